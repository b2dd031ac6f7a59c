"""Records waiting in a writer's backlog for the chain's lock reach the chain, or are counted, even when
their process is killed before it could write or spill them (SIGKILL: no exit hook runs).

Another process really holds the chain's lock here (``lock_held_by_another_process``); the killed
writer is a real process, killed with SIGKILL once its submits returned.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fork_support import exit_code, fork_checking
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_chain_lock import HANG_GUARD_S, lock_held_by_another_process

from otel_route_shadow.chain import (
    BACKLOG_RECORDS,
    DecisionChain,
    EncodedPayload,
    encode_payload,
    iter_payloads,
    sanitize_payload,
    verify_chain,
)
from otel_route_shadow.chain import log as chain_log
from otel_route_shadow.chain import spill as chain_spill
from otel_route_shadow.chain.spill import HEADER_BYTES
from otel_route_shadow.chain.waiting import DROPPED_SUFFIX, WaitingFile

ROOT = Path(__file__).resolve().parent.parent

_KILLED_HOST = """
import sys
from otel_route_shadow.instrumentation import RouteShadowConfig, ShadowRuntime

runtime = ShadowRuntime(RouteShadowConfig.resolve(chain_path=sys.argv[1], chain_lock_timeout_ms=10))
runtime.attach()
for n in range(int(sys.argv[2])):
    runtime.exporter.append(n + 1, n + 1, n + 1, {"route_shadow.seam": f"waited-{n}"})
