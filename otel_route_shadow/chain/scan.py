"""The streaming scan: the chain's complete lines checked in order, a block at a time.

Blocks come from the package's one block reader (``otel_route_shadow.lines``), which never buffers a
line longer than :data:`MAX_LINE_BYTES`. Each block's lines can also be hashed as Merkle leaves (a
:class:`LeafSink` takes them), and a caller that holds an authenticated checkpoint can have the lines
below its size hashed only (``Options.unchecked``, docs/chain-format.md section 13.7). Once a line does
not verify, the rest of the file is still hashed when leaves are wanted, but no longer checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from otel_route_shadow.chain.check import (
    DROPPED_PREFIX,
    Bad,
    Good,
    check_line,
    fast_run,
    record_hash_of,
    too_long,
)
from otel_route_shadow.chain.leaves import LeafSink, leaf_hashes
from otel_route_shadow.chain.record import MAX_LINE_BYTES
from otel_route_shadow.chain.result import Reason
from otel_route_shadow.lines import FileHandle, LineTooLong, iter_blocks
from otel_route_shadow.tlog import HASH_SIZE

__all__ = ["Options", "Progress", "ScanState", "Stop", "accept", "check_lines", "count_dropped", "scan"]

_BLOCK_BYTES: Final = 1 << 20

Progress = Callable[[int, int], None]
"""Internal progress hook: ``(records verified, bytes verified)``."""


class Digest(Protocol):
    """What a scan feeds the bytes it reads to (``hashlib.sha256()``)."""

    def update(self, data: bytes, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Options:
    """What a pass does besides checking lines (picklable: worker processes get it too)."""

    strict: bool = False
    """Also walk each payload for values no conforming writer emits (``check.check_line``)."""
    unchecked: int = 0
    """Lines ``[0, unchecked)`` are hashed as leaves only: an authenticated checkpoint vouches for them."""
    mark: int = -1
    """A line whose byte offset the pass reports (``ScanState.marked``); -1 for none."""


@dataclass(slots=True)
class ScanState:
    """Where a scan stands: the next expected seq and prev_hash, lines consumed, bytes consumed."""

    seq: int
    prev: str
    lines: int
    offset: int
    dropped_events: int = 0
    dropped_records: int = 0
    marked: int | None = None
    """The byte offset of line ``Options.mark``, once the scan has passed it."""
    hashed: int = 0
    """Where the leaves given so far end (a line too long to buffer ends them early)."""

    def copy(self) -> ScanState:
        return ScanState(
            self.seq,
            self.prev,
            self.lines,
            self.offset,
            self.dropped_events,
            self.dropped_records,
            self.marked,
            self.hashed,
        )


@dataclass(frozen=True, slots=True)
class Stop:
    """The first line the scan could not accept, and the state just before it."""

    state: ScanState
    line: bytes | None
    """None when the line was too long to buffer."""
    bad: Bad | None
    """Set when the line is bad on its own; None when only its links need a diagnosis."""
    good: Good | None


def scan(
    handle: FileHandle,
    state: ScanState,
    end: int,
    options: Options,
    sink: LeafSink | None = None,
    progress: Progress | None = None,
    digest: Digest | None = None,
) -> Stop | None:
    """Verify the complete lines from ``state.offset`` up to ``end`` (a line boundary), updating
    ``state``; give every line's leaf hash to ``sink`` and every byte read to ``digest``. None when
    every line verified, else where and why the scan stopped (the leaves of the lines after it are
    still given)."""
    stop: Stop | None = None
    dropped: list[int] | None
    try:
        for after, block in iter_blocks(handle, state.offset, end, _BLOCK_BYTES, MAX_LINE_BYTES):
            count, dropped = 0, None
            if digest is not None:
                digest.update(block)
                digest.update(b"\n")
            if sink is not None:
                dropped = []
                leaves = leaf_hashes(block, noting=DROPPED_PREFIX, noted=dropped)
                sink.add(leaves)
                state.hashed, count = after, len(leaves) // HASH_SIZE
            if stop is not None:
                continue
            stop = _scan_block(block, count, dropped, state, options)
            if stop is None:
                state.offset = after
                if progress is not None:
                    progress(state.seq, state.offset)
            elif sink is None:
                return stop
    except LineTooLong:
        return stop or Stop(state.copy(), None, too_long(), None)
    if stop is None and state.offset < end:
        return Stop(state.copy(), None, Bad(Reason.UNPARSEABLE, "the file changed during verification"), None)
    if stop is None and state.lines == options.mark:
        state.marked = state.offset
    return stop


def _scan_block(
    block: bytes, count: int, dropped: list[int] | None, state: ScanState, options: Options
) -> Stop | None:
    """One block's lines after ``state``: those below ``options.unchecked`` hashed only, the rest
    checked. ``count`` (the lines) and ``dropped`` (where lines that may be ``records-dropped`` events
    begin) when the caller found them already, while hashing the block."""
    mark = options.mark - state.lines
    if state.lines < options.unchecked:
        count = count or block.count(b"\n") + 1
        if state.lines + count <= options.unchecked and not 0 <= mark < count:
            _vouch_block(block, state, count, dropped)
            return None
    lines = block.split(b"\n")
    if 0 <= mark < len(lines):
        state.marked = state.offset + _offset_of(lines, mark)
    vouched = min(len(lines), options.unchecked - state.lines)
    if vouched > 0:
        _vouch_lines(lines[:vouched], state)
        lines = lines[vouched:]
    return check_lines(lines, state, options.strict)


def _vouch_block(block: bytes, state: ScanState, count: int, dropped: list[int] | None) -> None:
    """A block every line of which an authenticated checkpoint vouches for: counted, not checked."""
    if dropped is None:
        dropped = [0] if block.startswith(DROPPED_PREFIX) else []
        at = block.find(b"\n" + DROPPED_PREFIX)
        while at >= 0:
            dropped.append(at + 1)
            at = block.find(b"\n" + DROPPED_PREFIX, at + 1)
    if dropped:
        count_dropped([block[at : _line_end(block, at)] for at in dropped], state)
    state.seq += count
    state.lines += count
    state.prev = record_hash_of(block[block.rfind(b"\n") + 1 :]).decode("latin-1")


def _line_end(block: bytes, at: int) -> int:
    end = block.find(b"\n", at)
    return len(block) if end < 0 else end


def _vouch_lines(lines: list[bytes], state: ScanState) -> None:
    count_dropped(lines, state)
    state.seq += len(lines)
    state.lines += len(lines)
    state.offset += _offset_of(lines, len(lines))
    state.prev = record_hash_of(lines[-1]).decode("latin-1")


def count_dropped(lines: list[bytes], state: ScanState) -> None:
    """Count the ``records-dropped`` events among vouched-for lines, as the check would."""
    for line in lines:
        if line.startswith(DROPPED_PREFIX):
            verdict = check_line(line)
            if isinstance(verdict, Good) and verdict.dropped >= 0:
                state.dropped_events += 1
                state.dropped_records += verdict.dropped


def check_lines(lines: list[bytes], state: ScanState, strict: bool) -> Stop | None:
    """Verify ``lines`` after ``state``: the hot loop, and the exact check where it declines (every
    line the exact way when ``strict``)."""
    start_offset = state.offset
    limit = _first_too_long(lines)
    index = 0
    while index < len(lines):
        if not strict and index < limit:
            state.seq, state.prev, index = fast_run(lines, index, limit, state.seq, state.prev)
            if index == len(lines):
                break
        line = lines[index]
        verdict = check_line(line, strict)
        if not isinstance(verdict, Good) or verdict.seq != state.seq or verdict.prev_hash != state.prev:
            here = state.copy()
            here.lines, here.offset = state.lines + index, start_offset + _offset_of(lines, index)
            if isinstance(verdict, Bad):
                return Stop(here, line, verdict, None)
            return Stop(here, line, None, verdict)
        accept(state, verdict)
        index += 1
    state.lines += len(lines)
    state.offset = start_offset + _offset_of(lines, len(lines))
    return None


def _first_too_long(lines: list[bytes]) -> int:
    """The index of the first line over :data:`MAX_LINE_BYTES` (``len(lines)`` if none): the hot loop
    stops before it, and the exact check names it."""
    if sum(map(len, lines)) <= MAX_LINE_BYTES:
        return len(lines)
    return next((i for i, line in enumerate(lines) if len(line) > MAX_LINE_BYTES), len(lines))


def accept(state: ScanState, good: Good) -> None:
    """``good`` verified after ``state``: move on (and count a ``records-dropped`` event)."""
    state.seq += 1
    state.prev = good.record_hash
    if good.dropped >= 0:
        state.dropped_events += 1
        state.dropped_records += good.dropped


def _offset_of(lines: list[bytes], index: int) -> int:
    """Bytes taken by ``lines[:index]`` with their newlines."""
    return sum(map(len, lines[:index])) + index
