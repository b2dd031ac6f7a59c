"""Reading and verifying a segmented chain (docs/chain-format.md section 14.4): closed segments in
``X.jsonl.segments/``, then the live file, read as one chain; every anchor checked; each way a segment
can fail to follow the one before it is its own verdict naming the segment, exit 1 on the command line.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segment_support import chain_lines, prune, segmented_chain, segments_folder, sign, whole_copy
from test_chain_support import build_old_chain, forge, relink

from otel_route_shadow.backend.chain_source import iter_payloads_from
from otel_route_shadow.chain import (
    ChainPathError,
    chain_line,
    chain_segments,
    iter_chain_lines,
    iter_lines,
    iter_payloads,
    iter_records,
    live_path,
    parallel,
    verify_chain,
    verify_pass,
)
from otel_route_shadow.cli import main
from otel_route_shadow.logstore.entries import long_entries
from otel_route_shadow.tlog import Signer

ORIGIN = "example.com/route-shadow/segments"
POLICIES = str(Path(__file__).resolve().parent.parent / "examples" / "policies.json")
SIGNER = Signer.generate(ORIGIN)
VERIFIER = str(SIGNER.verifier())
SIZES = [5, 4, 6]  # segments 0000000000000000 (seq 0-4), 0000000000000005 (seq 5-8), live (seq 9-14)


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    segmented_chain(path, SIZES, signer=SIGNER, origin=ORIGIN)
    return path


def _segment(chain: Path, first: int) -> Path:
    return segments_folder(chain) / f"{first:016d}.jsonl"


def test_a_segmented_chain_verifies_and_reads_as_one_chain(chain: Path) -> None:
    lines = chain_lines(chain)
    result = verify_chain(chain)
    assert result.intact and result.records == 15 and result.head_seq == 14
    assert result.bytes_verified == sum(len(line) for line in lines)
    assert [seq for seq, _ in iter_payloads(chain)] == list(range(15))
    assert [record.seq for record in iter_records(chain)] == list(range(15))
    assert [number for number, _ in iter_lines(chain)] == list(range(1, 16))
    anchors = [payload for _, payload in iter_payloads(chain) if payload["kind"] == "segment-anchor"]
    assert [a["segment"] for a in anchors] == ["0000000000000000.jsonl", "0000000000000005.jsonl"]


def test_positions_run_over_the_files_as_over_one(chain: Path) -> None:
    lines = chain_lines(chain)
    positions = [position for position, _ in iter_chain_lines(chain)]
    assert positions == [sum(len(line) for line in lines[:i]) for i in range(15)]
    start = positions[7]  # inside the second segment
    assert [line for _, line in iter_chain_lines(chain, start)] == [line[:-1] for line in lines[7:]]
    assert [seq for seq, _ in iter_payloads_from(chain, start, 7)] == list(range(7, 15))
    assert [n for n, _ in iter_lines(chain, positions[6])] == list(range(1, 7))


def test_a_chain_is_named_by_its_live_file_a_closed_segment_or_its_folder(chain: Path) -> None:
    for name in (chain, _segment(chain, 5), segments_folder(chain), f"{segments_folder(chain)}/"):
        assert live_path(name) == str(chain)
        assert verify_chain(name).records == 15
    assert [s.first for s in chain_segments(chain)] == [0, 5, None]


def test_a_chain_never_cut_has_one_file_and_verifies_as_before(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    segmented_chain(path, [7])
    assert chain_segments(path) == chain_segments(str(path))
    assert [s.path for s in chain_segments(path)] == [str(path)]
    assert not segments_folder(path).exists()
    result = verify_chain(path)
    assert result.intact and result.records == 7 and result.path == str(path)


def test_a_closed_segment_removed_is_segment_missing_naming_the_next(chain: Path) -> None:
    _segment(chain, 5).unlink()
    result = verify_chain(chain)
    assert result.reason == "segment-missing" and result.first_bad_seq == 5
    assert result.path == str(chain) and "seq 5..8 is missing" in (result.detail or "")
    assert result.records == 5


def test_the_first_segment_removed_is_segment_missing(chain: Path) -> None:
    _segment(chain, 0).unlink()
    result = verify_chain(chain)
    assert result.reason == "segment-missing" and result.first_bad_seq == 0
    assert result.path == str(_segment(chain, 5))


def test_segments_swapped_by_name_are_segment_misplaced(chain: Path) -> None:
    first, second = _segment(chain, 0), _segment(chain, 5)
    first.rename(chain.parent / "swap")
    second.rename(first)
    (chain.parent / "swap").rename(second)
    result = verify_chain(chain)
    assert result.reason == "segment-misplaced" and result.first_bad_seq == 0
    assert result.path == str(first) and "first record is seq 5" in (result.detail or "")


def test_a_segment_duplicated_under_another_name_is_segment_misplaced(chain: Path) -> None:
    shutil.copyfile(_segment(chain, 0), _segment(chain, 2))
    result = verify_chain(chain)
    assert result.reason == "segment-misplaced" and result.path == str(_segment(chain, 2))
    assert result.records == 5


def test_a_record_edited_in_a_closed_segment_is_named_in_that_segment(chain: Path) -> None:
    segment = _segment(chain, 5)
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"agent-', b'"AGENT-')
    os.unlink(segment)  # a hard link: the edit must not reach another name of the file
    segment.write_bytes(b"".join(lines))
    result = verify_chain(chain)
    assert result.reason == "hash-mismatch" and result.first_bad_seq == 7
    assert result.path == str(segment) and result.line == 3


def test_a_closed_segment_cut_short_is_found(chain: Path) -> None:
    segment = _segment(chain, 0)
    data = segment.read_bytes()
    os.unlink(segment)
    segment.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])
    result = verify_chain(chain)
    assert result.reason == "segment-missing" and result.first_bad_seq == 4


def test_a_closed_segment_ending_mid_line_is_segment_edited(chain: Path) -> None:
    segment = _segment(chain, 5)
    data = segment.read_bytes()
    os.unlink(segment)
    segment.write_bytes(data + b'{"v":1,"seq":9')
    result = verify_chain(chain)
    assert result.reason == "segment-edited" and result.path == str(segment)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("sha256", "00" * 32, "segment-edited"),
        ("bytes", 1, "segment-edited"),
        ("segment", "0000000000000001.jsonl", "anchor-mismatch"),
        ("last_record_hash", "ab" * 32, "anchor-mismatch"),
        ("first_seq", 3, "anchor-mismatch"),
        ("checkpoint", "not a note", "anchor-mismatch"),
    ],
)
def test_an_anchor_naming_a_wrong_field_is_its_own_verdict(
    tmp_path: Path, field: str, value: Any, reason: str
) -> None:
    path = tmp_path / "c.jsonl"

    def wrong(anchor: dict[str, Any]) -> dict[str, Any]:
        return {**anchor, field: value} if anchor["first_seq"] == 5 else anchor

    segmented_chain(path, SIZES, signer=SIGNER, origin=ORIGIN, tamper=wrong)
    result = verify_chain(path)
    assert result.reason == reason and result.first_bad_seq == 9 and result.path == str(path)
    assert result.records == 9 and field.split("_")[0] in (result.detail or "").lower()


@pytest.mark.parametrize("field", ["bytes", "sha256"])
def test_an_anchor_edited_after_the_cut_is_named_not_the_intact_segment_before_it(
    chain: Path, field: str
) -> None:
    # The anchor's size or SHA-256 changed in the live file: verify said the closed segment before it
    # "was changed after the cut" (segment-edited), sending the operator to a file that is intact.
    lines = chain.read_bytes().splitlines(keepends=True)
    anchor = orjson.loads(lines[0])
    value = anchor["payload"][field]
    forged = value + 1 if field == "bytes" else ("0" if value[0] != "0" else "1") + value[1:]
    lines[0] = lines[0].replace(orjson.dumps({field: value})[1:-1], orjson.dumps({field: forged})[1:-1], 1)
    assert lines[0] != chain.read_bytes().splitlines(keepends=True)[0]
    chain.write_bytes(b"".join(lines))
    result = verify_chain(chain)
    assert result.reason == "hash-mismatch" and result.first_bad_seq == 9 and result.path == str(chain)
    assert "its anchor record (seq 9)" in (result.detail or "")


def test_an_anchor_naming_seq_0_as_false_does_not_match(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    def retyped(anchor: dict[str, Any]) -> dict[str, Any]:
        return {**anchor, "first_seq": False} if anchor["first_seq"] == 0 else anchor

    segmented_chain(path, SIZES, signer=SIGNER, origin=ORIGIN, tamper=retyped)
    result = verify_chain(path)
    assert result.reason == "anchor-mismatch" and result.first_bad_seq == 5
    assert "first_seq False" in (result.detail or "")


def test_the_live_segment_alone_whose_anchor_names_seq_0_as_false_does_not_verify(tmp_path: Path) -> None:
    # check_start compared the anchor's last_seq with ==: the live file checked alone passed an anchor
    # the whole chain's verify refuses.
    path = tmp_path / "c.jsonl"

    def retyped(anchor: dict[str, Any]) -> dict[str, Any]:
        return {**anchor, "last_seq": False} if anchor["last_seq"] == 0 else anchor

    segmented_chain(path, [1, 4], signer=SIGNER, origin=ORIGIN, tamper=retyped)
    result = verify_pass(path, live_only=True, verifiers=[SIGNER.verifier()]).result
    assert result.reason == "anchor-mismatch" and "last_seq False" in (result.detail or "")


def test_an_anchors_checkpoint_is_verified_with_the_logs_key(chain: Path) -> None:
    assert verify_pass(chain, verifiers=[SIGNER.verifier()]).result.intact
    other = Signer.generate(ORIGIN)
    result = verify_pass(chain, verifiers=[other.verifier()]).result
    assert result.reason == "anchor-mismatch" and "does not verify" in (result.detail or "")


def test_an_anchor_signed_by_a_key_not_given_points_to_the_key_set(chain: Path) -> None:
    # After a key rotation, --key OLD alone met the first anchor signed by the new key with "does not
    # verify" and no word of the key set that would verify it.
    result = verify_pass(chain, verifiers=[Signer.generate(ORIGIN).verifier()]).result
    assert "signed only by keys not given" in (result.detail or "") and "--keys" in (result.detail or "")


def test_the_live_segment_alone_verifies_from_its_anchor(chain: Path) -> None:
    result = verify_pass(chain, live_only=True, verifiers=[SIGNER.verifier()]).result
    assert result.intact and result.records == 15 and result.head_seq == 14
    _segment(chain, 0).unlink()  # history is not read
    assert verify_pass(chain, live_only=True, verifiers=[SIGNER.verifier()]).result.intact


def test_the_live_segment_alone_says_it_read_from_its_anchor_not_the_whole_chain(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # verify --live-segment printed "intact: 15 records" of a file that holds 6 of them.
    assert main(["verify", str(chain), "--live-segment", "--key", VERIFIER]) == 0
    assert ": intact from seq 9: 6 records, head seq 14, head hash " in capsys.readouterr().out
    assert main(["verify", str(chain), "--live-segment", "--key", VERIFIER, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["first_seq"], out["records"]) == (9, 15)
    assert main(["verify", str(chain), "--key", VERIFIER]) == 0
    assert ": intact: 15 records, head seq 14" in capsys.readouterr().out


def test_the_live_segment_alone_with_no_key_is_not_intact(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no key the anchor's checkpoint was only parsed, so a live file with a forged anchor (a note
    of any key) verified as intact."""
    result = verify_pass(chain, live_only=True).result
    assert not result.intact and "no log key was given" in (result.detail or "")
    assert main(["verify", str(chain), "--live-segment"]) == 2
    assert "--live-segment needs --key or --keys" in capsys.readouterr().err


