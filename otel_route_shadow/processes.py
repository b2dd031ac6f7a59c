"""Worker processes for work split over a file: one ``multiprocessing`` context, one pool recipe.

Shell code shared by the chain verifier, the tree builder, audits and reports. ``fork`` is used when
this process has a single thread (cheap: nothing is re-imported), else ``spawn``: forking a process
with other threads running can copy a lock in a held state. Workers take the default signal
dispositions, so a handler inherited from the host cannot keep one from ending with its pool.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext
from typing import TypeVar

from otel_route_shadow.lines import line_segments

__all__ = ["SEGMENTS_PER_JOB", "mp_context", "pool", "run_segments", "worker_signals"]

SEGMENTS_PER_JOB = 16
"""Segments per worker process: small ones are handed out as workers free up, so a worker slowed by
other load leaves the others at most one small segment of tail."""

_T = TypeVar("_T")


def mp_context() -> BaseContext:
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


def run_segments(
    work: Callable[[str, int, int], _T],
    path: str,
    start: int,
    end: int,
    jobs: int,
    *,
    min_parallel_bytes: int,
) -> list[_T]:
    """``work(path, a, b)`` over ``[start, end)`` in this process, or over line-aligned segments of it
    in ``jobs`` worker processes (results in file order). Ranges shorter than ``min_parallel_bytes``
    stay in this process whatever ``jobs`` says."""
    if jobs <= 1 or end - start < min_parallel_bytes:
        return [work(path, start, end)]
    with open(path, "rb", buffering=0) as handle:
        bounds = line_segments(handle, start, end, jobs * SEGMENTS_PER_JOB)
    with pool(jobs) as executor:
        futures = [executor.submit(work, path, a, b) for a, b in bounds]
        return [f.result() for f in futures]
