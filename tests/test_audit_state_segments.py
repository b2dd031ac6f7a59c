"""``audit --state`` across cuts and prunes (docs/auditing.md, "The auditor's memory"; docs/chain-format.md 14).

The auditor's memory holds chain-wide positions: a position counts the bytes of every file before it, the
segments a prune removed included, so it names the same record before and after a cut or a prune. Chains
are written by the real writer (``DecisionChain``), checkpointed by the real ``Checkpointer``, cut with
``logstore.cut_signed`` and pruned with ``otel-route-shadow prune``; a fake backend holds the spans and the
checkpoints (``backend_support``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from backend_support import FakeBackend, Host, seam_payload
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_route_shadow.backend import AuditOptions, AuditVerdict, audit_chain
from otel_route_shadow.backend.trust import TrustState
from otel_route_shadow.backend.verdict import AuditReport
from otel_route_shadow.chain import DecisionChain, sanitize_payload
from otel_route_shadow.chain.record import encode_payload, encode_record
from otel_route_shadow.cli import main
from otel_route_shadow.cli.audit import render_text
from otel_route_shadow.cli.exit_codes import EXIT_OK
from otel_route_shadow.logstore import Checkpointer, cut_signed
from otel_route_shadow.tlog import Signer

ORIGIN = "audit.example/route-shadow/state"


def _host(tmp_path: Path) -> Host:
    return Host(tmp_path / "host", ORIGIN, FakeBackend(), Signer.generate(ORIGIN))


def _cut(host: Host) -> None:
    """``rotate``'s cut: the tree signed at the live file's end, the anchor carrying that note."""
    checkpointer = Checkpointer(str(host.chain), ORIGIN, host.signer)
    checkpointer.add_listener(host.witness.add_checkpoint)
    assert cut_signed(checkpointer, timeout=30.0) is not None


def _prune(host: Host, min_index: int) -> None:
    assert isinstance(host.signer, Signer)
    key = str(host.signer.verifier())
    assert main(["prune", str(host.chain), "--key", key, "--min-index", str(min_index)]) == EXIT_OK


def _audit(host: Host, state: Path, *, full: bool = False) -> AuditReport:
    return audit_chain(str(host.chain), host.witness, AuditOptions(state=TrustState(state), full=full))


def _trusted_offset(state: Path) -> int:
    offset: int = json.loads(state.read_bytes())["origins"][ORIGIN]["offset"]
    return offset


def _grow_live_file_to(host: Host, size: int, first: int) -> int:
    """Append seam records to the live file so that it ends exactly at byte ``size`` (the last one padded
    to fit), their spans in the backend, a checkpoint every 10; return the next payload number."""
    live = host.chain
    number = first
    checkpointer = Checkpointer(str(live), ORIGIN, host.signer)
    checkpointer.add_listener(host.witness.add_checkpoint)
    while (missing := size - live.stat().st_size) > 0:
        last = orjson.loads(live.read_bytes().splitlines()[-1])
        payload = seam_payload(ORIGIN, number, host.salt)
        bare = _line_length(payload, last["seq"] + 1)
        if missing > bare + 1000:
            pad = 0
        else:
            pad = missing - bare
            assert pad >= 0, "the live file cannot end there"
        payload["attributes"]["route_shadow.pad"] = "x" * pad
        with DecisionChain(live) as log:
            log.append(payload)
        host.witness.add_seam(payload)
        host.sampled.add(number)
        number += 1
        if (number - first) % 10 == 0:
            checkpointer.checkpoint()
    assert live.stat().st_size == size
    return number


def _line_length(payload: dict[str, object], seq: int) -> int:
    padded = {**payload, "attributes": {**payload["attributes"], "route_shadow.pad": ""}}  # type: ignore[dict-item]
    clean, marks = sanitize_payload(padded)
    return len(encode_record(seq, "0" * 64, *encode_payload(clean, marks))[0])


def _same_verdicts(extended: AuditReport, full: AuditReport) -> None:
    assert extended.verdict is full.verdict is AuditVerdict.AGREE, render_text(extended)
    assert extended.consistency is not None and full.consistency is not None
    assert extended.consistency.failures == full.consistency.failures == ()
    assert (extended.witnessed_size, extended.chain_size) == (full.witnessed_size, full.chain_size)


def test_audit_state_across_a_cut_never_reports_a_record_changed_that_was_not(tmp_path: Path) -> None:
    """The live file after the cut ends with a line exactly where the remembered position is: a walk of
    the live file from there hashed the wrong records and reported the log rewritten."""
    state = tmp_path / "auditor" / "state.json"
    host = _host(tmp_path).run(60)
    assert _audit(host, state).verdict is AuditVerdict.AGREE
    remembered = _trusted_offset(state)
    assert remembered == host.chain.stat().st_size  # a chain never cut: one file
    _cut(host)
    following = _grow_live_file_to(host, remembered, first=60)
    host.run(25, first=following)
    report = _audit(host, state)
    assert report.verdict is AuditVerdict.AGREE, render_text(report)
    assert report.trusted_from == 60 and report.consistency is not None
    assert report.consistency.failures == ()
    assert _trusted_offset(state) > remembered


def test_audit_state_across_a_cut_extends_the_memory_reading_only_the_new_records(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    host = _host(tmp_path).run(95)
    assert _audit(host, state).verdict is AuditVerdict.AGREE
    _cut(host)
    host.run(30, first=95)  # the anchor is seq 95; records 96..125
    extended = _audit(host, state)
    assert extended.trusted_from == 95 and extended.spans.seam_records == 30
    full = _audit(host, tmp_path / "other.json", full=True)
    assert full.trusted_from is None and full.spans.seam_records == 125
    _same_verdicts(extended, full)
    # Saved on a segmented chain, then a second cut: the memory goes on across it.
    _cut(host)
    host.run(12, first=125)
    again = _audit(host, state)
    assert again.trusted_from == 126 and again.spans.seam_records == 12
    _same_verdicts(again, _audit(host, tmp_path / "other.json", full=True))


def test_audit_state_across_a_prune_above_the_remembered_size_extends_it(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    host = _host(tmp_path).run(40)
    _cut(host)  # segment [0, 40)
    host.run(30, first=40)
    assert _audit(host, state).verdict is AuditVerdict.AGREE  # remembers size 71
    _cut(host)  # segment [40, 71)
    host.run(10, first=70)
    first_segment = min(Path(str(host.chain) + ".segments").iterdir())
    left = first_segment.read_bytes()
    _prune(host, 40)  # the remembered position counts the pruned segment's bytes
    first_segment.write_bytes(left)  # as a prune killed after its commit leaves it: not the chain's
    extended = _audit(host, state)
    assert extended.trusted_from == 71 and extended.spans.seam_records == 10, render_text(extended)
    _same_verdicts(extended, _audit(host, tmp_path / "other.json", full=True))


def test_audit_state_below_the_minimum_index_falls_back_to_the_full_check_from_it(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    host = _host(tmp_path).run(40)
    assert _audit(host, state).verdict is AuditVerdict.AGREE  # remembers size 40
    _cut(host)  # segment [0, 40)
    host.run(30, first=40)
    _cut(host)  # segment [40, 71)
    host.run(10, first=70)
    _prune(host, 71)  # records 40..70, after the memory, are gone: it cannot be extended
    report = _audit(host, state)
    assert report.verdict is AuditVerdict.AGREE and report.trusted_from is None, render_text(report)
    assert report.spans.seam_records == 10  # the records kept, checked in full from the minimum index
    assert "the auditor's memory ends at seq 40, below the minimum index 71" in render_text(report)
    assert json.loads(state.read_bytes())["origins"][ORIGIN]["size"] == 82  # the full check's


def test_a_memory_of_a_live_file_offset_is_checked_in_full_never_a_finding(tmp_path: Path) -> None:
    """The previous code remembered the offset in the live file its walk ended at; read as a chain-wide
    position it names a line of another seq (or none): the audit says so and checks the chain in full."""
    state = tmp_path / "state.json"
    host = _host(tmp_path).run(50)
    _cut(host)
    host.run(20, first=50)
    assert _audit(host, state).verdict is AuditVerdict.AGREE  # remembers size 71
    closed = sum(p.stat().st_size for p in Path(str(host.chain) + ".segments").iterdir())
    memory = json.loads(state.read_bytes())
    chain_wide = memory["origins"][ORIGIN]["offset"]
    assert chain_wide > closed
    memory["origins"][ORIGIN]["offset"] = chain_wide - closed  # the same record, in the live file alone
    state.write_text(json.dumps(memory))
    host.run(15, first=70)
    report = _audit(host, state)
    assert report.verdict is AuditVerdict.AGREE and report.trusted_from is None, render_text(report)
    assert (
        report.state_fallback
        == f"the remembered position {chain_wide - closed} is not a line start of this chain"
    )
    assert "incremental: not possible, checked in full: the remembered position" in render_text(report)
    assert report.to_json()["state_fallback"] == report.state_fallback
    end = _trusted_offset(state)
    assert end == sum(p.stat().st_size for p in Path(str(host.chain) + ".segments").iterdir()) + (
        host.chain.stat().st_size
    )  # the full check wrote a chain-wide position again
    # A position that begins a line, of another record.
    first_segment = min(Path(str(host.chain) + ".segments").iterdir())
    memory["origins"][ORIGIN]["offset"] = len(first_segment.read_bytes().splitlines(keepends=True)[0])
    state.write_text(json.dumps(memory))
    report = _audit(host, state)
    assert report.verdict is AuditVerdict.AGREE and report.trusted_from is None, render_text(report)
    assert report.state_fallback is not None and report.state_fallback.endswith("is not record 71")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.integers(3, 30),
    steps=st.lists(st.one_of(st.just(0), st.integers(1, 25)), max_size=4),  # 0: a cut; k: k more records
    prune=st.booleans(),
)
def test_an_extended_audit_across_cuts_and_prunes_agrees_with_the_full_one(
    tmp_path_factory: pytest.TempPathFactory, first: int, steps: list[int], prune: bool
) -> None:
    directory = tmp_path_factory.mktemp("layout")
    state = directory / "state.json"
    host = _host(directory).run(first)
    assert _audit(host, state).verdict is AuditVerdict.AGREE
    remembered = json.loads(state.read_bytes())["origins"][ORIGIN]["size"]
    written, cut = first, False
    for step in [*steps, 0, 3]:  # a cut at least, and records after it
        if step:
            host.run(step, first=written)
            written += step
        elif not cut:  # a live file holding only its anchor is not cut
            _cut(host)
        cut = not step
    boundaries = sorted(int(p.name[:16]) for p in Path(str(host.chain) + ".segments").iterdir())[1:]
    if prune and boundaries:
        _prune(host, boundaries[-1])
    extended = _audit(host, state)
    full = _audit(host, directory / "full.json", full=True)
    _same_verdicts(extended, full)
    kept = boundaries[-1] if prune and boundaries else 0
    if remembered >= kept:
        assert extended.trusted_from == remembered and extended.state_fallback is None
        assert extended.spans.seam_records + extended.spans.other_records == full.chain_size - remembered
    else:
        assert extended.trusted_from is None and extended.state_fallback is not None
    assert json.loads(state.read_bytes()) == json.loads((directory / "full.json").read_bytes())


def test_audit_state_with_a_window_from_before_the_memory_holds_only_the_new_records_spans(tmp_path: Path) -> None:
    """``--state`` with ``--since`` before the records an earlier audit proved fetched their spans too, and
    each was an orphan (a span with no record read), so the rerun read as disagreeing."""
    state = tmp_path / "state.json"
    host = _host(tmp_path).run(60)
    assert _audit(host, state).verdict is AuditVerdict.AGREE
    host.run(20, first=60)
    options = AuditOptions(state=TrustState(state), since_unix_nano=1)
    report = audit_chain(str(host.chain), host.witness, options)
    assert report.verdict is AuditVerdict.AGREE, render_text(report)
    assert report.trusted_from == 60 and report.spans.matched == 20 and not report.spans.orphan_spans
    assert report.window_from_seq == 60
    assert "window: starts at seq 60, the first record after those an earlier audit proved" in render_text(report)
    quiet = audit_chain(str(host.chain), host.witness, options)  # nothing new: spans from the checkpoint on
    assert quiet.verdict is AuditVerdict.AGREE and quiet.spans.seam_spans == 0, render_text(quiet)


def test_a_pruned_records_span_that_started_after_the_first_record_kept_is_no_orphan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is appended when its spawn ends: pruned record 29 started after record 30, the first kept,
    so its span lay in the window and read as a span with no record; every audit of the chain disagreed."""
    import dataclasses

    import backend_support

    from otel_route_shadow.backend.base import is_checkpoint_span

    def shifted(origin: str, i: int, salt: int) -> dict[str, Any]:
        payload = seam_payload(origin, i, salt)
        if i == 29:
            payload["start_time_unix_nano"] = str(int(payload["start_time_unix_nano"]) + 1_500_000)
        return payload

    monkeypatch.setattr(backend_support, "seam_payload", shifted)
    host = _host(tmp_path).run(30)
    _cut(host)
    host.run(30, first=30, every=100, final_checkpoint=False)
    # Each checkpoint made as a host makes it: after its last record's spawn ended (record 29's at 30.7 ms).
    def made(span: Any) -> Any:
        size = int(span.attributes["route_shadow.checkpoint.size"])
        return dataclasses.replace(span, start_time_unix_nano=backend_support.T0 + size * 1_000_000 + 700_000)

    host.witness.spans = [made(s) if is_checkpoint_span(s) else s for s in host.witness.spans]
    _prune(host, 30)
    forged = seam_payload(ORIGIN, 45, 7)  # a span with no record, after the pruned ones: still an orphan
    host.witness.add_seam(forged)
    report = audit_chain(str(host.chain), host.witness, AuditOptions())
    assert report.pruned is not None and report.pruned.min_index == 30
    assert [o.span_id for o in report.spans.orphan_spans] == [forged["span_id"]], render_text(report)