def test_the_live_segment_whose_anchor_is_forged_does_not_verify(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    segmented_chain(path, SIZES, signer=SIGNER, origin=ORIGIN, tamper=lambda a: {**a, "last_seq": 1})
    result = verify_pass(path, live_only=True, verifiers=[SIGNER.verifier()]).result
    assert result.reason == "anchor-mismatch"


def test_verify_names_the_segment_and_exits_1(chain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _segment(chain, 5).unlink()
    assert main(["verify", str(chain)]) == 1
    out = capsys.readouterr().out
    assert "segment-missing" in out and str(chain) in out
    assert main(["verify", "--json", str(segments_folder(chain))]) == 1
    assert orjson.loads(capsys.readouterr().out)["reason"] == "segment-missing"


def test_verify_of_a_segmented_chain_against_its_checkpoints(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(chain), "--key", VERIFIER]) == 0
    assert "intact: 15 records" in capsys.readouterr().out
    assert main(["verify", str(chain), "--live-segment", "--key", VERIFIER]) == 0
    assert main(["verify", str(_segment(chain, 0)), "--live-segment", "--checkpoint", str(chain)]) == 2


def test_report_reads_a_segmented_chain_as_its_whole_copy(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = whole_copy(chain)
    whole.write_bytes(b"".join(chain_lines(chain)))
    assert main(["report", "--json", str(whole)]) == 0
    expected = orjson.loads(capsys.readouterr().out)
    assert main(["report", "--json", str(segments_folder(chain))]) == 0
    got = orjson.loads(capsys.readouterr().out)
    assert got["chain"]["records"] == 15
    assert _without_paths(got) == _without_paths(expected)


def _without_paths(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_paths(v)
            for k, v in value.items()
            if k not in {"path", "checkpoint", "generated_at", "age_seconds"}
        }
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    return value


@pytest.mark.parametrize("seq", [2, 5, 8, 9, 14])
def test_a_receipt_for_a_record_in_any_segment_verifies(
    chain: Path, tmp_path: Path, seq: int, capsys: pytest.CaptureFixture[str]
) -> None:
    sign(chain, SIGNER, ORIGIN)
    line, receipt = tmp_path / "record.line", tmp_path / "receipt"
    assert main(["prove", str(chain), "--seq", str(seq), "--receipt", "--record-out", str(line)]) == 0
    receipt.write_text(capsys.readouterr().out)
    assert line.read_bytes() == chain_lines(chain)[seq]
    assert main(["verify-proof", "--receipt", str(receipt), "--record", str(line), "--key", VERIFIER]) == 0


def test_chain_line_finds_each_line_through_the_segment_names(chain: Path) -> None:
    lines = chain_lines(chain)
    assert [chain_line(chain, seq) for seq in range(15)] == [line[:-1] for line in lines]
    assert chain_line(chain, 15) is None


def test_long_entries_of_a_segmented_chain_carry_their_seq_and_position(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    long_ones = {3, 7, 11}

    def payload(i: int) -> dict[str, Any]:
        return {"kind": "route-shadow", "n": i, "blob": "y" * (70_000 if i in long_ones else 10)}

    segmented_chain_old_lines(path, payload)
    lines = chain_lines(path)
    found = long_entries(str(path))
    assert [entry.seq for entry in found] == [3, 7, 11]
    for entry in found:
        assert entry.offset == sum(len(line) for line in lines[: entry.seq])
        assert entry.length == len(lines[entry.seq]) - 1


def segmented_chain_old_lines(path: Path, payload: Any) -> None:
    """A chain of 15 records whose records 3, 7 and 11 are longer than an entry (as an older writer wrote
    them), laid out in files cut at seq 5 and 9 (without anchors: ``long_entries`` does not read them)."""
    written = build_old_chain(path, 15, payload)
    folder = segments_folder(path)
    folder.mkdir()
    (folder / "0000000000000000.jsonl").write_bytes(b"".join(written[:5]))
    (folder / "0000000000000005.jsonl").write_bytes(b"".join(written[5:9]))
    path.write_bytes(b"".join(written[9:]))


def test_a_pruned_chain_verifies_from_its_minimum_index_authenticated_by_the_signed_tree(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sign(chain, SIGNER, ORIGIN)
    prune(chain, 5)
    assert [s.first for s in chain_segments(chain)] == [5, None]
    assert main(["verify", str(chain), "--key", VERIFIER]) == 0
    out = capsys.readouterr().out
    assert "pruned below seq 5 at 2026-09-21T" in out and "`otel-route-shadow prune --below 5`" in out
    assert "seq 5 authenticated from the signed tree of size 15" in out
    assert main(["verify", str(chain)]) == 0
    assert "seq 5, the first record kept, not authenticated (give --key)" in capsys.readouterr().out
    assert [seq for seq, _ in iter_payloads(chain)] == list(range(5, 15))


def test_a_pruned_chain_rewritten_from_its_first_kept_record_is_found_by_the_signed_tree(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Everything kept rewritten, links and hashes recomputed, the anchor naming a pruned segment's hash
    no one can check any more: the chain alone verifies, the signed tree does not hold."""
    sign(chain, SIGNER, ORIGIN)
    prune(chain, 9)
    lines = chain.read_bytes().splitlines(keepends=True)
    record = orjson.loads(lines[0])
    forged_anchor, _ = forge(9, record["prev_hash"], {**record["payload"], "sha256": "ff" * 32})
    chain.write_bytes(b"".join(relink([forged_anchor, *lines[1:]], 1)))
    assert verify_pass(chain, start=9).result.intact
    assert main(["verify", str(chain), "--key", VERIFIER]) == 1
    out = capsys.readouterr().out
    assert "BROKEN: seq 9, the first record kept, is not the leaf the checkpoint of size 15 signed" in out


def test_a_pruned_chain_missing_its_first_kept_segment_is_segment_missing(chain: Path) -> None:
    sign(chain, SIGNER, ORIGIN)
    prune(chain, 5)
    _segment(chain, 5).unlink()
    result = verify_pass(chain, start=5).result
    assert result.reason == "segment-missing" and "kept from seq 5" in (result.detail or "")


def test_a_pruned_file_that_is_not_json_is_unusable_input(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prune(chain, 5)
    (Path(str(chain) + ".tlog") / "pruned").write_text('{"min_index": -1}')
    assert main(["verify", str(chain)]) == 2
    assert "not a pruned-records file" in capsys.readouterr().err


@pytest.fixture(scope="module")
def demo_payloads(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--spawns", "12", "--quiet", "--out", str(out / "demo")]) == 0
    return [payload for _, payload in iter_payloads(out / "demo" / "chain.jsonl")]


@pytest.mark.parametrize(
    "command",
    [
        ["whatif", "--json", "--no-progress", "--policies", POLICIES],
        ["matrix", "--format", "json", "--policies", POLICIES, "--chain"],
        ["report", "--json", "--no-progress"],
    ],
)
def test_whatif_matrix_and_report_read_a_segmented_chain_as_its_whole_copy(
    tmp_path: Path,
    demo_payloads: list[dict[str, Any]],
    command: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    chain = tmp_path / "c.jsonl"
    count = len(demo_payloads)
    segmented_chain(
        chain, [count // 3, count // 3, count - 2 * (count // 3) + 2], payload=demo_payloads.__getitem__
    )
    whole = whole_copy(chain)
    whole.parent.mkdir()
    whole.write_bytes(b"".join(chain_lines(chain)))
    assert main([*command, str(whole)]) == 0
    expected = orjson.loads(capsys.readouterr().out)
    assert main([*command, str(_segment(chain, count // 3))]) == 0
    assert _without_paths(orjson.loads(capsys.readouterr().out)) == _without_paths(expected)


@pytest.mark.parametrize("damage", ["none", "edit", "missing"])
def test_verify_in_worker_processes_gives_the_one_process_verdict(
    chain: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if damage == "edit":
        segment = _segment(chain, 5)
        data = segment.read_bytes().replace(b'"agent-', b'"AGENT-', 1)
        segment.unlink()
        segment.write_bytes(data)
    elif damage == "missing":
        _segment(chain, 0).unlink()
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    one = verify_pass(chain, jobs=1).result
    two = verify_pass(chain, jobs=2).result
    assert two == one
    assert one.intact == (damage == "none")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(2, 6), min_size=1, max_size=4), mark=st.integers(0, 24))
def test_any_cuts_read_and_verify_as_the_lines_of_one_chain(
    tmp_path: Path, sizes: list[int], mark: int
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as directory:
        path = Path(directory) / "c.jsonl"
        lines = segmented_chain(path, sizes)
        total = len(lines)
        passed = verify_pass(path, mark=mark)
        assert passed.result.intact and passed.result.records == total
        assert passed.result.bytes_verified == sum(map(len, lines))
        if mark <= total:
            assert passed.marked_offset == sum(map(len, lines[:mark]))
        assert [seq for seq, _ in iter_payloads(path)] == list(range(total))
        assert [chain_line(path, seq) for seq in range(total)] == [line[:-1] for line in lines]


def test_a_segments_folder_that_is_a_symlink_is_refused(chain: Path, tmp_path: Path) -> None:
    folder = segments_folder(chain)
    folder.rename(tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ChainPathError, match="not a directory"):
        verify_chain(chain)


def test_a_fifo_named_as_a_segment_is_refused_without_blocking(
    chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = segments_folder(chain) / "0000000000000003.jsonl"
    os.mkfifo(fifo)
    assert main(["verify", str(chain)]) == 2
    assert "FIFO" in capsys.readouterr().err
    with pytest.raises(ChainPathError):
        list(iter_payloads(chain))


def test_the_live_segment_of_a_chain_never_cut_is_the_whole_chain(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    segmented_chain(path, [6])
    result = verify_pass(path, live_only=True).result
    assert result.intact and result.records == 6


def test_a_folder_of_chains_lists_a_segmented_chain_once_by_its_live_file(chain: Path) -> None:
    from otel_route_shadow.analysis.fleet import chain_paths as fleet_paths
    from otel_route_shadow.cli.audit import chain_paths as audit_paths

    folder = str(chain.parent)
    assert [p for p in audit_paths([folder]) if "whole" not in p] == [str(chain)]
    assert fleet_paths([folder]) == [str(chain)]
    assert fleet_paths([str(segments_folder(chain))]) == [str(chain)]


def test_a_line_marked_at_a_segment_boundary_keeps_its_chain_position(chain: Path) -> None:
    """The line at a cut is both the end of one file and the start of the next: the pass once reported
    its offset in the next file (0) instead of its chain position."""
    lines = chain_lines(chain)
    for mark in (5, 9, 15):
        assert verify_pass(chain, mark=mark).marked_offset == sum(map(len, lines[:mark]))
