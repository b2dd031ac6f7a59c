"""The plugin's checkpoint schedule: every N records or T seconds, in one background thread, at shutdown."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fork_support import exit_code, fork_checking
from tlog_support import ORIGIN, lines, log_dir, notes, root_from_leaf_hashes

from otel_route_shadow.chain import GENESIS_HASH, DecisionChain, WrittenLine, canonical_bytes
from otel_route_shadow.chain.record import encode_record
from otel_route_shadow.instrumentation import checkpointing
from otel_route_shadow.instrumentation.checkpointing import ScheduledCheckpointer
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter
from otel_route_shadow.lines import FileHandle
from otel_route_shadow.logstore import Checkpointer, SignedCheckpoint, catchup
from otel_route_shadow.tlog import leaf_hash
from otel_route_shadow.worker import WorkerName

WORKER_NAME = WorkerName.CHECKPOINTER


def _scheduled(chain: Path, every: int, *, background: bool = False) -> ScheduledCheckpointer:
    return ScheduledCheckpointer(Checkpointer(str(chain), ORIGIN, None), every, 3600.0, background=background)


def test_a_checkpoint_every_n_records_and_at_shutdown(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 100)
    seen: list[int] = []
    scheduled.add_listener(lambda c: seen.append(c.size))
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        for n in range(250):
            log.append({"n": n})
    assert seen == [100, 200]
    last = scheduled.checkpoint_now()
    assert last is not None and last.size == 250 and seen == [100, 200, 250]
    assert scheduled.checkpoint_now() is last  # nothing new: the last one made
    assert len(notes(chain)) == 3 and scheduled.origin == ORIGIN


def test_a_backlog_is_caught_up_on_the_appends_that_follow(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as log:
        for n in range(1000):
            log.append({"n": n})
    scheduled = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, None, max_leaves=300), 1, 3600.0, background=False
    )
    sizes = []
    scheduled.add_listener(lambda c: sizes.append(c.size))
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        for n in range(4):
            log.append({"n": 1000 + n})
    assert sizes == [300, 600, 900, 1004]


def test_a_background_checkpointer_never_checkpoints_in_the_appending_thread(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 3, background=True)
    log = DecisionChain(chain, listener=scheduled.line_written)
    made: list[tuple[int, str]] = []
    done = threading.Event()

    def listener(c: SignedCheckpoint) -> None:
        made.append((c.size, threading.current_thread().name))
        done.set()

    scheduled.add_listener(listener)
    for i in range(7):
        log.append({"n": i})  # due at the third: it only wakes the thread
    assert done.wait(30)  # a hang guard, not a speed assertion
    assert made[0][1] == WORKER_NAME and 3 <= made[0][0] <= 7
    final = scheduled.checkpoint_now()  # synchronous, in this thread
    assert final is not None and final.size == 7
    scheduled.close()
    assert not [t for t in threading.enumerate() if t.name == WORKER_NAME]
    log.close()


def test_closing_leaks_no_thread_across_cycles(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = DecisionChain(chain)
    for cycle in range(20):
        scheduled = _scheduled(chain, 1, background=True)
        log.listener = scheduled.line_written
        log.append({"cycle": cycle})
        scheduled.checkpoint_now()
        scheduled.close()
    assert not [t for t in threading.enumerate() if t.name == WORKER_NAME]
    log.close()


def test_a_forked_child_checkpoints_although_the_parent_was_checkpointing(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = DecisionChain(chain)
    for n in range(5):
        log.append({"n": n})
    scheduled = _scheduled(chain, 1)
    scheduled._mutex.acquire()  # as if the parent's thread were inside a checkpoint at fork time
    pid = os.fork()
    if pid == 0:  # the child: its own lock, its own thread
        made = scheduled.checkpoint_now()
        os._exit(0 if made is not None and made.size == 5 else 1)
    scheduled._mutex.release()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [n.split("\n")[1] for n in notes(chain)] == ["5"]
    log.close()


def test_a_child_forked_while_the_checkpointer_runs_checkpoints_again(tmp_path: Path) -> None:
    """At fork time the parent's checkpointing thread is inside ``Checkpointer.checkpoint`` (its call
    running, the tree directory's lock held: between two slices of a catch-up). Once that call gave the
    lock back, the child checkpoints as the parent does: its due checkpoint and its ``checkpoint_now``
    at shutdown. It used to inherit the call as running, so every checkpoint it asked for returned
    None for good."""
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as log:
        for n in range(5):
            log.append({"n": n})
    scheduled = _scheduled(chain, 1)
    checkpointer = scheduled.checkpointer
    seen: list[int] = []
    scheduled.add_listener(lambda c: seen.append(c.size))
    given_back, tell = os.pipe()

    def child() -> bool:
        os.close(tell)
        os.read(given_back, 1)  # the parent's call has given the lock back
        with DecisionChain(chain, listener=scheduled.line_written) as log:
            log.append({"n": 5})  # due at once (every record), in this thread
        made = scheduled.checkpoint_now()
        return seen == [6] and made is not None and made.size == 6

    os.makedirs(checkpointer.directory.path, exist_ok=True)
    with checkpointer.directory.lock() as held:  # as the parent's call holds them at fork time
        assert held
        checkpointer._running = True
        pid = fork_checking(child)
        checkpointer._running = False
    os.close(given_back)
    os.write(tell, b".")
    os.close(tell)
    assert exit_code(pid) == 0
    assert [n.split("\n")[1] for n in notes(chain)] == ["6"]


def test_a_child_forked_while_a_checkpoint_holds_the_tree_lock_leaves_the_parent_checkpointing(
    tmp_path: Path,
) -> None:
    """The tree directory's lock is an ``flock``, shared by every copy of its descriptor: a child forked
    while a checkpoint held it kept a copy nothing in the child closes, and held the lock for its
    whole life, so neither the parent nor the child checkpointed again while it lived."""
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 1)
    log = DecisionChain(chain, listener=scheduled.line_written)
    log.append({"n": 0})
    assert scheduled.last is not None and scheduled.last.size == 1
    done, tell = os.pipe()

    def child() -> bool:
        os.close(tell)
        return os.read(done, 1) == b"."  # lives until the parent checkpointed

    with scheduled.checkpointer.directory.lock() as held:  # as a checkpoint holds it at fork time
        assert held
        pid = fork_checking(child)
    try:
        log.append({"n": 1})  # due at once: checkpoints in this thread
        assert scheduled.last is not None and scheduled.last.size == 2
    finally:
        os.close(done)
        os.write(tell, b".")
        os.close(tell)
    assert exit_code(pid) == 0
    log.close()


# -- what the catch-up reads ----------------------------------------------------------------------------


class _Reads:
    """What the catch-up reads and checks: bytes of chain lines read, and lines checked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        self.checked = 0
        blocks, holds = catchup.iter_blocks, catchup.line_holds

        def counting_blocks(
            chain: FileHandle, start: int, end: int, size: int
        ) -> Iterator[tuple[int, bytes]]:
            for after, block in blocks(chain, start, end, size):
                self.bytes += len(block) + 1  # the block's lines, their last LF included
                yield after, block

        def counting_holds(line: bytes, prev: bytes, seq: int) -> bool:
            self.checked += 1
            return holds(line, prev, seq)

        monkeypatch.setattr(catchup, "iter_blocks", counting_blocks)
        monkeypatch.setattr(catchup, "line_holds", counting_holds)


