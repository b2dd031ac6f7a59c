"""Worker processes for work split over a file: one ``multiprocessing`` context, one pool recipe.

Shell code shared by the chain verifier, the tree builder, audits and reports. ``fork`` is used when
this process has a single thread (cheap: nothing is re-imported), else ``spawn``: forking a process
with other threads running can copy a lock in a held state. Workers take the default signal
dispositions, so a handler inherited from the host cannot keep one from ending with its pool.
"""

from __future__ import annotations

import collections
import io
import multiprocessing
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from multiprocessing.context import ForkContext, SpawnContext
from typing import Any, TypeVar

from otel_route_shadow.files import open_regular
from otel_route_shadow.lines import line_segments

__all__ = ["SEGMENTS_PER_JOB", "each_segment", "map_in_workers", "mp_context", "pool", "worker_signals"]

SEGMENTS_PER_JOB = 16
"""Segments per worker process: small ones are handed out as workers free up, so a worker slowed by
other load leaves the others at most one small segment of tail."""

_T = TypeVar("_T")


def mp_context() -> ForkContext | SpawnContext:
    """``fork`` in a single-threaded process on Linux, else ``spawn``."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def worker_signals() -> None:
    """Pool initializer: SIGTERM ends the worker, SIGINT is left to the parent."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of ``jobs`` worker processes with this module's context and initializer."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp_context(), initializer=worker_signals)


def map_in_workers(work: Callable[..., _T], items: Sequence[tuple[Any, ...]], jobs: int) -> list[_T]:
    """``work(*item)`` of each item, in order: in ``jobs`` worker processes (at most one per item), or
    in this process when ``jobs`` is 1, there is one item, this process is daemonic (it may have no
    child), or a worker cannot be started (a sandbox, a process limit): the workers already started
    are then killed, and every item is worked here. A task's own exception is raised, the tasks not
    yet started cancelled (so are they on an interrupt)."""
    if jobs <= 1 or len(items) <= 1 or multiprocessing.current_process().daemon:
        return [work(*item) for item in items]
    executor = pool(min(jobs, len(items)))
    try:
        try:
            executor.submit(int).result()  # starts the workers (all of them with fork)
            futures = [executor.submit(work, *item) for item in items]  # spawn: a worker as one is queued
        except (OSError, RuntimeError):
            _kill(executor)
            return [work(*item) for item in items]
        return [future.result() for future in futures]
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _kill(executor: ProcessPoolExecutor) -> None:
    """Kill the workers of a pool that could not start them all: they may wait for tasks no manager
    thread will ever send them."""
    for process in list((executor._processes or {}).values()):
        process.kill()
        process.join()


def each_segment(
    work: Callable[[str, int, int], _T],
    path: str,
    start: int,
    end: int,
    jobs: int,
    *,
    min_parallel_bytes: int,
    on_pool: Callable[[Executor], None] | None = None,
) -> Iterator[_T]:
    """``work(path, a, b)`` over ``[start, end)`` in this process, or over line-aligned segments of it
    in ``jobs`` worker processes (ranges shorter than ``min_parallel_bytes`` stay in this process
    whatever ``jobs`` says), each result yielded in file order as soon as it and those before it are
    done; at most ``2 * jobs`` segments are queued at a time, so work the caller submits to the same
    pool (given to ``on_pool`` before the first segment is queued) runs between them. Segments not
    started when the caller stops iterating are cancelled; workers are never killed (a worker killed
    while it held the result queue's lock would leave the pool's own threads waiting for it)."""
    if jobs <= 1 or end - start < min_parallel_bytes:
        yield work(path, start, end)
        return
    with io.FileIO(open_regular(path), "rb") as handle:  # a FIFO put there since is refused, never waited on
        bounds = iter(line_segments(handle, start, end, jobs * SEGMENTS_PER_JOB))
    with pool(jobs) as executor:
        if on_pool is not None:
            on_pool(executor)
        window: collections.deque[Future[_T]] = collections.deque()

        def queue_next() -> None:
            bound = next(bounds, None)
            if bound is not None:
                window.append(executor.submit(work, path, *bound))

        for _ in range(2 * jobs):
            queue_next()
        try:
            while window:
                result = window.popleft().result()
                queue_next()
                yield result
        finally:
            for future in window:
                future.cancel()
