"""Never sign a fork (issue 26 item 0): every attack on the log's own disk, across processes and within one.

The writer's promise is "never sign a checkpoint inconsistent with one it signed". Each test plays an
attacker with write access to ``<chain>.tlog/`` (and the chain): it flips a tile, deletes or rewrites
``state``, cuts the chain. A new ``Checkpointer`` is a new process; reusing one is the same process.
Afterwards every checkpoint in ``checkpoints`` must be consistent with every other and with the
intact part of the chain, or the writer must have refused (logged once, recorded in ``refusals``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tlog_support import ORIGIN, append, lines, log_dir, notes, root_from_leaf_hashes

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, LogStore
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.tlog import (
    Signer,
    TileReader,
    authenticate,
    consistency_proof,
    leaf_hash,
    tile_path,
    tree_hash,
    verify_consistency,
)

SIGNER = Signer.generate(ORIGIN)
KEY = str(SIGNER.verifier())


def _writer(chain: Path) -> Checkpointer:
    return Checkpointer(str(chain), ORIGIN, SIGNER)


def _signed_log(tmp_path: Path, size: int, every: int) -> Path:
    chain = tmp_path / "chain.jsonl"
    append(chain, size, _writer(chain), every=every)
    assert [authenticate(n, [SIGNER.verifier()]).checkpoint.size for n in notes(chain)][-1] == size
    return chain


def _sizes(chain: Path) -> list[int]:
    return [authenticate(n, [SIGNER.verifier()]).checkpoint.size for n in notes(chain)]


def _assert_all_consistent(chain: Path, intact: list[bytes]) -> None:
    """Every signed checkpoint has the root of the intact lines, so all are prefixes of one log."""
    hashes = [leaf_hash(line) for line in intact]
    checkpoints = [authenticate(n, [SIGNER.verifier()]).checkpoint for n in notes(chain)]
    for checkpoint in checkpoints:
        assert checkpoint.size <= len(hashes)
        assert checkpoint.root == root_from_leaf_hashes(hashes[: checkpoint.size]), checkpoint.size


def _refusals(chain: Path) -> list[dict[str, object]]:
    path = log_dir(chain) / "refusals"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _flip(path: Path, at: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("tile", [tile_path(0, 11, 184), tile_path(1, 0, 11)])
def test_a_flipped_byte_in_a_right_edge_tile_is_rebuilt_from_the_chain_never_signed(
    tmp_path: Path, tile: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = _signed_log(tmp_path, 3000, 1000)
    _flip(log_dir(chain) / tile, 40)
    made = append(chain, 1500, _writer(chain), every=500, start=3000)  # a new process
    assert [c.size for c in made] == [3500, 4000, 4500]
    _assert_all_consistent(chain, lines(chain))
    assert _refusals(chain) == []
    assert any("rebuilding the tree" in r.message and "tiles unusable" in r.message for r in caplog.records)
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    assert report.ok and report.tiles.ok, report  # the flipped tile was rewritten on the way


@pytest.mark.parametrize("state", ["deleted", "rewritten-to-2500", "rewritten-to-3000", "emptied"])
def test_a_cut_chain_with_its_state_deleted_or_rewritten_is_refused_not_signed(
    tmp_path: Path, state: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = _signed_log(tmp_path, 3000, 1000)
    intact = lines(chain)
    chain.write_bytes(b"".join(line + b"\n" for line in intact[:2500]))
    append(chain, 500, start=100_000)  # the host goes on: 3000 lines again, a fork from 2500 on
    cut = lines(chain)
    state_file = log_dir(chain) / "state"
    if state == "deleted":
        state_file.unlink()
    elif state == "emptied":
        state_file.write_bytes(b"")
    else:
        size = int(state.rsplit("-", 1)[1])
        offset = sum(len(line) + 1 for line in cut[:size])
        hint = {
            "size": size,
            "offset": offset,
            "last_start": offset - len(cut[size - 1]) - 1,
            "last_leaf": leaf_hash(cut[size - 1]).hex(),
            "checkpointed": size,
        }
        state_file.write_text(json.dumps(hint))
    writer = _writer(chain)
    made = append(chain, 1500, writer, every=500, start=100_500)
    assert made == [] and writer.refused == "rewritten"
    assert _sizes(chain) == [1000, 2000, 3000]
    _assert_all_consistent(chain, intact)
    assert [(r["reason"], r["tree_size"]) for r in _refusals(chain)] == [("rewritten", 3000)]
    assert sum("not signing checkpoints" in r.message for r in caplog.records) == 1
    again = _writer(chain)  # the next process refuses too, and records nothing twice
    assert again.checkpoint() is None and again.refused == "rewritten"
    assert len(_refusals(chain)) == 1


def test_the_process_that_signed_2400_and_2600_never_signs_2500_after_a_cut_under_its_lock(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = _writer(chain)
    append(chain, 2400)
    assert writer.checkpoint() is not None
    append(chain, 200, start=2400)
    assert writer.checkpoint() is not None
    intact = lines(chain)
    with DecisionChain(chain) as log:  # the cut, made while holding the chain's lock
        with open(chain, "r+b") as handle:
            handle.truncate(sum(len(line) + 1 for line in intact[:2300]))
        log.append({"kind": "route-shadow", "n": 100_000})
    (log_dir(chain) / "state").unlink()
    made = append(chain, 1400, writer, every=100, start=100_001)
    assert made == [] and writer.refused in {"truncated", "rewritten"}
    assert _sizes(chain) == [2400, 2600]
    _assert_all_consistent(chain, intact)


def test_the_same_process_signs_on_from_its_memory_whatever_state_says(tmp_path: Path) -> None:
    """Within one process the tree in memory is the truth: a state rewritten under it changes nothing."""
    chain = tmp_path / "chain.jsonl"
    writer = _writer(chain)
    append(chain, 600, writer, every=300)
    (log_dir(chain) / "state").write_text('{"size": 5, "offset": 9, "last_start": 0, "last_leaf": "00"}')
    _flip(log_dir(chain) / tile_path(0, 2, 88), 3)
    made = append(chain, 300, writer, every=300, start=600)
    assert [c.size for c in made] == [900]
    _assert_all_consistent(chain, lines(chain))


def test_a_lost_tile_store_is_rebuilt_from_the_chain(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = _signed_log(tmp_path, 1300, 260)
    for path in sorted((log_dir(chain) / "tile").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    made = append(chain, 200, _writer(chain), every=200, start=1300)
    assert [c.size for c in made] == [1500]
    _assert_all_consistent(chain, lines(chain))
    for note in notes(chain):  # every published checkpoint's tiles are there again
        checkpoint = authenticate(note, [SIGNER.verifier()]).checkpoint
        reader = TileReader(LogStore(str(chain)), checkpoint.size, checkpoint.root)
        assert tree_hash(reader, checkpoint.size) == checkpoint.root
    assert any("rebuilding the tree" in r.message for r in caplog.records)


def test_checkpoints_rolled_back_on_disk_do_not_roll_back_the_process(tmp_path: Path) -> None:
    """The newest checkpoint this process signed is held in memory: removing it from the file (and the
    tiles that go with it) does not let the process sign a tree inconsistent with it."""
    chain = tmp_path / "chain.jsonl"
    writer = _writer(chain)
    append(chain, 500, writer, every=250)
    checkpoints = log_dir(chain) / "checkpoints"
    checkpoints.write_text(checkpoints.read_text().splitlines(keepends=True)[0])
    intact = lines(chain)
    chain.write_bytes(b"".join(line + b"\n" for line in intact[:250]))
    append(chain, 300, start=100_000)
    made = append(chain, 1, writer, start=100_300)
    assert made == [] and writer.refused is not None
    assert writer.last is not None and writer.last.size == 500


def test_a_proof_that_does_not_verify_is_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last gate: even a tree built from authenticated parts is signed only after a consistency
    proof from every checkpoint it signed verifies."""
    chain = tmp_path / "chain.jsonl"
    writer = _writer(chain)
    append(chain, 300, writer, every=300)
    calls: list[int] = []

    def wrong(old_size: int, new_size: int, reader: object) -> list[bytes]:
        calls.append(old_size)
        return [b"\x00" * 32] * 3

    monkeypatch.setattr("otel_route_shadow.logstore.checkpointer.consistency_proof", wrong)
    assert append(chain, 10, writer, every=10, start=300) == []
    assert calls == [300] and writer.refused == "fork"
    assert _sizes(chain) == [300]


