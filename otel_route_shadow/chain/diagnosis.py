"""Why a record that is well formed on its own does not link: removed, reordered, duplicated, forked.

Memory does not grow with the chain: a diagnosis that needs context streams the file again instead of
remembering it (only a broken chain is read again).
"""

from __future__ import annotations

from otel_route_shadow.chain.check import Good, check_line
from otel_route_shadow.chain.reader import iter_lines_from
from otel_route_shadow.chain.result import Reason
from otel_route_shadow.chain.scan import Stop
from otel_route_shadow.lines import FileHandle

__all__ = ["diagnose"]


def _record_hash_at_line(handle: FileHandle, line_number: int, end: int) -> str | None:
    """The record hash of the 1-based ``line_number`` (a line of the verified prefix)."""
    for number, (_, line) in enumerate(iter_lines_from(handle, 0, end), start=1):
        if number == line_number:
            if line is None:
                return None
            verdict = check_line(line)
            return verdict.record_hash if isinstance(verdict, Good) else None
    return None


def _appears_later(handle: FileHandle, offset: int, end: int, seq: int, prev: str) -> bool:
    """Does a well-formed record with ``seq`` linking to ``prev`` appear at or after ``offset``?"""
    for _, line in iter_lines_from(handle, offset, end):
        if line is None:
            continue
        verdict = check_line(line)
        if isinstance(verdict, Good) and verdict.seq == seq and verdict.prev_hash == prev:
            return True
    return False


def diagnose(handle: FileHandle, stop: Stop, end: int, first: int = 0) -> tuple[Reason, str, int]:
    """Reason, detail and first bad seq for a line that is a good record but does not link; ``first``
    is the seq of the file's first line (a segment's), and line numbers are the file's."""
    state = stop.state
    good = stop.good
    if good is None:  # pragma: no cover - callers pass a Stop with a good record
        raise AssertionError("nothing to diagnose")
    expected = state.seq
    if good.seq == expected:
        return (
            Reason.LINK_BROKEN,
            f"seq {good.seq} has prev_hash {good.prev_hash[:16]}..., but the preceding record's hash is "
            f"{state.prev[:16]}...: the preceding record was replaced, or this one re-linked",
            expected,
        )
    if good.seq < expected:
        earlier = _record_hash_at_line(handle, good.seq - first + 1, end) if good.seq >= first else None
        if earlier == good.record_hash:
            return (
                Reason.REORDERED_OR_DUPLICATED,
                f"record seq {good.seq} appears again at line {state.lines + 1}",
                good.seq,
            )
        return (
            Reason.FORKED,
            f"line {state.lines + 1} claims seq {good.seq}, already held by a different record at line "
            f"{good.seq - first + 1}: the chain forks at seq {good.seq}",
            good.seq,
        )
    if good.prev_hash == state.prev:
        return (
            Reason.SEQ_GAP,
            f"seq jumps from {expected - 1} to {good.seq} although prev_hash links correctly",
            expected,
        )
    after = state.offset + (len(stop.line) + 1 if stop.line is not None else 0)
    if _appears_later(handle, after, end, expected, state.prev):
        return (
            Reason.REORDERED_OR_DUPLICATED,
            f"expected seq {expected}, found seq {good.seq}; seq {expected} appears later in the file",
            expected,
        )
    return (
        Reason.RECORD_REMOVED,
        f"expected seq {expected}, found seq {good.seq}; seq {expected} is not in the file",
        expected,
    )
