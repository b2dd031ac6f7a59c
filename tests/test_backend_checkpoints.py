"""The audit against the checkpoints the backend holds: each attack, coverage, origins, exit codes, the fleet.

A fake witness (in memory) stands in for the backend; chains and checkpoints are made by the real
chain writer and the real ``tlog.Checkpointer``. The e2e suite repeats the attacks against Phoenix.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from backend_support import (
    T0,
    FakeBackend,
    Host,
    copy_host,
    insert,
    prune_head,
    rewrite,
    seam_payload,
    truncate,
)

from otel_route_shadow.backend.audit import AuditOptions, audit_chain
from otel_route_shadow.backend.base import BackendSpan
from otel_route_shadow.backend.trust import TrustState
from otel_route_shadow.backend.verdict import AuditVerdict, Thresholds
from otel_route_shadow.cli import audit as audit_cli
from otel_route_shadow.cli import main
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.tlog import Signer

ORIGIN = "example.test/route-shadow/host-a"


@pytest.fixture
def witness(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    fake = FakeBackend()
    monkeypatch.setattr(audit_cli, "build_backend", lambda *_: fake)
    return fake


def _audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["audit", *argv, "--backend", "http://127.0.0.1:9"])
    out, err = capsys.readouterr()
    return code, out, err


def _host(tmp_path: Path, witness: FakeBackend, records: int = 95, **kwargs: Any) -> Host:
    keep = kwargs.pop("keep", 1.0)
    return Host(tmp_path / "host", ORIGIN, witness, **kwargs).run(records, keep=keep)


def test_an_untouched_chain_agrees_with_its_checkpoints(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, witness)
    report = audit_chain(str(host.chain), witness)
    assert report.verdict is AuditVerdict.AGREE
    assert report.origin == ORIGIN and report.origin_source == "records"
    assert len(report.checkpoints) == 10  # every 10 records, plus the one at shutdown (95)
    assert report.witnessed_size == report.chain_size == 95 and report.unwitnessed == 0
    code, out, _ = _audit(capsys, str(host.chain))
    assert code == 0, out
    assert "consistency: the chain is consistent with every one (up to size 95)" in out
    assert "proven up to 95 of 95 records; 0 after the last checkpoint" in out


@pytest.mark.parametrize(
    ("attack", "first_bad_seq", "reason"),
    [
        (lambda p: truncate(p, 85), None, "truncated"),  # below the witnessed size 95 (and 90)
        (lambda p: prune_head(p, 10), 0, "record-changed"),
        (
            lambda p: rewrite(p, 42, lambda r: r["attributes"].update({"route_shadow.agreed": False})),
            42,
            "record-changed",
        ),
        (lambda p: insert(p, 17, seam_payload(ORIGIN, 9999, 1)), 17, "record-changed"),
    ],
    ids=["truncation", "head-pruning", "rewrite", "forged-insert"],
)
def test_each_attack_below_a_witnessed_checkpoint_disagrees(
    tmp_path: Path,
    witness: FakeBackend,
    capsys: pytest.CaptureFixture[str],
    attack: Any,
    first_bad_seq: int | None,
    reason: str,
) -> None:
    host = _host(tmp_path, witness)
    victim = copy_host(host, tmp_path / "victim")
    attack(victim.chain)
    report = audit_chain(str(victim.chain), witness)
    assert report.verdict is AuditVerdict.DISAGREE
    assert report.consistency is not None
    assert {f.reason for f in report.consistency.chain_failures} >= {reason}
    if first_bad_seq is not None:
        assert report.consistency.first_bad_seq == first_bad_seq
    code, out, _ = _audit(capsys, str(victim.chain))
    assert code == 1 and "verdict: DISAGREE" in out


def test_an_edit_of_a_record_whose_span_was_sampled_out_disagrees(
    tmp_path: Path, witness: FakeBackend
) -> None:
    """At a 30% sampler the span cross-check cannot see most edits; the checkpoints do."""
    host = _host(tmp_path, witness, keep=0.3)
    unsampled = min(set(range(95)) - host.sampled - set(range(10)))
    victim = copy_host(host, tmp_path / "victim")
    rewrite(victim.chain, unsampled, lambda r: r["attributes"].update({"route_shadow.agreed": "forged"}))
    report = audit_chain(str(victim.chain), witness)
    assert report.spans.errors == 0  # the span cross-check alone would say AGREE
    assert report.verdict is AuditVerdict.DISAGREE
    assert report.first_bad_seq == unsampled


def test_nothing_to_hold_the_chain_against_is_insufficient_evidence_never_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host = _host(tmp_path, FakeBackend())  # its spans and checkpoints went to another backend
    empty = FakeBackend()
    monkeypatch.setattr(audit_cli, "build_backend", lambda *_: empty)
    code, out, _ = _audit(capsys, str(host.chain))
    assert code == 3, out
    assert "nothing to hold the chain against" in out and "verdict: INSUFFICIENT EVIDENCE" in out


def test_thresholds_turn_a_thin_witness_into_exit_3(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path / "h", ORIGIN, witness).run(95, keep=0.5, final_checkpoint=False)
    report = audit_chain(str(host.chain), witness)
    assert report.witnessed_size == 90 and report.unwitnessed == 5
    assert report.verdict is AuditVerdict.AGREE
    assert _audit(capsys, str(host.chain), "--max-unwitnessed", "5")[0] == 0
    code, out, _ = _audit(capsys, str(host.chain), "--max-unwitnessed", "4")
    assert code == 3 and "5 records after the last checkpoint, more than --max-unwitnessed 4" in out
    code, out, _ = _audit(capsys, str(host.chain), "--min-span-coverage", "0.9")
    assert code == 3 and "below --min-span-coverage 0.9" in out


def test_with_state_nothing_new_is_no_span_coverage_shortfall(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cron audit with --state and --min-span-coverage, nothing written since the last one: it read no
    record, said "span coverage: no records" and then "span coverage 0.0%, below" it, exit 3."""
    host = _host(tmp_path, witness, records=60)
    state = str(tmp_path / "state.json")
    assert _audit(capsys, str(host.chain), "--state", state, "--min-span-coverage", "0.9")[0] == 0
    code, out, _ = _audit(capsys, str(host.chain), "--state", state, "--min-span-coverage", "0.9")
    assert "span coverage: no records" in out and "insufficient" not in out
    assert code == 0, out


