"""Verifying a decision chain: one pass over its lines, in this process or in worker processes.

The pass checks every line as docs/chain-format.md section 8 says (``check``, ``scan``; ``parallel``
with ``jobs > 1``), names the first line that does not verify and why (``diagnosis``), and on request
hashes every line as a Merkle leaf as it goes, so that a caller holding signed checkpoints (``tlog``)
reads the chain once. Lines an authenticated checkpoint vouches for can be hashed only (section 13.7).
A segmented chain is one pass over its files in order, each segment's anchor checked against the
segment before it (``anchor``, section 14.4).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from otel_route_shadow.chain import parallel
from otel_route_shadow.chain.anchor import (
    Anchor,
    Closed,
    Fault,
    anchor_of,
    check_anchor,
    check_start,
    hash_range,
)
from otel_route_shadow.chain.check import Bad, check_line
from otel_route_shadow.chain.diagnosis import diagnose
from otel_route_shadow.chain.leaves import LeafSink
from otel_route_shadow.chain.reader import each_chain_file, open_chain
from otel_route_shadow.chain.record import GENESIS_HASH, MAX_LINE_BYTES
from otel_route_shadow.chain.result import ChainPass, Reason, TornTail, Verdict, VerifyResult
from otel_route_shadow.chain.scan import Digest, Options, Progress, ScanState, Stop, scan
from otel_route_shadow.chain.segments import Segment, chain_segments
from otel_route_shadow.lines import FileHandle, complete_end, first_line
from otel_route_shadow.locking import settled_size
from otel_route_shadow.tlog import LogKey

__all__ = ["VerifyResult", "verify_chain", "verify_pass"]  # VerifyResult: for log.py, which imports it here


def verify_chain(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    strict: bool = False,
    byte_progress: Callable[[int, int], None] | None = None,
) -> VerifyResult:
    """Verify the chain file at ``path``. See :meth:`DecisionChain.verify`.

    ``progress(records)`` is called now and then with the records verified so far;
    ``byte_progress(done, total)`` with bytes (for a progress bar). ``strict`` adds the payload value
    walk of ``check.check_line``. Raises ``OSError`` (``FileNotFoundError``, ``PermissionError``,
    ``ChainPathError`` for a directory, a FIFO or a device) when the file cannot be read at all; every
    problem *inside* the file is a verdict, never an exception.
    """
    return verify_pass(path, jobs=jobs, progress=progress, strict=strict, byte_progress=byte_progress).result


def verify_pass(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    strict: bool = False,
    unchecked: int = 0,
    mark: int = -1,
    leaves: LeafSink | None = None,
    progress: Callable[[int], None] | None = None,
    byte_progress: Callable[[int, int], None] | None = None,
    verifiers: Sequence[LogKey] = (),
    live_only: bool = False,
    start: int = 0,
) -> ChainPass:
    """:func:`verify_chain`, and what a caller holding checkpoints needs from the same read.

    ``leaves`` takes the leaf hash of every complete line, in order (all of them, whatever the
    verdict). The first ``unchecked`` lines are hashed only: the caller holds an authenticated
    checkpoint of that size, whose signer checked them (docs/chain-format.md section 13.7); the
    verdict then describes the chain on that trust (their count, the record hash the last of them
    carries as the link of the next, their ``records-dropped`` events). ``mark`` names a line whose
    byte offset the result reports.

    A segmented chain (``path`` names its live file, a closed segment or its segments folder) is
    verified across its files: positions (``offset`` of an intact chain, ``bytes_verified``,
    ``marked_offset``) run over them as over one file, and a verdict on a line names the file it is in
    (``path``, ``line`` and ``offset`` within it). Each anchor is checked against the segment before
    it, its checkpoint's signature with ``verifiers`` when given. ``live_only`` verifies the live file
    alone, from its anchor (seq, link and checkpoint taken from the anchor, which needs ``verifiers``:
    an unverified checkpoint vouches for nothing; no closed segment is read); ``start`` (a pruned chain's minimum index) verifies from the file that begins at that seq, likewise
    from its anchor: its link to the record before is not checked (the caller authenticates the record
    at ``start`` from the signed tree), and positions count from that file.
    """
    segments = chain_segments(path)
    options = Options(strict, max(0, unchecked), mark)
    if len(segments) > 1 or live_only or start > 0:
        walk = _Walk(verifiers, live_only, max(0, start))
        return _segmented_pass(segments, jobs, options, leaves, progress, byte_progress, walk)
    name = segments[0].path
    with io.FileIO(open_chain(name, os.O_RDONLY), "rb") as handle:
        size = settled_size(handle.fileno())
        complete = complete_end(handle, size)
        state = ScanState(0, GENESIS_HASH, 0, 0)
        hook = _combine(progress, byte_progress, size)
        stop = _scan_file(name, handle, state, complete, jobs, options, leaves, hook)
        if stop is not None:
            result = _broken(name, handle, stop, complete)
        else:
            result = _complete(name, state, complete, size)
        return ChainPass(result, min(options.unchecked, result.records), state.marked)


def _prefix(state: ScanState) -> dict[str, Any]:
    """The verified prefix, as every verdict reports it."""
    return {
        "records": state.seq,
        "head_seq": state.seq - 1 if state.seq else None,
        "head_hash": state.prev if state.seq else None,
        "dropped_events": state.dropped_events,
        "dropped_records": state.dropped_records,
    }


def _complete(
    name: str, state: ScanState, complete: int, size: int, base: int = 0, lines_before: int = 0
) -> VerifyResult:
    """Every complete line verified: intact, or a torn tail after them. ``base`` and ``lines_before``:
    the bytes and lines of the segments before the file ``name``."""
    if complete == size:
        return VerifyResult(
            path=name, verdict=Verdict.INTACT, bytes_verified=base + complete, **_prefix(state)
        )
    return VerifyResult(
        path=name,
        verdict=Verdict.TORN_TAIL,
        first_bad_seq=state.seq,
        reason=Reason.TORN_TAIL,
        line=state.lines - lines_before + 1,
        offset=complete,
        detail=f"{size - complete} bytes after the last newline (an append that did not finish)",
        torn_tail=TornTail(complete, size - complete),
        bytes_verified=base + complete,
        **_prefix(state),
    )


def _combine(
    progress: Callable[[int], None] | None,
    byte_progress: Callable[[int, int], None] | None,
    total: int,
    base: int = 0,
) -> Progress | None:
    if progress is None and byte_progress is None:
        return None

    def hook(records: int, done: int) -> None:
        if progress is not None:
            progress(records)
        if byte_progress is not None:
            byte_progress(base + done, total)

    return hook


def _broken(
    name: str, handle: FileHandle, stop: Stop, end: int, base: int = 0, lines_before: int = 0
) -> VerifyResult:
    """The verdict on the first line that does not verify (in the file ``name``, after ``base``
    bytes and ``lines_before`` lines of segments before it)."""
    state = stop.state.copy()
    state.lines -= lines_before
    stop = dataclasses.replace(stop, state=state)
    if stop.bad is not None:
        reason, detail, first_bad = stop.bad.reason, stop.bad.detail, state.seq
    else:
        reason, detail, first_bad = diagnose(handle, stop, end, lines_before)
    return VerifyResult(
        path=name,
        verdict=Verdict.BROKEN,
        first_bad_seq=first_bad,
        reason=reason,
        line=state.lines + 1,
        offset=state.offset,
        detail=detail,
        bytes_verified=base + state.offset,
        **_prefix(state),
    )


def _scan_file(
    path: str,
    handle: FileHandle,
    state: ScanState,
    end: int,
    jobs: int,
    options: Options,
    leaves: LeafSink | None,
    hook: Progress | None,
    digest: Digest | None = None,
) -> Stop | None:
    """Scan ``handle`` up to ``end``, in ``jobs`` processes when it is large; ``digest`` is fed every
    byte read when one process scans."""
    if jobs > 1 and end - state.offset >= parallel.PARALLEL_MIN_BYTES:
        return parallel.scan_parallel(path, handle, state, end, jobs, options, leaves, hook)
    return scan(handle, state, end, options, leaves, hook, digest)


def _segmented_pass(
    segments: list[Segment],
    jobs: int,
    options: Options,
    leaves: LeafSink | None,
    progress: Callable[[int], None] | None,
    byte_progress: Callable[[int, int], None] | None,
    walk: _Walk,
) -> ChainPass:
    """:func:`verify_pass` over a segmented chain's files, in order (section 14.4)."""
    live = segments[-1].path
    total = _total_bytes(segments[-1:] if walk.live_only else segments)
    state = ScanState(walk.start, GENESIS_HASH, walk.start, 0)
    base, previous, first = 0, None, 0
    for segment, handle in _files(live, walk):
        fd = handle.fileno()
        size = os.fstat(fd).st_size if segment.closed else settled_size(fd)
        complete = complete_end(handle, size)
        placed = _placement(segment, handle, complete, state, previous, walk)
        if isinstance(placed, Fault):
            return _faulted(segment.path, placed, state, base, options)
        if placed is not None and previous is None:  # started at a file's anchor
            state = ScanState(placed.seq, placed.prev_hash, placed.seq, 0)
            first = placed.seq
        state.offset = 0
        lines_before = state.lines
        marked, state.marked = state.marked, None
        hook = _combine(progress, byte_progress, total, base)
        digest = hashlib.sha256() if segment.closed else None
        one_process = not (jobs > 1 and complete >= parallel.PARALLEL_MIN_BYTES)
        stop = _scan_file(segment.path, handle, state, complete, jobs, options, leaves, hook, digest)
        state.marked = marked if state.marked is None else base + state.marked
        if stop is not None or not segment.closed:
            result = (
                _complete(live, state, complete, size, base, lines_before)
                if stop is None
                else _broken(segment.path, handle, stop, complete, base, lines_before)
            )
            result = dataclasses.replace(result, first_seq=first)
            return ChainPass(result, min(options.unchecked, result.records), state.marked)
        if complete != size:
            fault = Fault(
                Reason.SEGMENT_EDITED, f"the closed segment ends mid-line ({size - complete} bytes)"
            )
            return _faulted(segment.path, fault, state, base + complete, options)
        assert segment.first is not None
        # One process scanned the file from byte 0 to its end (state.offset = 0 above, complete == size):
        # what it read is the whole file. Else its ``size`` bytes are hashed again.
        if digest is None or not one_process:
            digest = hashlib.sha256()
            hash_range(fd, digest, 0, size)
        previous = Closed(segment.name, segment.first, state.seq - 1, state.prev, digest.hexdigest(), size)
        base += size
    raise AssertionError("a chain's files end with its live file")  # pragma: no cover


@dataclasses.dataclass(frozen=True, slots=True)
class _Walk:
    """Where a segmented pass begins (the first file, or ``live_only``, or the file at seq ``start``),
    and the keys that check the anchors' checkpoints."""

    verifiers: Sequence[LogKey]
    live_only: bool
    start: int

    def from_anchor(self, previous: Closed | None) -> bool:
        """Whether the file about to be read is the first, begun at its anchor."""
        return previous is None and (self.live_only or self.start > 0)


def _files(live: str, walk: _Walk) -> Iterator[tuple[Segment, io.FileIO]]:
    if not walk.live_only:
        yield from each_chain_file(live, walk.start)
        return
    with io.FileIO(open_chain(live, os.O_RDONLY), "rb") as handle:
        yield Segment(live, None), handle


def _total_bytes(segments: list[Segment]) -> int:
    total = 0
    for segment in segments:
        with contextlib.suppress(OSError):  # the pass itself reports a file it cannot read
            total += os.stat(segment.path).st_size
    return total


def _placement(
    segment: Segment,
    handle: FileHandle,
    complete: int,
    state: ScanState,
    previous: Closed | None,
    walk: _Walk,
) -> Anchor | Fault | None:
    """Does ``segment`` begin where the chain before it ends? Its anchor (None for the first
    segment), or why not. For a file the pass begins at (the live file alone, the first retained
    file), the anchor is checked on its own: it must link to the record it names, carry a checkpoint
    of its seq, and be at ``walk.start``."""
    misnamed = _misnamed(segment, state.seq)
    if misnamed is not None:
        return misnamed
    line = first_line(handle.fileno(), 0, complete, MAX_LINE_BYTES)
    claimed = anchor_of(line)
    if segment.first is not None and claimed.seq >= 0 and claimed.seq != segment.first:
        return Fault(
            Reason.SEGMENT_MISPLACED,
            f"its name says it begins at seq {segment.first}, but its first record is seq {claimed.seq}: "
            "a segment renamed or reordered",
        )
    if previous is None and not walk.from_anchor(previous):
        return None
    if walk.live_only and isinstance(claimed, Fault) and claimed.seq == 0:
        return None  # a chain never cut: its live file is the whole chain
    if isinstance(claimed, Fault):
        return claimed
    if previous is not None:
        fault = check_anchor(claimed, previous, walk.verifiers)
        edited = check_line(line) if fault is not None and line is not None else None
        if isinstance(edited, Bad):  # the anchor itself was changed, not what it names: its own hash says so
            return Fault(
                edited.reason, f"its anchor record (seq {claimed.seq}): {edited.detail}", claimed.seq
            )
        return fault or claimed
    return _start_fault(claimed, walk) or claimed


def _start_fault(claimed: Anchor, walk: _Walk) -> Fault | None:
    """Why the anchor of the file a pass begins at does not hold on its own (None when it does)."""
    if walk.start and claimed.seq != walk.start:
        return Fault(
            Reason.SEGMENT_MISSING if claimed.seq > walk.start else Reason.SEGMENT_MISPLACED,
            f"the chain is kept from seq {walk.start} on, but its first file begins at seq {claimed.seq}",
        )
    if walk.live_only and not walk.verifiers:
        return Fault(
            Reason.ANCHOR_MISMATCH,
            f"the live file begins with an anchor (seq {claimed.seq}) and no log key was given: its checkpoint "
            "cannot vouch for the records before it",
        )
    return check_start(claimed, walk.verifiers)


def _misnamed(segment: Segment, seq: int) -> Fault | None:
    """Why a closed segment does not begin at ``seq``, where the chain before it ends (None when it does)."""
    if segment.first is None or segment.first == seq:
        return None
    if segment.first > seq:
        return Fault(
            Reason.SEGMENT_MISSING,
            f"its name says it begins at seq {segment.first}, but the chain before it ends at seq "
            f"{seq - 1}: the segment holding seq {seq}..{segment.first - 1} is missing",
        )
    return Fault(
        Reason.SEGMENT_MISPLACED,
        f"its name says it begins at seq {segment.first}, but the chain before it already holds seq "
        f"{segment.first}..{seq - 1}: a segment reordered, renamed or duplicated",
    )


def _faulted(path: str, fault: Fault, state: ScanState, position: int, options: Options) -> ChainPass:
    """The verdict on a segment that does not follow the one before it."""
    result = VerifyResult(
        path=path,
        verdict=Verdict.BROKEN,
        first_bad_seq=state.seq,
        reason=fault.reason,
        line=1,
        offset=0,
        detail=fault.detail,
        bytes_verified=position,
        **_prefix(state),
    )
    return ChainPass(result, min(options.unchecked, result.records), state.marked)
