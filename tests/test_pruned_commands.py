"""Every command that reads a chain's records reads a pruned chain (docs/chain-format.md 14.4-14.5): from its
minimum index m, verified as ``verify`` verifies it (the record at m authenticated from the signed tree when a
key is given), saying what was pruned, when and by which command, and that its figures start at seq m.

The chains are real: written by the chain's writer, signed by the ``Checkpointer``, cut as ``rotate`` cuts
and pruned by ``otel-route-shadow prune`` (``test_fleet_pruned.Host``). The oracle of a pruned chain's figures
is the same computation over the same chain read before the prune, its records below m left out: a report of
a pruned chain counts the records it keeps, and only those.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from backend_support import FakeBackend
from backend_support import Host as BackendHost
from test_analysis_support import snapshot_of
from test_fleet_pruned import Host, _three_files
from tlog_support import key_file

from otel_route_shadow.analysis import (
    ChainStatus,
    aggregate,
    axes_from_chain,
    build_fleet_report,
    build_report,
    replay,
    replay_payloads,
)
from otel_route_shadow.analysis.source import read_payloads
from otel_route_shadow.backend import AuditOptions, AuditVerdict, audit_chain
from otel_route_shadow.chain import chain_line, sanitize_payload
from otel_route_shadow.chain.record import encode_payload, encode_record
from otel_route_shadow.cli import main
from otel_route_shadow.cli.audit import render_text
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, EXIT_USAGE
from otel_route_shadow.logstore import Checkpointer, cut_signed
from otel_route_shadow.tlog import Signer

MIN_INDEX = 306


def _segment(host: Host, first: int) -> Path:
    return Path(str(host.chain) + ".segments") / f"{first:016d}.jsonl"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Host, Path]:
    """A host's chain pruned below 306, and a copy of its folder taken before the prune (the oracle)."""
    folder = tmp_path_factory.mktemp("pruned")
    host = _three_files(folder / "host")
    before = folder / "before"
    shutil.copytree(host.chain.parent, before)
    host.prune(MIN_INDEX)
    return host, before / host.chain.name


@pytest.fixture
def pruned(pristine: tuple[Host, Path], tmp_path: Path) -> tuple[Host, Path]:
    """A test's own copy of the pruned host (and the path of the chain before the prune)."""
    host, before = pristine
    shutil.copytree(host.chain.parent, tmp_path / "host")
    copy = Host.__new__(Host)
    copy.__dict__.update(host.__dict__)
    copy.chain = tmp_path / "host" / host.chain.name
    return copy, before


def _kept_payloads(before: Path) -> list[tuple[int, Any]]:
    """The records the pruned chain keeps, read from the chain as it was before the prune."""
    return [(seq, payload) for seq, payload in read_payloads(before) if seq >= MIN_INDEX]


def _figures(data: dict[str, Any]) -> dict[str, Any]:
    """A report's figures: without the chain's status and the log's evidence (where they were read from)."""
    data = json.loads(json.dumps(data, default=str))
    data.pop("chain", None)
    data.pop("evidence", None)
    return data


def _status() -> ChainStatus:
    return ChainStatus(path="oracle", records=0, verified=True, checked=True)


# -- report ----------------------------------------------------------------------------------------


