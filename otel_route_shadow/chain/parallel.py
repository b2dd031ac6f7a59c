"""Verifying a chain in worker processes: line-aligned segments, each checked without knowing the
ones before it, stitched in file order at their boundaries.

A segment's worker places itself by the seq its first line claims (in an intact chain a line's seq is
its index), checks its lines from there (hashing those below ``Options.unchecked`` only) and hashes
every line as a leaf. The parent accepts a segment when it is placed where the lines before it end,
its first record links to the last one before it, and it verified to its end; the leaves of every
segment are kept in order. At the first segment it cannot accept, the parent checks the rest of the
file itself, from the exact state the accepted segments left (so a damaged chain gets the sequential
verdict, line for line).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
from concurrent.futures import Executor
from typing import Final

import orjson

from otel_route_shadow.chain.check import Good, check_line, record_hash_of
from otel_route_shadow.chain.leaves import LeafSink
from otel_route_shadow.chain.reader import iter_lines_from, open_chain
from otel_route_shadow.chain.scan import Options, Progress, ScanState, Stop, accept, count_dropped, scan
from otel_route_shadow.lines import FileHandle
from otel_route_shadow.processes import each_segment
from otel_route_shadow.tlog import leaf_hash

__all__ = ["PARALLEL_MIN_BYTES", "scan_parallel"]

PARALLEL_MIN_BYTES: Final = 8 << 20
"""Chains shorter than this are verified in one process whatever ``jobs`` says."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Part:
    """One segment as its worker found it; ``placed`` is the index its first line claims (-1: none)."""

    start: int
    hashed: int
    """Where the segment's leaves end (its end, unless a line too long to buffer stopped them)."""
    placed: int
    verified: bool
    first_prev: str | None
    """The first line's ``prev_hash``, for the parent to check; None when that line is vouched for."""
    state: ScanState
    leaves: bytes


class _Leaves:
    """The leaves of one segment, kept in the worker until it returns them."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def add(self, leaves: bytes) -> None:
        self.parts.append(leaves)

    def parallel(self, executor: Executor) -> None:  # pragma: no cover - workers start no pool
        del executor

    def joined(self) -> bytes:
        return b"".join(self.parts)


def _verify_segment(options: Options, want_leaves: bool, path: str, start: int, end: int) -> _Part:
    """In a worker: the lines of ``[start, end)`` checked from where the first one places them."""
    sink = _Leaves() if want_leaves else None
    with io.FileIO(open_chain(path, os.O_RDONLY), "rb") as handle:
        line = next(iter_lines_from(handle, start, end), (start, None))[1]
        placed = -1 if line is None else _claimed_seq(line)
        if line is None or placed < 0:
            return _unplaced(handle, start, end, sink)
        state = ScanState(placed, "", placed, start, hashed=start)
        first_prev = _first_line(line, state, options)
        if first_prev == "":
            return _unplaced(handle, start, end, sink)
        if sink is not None:
            sink.add(leaf_hash(line))
            state.hashed = state.offset
        stop = scan(handle, state, end, options, sink)
        leaves = sink.joined() if sink is not None else b""
        return _Part(start, state.hashed, placed, stop is None, first_prev, state, leaves)


def _claimed_seq(line: bytes) -> int:
    try:
        seq = orjson.loads(line)["seq"]
    except Exception:
        return -1
    return seq if seq.__class__ is int and seq >= 0 else -1


def _first_line(line: bytes, state: ScanState, options: Options) -> str | None:
    """Take the segment's first line into ``state`` (placed at its claimed seq); its ``prev_hash`` when
    it is checked (``""`` when it does not verify on its own), None when it is vouched for."""
    first_prev: str | None = None
    if state.lines == options.mark:
        state.marked = state.offset
    if state.lines >= options.unchecked:
        verdict = check_line(line, options.strict)
        if not isinstance(verdict, Good) or verdict.seq != state.seq:
            return ""
        first_prev = verdict.prev_hash
        accept(state, verdict)
    else:
        count_dropped([line], state)
        state.seq += 1
        state.prev = record_hash_of(line).decode("latin-1")
    state.lines += 1
    state.offset += len(line) + 1
    return first_prev


def _unplaced(handle: FileHandle, start: int, end: int, sink: _Leaves | None) -> _Part:
    """A segment the worker cannot place or whose first line does not verify: its leaves only."""
    state = ScanState(0, "", 0, start, hashed=start)
    if sink is not None:
        scan(handle, state, end, Options(unchecked=1 << 62), sink)
    leaves = sink.joined() if sink is not None else b""
    return _Part(start, state.hashed, -1, False, None, state, leaves)


def scan_parallel(
    path: str,
    handle: FileHandle,
    state: ScanState,
    end: int,
    jobs: int,
    options: Options,
    sink: LeafSink | None,
    progress: Progress | None,
) -> Stop | None:
    """:func:`scan.scan` over ``[state.offset, end)`` with ``jobs`` worker processes: the same
    result, the same leaves (``sink`` is told the pool, and may queue its own work on it)."""
    work = functools.partial(_verify_segment, options, sink is not None)
    on_pool = None if sink is None else sink.parallel
    stitching = True
    for part in each_segment(work, path, state.offset, end, jobs, min_parallel_bytes=0, on_pool=on_pool):
        if sink is not None and state.hashed == part.start:
            sink.add(part.leaves)
            state.hashed = part.hashed
        if stitching and _joins(part, state):
            _advance(state, part)
            if progress is not None:
                progress(state.seq, state.offset)
        else:
            stitching = False
    if stitching:
        if state.lines == options.mark:
            state.marked = state.offset
        return None
    hashed = state.hashed
    stop = scan(handle, state, end, options, None, progress)
    state.hashed = hashed
    return stop


def _joins(part: _Part, state: ScanState) -> bool:
    """The segment starts where the accepted ones end, links to them, and verified to its end."""
    if not part.verified or part.placed != state.lines:
        return False
    return part.first_prev is None or part.first_prev == state.prev


def _advance(state: ScanState, part: _Part) -> None:
    done = part.state
    state.seq, state.prev, state.lines, state.offset = done.seq, done.prev, done.lines, done.offset
    state.dropped_events += done.dropped_events
    state.dropped_records += done.dropped_records
    if done.marked is not None:
        state.marked = done.marked
