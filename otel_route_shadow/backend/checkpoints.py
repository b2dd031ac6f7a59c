"""Checkpoints the backend holds: read back from the checkpoint spans the plugin emits.

Pure logic, no I/O. A checkpoint span (:mod:`otel_route_shadow.shadow.checkpoint_attributes`) carries
the chain's origin, the size and root a checkpoint commits to and the whole signed note. Only the note
counts for the proof (the verifier parses and checks it); origin, size and root on the span are for
queries and are checked against the note's own lines, so a span whose attributes contradict its note is
reported, not trusted. The same checkpoint sent twice (a retry after a failed export) is one checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from otel_route_shadow.backend.base import BackendSpan, is_checkpoint_span
from otel_route_shadow.shadow import checkpoint_attributes as cp

__all__ = ["BackendCheckpoint", "BadCheckpointSpan", "backend_checkpoints", "note_text"]

_SIGNATURE_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class BackendCheckpoint:
    """One checkpoint as the backend holds it; ``seen_unix_nano`` is when the writer made it (span start)."""

    origin: str
    size: int
    root: str  # standard base64, as in the note's third line
    note: str
    signed: bool
    seen_unix_nano: int
    span_id: str


@dataclass(frozen=True, slots=True)
class BadCheckpointSpan:
    """A checkpoint span whose attributes cannot be read or contradict its note."""

    span_id: str
    reason: str


def note_text(note: str) -> str:
    """The checkpoint text of a signed note (everything before the blank line), ending in ``\\n``."""
    head, sep, _ = note.partition(_SIGNATURE_SEPARATOR)
    return head + "\n" if sep else note


def _read(span: BackendSpan) -> BackendCheckpoint | BadCheckpointSpan:
    a = span.attributes
    origin, size, root, note = a.get(cp.ORIGIN), a.get(cp.SIZE), a.get(cp.ROOT), a.get(cp.NOTE)
    if isinstance(size, float) and size.is_integer():
        size = int(size)  # some backends keep numbers as floats
    if not isinstance(origin, str) or not isinstance(root, str) or not isinstance(note, str):
        return BadCheckpointSpan(span.span_id, "origin, root or note is missing or not a string")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return BadCheckpointSpan(span.span_id, "size is not a non-negative integer")
    lines = note_text(note).split("\n")
    if len(lines) < 4 or lines[:3] != [origin, str(size), root]:
        return BadCheckpointSpan(span.span_id, "the note's origin, size or root differs from the span's")
    signed = _SIGNATURE_SEPARATOR in note
    return BackendCheckpoint(origin, size, root, note, signed, span.start_time_unix_nano, span.span_id)


def backend_checkpoints(
    spans: Iterable[BackendSpan], origin: str
) -> tuple[list[BackendCheckpoint], list[BadCheckpointSpan]]:
    """The distinct checkpoints of ``origin`` among ``spans`` (ordered by size, then time) and the
    checkpoint spans of that origin that cannot be read. Spans of other origins are ignored."""
    found: dict[str, BackendCheckpoint] = {}
    bad: list[BadCheckpointSpan] = []
    for span in spans:
        if not is_checkpoint_span(span) or span.attributes.get(cp.ORIGIN) != origin:
            continue
        read = _read(span)
        if isinstance(read, BadCheckpointSpan):
            bad.append(read)
        elif read.note not in found or read.seen_unix_nano < found[read.note].seen_unix_nano:
            found[read.note] = read
    ordered = sorted(found.values(), key=lambda c: (c.size, c.seen_unix_nano, c.note))
    return ordered, bad