def test_a_pruned_chain_with_no_backend_checkpoint_covering_its_first_record_kept_is_no_disagreement(
    tmp_path: Path,
) -> None:
    """Audited while the backend lags (the checkpoint spans from the cut on not there yet, or lost with a
    collector): no checkpoint it holds covers seq 30, the first record kept. Every one was `unprovable` and
    seq 30 `record-changed`: DISAGREE, exit 1, for a chain nothing contradicts."""
    host = _host(tmp_path).run(30)
    _cut(host)
    host.run(30, first=30)
    _prune(host, 30)
    size = "route_shadow.checkpoint.size"
    host.witness.spans = [s for s in host.witness.spans if int(s.attributes.get(size, 0)) <= 30]
    assert isinstance(host.signer, Signer)
    options = AuditOptions(verifier_keys=(str(host.signer.verifier()),))
    report = audit_chain(str(host.chain), host.witness, options)
    assert report.verdict is AuditVerdict.AGREE and report.witnessed_size == 0, render_text(report)
    assert "none covers the first record kept (seq 30)" in render_text(report)
    host.witness.spans = [s for s in host.witness.spans if size in s.attributes]  # and no seam span either
    report = audit_chain(str(host.chain), host.witness, options)
    assert report.verdict is AuditVerdict.INSUFFICIENT, render_text(report)


@pytest.mark.parametrize("prune", [False, True])
def test_a_segmented_chain_audited_with_the_wrong_key_is_a_bad_checkpoint_not_a_broken_chain(
    tmp_path: Path, prune: bool
) -> None:
    """With a --key that signed none of the checkpoints, an unsegmented chain was a bad checkpoint (exit 6),
    but a cut one 'broken at seq 30: anchor-mismatch' (and, pruned, seq 30 record-changed): DISAGREE, exit 1,
    as if the holder had tampered with it."""
    host = _host(tmp_path).run(30)
    _cut(host)
    host.run(30, first=30)
    if prune:
        _prune(host, 30)
    wrong = str(Signer.generate(ORIGIN).verifier())
    report = audit_chain(str(host.chain), host.witness, AuditOptions(verifier_keys=(wrong,)))
    assert report.verdict is AuditVerdict.BAD_CHECKPOINT, render_text(report)
    assert report.spans.chain_linkage == "intact" and report.first_bad_seq is None