print(runtime.exporter._log.backlog, flush=True)
sys.stdin.read()  # killed here, with SIGKILL: no exit hook runs
"""


def _seams(path: Path) -> list[object]:
    return [p.get("attributes", {}).get("route_shadow.seam", p.get("n")) for _, p in iter_payloads(path)]


def _killed_while_waiting(path: Path, records: int) -> None:
    """A host process submits ``records`` while another process holds the chain's lock, and is killed
    with SIGKILL once its submits returned (all kept in its backlog)."""
    host = subprocess.Popen(
        [sys.executable, "-c", _KILLED_HOST, str(path), str(records)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == str(records)  # every record waited: the lock never came
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(HANG_GUARD_S)
    assert host.returncode == -signal.SIGKILL


def test_records_waiting_for_the_lock_when_their_process_is_killed_reach_the_chain_or_are_counted(
    tmp_path: Path,
) -> None:
    # A host killed by a signal (SIGTERM from Pool.terminate, SIGKILL) lost the records waiting in its
    # backlog with no trace: 10, 30 and 50 of 50 kept in three runs, the rest unmarked.
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": "before"})
    with lock_held_by_another_process(path):
        _killed_while_waiting(path, 50)
    log = DecisionChain(path)
    for n in range(5):
        log.append({"kind": "route-shadow", "n": f"next-{n}"})
    seams = _seams(path)
    waited = [f"waited-{n}" for n in range(50)]
    assert [s for s in seams if s in waited] == waited  # every one, once, in order
    assert [s for s in seams if str(s).startswith("next-")] == [f"next-{n}" for n in range(5)]
    assert seams[0] == "before"
    result = verify_chain(path)
    assert result.intact and result.dropped_records == 0


class Killed(BaseException):
    """A writer killed between two lines it writes (raised where the kill lands; nothing of the writer
    runs after it but what unwinding runs anyway, which leaves the disk as the kill would)."""


def _encoded(writer: int, n: int) -> EncodedPayload:
    return encode_payload(*sanitize_payload({"kind": "route-shadow", "n": f"{writer}:{n}"}))


def _die(log: DecisionChain) -> None:
    """What the kernel does for a killed writer: its descriptors close (its waiting file's lock goes)."""
    for fd in (log._fd, log._waiting._fd, log._waiting._cfd):
        if fd >= 0:
            os.close(fd)


_SLOT = st.integers(0, 1)
_STEP = st.one_of(
    st.tuples(st.just("submit"), _SLOT, st.integers(1, 20), st.just(False)),
    st.tuples(st.just("hold"), st.just(0), st.just(0), st.just(False)),
    st.tuples(st.just("release"), st.just(0), st.just(0), st.just(False)),
    st.tuples(st.just("flush"), _SLOT, st.just(0), st.just(False)),
    st.tuples(st.just("exit"), _SLOT, st.just(0), st.just(False)),
    # the disk refuses the `point`th line of a drain, or (`point` 99) the spill file refuses all
    st.tuples(st.just("fail"), _SLOT, st.integers(0, 20) | st.just(99), st.just(False)),
    # killed once `point` more lines are written, or in a syscall of giving up the written ones'
    # mirror lines (`point` >= 1000: that call's number); with `keep`, another thread keeps a record
    # meanwhile
    st.tuples(st.just("kill"), _SLOT, st.integers(0, 40) | st.integers(1000, 1005), st.booleans()),
)


def _refuse(*args: Any) -> None:
    raise OSError(errno.ENOSPC, "no space")


class _Killer:
    """Kills a writer at a point of its next drain (see ``_STEP``)."""

    def __init__(self, point: int, keep: Any, fault: type[BaseException] = Killed) -> None:
        self.point, self.keep, self.fault = point, keep, fault
        self.lines, self.calls, self.settling = 0, 0, False

    def line(self, real: Any) -> Any:
        def dying(log: DecisionChain, *args: Any) -> Any:
            if self.lines == self.point:
                raise self.fault(errno.EIO, "refused")
            if self.lines == 0 and self.keep is not None:
                self.keep()  # another thread's record that timed out on this instance's lock
            self.lines += 1
            return real(log, *args)

        return dying

    def syscall(self, real: Any) -> Any:
        def dying(*args: Any) -> Any:
            if self.settling:
                if self.calls == self.point - 1000:
                    raise Killed
                self.calls += 1
            return real(*args)

        return dying

    def settled(self, real: Any) -> Any:
        def settling(mirror: Any, taken: Any) -> None:
            self.settling = True
            try:
                real(mirror, taken)
            finally:
                self.settling = False

        return settling


def _killed_after(submitted: int, point: int, keeps: bool = False) -> list[tuple[str, int, int, bool]]:
    """Steps: records wait, the lock is released, the writer is killed at ``point`` of its drain."""
    return [
        ("hold", 0, 0, False),
        ("submit", 0, submitted, False),
        ("release", 0, 0, False),
        ("kill", 0, point, keeps),
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# mid-drain: the claim; emptying the file: cut first; a kept line no shorter than the written ones: not
# moved down; moving down: cut before the header; the spill file refused; killed holding counts
@example(steps=_killed_after(2, 1), capacity=BACKLOG_RECORDS)
@example(steps=_killed_after(9, 1001), capacity=BACKLOG_RECORDS)
@example(steps=_killed_after(1, 1003, keeps=True), capacity=BACKLOG_RECORDS)
@example(steps=_killed_after(3, 1003, keeps=True), capacity=BACKLOG_RECORDS)
@example(steps=[*_killed_after(3, 2)[:2], ("fail", 0, 99, False), *_killed_after(3, 2)[2:]], capacity=4096)
@example(steps=[*_killed_after(9, 0)[:2], ("kill", 0, 0, False)], capacity=4)
@given(steps=st.lists(_STEP, max_size=25), capacity=st.sampled_from([BACKLOG_RECORDS, 4]))
def test_every_waiting_record_reaches_the_chain_once_and_in_its_writers_order_whatever_is_killed_when(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[str, int, int, bool]],
    capacity: int,
) -> None:
    # with a backlog of 4, records past it are counted: the counts reach the chain too (at least once)
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 0)  # every append looks, as a later one would
    path = tmp_path_factory.mktemp("chain") / "chain.jsonl"
    with DecisionChain(path) as first:
        first.append({"kind": "route-shadow", "n": "before"})
    holder = os.open(path, os.O_RDONLY)
    generation = [0, 1]  # writer slot -> writer id (a killed writer is replaced by a new one)
    logs = [DecisionChain(path, lock_timeout=0, backlog=capacity) for _ in generation]
    try:
        _every_waiting_record_once(path, holder, generation, logs, steps, capacity, monkeypatch)
    finally:  # a session runs hundreds of examples: each one's descriptors go with it
        for log in logs:
            log.close()