def test_two_origins_in_one_project_never_raise_false_alarms(tmp_path: Path, witness: FakeBackend) -> None:
    a = Host(tmp_path / "a", "example.test/a", witness, salt=1).run(40)
    b = Host(tmp_path / "b", "example.test/b", witness, salt=2).run(60)
    for host, size in ((a, 40), (b, 60)):
        report = audit_chain(str(host.chain), witness)
        assert report.verdict is AuditVerdict.AGREE, report.to_json()
        assert report.spans.orphan_spans == [] and report.witnessed_size == size


def test_signatures_checked_with_a_key_and_a_forged_checkpoint_is_exit_6(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    signer = Signer.generate(ORIGIN)
    key = str(signer.verifier())
    host = _host(tmp_path, witness, signer=signer)
    code, out, _ = _audit(capsys, str(host.chain), "--key", key)
    assert code == 0, out
    assert "signatures not checked" not in out
    assert _audit(capsys, str(host.chain), "--key", str(Signer.generate("other").verifier()))[0] == 6
    # Someone writes a checkpoint into the backend whose signature does not verify.
    genuine = next(s for s in reversed(witness.spans) if cpa.NOTE in s.attributes)
    witness.spans.append(
        BackendSpan(
            "f" * 32, "f" * 16, genuine.start_time_unix_nano, {**genuine.attributes, cpa.NOTE: _flip(genuine)}
        )
    )
    code, out, _ = _audit(capsys, str(host.chain), "--key", key)
    assert code == 6, out
    assert "bad-signature" in out and "verdict: BAD CHECKPOINT" in out


def _flip(span: BackendSpan) -> str:
    """The span's signed note with one bit of its signature flipped (key id kept)."""
    text, _, signature = str(span.attributes[cpa.NOTE]).partition("\n\n")
    prefix, blob = signature.rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    return f"{text}\n\n{prefix} {base64.b64encode(bytes(raw)).decode()}\n"


def test_a_checkpoint_span_contradicting_its_note_is_reported(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, witness, records=20)
    span = next(s for s in witness.spans if cpa.NOTE in s.attributes)
    witness.spans.append(
        BackendSpan("e" * 32, "e" * 16, span.start_time_unix_nano, {**span.attributes, cpa.SIZE: 7})
    )
    code, out, _ = _audit(capsys, str(host.chain))
    assert code == 6 and "unreadable checkpoint span eeeeeeeeeeeeeeee" in out


def test_fleet_audit_one_line_per_chain_plus_total_only_the_tampered_one_disagrees(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet"
    hosts = [Host(fleet / f"h{i}", f"example.test/h{i}", witness, salt=i + 1).run(30 + i) for i in range(3)]
    code, out, _ = _audit(capsys, str(fleet))
    assert code == 0, out
    assert out.count("AGREE") == 3 and "total: 3 chains: 3 agree; exit 0" in out
    truncate(hosts[1].chain, 12)
    code, out, _ = _audit(capsys, str(fleet), "--jobs", "3")
    lines = out.splitlines()
    assert code == 1, out
    assert len(lines) == 4
    assert [("DISAGREE" in line) for line in lines[:3]] == [False, True, False]
    assert lines[3] == "total: 3 chains: 2 agree, 1 disagree; exit 1"
    code, out, _ = _audit(capsys, str(hosts[0].chain), str(hosts[2].chain), "--json")
    body = json.loads(out)
    assert code == 0 and [c["verdict"] for c in body["chains"]] == ["agree", "agree"]


def test_fleet_reports_an_unreadable_chain_on_its_line(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, witness, records=12)
    code, out, _ = _audit(capsys, str(host.chain), str(tmp_path / "absent.jsonl"))
    assert code == 2, out
    assert "absent.jsonl: UNUSABLE-INPUT:" in out and "no such file" in out
    assert out.splitlines()[-1] == "total: 2 chains: 1 agree, 1 unusable-input; exit 2"


def test_origin_falls_back_to_the_chain_checkpoint_file(tmp_path: Path, witness: FakeBackend) -> None:
    host = _host(tmp_path, witness, records=20)
    report = audit_chain(str(host.chain), witness, AuditOptions(thresholds=Thresholds()))
    assert report.origin_source == "records"
    # Records written before origins existed: the checkpoint file still names the origin.
    lines = host.chain.read_text().splitlines()
    stripped = [json.loads(line) for line in lines]
    assert all("route_shadow.origin" in r["payload"]["attributes"] for r in stripped)
    from otel_route_shadow.backend.audit import chain_origin_from_checkpoint_file

    assert chain_origin_from_checkpoint_file(str(host.chain)) == ORIGIN


# --------------------------------------------------------------------------------------------------
# The auditor's state: the next audit reads only what is new
# --------------------------------------------------------------------------------------------------


def test_with_state_the_next_audit_reads_only_the_records_after_the_trusted_checkpoint(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "auditor" / "state.json"
    host = _host(tmp_path, witness, records=95)
    first = audit_chain(str(host.chain), witness, AuditOptions(state=TrustState(state)))
    assert first.verdict is AuditVerdict.AGREE and first.trusted_from is None
    assert TrustState(state).get(ORIGIN) is not None
    host.run(40, first=95)  # the host goes on: checkpoints at 100 ... 130, then 135 at shutdown
    second = audit_chain(str(host.chain), witness, AuditOptions(state=TrustState(state)))
    assert second.verdict is AuditVerdict.AGREE, second.to_json()
    assert second.trusted_from == 95
    assert second.spans.seam_records == 40  # only the new records were read
    assert second.witnessed_size == second.chain_size == 135
    code, out, _ = _audit(capsys, str(host.chain), "--state", str(state))
    assert code == 0 and "incremental: records below seq 135 were proven by an earlier audit" in out


def test_the_first_audit_remembers_what_a_separate_walk_would_from_its_one_verification_read(
    tmp_path: Path, witness: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state was made by a second walk over the whole chain (verify_incremental from nothing);
    it now comes from the verification pass itself, which is the only read besides the payloads."""
    from otel_route_shadow.backend import audit as audit_module
    from otel_route_shadow.backend.checkpoints import backend_checkpoints
    from otel_route_shadow.backend.trust import Trusted, verify_incremental
    from otel_route_shadow.logstore import consistency

    host = _host(tmp_path, witness, records=95)
    passes: list[int] = []
    real_pass = consistency.verify_pass

    def spy(*args: Any, **kwargs: Any) -> Any:
        passes.append(kwargs.get("unchecked", 0))
        return real_pass(*args, **kwargs)

    def no_second_verify(*_: Any, **__: Any) -> Any:
        raise AssertionError("the chain's verdict comes from the checkpoint pass")

    monkeypatch.setattr(consistency, "verify_pass", spy)
    monkeypatch.setattr(audit_module, "verify", no_second_verify)
    state = TrustState(tmp_path / "state.json")
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.verdict is AuditVerdict.AGREE and passes == [0]
    assert report.spans.chain_linkage == "intact"
    checkpoints, _ = backend_checkpoints(witness.spans, ORIGIN)
    walked = verify_incremental(str(host.chain), checkpoints, [], Trusted.empty())
    assert not isinstance(walked, str) and state.get(ORIGIN) == walked[1]


def test_with_state_an_edit_after_the_trusted_point_disagrees(tmp_path: Path, witness: FakeBackend) -> None:
    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    assert audit_chain(str(host.chain), witness, AuditOptions(state=state)).verdict is AuditVerdict.AGREE
    host.run(40, first=60)
    rewrite(host.chain, 77, lambda r: r["attributes"].update({"route_shadow.agreed": "forged"}))
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.verdict is AuditVerdict.DISAGREE and report.trusted_from == 60
    assert report.first_bad_seq == 77
    assert state.get(ORIGIN) is not None and state.get(ORIGIN).size == 60  # type: ignore[union-attr]


def test_with_state_a_proven_record_whose_span_started_after_the_next_record_is_no_orphan(
    tmp_path: Path, witness: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is appended when its spawn ends: record 59 (proven) started after record 60 (the first the
    incremental audit reads), so its span lies in the window; it was read as a span with no record."""
    import backend_support

    def shifted(origin: str, i: int, salt: int) -> dict[str, Any]:
        payload = seam_payload(origin, i, salt)
        if i == 59:
            payload["start_time_unix_nano"] = str(int(payload["start_time_unix_nano"]) + 1_500_000)
        return payload

    monkeypatch.setattr(backend_support, "seam_payload", shifted)
    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    assert audit_chain(str(host.chain), witness, AuditOptions(state=state)).verdict is AuditVerdict.AGREE
    host.run(10, first=60, every=100, final_checkpoint=False)
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.trusted_from == 60 and report.spans.orphan_spans == [], report.to_json()
    assert report.verdict is AuditVerdict.AGREE
    truncate(host.chain, 65)  # a span with no record after the trusted point is still one
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.trusted_from == 60 and report.verdict is AuditVerdict.DISAGREE
    orphans = [o.span_id for o in report.spans.orphan_spans]
    assert orphans == [f"{1_000_000 + i + 1:016x}" for i in range(65, 70)]


def test_with_state_a_tail_cut_back_to_the_trusted_point_leaves_its_spans_orphans(
    tmp_path: Path, witness: FakeBackend
) -> None:
    """The host wrote 30 records after the trusted checkpoint and died before checkpointing them; their
    spans reached the backend and the tail was cut back to the trusted size. The incremental audit read
    no record, so it held no span, and said AGREE where the full audit says DISAGREE."""
    import dataclasses

    from otel_route_shadow.backend.base import is_checkpoint_span

    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    Host(tmp_path / "other", "example.test/route-shadow/host-b", witness, salt=2).run(90)
    made = T0 + 59_500_000  # as a host makes it: after record 59 was appended, before record 60 began
    witness.spans = [
        dataclasses.replace(s, start_time_unix_nano=made) if is_checkpoint_span(s) else s
        for s in witness.spans
    ]
    assert audit_chain(str(host.chain), witness, AuditOptions(state=state)).verdict is AuditVerdict.AGREE
    host.run(30, first=60, every=100, final_checkpoint=False)
    truncate(host.chain, 60)
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.trusted_from == 60 and report.verdict is AuditVerdict.DISAGREE, report.to_json()
    orphans = [o.span_id for o in report.spans.orphan_spans]
    assert orphans == [f"{1_000_000 + i + 1:016x}" for i in range(60, 90)]


def test_with_state_nothing_new_and_until_before_the_trusted_checkpoint_agrees(
    tmp_path: Path, witness: FakeBackend
) -> None:
    """An audit run with --until a while ago (for the export lag) and nothing new since the last one: the
    window from when the proven checkpoint was made ended before it began, and the audit refused, exit 2."""
    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    assert audit_chain(str(host.chain), witness, AuditOptions(state=state)).verdict is AuditVerdict.AGREE
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state, until_unix_nano=T0 + 10**12))
    assert report.trusted_from == 60 and report.verdict is AuditVerdict.AGREE


def test_with_state_truncation_below_the_trusted_point_falls_back_to_the_full_check(
    tmp_path: Path, witness: FakeBackend
) -> None:
    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    audit_chain(str(host.chain), witness, AuditOptions(state=state))
    truncate(host.chain, 30)
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.verdict is AuditVerdict.DISAGREE and report.trusted_from is None
    assert report.consistency is not None
    assert "truncated" in {f.reason for f in report.consistency.failures}


def test_an_edit_below_the_trusted_point_is_found_by_full(tmp_path: Path, witness: FakeBackend) -> None:
    """What the state trusts is not re-read (documented); --full reads it again."""
    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    audit_chain(str(host.chain), witness, AuditOptions(state=state))
    original = host.chain.read_bytes()
    lines = original.splitlines(keepends=True)
    lines[12] = lines[12].replace(b'"sha256:0', b'"sha256:f', 1)  # same length: every offset stays
    host.chain.write_bytes(b"".join(lines))
    assert audit_chain(str(host.chain), witness, AuditOptions(state=state)).trusted_from == 60
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state, full=True))
    assert report.verdict is AuditVerdict.DISAGREE and report.first_bad_seq == 12
    # An edit that moves the trusted offset off a line start makes the audit fall back to the full check.
    lines = original.splitlines(keepends=True)
    lines[12] = lines[12].replace(b'"route_shadow.agreed":true', b'"route_shadow.agreed":false')
    host.chain.write_bytes(b"".join(lines))
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert (
        report.trusted_from is None and report.verdict is AuditVerdict.DISAGREE and report.first_bad_seq == 12
    )