def test_report_of_a_pruned_chain_counts_from_its_first_kept_record_not_segment_missing(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    host, before = pruned
    report = build_report(host.chain, keys=[host.key])
    assert report.chain.verified, report.chain.describe()
    assert report.chain.start == MIN_INDEX and report.chain.records == 649
    assert report.chain.kept is not None and report.chain.kept.proven is not None
    oracle = aggregate(_kept_payloads(before), chain=_status())
    assert _figures(report.as_dict()) == _figures(oracle.as_dict())
    assert report.spawns == 341 and report.records.read == 649 - MIN_INDEX  # two anchors are not spawns
    assert main(["report", str(host.chain), "--no-progress", "--key", host.key]) == EXIT_OK
    text = capsys.readouterr().out
    assert "verified: 343 records from seq 306" in text and "figures start at seq 306" in text
    assert "pruned below seq 306 at " in text and "by `otel-route-shadow prune " in text
    assert "seq 306 authenticated from the signed tree of size 649" in text
    assert "segment-missing" not in text


def test_report_json_of_a_pruned_chain_names_its_minimum_index_and_who_pruned_it(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    host, _before = pruned
    assert main(["report", str(host.chain), "--no-progress", "--json"]) == EXIT_OK
    chain = json.loads(capsys.readouterr().out)["chain"]
    assert chain["verified"] and chain["from_seq"] == MIN_INDEX
    assert chain["pruned"]["min_index"] == MIN_INDEX and chain["pruned"]["command"].startswith("otel-route-shadow prune")
    assert chain["pruned"]["first_kept"] is None and chain["pruned"]["problem"] is None  # no key given


def test_report_of_a_pruned_chain_figures_equal_the_fleet_reports_of_the_same_log(pruned: tuple[Host, Path]) -> None:
    host, _before = pruned
    single = build_report(host.chain)
    fleet = build_fleet_report([str(host.chain)])
    assert fleet.fleet is not None and fleet.fleet.logs[0].start == MIN_INDEX
    counted = _figures(fleet.as_dict())
    counted.pop("fleet")
    assert single.spawns == fleet.spawns == 341
    assert _figures(single.as_dict())["totals"] == counted["totals"]


def test_report_of_a_pruned_chain_verified_in_a_worker_while_read_counts_the_same(pruned: tuple[Host, Path]) -> None:
    host, _before = pruned
    serial = build_report(host.chain, concurrent=False)
    concurrent = build_report(host.chain, concurrent=True)
    assert concurrent.chain.verified and concurrent.chain.start == MIN_INDEX
    assert _figures(concurrent.as_dict()) == _figures(serial.as_dict())


def test_html_report_of_a_pruned_chain_says_its_figures_start_at_the_first_record_kept(
    pruned: tuple[Host, Path], tmp_path: Path
) -> None:
    host, _before = pruned
    html = tmp_path / "report.html"
    assert main(["report", str(host.chain), "--no-progress", "--html", str(html)]) == EXIT_OK
    page = html.read_text()
    assert "figures start at seq 306" in page and "pruned below seq 306 at " in page


def test_verify_of_a_pruned_chain_with_another_key_claims_nothing_verified_below_its_minimum_index(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "verified before it: 306 records (seq 0..305), head hash 000...0": records that were
    # pruned, not verified.
    host, _before = pruned
    other = Signer.generate("other.example/route-shadow")
    assert main(["verify", str(host.chain), "--key", str(other.verifier())]) == EXIT_FINDING
    out = capsys.readouterr().out
    assert f"verified before it: no records (pruned below seq {MIN_INDEX})" in out
    assert "seq 0.." not in out


def test_report_of_a_pruned_chain_whose_checkpoints_file_is_damaged_agrees_with_verify(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # report authenticated the first record kept from the checkpoints file alone: emptied, it said
    # "VERIFICATION FAILED at seq 306", exit 1, where verify (which reads the published checkpoint too)
    # said intact, exit 0.
    host, _before = pruned
    (Path(str(host.chain) + ".tlog") / "checkpoints").write_bytes(b"")
    assert main(["verify", str(host.chain), "--key", host.key]) == EXIT_OK
    capsys.readouterr()
    assert main(["report", str(host.chain), "--key", host.key, "--no-progress"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "VERIFICATION FAILED" not in out and f"seq {MIN_INDEX} authenticated" in out


def _forge_first_kept(chain: Path) -> None:
    """Rewrite the live file of a chain pruned at its anchor as one who holds the disk could: the anchor
    linked to another record before it (its ``prev_hash`` and ``last_record_hash``), every hash after it
    recomputed, so the file verifies on its own; only the signed tree tells it from the one written."""
    records = [orjson.loads(line) for line in chain.read_bytes().splitlines()]
    forged = "ab" * 32
    records[0]["payload"]["last_record_hash"] = forged
    out, prev = [], forged
    for record in records:
        clean, marks = sanitize_payload(record["payload"])
        line, prev = encode_record(record["seq"], prev, *encode_payload(clean, marks))
        out.append(line)
    chain.write_bytes(b"".join(out))


def test_report_of_a_pruned_chain_whose_first_record_kept_is_not_the_signed_leaf_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _three_files(tmp_path / "host").prune(512)
    _forge_first_kept(host.chain)
    assert main(["verify", str(host.chain)]) == EXIT_OK  # the file alone cannot tell
    assert main(["report", str(host.chain), "--no-progress"]) == EXIT_OK
    assert "seq 512, the first record kept, not authenticated (give --key)" in capsys.readouterr().out
    assert main(["report", str(host.chain), "--no-progress", "--key", host.key]) == EXIT_FINDING
    err = capsys.readouterr().err
    assert "refusing to analyse an unverifiable chain (VERIFICATION FAILED at seq 512: seq 512, the first record " in err
    assert "is not the leaf the checkpoint of size 649 signed" in err
    flagged = build_report(host.chain, keys=[host.key], allow_unverified=True)
    assert flagged.flagged and flagged.chain.first_bad_seq == 512


def test_a_segment_an_interrupted_prune_left_below_the_minimum_index_is_not_in_the_report(
    pruned: tuple[Host, Path],
) -> None:
    host, before = pruned
    clean = build_report(host.chain)
    _segment(host, 0).write_bytes(_segment_of(before, 0).read_bytes())  # a prune killed before removing it
    again = build_report(host.chain)
    assert again.chain.verified and _figures(again.as_dict()) == _figures(clean.as_dict())


def _segment_of(chain: Path, first: int) -> Path:
    return Path(str(chain) + ".segments") / f"{first:016d}.jsonl"


def test_report_of_a_chain_whose_pruned_file_is_not_one_is_unusable_input(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    host, _before = pruned
    (host.chain.parent / (host.chain.name + ".tlog") / "pruned").write_text('{"min_index": "306"}')
    assert main(["report", str(host.chain), "--no-progress"]) == EXIT_USAGE
    assert "pruned" in capsys.readouterr().err


# -- whatif ----------------------------------------------------------------------------------------


def test_whatif_of_a_pruned_chain_replays_the_records_it_keeps(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    host, before = pruned
    candidate = snapshot_of([], revision=7)
    result = replay(host.chain, candidate, keys=[host.key])
    oracle = replay_payloads(_kept_payloads(before), candidate, chain=_status())
    assert result.chain.verified and result.chain.start == MIN_INDEX
    assert _figures(result.as_dict()) == _figures(oracle.as_dict())
    policies = tmp_path / "policies.json"
    policies.write_text('{"policies": []}')
    assert main(["whatif", str(host.chain), "--policies", str(policies), "--no-progress"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "figures start at seq 306" in text and "not authenticated (give --key)" in text
    assert main(["whatif", str(host.chain), "--policies", str(policies), "--no-progress", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["chain"]["from_seq"] == MIN_INDEX


# -- matrix --chain ---------------------------------------------------------------------------------


def test_matrix_takes_its_axis_values_from_the_records_a_pruned_chain_keeps(
    pruned: tuple[Host, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host, before = pruned
    kept = tmp_path / "kept.jsonl"  # the kept records alone, a file read without verification as matrix reads
    kept.write_bytes(b"".join(chain_line(before, seq) + b"\n" for seq in range(MIN_INDEX, 649)))
    _segment(host, 0).write_bytes(_segment_of(before, 0).read_bytes())  # left below m: not read
    told: list[str] = []
    assert axes_from_chain(host.chain, tell=told.append) == axes_from_chain(kept)
    assert told and told[0].startswith("axis values from seq 306 on: pruned below seq 306")
    policies = tmp_path / "policies.json"
    policies.write_text('{"policies": []}')
    assert main(["matrix", "--policies", str(policies), "--chain", str(host.chain), "--format", "json"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert json.loads(out)["rows"] and "axis values from seq 306 on" in err


# -- prove, verify-proof ----------------------------------------------------------------------------


def test_prove_of_a_pruned_seq_is_refused_naming_its_archive(
    pruned: tuple[Host, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    host, _before = pruned
    for extra in ([], ["--receipt"]):
        assert main(["prove", str(host.chain), "--seq", "10", *extra]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "seq 10 was pruned, its record is gone from the chain" in err
        assert "0000000000000000.jsonl.gz" in err and "the records kept begin at seq 306" in err
    assert main(["prove", str(host.chain), "--seq", "306", "--receipt"]) == EXIT_OK


def test_proofs_of_records_kept_and_of_sizes_below_the_minimum_index_still_verify_offline(
    pruned: tuple[Host, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host, _before = pruned
    note = tmp_path / "checkpoint"
    note.write_bytes((host.chain.parent / (host.chain.name + ".tlog") / "checkpoint").read_bytes())
    record = tmp_path / "record"
    record.write_bytes(chain_line(host.chain, 400) + b"\n")
    proofs = {"inclusion": ["--seq", "400"], "consistency": ["--from", "100"]}
    for name, what in proofs.items():
        capsys.readouterr()
        assert main(["prove", str(host.chain), *what]) == EXIT_OK
        proof = tmp_path / f"{name}.json"
        proof.write_text(capsys.readouterr().out)
        extra = ["--record", str(record)] if name == "inclusion" else []
        assert main(["verify-proof", "--proof", str(proof), "--checkpoint", str(note), "--key", host.key, *extra]) == 0
    assert "consistent: the tree of 100 records is a prefix of the tree of 649" in capsys.readouterr().out


# -- rotate after a prune ---------------------------------------------------------------------------


def test_rotate_after_a_prune_cuts_and_the_chain_still_verifies_and_reports_from_its_minimum_index(
    pruned: tuple[Host, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host, _before = pruned
    host.grow(20)
    key = key_file(tmp_path / "log.key", host.signer)
    assert main(["rotate", str(host.chain), "--key", key]) == EXIT_OK
    assert _segment(host, 512).exists() and "records 512..668" in capsys.readouterr().out
    host.written += 1
    host.grow(3).sign()
    capsys.readouterr()
    assert main(["verify", str(host.chain), "--key", host.key]) == EXIT_OK
    assert "seq 306 authenticated from the signed tree of size 673" in capsys.readouterr().out
    report = build_report(host.chain, keys=[host.key])
    assert report.chain.verified and report.chain.start == MIN_INDEX and report.chain.records == 673
    assert report.spawns == 341 + 20 + 3


# -- audit -----------------------------------------------------------------------------------------

ORIGIN = "audit.example/route-shadow"


def _audited_host(directory: Path) -> tuple[BackendHost, Signer]:
    """300 seam records, a cut (the anchor is seq 300), 100 more, pruned below 300; every checkpoint and
    every seam span in the backend."""
    signer = Signer.generate(ORIGIN)
    host = BackendHost(directory, ORIGIN, FakeBackend(), signer).run(300, every=10)
    checkpointer = Checkpointer(str(host.chain), ORIGIN, signer)
    checkpointer.add_listener(host.witness.add_checkpoint)
    assert cut_signed(checkpointer, timeout=30.0) is not None
    host.run(100, every=10, first=301)
    key = str(signer.verifier())
    assert main(["prune", str(host.chain), "--key", key, "--min-index", "300"]) == EXIT_OK
    return host, signer


def test_audit_of_a_pruned_chain_holds_the_records_kept_against_the_backend(tmp_path: Path) -> None:
    host, signer = _audited_host(tmp_path / "host")
    unkeyed = audit_chain(str(host.chain), host.witness, AuditOptions())
    assert unkeyed.verdict == AuditVerdict.AGREE, render_text(unkeyed)
    report = audit_chain(str(host.chain), host.witness, AuditOptions(verifier_keys=(str(signer.verifier()),)))
    assert report.verdict == AuditVerdict.AGREE, render_text(report)
    assert report.consistency is not None and report.consistency.checkpointed_size == 401
    assert report.spans.matched == 100 and report.to_json()["from_seq"] == 300
    text = render_text(report)
    assert "pruned: audited from seq 300, the first record kept; pruned below seq 300 at " in text
    assert "intact, 401 records" in text


def test_audit_of_a_pruned_chain_whose_first_record_kept_is_not_the_signed_leaf_disagrees(tmp_path: Path) -> None:
    host, signer = _audited_host(tmp_path / "host")
    _forge_first_kept(host.chain)
    for keys in ((str(signer.verifier()),), ()):  # without a key: against the checkpoints the backend holds
        report = audit_chain(str(host.chain), host.witness, AuditOptions(verifier_keys=keys))
        assert report.verdict == AuditVerdict.DISAGREE
        assert report.consistency is not None and report.consistency.first_bad_seq == 300
        details = [failure.detail for failure in report.consistency.failures if failure.first_bad_seq == 300]
        assert any("seq 300, the first record kept, is not the leaf the checkpoint" in d for d in details), details


def test_audit_of_a_pruned_chain_with_a_window_from_before_its_first_record_kept_finds_no_orphan(
    tmp_path: Path,
) -> None:
    """``--since`` before the first record kept fetched the spans of the pruned records too, and each was
    an orphan (a span with no record), so a chain pruned by its own retention read as disagreeing."""
    host, signer = _audited_host(tmp_path / "host")
    options = AuditOptions(verifier_keys=(str(signer.verifier()),), since_unix_nano=1)
    report = audit_chain(str(host.chain), host.witness, options)
    assert report.verdict == AuditVerdict.AGREE, render_text(report)
    assert report.spans.matched == 100 and not report.spans.orphan_spans
    text = render_text(report)
    assert "starts at the first record kept (seq 300): the records before it were pruned" in text
    assert report.to_json()["window_from_seq"] == 300


def test_audit_of_a_pruned_chain_with_a_window_wholly_before_its_first_record_kept_is_unusable(
    tmp_path: Path,
) -> None:
    from otel_route_shadow.backend.audit import AuditError, Problem

    host, _signer = _audited_host(tmp_path / "host")
    with pytest.raises(AuditError, match="holds no record this audit reads") as caught:
        audit_chain(str(host.chain), host.witness, AuditOptions(since_unix_nano=1, until_unix_nano=2))
    assert caught.value.problem == Problem.USAGE


def test_the_first_record_kept_is_authenticated_by_checking_the_largest_checkpoint_only(
    pruned: tuple[Host, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_route_shadow.logstore import LogStore, first_kept

    host, _ = pruned
    store = LogStore(host.chain)
    notes = store.notes().notes
    checked: list[str] = []
    authenticate = first_kept.authenticate

    def counted(note: str, verifiers: Any) -> Any:
        checked.append(note)
        return authenticate(note, verifiers)

    monkeypatch.setattr(first_kept, "authenticate", counted)
    stored = store.read_pruned()
    assert stored is not None and len(notes) > 1
    said = first_kept.authenticate_first_kept(store, stored, [*notes, "not a note"], [host.key])
    assert len(checked) == 1 and str(max(first_kept._size(n) for n in notes)) in said