def test_the_proof_the_writer_checks_is_the_one_a_verifier_checks(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 700, _writer(chain), every=350)
    old, new = (authenticate(n, [SIGNER.verifier()]).checkpoint for n in notes(chain))
    reader = TileReader(LogStore(str(chain)), new.size, new.root)
    verify_consistency(old.size, new.size, old.root, new.root, consistency_proof(old.size, new.size, reader))


@pytest.mark.parametrize("how", ["flipped", "replaced-by-another-tile"])
def test_a_full_tile_replaced_under_a_running_writer_is_found_repaired_from_the_chain_and_logged_once(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = _writer(chain)  # one process throughout: the host keeps running
    append(chain, 3000, writer, every=500)
    tile = log_dir(chain) / tile_path(0, 3)
    authentic = tile.read_bytes()
    if how == "flipped":
        _flip(tile, 100)
    else:
        tile.write_bytes((log_dir(chain) / tile_path(0, 4)).read_bytes())
    made = append(chain, 1500, writer, every=500, start=3000)
    assert made and writer.refused is None
    assert tile.read_bytes() == authentic
    _assert_all_consistent(chain, lines(chain))
    assert (
        sum("tiles do not read back" in r.message and "not signing yet" in r.message for r in caplog.records)
        == 1
    )
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    assert report.ok and report.tiles.ok, report


def test_tiles_of_the_forked_chain_are_not_called_damaged_by_the_checkpoint_it_forks_from(
    tmp_path: Path,
) -> None:
    """Regression: ``verify --checkpoint SAVED`` of a chain rewritten and signed anew named its own, sound
    tiles as damaged ("TILES DAMAGED ... remove the state file") because they do not give the root of
    the checkpoint it forks from: the fork is the finding, not the tiles."""
    (tmp_path / "a").mkdir()
    original = _signed_log(tmp_path / "a", 300, 300)
    saved = notes(original)[-1]
    forked = tmp_path / "b" / "chain.jsonl"
    forked.parent.mkdir()
    forked.write_bytes(b"".join(line + b"\n" for line in lines(original)[:200]))
    append(forked, 100, _writer(forked), every=100, start=1000)
    report = verify_against_checkpoints(str(forked), [saved, notes(forked)[-1]], [KEY])
    assert [v.reason.value for v in report.verdicts] == ["fork", "ok"]
    assert report.tiles.ok, report.tiles
    alone = verify_against_checkpoints(str(forked), [saved], [KEY])
    assert alone.verdicts[0].reason.value == "record-changed" and alone.tiles.ok, alone.tiles


def test_a_checkpoint_of_another_log_given_with_the_chains_own_is_not_called_a_fork(tmp_path: Path) -> None:
    """Regression: ``verify --key A --key B --checkpoint B's --checkpoint A's`` (a fleet auditor's mix-up)
    called host A's log a fork ("inconsistent with the checkpoint of size 300, which the chain
    matches") for a checkpoint of host B's log of the same size."""
    (tmp_path / "a").mkdir()
    own = _signed_log(tmp_path / "a", 300, 300)
    other_signer = Signer.generate("example.com/route-shadow/other")
    other = tmp_path / "b" / "chain.jsonl"
    other.parent.mkdir()
    append(other, 300, Checkpointer(str(other), other_signer.name, other_signer), every=300, start=5000)
    keys = [KEY, str(other_signer.verifier())]
    report = verify_against_checkpoints(str(own), [notes(other)[-1], notes(own)[-1]], keys)
    assert [v.reason.value for v in report.verdicts] == ["record-changed", "ok"]
    assert "a checkpoint of another log, 'example.com/route-shadow/other'" in report.verdicts[0].detail
