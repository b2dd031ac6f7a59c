"""The auditor's side of a pruned chain (docs/chain-format.md 14.4-14.6, docs/auditing.md): ``verify`` of a
pruned chain proves every checkpoint against the tree rebuilt from the retained records and the signed tiles
that stand for the pruned ones, with ``--key``, ``--keys``, ``--witness-policy`` and ``--live-segment``;
``prune`` and ``verify ARCHIVE`` take a key set (``--keys``) as the other commands do."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prune_support import KEY, SegmentedChain, copied, segment_name, segmented_chain
from witness_support import Cosigner

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import LogStore, tlog_dir
from otel_route_shadow.tlog import parse_note

WITNESS = Cosigner("w0.example/w")
SIZES = (20, 15, 30, 12)
MIN_INDEX = 35


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], SegmentedChain]:
    """A copy, in a given folder, of one chain of closed segments of SIZES records and a live file."""
    made = segmented_chain(tmp_path_factory.mktemp("pristine") / "log", SIZES)
    return lambda directory: copied(made, directory)


@pytest.fixture
def log(fresh: Callable[[Path], SegmentedChain], tmp_path: Path) -> SegmentedChain:
    return fresh(tmp_path)


@pytest.fixture
def pruned(log: SegmentedChain) -> SegmentedChain:
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", str(MIN_INDEX)]) == 0
    assert sorted(p.name for p in log.segments.iterdir()) == [segment_name(35), segment_name(65)]
    return log


def verify_json(log: SegmentedChain, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    code = main(["verify", str(log.chain), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def key_set(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "log.keys"
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


def test_a_pruned_chain_is_proven_consistent_with_every_checkpoint(
    pruned: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoints = Path(tlog_dir(pruned.chain)) / "checkpoints"  # with the entries below m the prune moved out
    retired = gzip.decompress((pruned.archive / "checkpoints.000001.jsonl.gz").read_bytes())
    checkpoints.write_bytes(retired + checkpoints.read_bytes())
    code, out = verify_json(pruned, capsys, "--key", str(KEY))
    report = out["checkpoints"]
    sizes = [v["size"] for v in report["verdicts"]]
    assert code == 0 and report["ok"] and all(v["reason"] == "ok" for v in report["verdicts"])
    assert min(sizes) < MIN_INDEX < max(sizes) == pruned.total  # below m: proven through the signed tiles
    assert (report["chain_size"], report["checkpointed_size"], report["unprotected"]) == (
        pruned.total,
    ) * 2 + (0,)
    assert out["pruned"]["min_index"] == MIN_INDEX and "authenticated" in out["pruned"]["first_kept"]
    assert "pruned below seq 35" in report["tiles"]["note"]


def test_a_retained_record_edited_after_pruning_is_record_changed_at_its_seq(
    pruned: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = pruned.segment(35)
    data = segment.read_bytes()
    segment.write_bytes(data.replace(b'"n":40', b'"n":41', 1))
    code, out = verify_json(pruned, capsys, "--key", str(KEY))
    report = out["checkpoints"]
    assert code == 1 and report["reason"] == "record-changed" and report["first_bad_seq"] == 40
    assert out["first_bad_seq"] == 40


def test_forged_tiles_standing_for_the_pruned_records_are_unprovable_never_ok(
    pruned: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    tiles = sorted((Path(str(pruned.chain) + ".tlog") / "tile" / "0").rglob("*"))
    for tile in (t for t in tiles if t.is_file()):
        data = bytearray(tile.read_bytes())
        data[0] ^= 1  # leaf 0: pruned
        tile.write_bytes(bytes(data))
    code, out = verify_json(pruned, capsys, "--key", str(KEY))
    reasons = {v["reason"] for v in out["checkpoints"]["verdicts"]}
    assert code == 1 and "unprovable" in reasons and "ok" not in reasons
    assert out["pruned"]["problem"] is not None


def test_a_pruned_chain_with_a_witness_policy_says_what_a_quorum_attests(
    pruned: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = LogStore(pruned.chain)
    note = next(n for n in store.newest_notes() if parse_note(n).text.split("\n")[1] == "65")
    text, now = parse_note(note).text, int(time.time())
    store.cosign(text, [WITNESS.line(text, now)], [WITNESS.verifier], now=now)
    policy = tmp_path / "witnesses.policy"
    policy.write_text(f"log {KEY}\nwitness w0 {WITNESS.verifier}\nquorum w0\n")
    code, out = verify_json(pruned, capsys, "--witness-policy", str(policy))
    assert code == 3 and out["witnessed"]["attested_size"] == 65 and out["checkpoints"]["ok"]
    code, out = verify_json(pruned, capsys, "--witness-policy", str(policy), "--max-unwitnessed", "100")
    assert code == 0 and out["pruned"]["min_index"] == MIN_INDEX


def test_the_live_segment_of_a_pruned_chain_verifies_from_its_anchor(
    pruned: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(pruned.chain), "--live-segment", "--key", str(KEY)]) == 0
    out = capsys.readouterr().out
    assert "intact" in out and "pruned below seq 35" in out
    keys = key_set(tmp_path, f"{KEY} 0")
    assert main(["verify", str(pruned.chain), "--live-segment", "--keys", keys]) == 0


def test_prune_and_verify_take_a_key_set(
    log: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = key_set(tmp_path, f"{KEY} 0")
    assert main(["prune", str(log.chain), "--keys", keys, "--min-index", str(MIN_INDEX)]) == 0
    assert "--keys" in LogStore(log.chain).read_pruned().command  # type: ignore[union-attr]
    code, out = verify_json(log, capsys, "--keys", keys)
    assert code == 0 and out["checkpoints"]["ok"] and "authenticated" in out["pruned"]["first_kept"]
    archive = log.archive / "0000000000000020.jsonl.gz"
    assert main(["verify", str(archive), "--keys", keys]) == 0


def test_a_key_set_whose_window_misses_the_note_is_a_finding(
    pruned: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    early = key_set(tmp_path, f"{KEY} 0 10")
    archive = pruned.archive / "0000000000000020.jsonl.gz"
    capsys.readouterr()
    assert main(["verify", str(archive), "--keys", early]) == 1
    assert "key-outside-window" in capsys.readouterr().out
    code, out = verify_json(pruned, capsys, "--keys", early)
    assert code == 1 and "key-outside-window" in {v["reason"] for v in out["checkpoints"]["verdicts"]}