def _right_root(chain: Path, made: SignedCheckpoint | None) -> bool:
    hashes = [leaf_hash(line) for line in lines(chain)]
    return made is not None and made.root == root_from_leaf_hashes(hashes[: made.size])


def test_the_checkpointer_never_rereads_lines_its_own_process_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each background checkpoint re-read and re-hashed the ~1,000 lines its own process had just
    # written and hashed, holding the interpreter lock for 116-343 ms (issue 25).
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 100)
    exporter = RouteShadowChainExporter(chain, listener=scheduled.line_written)
    reads = _Reads(monkeypatch)
    seen: list[SignedCheckpoint] = []
    scheduled.add_listener(seen.append)
    for n in range(250):
        exporter.append(n + 1, n + 1, n + 1, {"route_shadow.seam": "own"})
    assert [c.size for c in seen] == [100, 200]
    assert (reads.bytes, reads.checked) == (0, 0)
    with DecisionChain(chain) as other:  # another process's lines: read and checked, and only they
        for n in range(30):
            other.append({"kind": "route-shadow", "n": n})
    for n in range(20):
        exporter.append(n + 1, n + 1, n + 1, {"route_shadow.seam": "own"})
    last = scheduled.checkpoint_now()
    assert last is not None and last.size == 300 and _right_root(chain, last)
    foreign = sum(len(line) + 1 for line in lines(chain)[250:280])
    assert (reads.checked, reads.bytes) == (30, foreign)
    assert scheduled.kept == 0  # every line kept was covered, and forgotten
    exporter.close()


def test_an_own_line_that_no_longer_links_to_the_line_before_it_is_refused(tmp_path: Path) -> None:
    """A line this process appended is taken as given, but its link is still checked: here another
    process's line before it was rewritten after it was linked to (same length, valid on its own)."""
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 1000)
    with DecisionChain(chain) as other:
        other.append({"kind": "route-shadow", "n": 1})
    before = lines(chain)[0]
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        log.append({"kind": "route-shadow", "n": 2})
    rewritten, _ = encode_record(0, GENESIS_HASH, canonical_bytes({"kind": "route-shadow", "n": 9}), b"[]")
    assert len(rewritten) == len(before) + 1
    with open(chain, "r+b") as handle:
        handle.write(rewritten)
    made = scheduled.checkpoint_now()
    assert scheduled.refused == "broken-link" and (made is None or made.size == 1)
    assert json.loads((log_dir(chain) / "refusals").read_text())["seq"] == 1


