"""The writer side: checkpoints as the chain grows, tiles on disk, resume, bounds, several processes."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_chain_support import build_old_chain
from tlog_support import ORIGIN, append, lines, log_dir, notes, root_from_leaf_hashes

from otel_route_shadow.chain import DecisionChain, WrittenLine
from otel_route_shadow.logstore import Checkpointer, LogStore, SignedCheckpoint, default_origin, links
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.tlog import (
    Signer,
    Tile,
    TileReader,
    consistency_proof,
    leaf_hash,
    parse_checkpoint,
    tile_path,
    tree_hash,
    verify_consistency,
)
from otel_route_shadow.tlog.note import check_signatures, parse_note


def test_checkpoints_as_the_chain_grows_with_the_right_roots(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    signer = Signer.generate(ORIGIN)
    seen: list[SignedCheckpoint] = []
    checkpointer = Checkpointer(str(chain), ORIGIN, signer)
    checkpointer.add_listener(seen.append)
    made = append(chain, 250, checkpointer, every=100)
    assert [c.size for c in made] == [c.size for c in seen] == [100, 200]
    last = checkpointer.checkpoint()
    assert last is not None and last.size == 250 and last.signed and last.key_name == ORIGIN
    hashes = [leaf_hash(line) for line in lines(chain)]
    for signed in seen:
        opened = check_signatures(parse_note(signed.note), [signer.verifier()])
        assert opened.verified_by
        assert (
            parse_checkpoint(opened.text).root == signed.root == root_from_leaf_hashes(hashes[: signed.size])
        )
    assert notes(chain) == [c.note for c in seen]
    assert (log_dir(chain) / "checkpoint").read_text() == seen[-1].note
    state = json.loads((log_dir(chain) / "state").read_text())
    assert (state["size"], state["checkpointed"], state["previous"]["size"]) == (250, 250, 200)


def test_tiles_follow_the_c2sp_layout_and_give_every_root(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 600)
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint()
    assert made is not None and made.size == 600 and not made.signed and made.key_name is None
    directory = log_dir(chain)
    assert (directory / tile_path(0, 0)).stat().st_size == 256 * 32
    assert (directory / tile_path(0, 2, 88)).stat().st_size == 88 * 32
    assert (directory / tile_path(1, 0, 2)).stat().st_size == 2 * 32
    assert tile_path(1, 1234067) == "tile/1/x001/x234/067"
    assert tile_path(0, 5, 7) == "tile/0/005.p/7"
    hashes = [leaf_hash(line) for line in lines(chain)]
    reader = TileReader(LogStore(str(chain)), 600, made.root)
    for size in (1, 255, 256, 257, 512, 599, 600):
        assert tree_hash(reader, size) == root_from_leaf_hashes(hashes[:size])
    proof = consistency_proof(300, 600, reader)
    verify_consistency(300, 600, root_from_leaf_hashes(hashes[:300]), made.root, proof)


def test_resume_reads_the_state_and_the_edge_tiles_not_the_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 700)
    assert Checkpointer(str(chain), ORIGIN, None).checkpoint() is not None
    append(chain, 5, start=700)
    checked: list[bytes] = []
    original = links.line_holds
    monkeypatch.setattr(
        "otel_route_shadow.logstore.catchup.line_holds",
        lambda line, prev, seq: checked.append(line) or original(line, prev, seq),
    )
    reads: list[int] = []
    read = LogStore.read_tiles

    def counting(self: LogStore, tiles: Sequence[Tile]) -> list[bytes]:
        reads.extend(tile.level for tile in tiles)
        return read(self, tiles)

    monkeypatch.setattr(LogStore, "read_tiles", counting)
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint()
    assert made is not None and made.size == 705
    assert len(checked) == 5  # only the new lines are checked and hashed
    assert made.root == root_from_leaf_hashes([leaf_hash(line) for line in lines(chain)])
    # Resume: the two edge tiles of 700; proof before signing: the new edge and the tiles it proves through.
    assert len(reads) <= 6


def test_catch_up_is_bounded_per_call_and_continues_next_time(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 1000)
    checkpointer = Checkpointer(str(chain), ORIGIN, None, max_leaves=300)
    sizes = []
    for _ in range(5):
        made = checkpointer.checkpoint()
        sizes.append(made.size if made else None)
        assert checkpointer.behind == (made is not None and made.size < 1000)
    assert sizes == [300, 600, 900, 1000, None]


def test_catch_up_is_bounded_in_bytes_too(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"  # lines of 1 MB, as writers before the 64 KiB entry bound wrote
    build_old_chain(chain, 10, lambda n: {"kind": "route-shadow", "n": n, "blob": "x" * 1_000_000})
    checkpointer = Checkpointer(str(chain), ORIGIN, None, max_bytes=1)  # floor: 4 MiB + 1
    sizes = [made.size for _ in range(4) if (made := checkpointer.checkpoint()) is not None]
    assert sizes == [4, 8, 10]


def test_the_catch_up_pauses_after_every_slice_of_lines(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 1000)
    sizes: list[int] = []
    checkpointer = Checkpointer(
        str(chain), ORIGIN, None, slice_leaves=64, pause=lambda: sizes.append(checkpointer.size)
    )
    made = checkpointer.checkpoint()
    assert made is not None and made.size == 1000
    steps = [b - a for a, b in zip([0, *sizes], sizes, strict=False)]
    assert len(sizes) >= 1000 // 64 and max(steps) <= 64


def test_lines_this_process_appended_are_taken_as_given_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 10)
    data = chain.read_bytes()
    own, offset = [], 0
    for line in lines(chain):
        own.append(
            WrittenLine(
                offset, line + b"\n", links.record_hash_of(line).decode(), links.prev_of(line).decode()
            )
        )
        offset += len(line) + 1
    checked: list[bytes] = []
    original = links.line_holds
    monkeypatch.setattr(
        "otel_route_shadow.logstore.catchup.line_holds",
        lambda line, prev, seq: checked.append(line) or original(line, prev, seq),
    )
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint(appended=own[3:])
    assert made is not None and made.size == 10 and len(checked) == 3  # lines 0-2 only
    assert made.root == root_from_leaf_hashes([leaf_hash(line) for line in lines(chain)])
    assert chain.read_bytes() == data


def test_nothing_new_signs_nothing_new(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    made = checkpointer.checkpoint()
    assert made is not None and checkpointer.checkpoint() is None and checkpointer.last is made
    assert len(notes(chain)) == 1
    assert Checkpointer(str(chain), ORIGIN, None).checkpoint() is None  # another process: nothing new either


def test_a_torn_tail_is_not_a_leaf(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 4)
    with open(chain, "ab") as handle:
        handle.write(b'{"partial')
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint()
    assert made is not None and made.size == 4
    append(chain, 1, start=4)  # quarantines the torn bytes, appends an event and one record
    again = Checkpointer(str(chain), ORIGIN, None).checkpoint()
    assert again is not None and again.size == 6
    assert verify_against_checkpoints(str(chain), notes(chain), []).ok


def _worker(chain: str, key: str, rounds: int) -> None:
    checkpointer = Checkpointer(chain, ORIGIN, Signer.parse(key))
    with DecisionChain(chain) as log:
        for n in range(rounds):
            log.append({"kind": "route-shadow", "pid": os.getpid(), "n": n})
            if n % 7 == 6:
                checkpointer.checkpoint()
    checkpointer.checkpoint()


def test_several_processes_share_one_tree_and_never_sign_inconsistent_checkpoints(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    signer = Signer.generate(ORIGIN)
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_worker, args=(str(chain), signer.secret_string(), 150)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    Checkpointer(str(chain), ORIGIN, signer).checkpoint()
    found = notes(chain)
    report = verify_against_checkpoints(str(chain), found, [str(signer.verifier())])
    assert report.ok and report.tiles.ok, report
    assert report.chain_size == 450 and report.checkpointed_size == 450 and report.unprotected == 0
    assert not (log_dir(chain) / "refusals").exists()
    assert len(found) >= 2  # how many depends on how the three interleave (a busy lock is skipped)


@pytest.mark.parametrize("damage", ["truncated", "rewritten"])
def test_refuses_to_sign_after_the_chain_changed_underneath(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 50)
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    assert checkpointer.checkpoint() is not None
    kept = lines(chain)
    if damage == "truncated":
        chain.write_bytes(b"\n".join(kept[:40]) + b"\n")
    else:
        chain.unlink()
        append(chain, 60)  # a new chain at the same path: its line 49 differs (other seq/links)
        chain.write_bytes(chain.read_bytes().replace(b'"n":49}', b'"n":99}'))
    before = len(notes(chain))
    for _ in range(3):
        assert checkpointer.checkpoint() is None
    assert checkpointer.refused == damage
    assert len(notes(chain)) == before
    refusals = (log_dir(chain) / "refusals").read_text().splitlines()
    assert [json.loads(line)["reason"] for line in refusals] == [damage]
    assert sum("not signing checkpoints" in r.message for r in caplog.records) == 1


def test_a_failing_listener_is_contained_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    checkpointer = Checkpointer(str(chain), ORIGIN, None)

    def boom(_: SignedCheckpoint) -> None:
        raise RuntimeError("listener bug")

    checkpointer.add_listener(boom)
    append(chain, 3, checkpointer)
    assert checkpointer.last is not None and checkpointer.last.size == 3
    assert sum("listener failed" in r.message for r in caplog.records) == 1


def test_an_unwritable_directory_never_reaches_the_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 2)
    (tmp_path / "chain.jsonl.tlog").write_text("not a directory")
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    assert checkpointer.checkpoint() is None and checkpointer.checkpoint() is None
    assert sum("checkpoint failed" in r.message for r in caplog.records) == 1


def test_default_origin_is_stable_and_a_valid_key_name(tmp_path: Path) -> None:
    origin = default_origin(str(tmp_path / "chain.jsonl"))
    assert origin == default_origin(str(tmp_path / "." / "chain.jsonl"))
    assert origin != default_origin(str(tmp_path / "other.jsonl"))
    assert "/route-shadow/" in origin and " " not in origin and "+" not in origin
    Signer.generate(origin)


def test_a_checkpointer_given_a_key_and_no_origin_signs_for_the_keys_name(tmp_path: Path) -> None:
    """Regression: with a key and no origin, the origin was derived from the chain's path, so the first
    checkpoint was signed by a key named otherwise; read back, it authenticated to no one (a key is
    named for its log's origin) and the writer refused for good (``unverified-checkpoint``)."""
    signer = Signer.generate("example.com/route-shadow/named")
    chain = tmp_path / "chain.jsonl"
    append(chain, 20, Checkpointer(str(chain), None, signer), every=5)
    again = Checkpointer(str(chain), None, signer)
    assert again.origin == signer.name
    append(chain, 5, again, every=5)
    assert again.refused is None and again.last is not None and again.last.size == 25
    with pytest.raises(ValueError, match=r"not for 'example\.com/other'"):
        Checkpointer(str(chain), "example.com/other", signer)
