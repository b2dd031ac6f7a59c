"""Checking a segment's anchor: the first record of every segment after the first (docs/chain-format.md
section 14.4) against the segment before it, as verification found that segment.

An anchor's payload names the previous segment's file, its first and last seq, its last record hash,
the SHA-256 and size of the whole file, and the newest signed checkpoint whose tree size is exactly the
anchor's seq (null for a chain with no log). Each field is compared with what was read; the checkpoint
is parsed, its size compared, and its signature checked with the log's keys when the caller has them.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from otel_route_shadow.chain.result import Reason
from otel_route_shadow.files import range_blocks
from otel_route_shadow.tlog import AuthenticationError, LogKey, authenticate

__all__ = [
    "ANCHOR_KIND",
    "Anchor",
    "Closed",
    "Fault",
    "anchor_of",
    "check_anchor",
    "check_start",
    "hash_range",
    "same_value",
]

ANCHOR_KIND: Final = "segment-anchor"
_HASH_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Closed:
    """A closed segment as verification found it."""

    name: str
    first: int
    last: int
    last_hash: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class Anchor:
    """An anchor record: its seq, its ``prev_hash`` and its payload."""

    seq: int
    prev_hash: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fault:
    """Why a segment does not follow the one before it."""

    reason: Reason
    detail: str
    seq: int = -1
    """The seq of the record found instead of an anchor (-1: none, or not known)."""


def hash_range(fd: int, digest: Any, start: int, end: int) -> None:
    """Feed ``digest`` bytes ``[start, end)`` of ``fd``, read in bounded chunks with ``pread``; ``OSError``
    (EIO) when the file ends before ``end``."""
    position = start
    for block in range_blocks(fd, start, end, _HASH_CHUNK):
        digest.update(block)
        position += len(block)
    if position < end:
        raise OSError(errno.EIO, f"the file ended at byte {position} while it was hashed")


def anchor_of(line: bytes | None) -> Anchor | Fault:
    """The anchor a segment's first line holds, or why it holds none."""
    try:
        record = orjson.loads(line) if line is not None else None
        seq, prev, payload = record["seq"], record["prev_hash"], record["payload"]  # type: ignore[index]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return Fault(Reason.ANCHOR_MISMATCH, "its first line is not a record")
    if seq.__class__ is not int or prev.__class__ is not str or payload.__class__ is not dict:
        return Fault(Reason.ANCHOR_MISMATCH, "its first line is not a record")
    if payload.get("kind") != ANCHOR_KIND:
        return Fault(
            Reason.ANCHOR_MISMATCH, f"its first record (seq {seq}) is not a {ANCHOR_KIND} record", seq
        )
    return Anchor(seq, prev, payload)


def check_anchor(anchor: Anchor, previous: Closed, verifiers: Sequence[LogKey]) -> Fault | None:
    """None when ``anchor`` names ``previous`` exactly (and its checkpoint holds), else the first field
    that does not match."""
    if anchor.seq > previous.last + 1:
        return Fault(
            Reason.SEGMENT_MISSING,
            f"its anchor is seq {anchor.seq}, but {previous.name} ends at seq {previous.last}: the "
            f"segment holding seq {previous.last + 1}..{anchor.seq - 1} is missing",
        )
    if anchor.seq <= previous.last:
        return Fault(
            Reason.SEGMENT_MISPLACED,
            f"its anchor is seq {anchor.seq}, within {previous.name} (seq {previous.first}..{previous.last}): "
            "a segment reordered or duplicated",
        )
    payload = anchor.payload
    expected = {
        "segment": previous.name,
        "first_seq": previous.first,
        "last_seq": previous.last,
        "last_record_hash": previous.last_hash,
    }
    for field, value in expected.items():
        if not same_value(payload.get(field), value):
            return Fault(
                Reason.ANCHOR_MISMATCH,
                f"its anchor names {field} {_shown(payload.get(field))}, but the segment before it has "
                f"{_shown(value)}",
            )
    if not (
        same_value(payload.get("sha256"), previous.sha256) and same_value(payload.get("bytes"), previous.size)
    ):
        return Fault(
            Reason.SEGMENT_EDITED,
            f"{previous.name} is {previous.size} bytes with sha256 {previous.sha256[:16]}..., but its "
            f"anchor recorded {_shown(payload.get('bytes'))} bytes with sha256 "
            f"{_shown(payload.get('sha256'))}: the segment was changed after the cut",
        )
    return _checkpoint_fault(payload.get("checkpoint"), anchor.seq, verifiers)


def same_value(named: object, value: object) -> bool:
    """Whether an anchor's field names ``value`` itself: equal and of its type (``false`` is not seq 0,
    ``4.0`` not seq 4). Every reader of an anchor's fields compares with it."""
    return type(named) is type(value) and named == value


def check_start(anchor: Anchor, verifiers: Sequence[LogKey]) -> Fault | None:
    """For the live file read without the segments before it: None when ``anchor`` links to the record
    it names and its checkpoint (required) is of the anchor's seq and verifies with ``verifiers``."""
    payload = anchor.payload
    if not (
        same_value(payload.get("last_seq"), anchor.seq - 1)
        and same_value(payload.get("last_record_hash"), anchor.prev_hash)
    ):
        return Fault(
            Reason.ANCHOR_MISMATCH,
            f"its anchor (seq {anchor.seq}) names last_seq {_shown(payload.get('last_seq'))} and "
            f"last_record_hash {_shown(payload.get('last_record_hash'))}, not the record it links to",
        )
    if payload.get("checkpoint") is None:
        return Fault(
            Reason.ANCHOR_MISMATCH,
            "its anchor carries no checkpoint: the live file cannot be verified without the segments before it",
        )
    return _checkpoint_fault(payload.get("checkpoint"), anchor.seq, verifiers)


def _checkpoint_fault(note: object, size: int, verifiers: Sequence[LogKey]) -> Fault | None:
    if note is None:
        return None
    if not isinstance(note, str):
        return Fault(Reason.ANCHOR_MISMATCH, "its anchor's checkpoint is not a signed note")
    try:
        checkpoint = authenticate(note, verifiers).checkpoint
    except AuthenticationError as exc:
        rotated = (
            " (if the log's key was rotated: verify with its key set, --keys)"
            if exc.reason == "unknown-key"
            else ""
        )
        return Fault(Reason.ANCHOR_MISMATCH, f"its anchor's checkpoint does not verify: {exc}{rotated}")
    if checkpoint.size != size:
        return Fault(
            Reason.ANCHOR_MISMATCH,
            f"its anchor's checkpoint is of tree size {checkpoint.size}, not {size} (the anchor's seq)",
        )
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
