"""The writer side: checkpoints as the chain grows, tiles on disk, resume, several processes, refusal."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest
from test_chain_support import build_old_chain

from otel_route_shadow.chain import RoutingAuditLog
from otel_route_shadow.tlog import (
    Checkpointer,
    SignedCheckpoint,
    Signer,
    TileStore,
    default_origin,
    leaf_hash,
    open_note,
    parse_checkpoint,
    read_checkpoint_file,
    root_from_leaf_hashes,
    tile_path,
    verify_against_checkpoints,
    verify_consistency,
)
from otel_route_shadow.tlog.checkpointer import WORKER_NAME
from otel_route_shadow.tlog.merkle import consistency_proof

ORIGIN = "example.com/route-shadow/test"


def _lines(chain: Path) -> list[bytes]:
    return chain.read_bytes().split(b"\n")[:-1]


def _append(chain: Path, count: int, checkpointer: Checkpointer | None = None, start: int = 0) -> None:
    with RoutingAuditLog(chain) as log:
        for n in range(start, start + count):
            log.append({"kind": "route-shadow", "n": n})
            if checkpointer is not None:
                checkpointer.after_append()


def _notes(chain: Path) -> list[str]:
    return read_checkpoint_file(str(chain) + ".tlog/checkpoints")


def test_checkpoints_every_n_records_and_at_shutdown_with_the_right_roots(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    signer = Signer.generate(ORIGIN)
    seen: list[SignedCheckpoint] = []
    checkpointer = Checkpointer(str(chain), ORIGIN, signer, every_records=100, every_seconds=3600)
    checkpointer.add_listener(seen.append)
    _append(chain, 250, checkpointer)
    assert [c.size for c in seen] == [100, 200]
    last = checkpointer.checkpoint_now()
    assert last is not None and last.size == 250 and last.signed and last.key_name == ORIGIN
    assert [c.size for c in seen] == [100, 200, 250]
    hashes = [leaf_hash(line) for line in _lines(chain)]
    for made in seen:
        opened = open_note(made.note, [signer.verifier()])
        assert opened.verified_by
        checkpoint = parse_checkpoint(opened.text)
        assert checkpoint.root == made.root == root_from_leaf_hashes(hashes[: made.size])
    assert _notes(chain) == [c.note for c in seen]
    assert (tmp_path / "chain.jsonl.tlog" / "checkpoint").read_text() == seen[-1].note


def test_tiles_follow_the_c2sp_layout_and_give_every_root(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 600)
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint_now()
    assert made is not None and made.size == 600 and not made.signed and made.key_name is None
    directory = tmp_path / "chain.jsonl.tlog"
    assert (directory / tile_path(0, 0)).stat().st_size == 256 * 32
    assert (directory / tile_path(0, 2, 88)).stat().st_size == 88 * 32
    assert (directory / tile_path(1, 0, 2)).stat().st_size == 2 * 32
    assert tile_path(1, 1234067) == "tile/1/x001/x234/067"
    assert tile_path(0, 5, 7) == "tile/0/005.p/7"
    hashes = [leaf_hash(line) for line in _lines(chain)]
    store = TileStore(str(directory), 600)
    for size in (1, 255, 256, 257, 512, 599, 600):
        assert store.root(size) == root_from_leaf_hashes(hashes[:size])
    proof = consistency_proof(300, 600, store.range_hash)
    verify_consistency(300, 600, root_from_leaf_hashes(hashes[:300]), made.root, proof)


def test_resume_after_restart_reads_state_and_edge_tiles_not_the_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 700)
    first = Checkpointer(str(chain), ORIGIN, None).checkpoint_now()
    assert first is not None
    _append(chain, 5, start=700)
    resumed = Checkpointer(str(chain), ORIGIN, None)
    reads: list[int] = []
    original = TileStore.tile

    def counting(self: TileStore, level: int, index: int) -> list[bytes]:
        reads.append(level)
        return original(self, level, index)

    monkeypatch.setattr(TileStore, "tile", counting)
    made = resumed.checkpoint_now()
    assert made is not None and made.size == 705
    assert len(reads) <= 3  # one partial tile per level
    assert made.root == root_from_leaf_hashes([leaf_hash(line) for line in _lines(chain)])


def test_catch_up_is_bounded_per_call_and_continues_next_time(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 1000)
    checkpointer = Checkpointer(str(chain), ORIGIN, None, every_records=1, max_leaves=300)
    sizes = []
    checkpointer.add_listener(lambda c: sizes.append(c.size))
    for _ in range(5):
        checkpointer.after_append()
    assert sizes == [300, 600, 900, 1000]


def test_catch_up_is_bounded_in_bytes_too(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"  # lines of 1 MB, as writers before the 64 KiB entry bound wrote
    build_old_chain(chain, 10, lambda n: {"kind": "route-shadow", "n": n, "blob": "x" * 1_000_000})
    checkpointer = Checkpointer(str(chain), ORIGIN, None, every_records=1, max_bytes=1)  # floor: 4 MiB + 1
    sizes = []
    checkpointer.add_listener(lambda c: sizes.append(c.size))
    for _ in range(4):
        checkpointer.after_append()
    assert sizes == [4, 8, 10]


def test_nothing_new_signs_nothing_new(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 3)
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    made = checkpointer.checkpoint_now()
    assert checkpointer.checkpoint_now() is made
    assert len(_notes(chain)) == 1


def test_a_torn_tail_is_not_a_leaf(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 4)
    with open(chain, "ab") as handle:
        handle.write(b'{"partial')
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint_now()
    assert made is not None and made.size == 4
    _append(chain, 1, start=4)  # quarantines the torn bytes, appends an event and one record
    again = Checkpointer(str(chain), ORIGIN, None).checkpoint_now()
    assert again is not None and again.size == 6
    assert verify_against_checkpoints(str(chain), _notes(chain), []).ok


def _worker(chain: str, key: str, rounds: int) -> None:
    signer = Signer.parse(key)
    checkpointer = Checkpointer(chain, ORIGIN, signer, every_records=7, every_seconds=3600)
    with RoutingAuditLog(chain) as log:
        for n in range(rounds):
            log.append({"kind": "route-shadow", "pid": os.getpid(), "n": n})
            checkpointer.after_append()
    checkpointer.checkpoint_now()


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
    Checkpointer(str(chain), ORIGIN, signer).checkpoint_now()
    notes = _notes(chain)
    report = verify_against_checkpoints(str(chain), notes, [str(signer.verifier())])
    assert report.ok, report
    assert report.chain_size == 450 and report.checkpointed_size == 450 and report.unprotected == 0
    # The workers checkpointed along the way, not only the final call above. How many times depends on
    # how the three interleave (one that finds the tree's lock taken skips: the other covers its
    # records), so only "more than the last one" is certain.
    assert len(notes) >= 2


@pytest.mark.parametrize("damage", ["truncated", "rewritten"])
def test_refuses_to_sign_after_the_chain_changed_underneath(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 50)
    checkpointer = Checkpointer(str(chain), ORIGIN, None, every_records=1)
    assert checkpointer.checkpoint_now() is not None
    lines = _lines(chain)
    if damage == "truncated":
        chain.write_bytes(b"\n".join(lines[:40]) + b"\n")
    else:
        chain.unlink()
        _append(chain, 60)  # a new chain at the same path: its line 49 differs (other seq/links)
        chain.write_bytes(chain.read_bytes().replace(b'"n":49}', b'"n":99}'))
    before = len(_notes(chain))
    for _ in range(3):
        checkpointer.after_append()
    assert checkpointer.checkpoint_now() is None or checkpointer.refused == damage
    assert checkpointer.refused == damage
    assert len(_notes(chain)) == before
    refusals = (tmp_path / "chain.jsonl.tlog" / "refusals").read_text().splitlines()
    assert [json.loads(line)["reason"] for line in refusals] == [damage]
    assert sum("not signing checkpoints" in r.message for r in caplog.records) == 1


def test_a_failing_listener_is_contained_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    checkpointer = Checkpointer(str(chain), ORIGIN, None, every_records=1)

    def boom(_: SignedCheckpoint) -> None:
        raise RuntimeError("listener bug")

    checkpointer.add_listener(boom)
    _append(chain, 3, checkpointer)
    assert checkpointer.last is not None and checkpointer.last.size == 3
    assert sum("listener failed" in r.message for r in caplog.records) == 1


def test_an_unwritable_directory_never_reaches_the_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    _append(chain, 2)
    (tmp_path / "chain.jsonl.tlog").write_text("not a directory")
    checkpointer = Checkpointer(str(chain), ORIGIN, None, every_records=1)
    checkpointer.after_append()
    assert checkpointer.checkpoint_now() is None
    assert sum("checkpoint failed" in r.message for r in caplog.records) == 1


def test_default_origin_is_stable_and_a_valid_key_name(tmp_path: Path) -> None:
    origin = default_origin(str(tmp_path / "chain.jsonl"))
    assert origin == default_origin(str(tmp_path / "." / "chain.jsonl"))
    assert origin != default_origin(str(tmp_path / "other.jsonl"))
    assert "/route-shadow/" in origin and " " not in origin and "+" not in origin
    Signer.generate(origin)


def test_a_background_checkpointer_never_checkpoints_in_the_appending_thread(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(chain)
    checkpointer = Checkpointer(str(chain), "example.com/bg", None, every_records=3, background=True)
    made: list[tuple[int, str]] = []
    done = threading.Event()

    def listener(c: SignedCheckpoint) -> None:
        made.append((c.size, threading.current_thread().name))
        done.set()

    checkpointer.add_listener(listener)
    for i in range(7):
        log.append({"n": i})
        checkpointer.after_append()  # due at the third: it only wakes the thread
    assert done.wait(30)  # a hang guard, not a speed assertion
    assert made[0][1] == WORKER_NAME and 3 <= made[0][0] <= 7
    final = checkpointer.checkpoint_now()  # synchronous, in this thread
    assert final is not None and final.size == 7
    checkpointer.close()
    assert not [t for t in threading.enumerate() if t.name == WORKER_NAME]
    log.close()


def test_closing_a_background_checkpointer_leaks_no_thread_across_cycles(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(chain)
    for cycle in range(20):
        checkpointer = Checkpointer(str(chain), "example.com/bg", None, every_records=1, background=True)
        log.append({"cycle": cycle})
        checkpointer.after_append()
        checkpointer.checkpoint_now()
        checkpointer.close()
    assert not [t for t in threading.enumerate() if t.name == WORKER_NAME]
    log.close()