def _every_waiting_record_once(
    path: Path,
    holder: int,
    generation: list[int],
    logs: list[DecisionChain],
    steps: list[tuple[str, int, int, bool]],
    capacity: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    numbers = [0, 0]
    submitted: dict[int, list[str]] = {0: [], 1: []}

    def submit(slot: int) -> None:
        writer = generation[slot]
        submitted.setdefault(writer, []).append(f"{writer}:{numbers[slot]}")
        logs[slot].submit(_encoded(writer, numbers[slot]))
        numbers[slot] += 1

    def keep(slot: int) -> None:
        writer = generation[slot]
        submitted.setdefault(writer, []).append(f"{writer}:{numbers[slot]}")
        logs[slot]._backlog.keep(_encoded(writer, numbers[slot]), 0)
        numbers[slot] += 1

    try:
        for action, slot, count, keeps in steps:
            log = logs[slot]
            if action == "submit":
                for _ in range(count):
                    submit(slot)
            elif action == "hold":
                fcntl.flock(holder, fcntl.LOCK_EX)
            elif action == "release":
                fcntl.flock(holder, fcntl.LOCK_UN)
            elif action == "flush":
                log.flush(0)
            elif action == "fail":
                with monkeypatch.context() as patch, contextlib.suppress(OSError):
                    if count == 99:
                        patch.setattr(chain_spill.Spill, "keep", _refuse)
                        log.spill(0)
                    else:
                        failing = _Killer(count, None, OSError)
                        patch.setattr(DecisionChain, "_write_line", failing.line(DecisionChain._write_line))
                        log.flush(0)
            elif action in ("kill", "exit"):
                if action == "exit":  # what the exporter does at a normal exit, then the process ends
                    log.flush(0)
                    log.spill(0)
                else:
                    killer = _Killer(count, (lambda slot=slot: keep(slot)) if keeps else None)
                    with monkeypatch.context() as patch:
                        patch.setattr(DecisionChain, "_write_line", killer.line(DecisionChain._write_line))
                        patch.setattr(WaitingFile, "settled", killer.settled(WaitingFile.settled))
                        for name in ("pwrite", "ftruncate"):
                            patch.setattr(chain_spill.os, name, killer.syscall(getattr(os, name)))
                        with contextlib.suppress(Killed):
                            log.flush(0)
                _die(log)
                generation[slot] = max(generation) + 1
                numbers[slot] = 0
                logs[slot] = DecisionChain(path, lock_timeout=0, backlog=capacity)
        fcntl.flock(holder, fcntl.LOCK_UN)
        for log in logs:
            log.flush(None)
        batches = 2 * (sum(map(len, submitted.values())) // 16 + max(generation)) + 4  # spill, dead writers'
        with DecisionChain(path) as final:
            for n in range(batches):  # a batch per append
                final.append({"kind": "route-shadow", "n": f"final:{n}"})
    finally:
        os.close(holder)
    names = [p["n"] for _, p in iter_payloads(path) if str(p.get("n"))[:1].isdigit()]
    assert len(names) == len(set(names))  # nothing twice
    for writer, records in submitted.items():  # in order, every one not counted as dropped
        assert [n for n in names if n.split(":")[0] == str(writer)] == [n for n in records if n in names]
    dropped = verify_chain(path).dropped_records
    total = sum(map(len, submitted.values()))
    if capacity >= BACKLOG_RECORDS:
        assert len(names) == total and dropped == 0
    else:  # a kill between writing a drop event and giving its count up counts it twice, never loses it
        assert len(names) + dropped >= total
        if not any(step[0] == "kill" for step in steps):
            assert len(names) + dropped == total
    waiting = path.with_name(f"{path.name}.waiting")
    left = sorted(waiting.iterdir()) if waiting.exists() else []
    live = {log._waiting._name for log in logs}
    assert {f.name.removesuffix(DROPPED_SUFFIX) for f in left} <= live  # the dead writers' are gone
    for f in left:  # the live ones' hold nothing
        content = f.read_bytes()
        assert content.split() == [b"{}"] if f.name.endswith(DROPPED_SUFFIX) else len(content) == HEADER_BYTES
    assert verify_chain(path).intact


def test_a_forked_child_leaves_its_parents_waiting_records_to_the_parent(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0)
    with lock_held_by_another_process(path):
        for n in range(3):
            assert log.submit(_encoded(0, n)) is None

    def child() -> bool:  # its look finds the parent's file locked: the parent lives
        log.append({"kind": "route-shadow", "n": "child"})
        return log.backlog == 0

    assert exit_code(fork_checking(child)) == 0
    mirror = path.with_name(f"{path.name}.waiting") / log._waiting._name
    probe = os.open(mirror, os.O_RDONLY)
    try:  # the child closed its copy of the descriptor without unlocking the parent's file
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)
    assert len(mirror.read_bytes().splitlines()) == 4  # the header and the parent's three
    assert log.flush(None) == 0
    names = [p["n"] for _, p in iter_payloads(path)]
    assert names == ["child", "0:0", "0:1", "0:2"]
    assert mirror.stat().st_size == HEADER_BYTES


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink", "directory"])
def test_what_is_not_a_waiting_file_blocks_nothing_and_a_waiting_folder_that_is_not_one_keeps_in_memory(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "chain.jsonl"
    waiting = path.with_name(f"{path.name}.waiting")
    if kind == "file":  # no folder can be made: the records wait in memory only, as before
        waiting.write_bytes(b"x" * 100)
    else:
        waiting.mkdir()
        odd = waiting / "1-00000000"
        if kind == "fifo":
            os.mkfifo(odd)
        elif kind == "symlink":
            odd.symlink_to(path)
        else:
            odd.mkdir()
    log = DecisionChain(path, lock_timeout=0)
    log.append({"kind": "route-shadow", "n": "0:0"})
    with lock_held_by_another_process(path):
        assert log.submit(_encoded(0, 1)) is None
    DecisionChain(path).append({"kind": "route-shadow", "n": "1:0"})  # a look: the odd entry is passed over
    assert log.flush(None) == 0
    assert [p["n"] for _, p in iter_payloads(path)] == ["0:0", "1:0", "0:1"]
    assert verify_chain(path).intact


_KILLED_WRITER = """
import sys
from otel_route_shadow.chain import DecisionChain, encode_payload, sanitize_payload

log = DecisionChain(sys.argv[1], lock_timeout=0, backlog=3)
for n in range(10):
    log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": f"0:{n}"})))
print(sum(log.backlog_records), flush=True)
sys.stdin.read()  # killed here, with SIGKILL
"""


def test_the_drop_counts_of_a_writer_killed_with_a_full_backlog_reach_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    with lock_held_by_another_process(path):
        host = subprocess.Popen(
            [sys.executable, "-c", _KILLED_WRITER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            assert host.stdout is not None
            assert host.stdout.readline().strip() == b"10"  # three kept, seven counted
        finally:
            host.send_signal(signal.SIGKILL)
            host.wait(HANG_GUARD_S)
    DecisionChain(path).append({"kind": "route-shadow", "n": "next"})
    payloads = [p for _, p in iter_payloads(path)]
    assert [p.get("n", p["kind"]) for p in payloads] == ["0:0", "0:1", "0:2", "records-dropped", "next"]
    assert payloads[3]["count"] == 7 and payloads[3]["reason"] == "chain-lock-timeout"
    assert verify_chain(path).dropped_records == 7


def test_a_waiting_folder_that_is_a_symbolic_link_is_not_written_through(tmp_path: Path) -> None:
    # The writer created its waiting file (and its counts) in the folder a link at <chain>.waiting named,
    # where no look ever takes them (a look passes a link over): refused now, the records in memory.
    path = tmp_path / "chain.jsonl"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path.with_name(f"{path.name}.waiting").symlink_to(elsewhere)
    log = DecisionChain(path, lock_timeout=0, backlog=1)
    with lock_held_by_another_process(path):
        for n in range(3):  # one kept, two counted
            assert log.submit(_encoded(0, n)) is None
    assert list(elsewhere.iterdir()) == []
    assert log.flush(None) == 0
    payloads = [p for _, p in iter_payloads(path)]
    assert [p.get("n", p["kind"]) for p in payloads] == ["0:0", "records-dropped"]
    assert verify_chain(path).dropped_records == 2


def test_a_file_not_named_as_a_waiting_file_is_neither_taken_nor_removed_by_a_look(tmp_path: Path) -> None:
    # A look took any regular file of <chain>.waiting/ for a dead writer's: a foreign file (an editor's
    # backup, notes) was removed, and its lines were counted in the chain as records dropped.
    path = tmp_path / "chain.jsonl"
    waiting = path.with_name(f"{path.name}.waiting")
    waiting.mkdir()
    foreign = {name: b"not a record\n" * 10 for name in ("notes.txt", "1-00000000~", "12-0000000g")}
    for name, content in foreign.items():
        (waiting / name).write_bytes(content)
    DecisionChain(path).append({"kind": "route-shadow", "n": "0:0"})  # its first append looks
    assert {f.name: f.read_bytes() for f in waiting.iterdir()} == foreign
    assert [p["n"] for _, p in iter_payloads(path)] == ["0:0"]
    assert verify_chain(path).dropped_records == 0


def test_a_writer_closed_with_nothing_waiting_leaves_no_waiting_file_and_no_descriptor(tmp_path: Path) -> None:
    # close() left the waiting file open and locked, and on disk, for the process's life: a descriptor
    # (and a file) per instance that ever had a record wait, however many were closed.
    path = tmp_path / "chain.jsonl"
    fds = len(os.listdir("/proc/self/fd"))
    with lock_held_by_another_process(path):
        logs = [DecisionChain(path, lock_timeout=0, backlog=1) for _ in range(3)]
        for n, log in enumerate(logs):
            for _ in range(2):  # one kept, one counted: the counts file too
                assert log.submit(_encoded(n, 0)) is None
    for log in logs:
        assert log.flush(None) == 0
        log.close()
    assert list(path.with_name(f"{path.name}.waiting").iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == fds
    logs[0].submit(_encoded(0, 1))  # a closed writer still writes: its next wait makes a new file
    with lock_held_by_another_process(path):
        assert logs[0].submit(_encoded(0, 2)) is None
    assert len(list(path.with_name(f"{path.name}.waiting").iterdir())) == 1
    assert logs[0].flush(None) == 0
    assert verify_chain(path).dropped_records == 3


def test_a_look_that_takes_a_waiting_file_before_its_writer_locks_it_costs_the_record_no_mirror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process's look between a writer's creating its file and locking it takes the empty file
    # for a dead writer's and removes it: the record that made it was then kept in memory only, so a
    # kill lost it unmarked (and the one warning a writer logs went on this race).
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": "first"})
    looker = DecisionChain(path)
    real_flock = fcntl.flock
    holder = os.open(path, os.O_RDONLY)  # the chain's lock, held by another open file of the chain
    raced = []

    def flock(fd: int, operation: int) -> None:
        if not raced and operation == fcntl.LOCK_EX | fcntl.LOCK_NB and os.fstat(fd).st_size == 0:
            raced.append(fd)
            real_flock(holder, fcntl.LOCK_UN)
            looker.append({"kind": "route-shadow", "n": "look"})  # its first append looks
            real_flock(holder, fcntl.LOCK_EX)
        real_flock(fd, operation)

    writer = DecisionChain(path, lock_timeout=0)
    try:
        real_flock(holder, fcntl.LOCK_EX)
        monkeypatch.setattr(chain_spill.fcntl, "flock", flock)
        assert writer.submit(_encoded(0, 0)) is None
        monkeypatch.undo()
        assert raced
        assert writer.submit(_encoded(0, 1)) is None
    finally:
        os.close(holder)
    _die(writer)  # killed
    DecisionChain(path).append({"kind": "route-shadow", "n": "next"})
    assert [p["n"] for _, p in iter_payloads(path)] == ["first", "look", "0:0", "0:1", "next"]


def test_a_dead_writers_waiting_file_that_cannot_be_read_now_is_kept_for_a_later_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A look that failed to read or claim a dead writer's file (an I/O error) took that for an empty
    # file and removed it: its records were lost, unmarked.
    path = tmp_path / "chain.jsonl"
    writer = DecisionChain(path, lock_timeout=0)
    with lock_held_by_another_process(path):
        for n in range(3):
            assert writer.submit(_encoded(0, n)) is None
    _die(writer)  # killed

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(chain_spill.os, "fsync", failing)  # the claim cannot be made durable
        DecisionChain(path).append({"kind": "route-shadow", "n": "1:0"})
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 0)  # a later look
    DecisionChain(path).append({"kind": "route-shadow", "n": "2:0"})
    assert [p["n"] for _, p in iter_payloads(path)] == ["1:0", "0:0", "0:1", "0:2", "2:0"]


def test_a_dead_writers_waiting_file_that_stays_unreadable_is_said_once_not_at_every_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Each look read a dead writer's file through a new reader, whose "logged once" was its own: a file
    # that kept failing (an I/O error) put a warning in the host's log at every look, once a second.
    path = tmp_path / "chain.jsonl"
    writer = DecisionChain(path, lock_timeout=0)
    with lock_held_by_another_process(path):
        assert writer.submit(_encoded(0, 0)) is None
    _die(writer)  # killed

    def failing(fd: int, end: int) -> tuple[int, int, int]:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 0)  # every append looks
    reader = DecisionChain(path)
    with monkeypatch.context() as patch, caplog.at_level("WARNING"):
        patch.setattr(chain_spill, "_read_header", failing)
        for n in range(4):
            reader.append({"kind": "route-shadow", "n": f"1:{n}"})
    assert len(caplog.records) == 1
    reader.append({"kind": "route-shadow", "n": "1:4"})  # readable again: the record is not lost
    assert [p["n"] for _, p in iter_payloads(path)] == ["1:0", "1:1", "1:2", "1:3", "0:0", "1:4"]


def test_a_record_past_the_waiting_files_bound_is_said_not_skipped_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # keep() passed over a record that would take the file past its bound without a word: the record
    # waited in memory only, and a kill then lost it with nothing in the log to say it was not on disk.
    from otel_route_shadow.chain import waiting as chain_waiting

    path = tmp_path / "chain.jsonl"
    entry = encode_payload(*sanitize_payload({"kind": "route-shadow", "n": "x" * 200}))
    monkeypatch.setattr(chain_waiting, "SPILL_MAX_BYTES", 300)
    waiting = WaitingFile(str(path))
    with caplog.at_level("WARNING"):
        waiting.keep(entry)
        assert caplog.records == []
        waiting.keep(entry)
    (named,) = os.listdir(waiting.dir)
    assert len((Path(waiting.dir) / named).read_bytes().splitlines()) == 2  # the header and the first
    assert [r.getMessage() for r in caplog.records] == [
        f"route shadow: waiting records cannot be kept in {waiting.dir}: [Errno 27] the file would pass 300 bytes"
    ]