def test_a_late_checkpoint_below_the_trusted_size_is_proven_from_the_tiles(
    tmp_path: Path, witness: FakeBackend
) -> None:
    state = TrustState(tmp_path / "state.json")
    host = _host(tmp_path, witness, records=60)
    late = [s for s in witness.spans if s.attributes.get(cpa.SIZE) == 30]
    witness.spans = [s for s in witness.spans if s not in late]  # its export was delayed
    audit_chain(str(host.chain), witness, AuditOptions(state=state))
    witness.spans += late
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.verdict is AuditVerdict.AGREE and report.trusted_from == 60
    # A checkpoint of size 30 with another root: the backend holds two histories.
    forged = str(late[0].attributes[cpa.NOTE]).replace(str(late[0].attributes[cpa.ROOT]), "A" * 43 + "=")
    witness.spans.append(
        BackendSpan(
            "d" * 32,
            "d" * 16,
            late[0].start_time_unix_nano,
            {**late[0].attributes, cpa.NOTE: forged, cpa.ROOT: "A" * 43 + "="},
        )
    )
    report = audit_chain(str(host.chain), witness, AuditOptions(state=state))
    assert report.verdict is AuditVerdict.DISAGREE
    assert report.consistency is not None and [f.reason for f in report.consistency.failures] == ["fork"]


def test_an_unreadable_state_file_is_one_line_exit_2(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, witness, records=20)
    bad = tmp_path / "state.json"
    bad.write_text("{not json")
    code, out, err = _audit(capsys, str(host.chain), "--state", str(bad))
    assert code == 2 and out == "" and "not an audit state file" in err and len(err.splitlines()) == 1


def test_a_signing_key_given_as_key_is_refused_without_repeating_it(
    tmp_path: Path, witness: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, witness, records=12)
    secret = Signer.generate(ORIGIN).secret_string()
    code, out, err = _audit(capsys, str(host.chain), "--key", secret)
    assert code == 2 and out == "" and "this is a signing key" in err
    # PRIVATE+KEY+<name>+<id>+<base64 seed>: the base64 may itself hold a "+", so split from the left
    seed = secret.split("+", 4)[4]
    assert secret not in err and seed not in err