def test_lines_kept_for_a_checkpointer_that_falls_behind_are_bounded_and_then_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 50)  # keeps at most 2 x 50 lines
    reads = _Reads(monkeypatch)
    high = 0
    with DecisionChain(chain, listener=scheduled.line_written) as log, scheduled.exclusive(1.0) as held:
        assert held  # no checkpoint can run: the checkpointer falls behind
        for n in range(250):
            log.append({"kind": "route-shadow", "n": n})
            high = max(high, scheduled.kept)
    assert high == 100 and scheduled.kept == 50  # dropped at 100, twice; the last 50 kept
    made = scheduled.checkpoint_now()
    assert made is not None and made.size == 250 and _right_root(chain, made)
    assert reads.checked == 200  # the dropped lines, read from the chain; the kept ones taken as given


def test_lines_kept_are_bounded_in_bytes_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = tmp_path / "chain.jsonl"
    monkeypatch.setattr(checkpointing, "KEPT_BYTES_MAX", 10_000)
    scheduled = _scheduled(chain, 1000)
    high = 0
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        for n in range(100):
            log.append({"kind": "route-shadow", "n": n, "pad": "p" * 1000})
            high = max(high, sum(len(line.line) for line in scheduled._kept))
    assert 9_000 < high <= 10_000
    made = scheduled.checkpoint_now()
    assert made is not None and made.size == 100 and _right_root(chain, made)


def test_a_refused_checkpointer_keeps_no_lines(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 10)
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        for n in range(10):
            log.append({"kind": "route-shadow", "n": n})
        assert notes(chain) and scheduled.kept == 0
        with open(chain, "r+b") as handle:  # the chain cut below what was signed
            handle.truncate(len(b"\n".join(lines(chain)[:5])) + 1)
        log.append({"kind": "route-shadow", "n": "after"})
        scheduled.checkpoint_now()
        assert scheduled.refused == "truncated" and scheduled.kept == 0
        for n in range(20):
            log.append({"kind": "route-shadow", "n": n})
        assert scheduled.kept == 0


def test_a_line_that_does_not_follow_the_kept_ones_drops_them(tmp_path: Path) -> None:
    scheduled = _scheduled(tmp_path / "chain.jsonl", 100)
    line = b"x" * 9 + b"\n"
    scheduled.line_written(WrittenLine(0, line, "1" * 64, "0" * 64))
    scheduled.line_written(WrittenLine(10, line, "2" * 64, "1" * 64))
    assert scheduled.kept == 2
    scheduled.line_written(WrittenLine(5, line, "3" * 64, "0" * 64))  # the chain file replaced, or cut
    assert scheduled.kept == 1


def test_catch_up_yields_between_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The background catch-up held the interpreter lock for its whole run: every host thread that
    # wanted it waited (issue 25: p99.9 of a seam call 1,397 us with checkpointing on, 386 us off).
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 300, background=True)  # due at the 300th line of this process
    checkpointer = scheduled.checkpointer
    with DecisionChain(chain) as other:  # 1,000 lines of another process, then 300 of this one
        for n in range(1000):
            other.append({"kind": "route-shadow", "n": n})
    sizes: list[tuple[int, str]] = []
    monkeypatch.setattr(
        checkpointing, "_give_way", lambda: sizes.append((checkpointer.size, threading.current_thread().name))
    )
    done = threading.Event()
    scheduled.add_listener(lambda c: done.set() if c.size == 1300 else None)
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        for n in range(300):
            log.append({"kind": "route-shadow", "n": n})
    assert done.wait(30)  # a hang guard, not a speed assertion
    steps = [b - a for (a, _), (b, _) in zip([(0, ""), *sizes], sizes, strict=False)]
    assert len(sizes) >= 1300 // checkpointer.slice_leaves
    assert max(steps) <= checkpointer.slice_leaves
    assert {name for _, name in sizes} == {WORKER_NAME}
    scheduled.close()


def test_a_catch_up_at_shutdown_does_not_pause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as other:
        for n in range(300):
            other.append({"kind": "route-shadow", "n": n})
    paused: list[int] = []
    monkeypatch.setattr(checkpointing, "_give_way", lambda: paused.append(1))
    made = _scheduled(chain, 1000).checkpoint_now()  # in the caller's thread: nothing to give way to
    assert made is not None and made.size == 300 and paused == []


def test_a_failed_checkpoint_keeps_no_frames_of_the_call_through_a_chained_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkpointer.failed dropped the failure's own traceback, but not the one of the exception it was
    # raised while handling (its __context__): the failed call's frames stayed held until the next call.
    chain = tmp_path / "chain.jsonl"
    DecisionChain(chain).append({"kind": "route-shadow", "n": 1})
    checkpointer = Checkpointer(str(chain), ORIGIN, None)

    def failing(work: object) -> None:
        try:
            raise ValueError("the first failure")
        except ValueError:
            raise OSError(5, "I/O error") from None

    monkeypatch.setattr(checkpointer, "_locked", failing)
    assert checkpointer.checkpoint() is None
    failed = checkpointer.failed
    assert isinstance(failed, OSError)
    assert failed.__traceback__ is None
    assert failed.__context__ is None and failed.__cause__ is None
