"""Threads and processes appending to one chain at once: no fork, no gap, every record present; and in
fsync mode the appenders share their syncs."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import DecisionChain, iter_payloads, verify_chain
from otel_route_shadow.chain.group_commit import WATERMARK, read_watermark

HANG_GUARD_S = 30.0


def _assert_complete(path: Path, expected: set[tuple[Any, ...]]) -> None:
    result = verify_chain(path)
    assert result.intact, result.describe()
    seqs = []
    seen = []
    for seq, payload in iter_payloads(path):
        seqs.append(seq)
        seen.append(tuple(payload["who"]))
    assert seqs == list(range(len(seqs)))  # gap-free, in order, no fork
    assert Counter(seen) == Counter(expected)  # every record exactly once
    assert result.records == len(expected)


def _threads(log_for: Any, process: int, threads: int, per_thread: int) -> None:
    barrier = threading.Barrier(threads)

    def work(thread: int) -> None:
        log = log_for(thread)
        barrier.wait()
        for i in range(per_thread):
            log.append({"who": [process, thread, i]})

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_threads_sharing_one_log(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    _threads(lambda _: log, 0, threads=8, per_thread=40)
    _assert_complete(path, {(0, t, i) for t in range(8) for i in range(40)})


def test_threads_with_their_own_logs(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    logs = [DecisionChain(path) for _ in range(6)]
    _threads(lambda t: logs[t], 0, threads=6, per_thread=40)
    _assert_complete(path, {(0, t, i) for t in range(6) for i in range(40)})


def _process_main(path: str, process: int, threads: int, per_thread: int, durability: str, go: Any) -> None:
    log = DecisionChain(path, durability=durability)  # type: ignore[arg-type]
    go.wait()
    _threads(lambda _: log, process, threads, per_thread)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_processes_times_threads(tmp_path: Path, start_method: str) -> None:
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"who": ["parent", 0, 0]})
    context = multiprocessing.get_context(start_method)
    go = context.Event()
    processes = [
        context.Process(target=_process_main, args=(str(path), p, 3, 25, "flush", go)) for p in range(3)
    ]
    for process in processes:
        process.start()
    go.set()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    _assert_complete(
        path, {("parent", 0, 0)} | {(p, t, i) for p in range(3) for t in range(3) for i in range(25)}
    )


def _durable(path: Path) -> int:
    fd = os.open(f"{path}.sync", os.O_RDONLY)
    try:
        return read_watermark(fd)[2]
    finally:
        os.close(fd)


def test_fsync_group_commit_one_sync_covers_every_record_written_while_another_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controlled interleaving instead of a scheduling-dependent bound: the first append's sync is
    held open while seven more appends write their lines and wait; the next sync then covers all
    seven. Exactly two syncs for eight appends, and each append returned only once its line was
    covered."""
    path = tmp_path / "chain.jsonl"
    calls: list[int] = []
    entered, release = threading.Event(), threading.Event()
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            entered.set()
            assert release.wait(HANG_GUARD_S)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    log = DecisionChain(path, durability="fsync")
    first = threading.Thread(target=log.append, args=({"who": [0, 0, 0]},))
    first.start()
    assert entered.wait(HANG_GUARD_S)
    others = [threading.Thread(target=log.append, args=({"who": [0, 1, i]},)) for i in range(7)]
    for thread in others:
        thread.start()
    deadline = time.monotonic() + HANG_GUARD_S
    while path.read_bytes().count(b"\n") < 8:  # every line written; their appends wait for a sync
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert len(calls) == 1 and all(thread.is_alive() for thread in others)
    release.set()
    for thread in (first, *others):
        thread.join(HANG_GUARD_S)
    assert len(calls) == log.fsyncs == 2
    assert _durable(path) == path.stat().st_size
    _assert_complete(path, {(0, 0, 0), *((0, 1, i) for i in range(7))})


def test_fsync_group_commit_across_processes(tmp_path: Path) -> None:
    """Processes coordinate through the shared watermark; each record is durable when append returns
    (checked by the watermark covering the whole file at the end)."""
    path = tmp_path / "chain.jsonl"
    context = multiprocessing.get_context("fork")
    go = context.Event()
    processes = [
        context.Process(target=_process_main, args=(str(path), p, 2, 20, "fsync", go)) for p in range(3)
    ]
    for process in processes:
        process.start()
    go.set()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert _durable(path) == path.stat().st_size
    _assert_complete(path, {(p, t, i) for p in range(3) for t in range(2) for i in range(20)})


def test_a_truncation_pulls_the_watermark_back(tmp_path: Path) -> None:
    """After a torn tail is cut off, the watermark must not claim bytes that are written later."""
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, durability="fsync")
    log.append({"who": ["a", 0, 0]})
    with path.open("ab") as handle:
        handle.write(b'{"torn":')
    fd = os.open(f"{path}.sync", os.O_WRONLY)
    try:
        os.pwrite(fd, WATERMARK.pack(path.stat().st_dev, path.stat().st_ino, path.stat().st_size), 0)
    finally:
        os.close(fd)
    fresh = DecisionChain(path, durability="fsync")
    fresh.append({"who": ["b", 0, 0]})
    assert fresh.fsyncs == 1  # the stale watermark did not excuse this record from its sync
    assert verify_chain(path).intact
