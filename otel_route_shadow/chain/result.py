"""What verifying a chain finds: the verdict, why a line does not verify, and the verified prefix."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from otel_route_shadow.chain.record import DROPPED_KIND

__all__ = ["ChainPass", "Reason", "TornTail", "Verdict", "VerifyResult"]


class Reason(StrEnum):
    """Why the chain does not verify at ``first_bad_seq``. Documented in ``docs/chain-format.md``."""

    HASH_MISMATCH = "hash-mismatch"
    """The record's content does not hash to its ``record_hash``: payload, seq, links or hash edited."""
    LINK_BROKEN = "link-broken"
    """The seq is the expected one but ``prev_hash`` does not name the preceding record: the preceding
    record was replaced by one with a recomputed hash, or this one was re-linked."""
    RECORD_REMOVED = "record-removed"
    """The expected seq is missing and never appears later; the next record links to a record that is
    not in the file."""
    REORDERED_OR_DUPLICATED = "reordered-or-duplicated"
    """The expected seq appears later in the file, or an earlier record appears again verbatim."""
    FORKED = "forked"
    """A different record claims a seq that an earlier record already holds: an inserted record, or two
    writers that did not share the chain lock."""
    SEQ_GAP = "seq-gap"
    """``prev_hash`` links correctly but seq jumps past the expected value."""
    TORN_TAIL = "torn-tail"
    """Bytes after the last newline: an append that did not finish (or a truncation mid-line)."""
    UNPARSEABLE = "unparseable"
    """A complete line that is not UTF-8 JSON, or is longer than the line limit."""
    MALFORMED_RECORD = "malformed-record"
    """Valid JSON, version 1, but not a well-formed record, or not in canonical form."""
    UNKNOWN_VERSION = "unknown-version"
    """The record's ``v`` is not a version this verifier knows."""
    SEGMENT_MISSING = "segment-missing"
    """A segmented chain: the records between two segments (or before the first) are in no file."""
    SEGMENT_MISPLACED = "segment-misplaced"
    """A segmented chain: a segment begins at another seq than its name or its place says (a segment
    reordered, renamed or duplicated)."""
    SEGMENT_EDITED = "segment-edited"
    """A segmented chain: a closed segment's bytes are not the ones the next segment's anchor recorded,
    or it ends mid-line."""
    ANCHOR_MISMATCH = "anchor-mismatch"
    """A segmented chain: a segment's first record is not an anchor naming the segment before it (its
    file, last seq, last record hash), or the anchor's checkpoint does not hold."""


class Verdict(StrEnum):
    INTACT = "intact"
    TORN_TAIL = "torn-tail"
    BROKEN = "broken"


@dataclass(frozen=True, slots=True)
class TornTail:
    """The bytes after the last newline."""

    offset: int
    length: int

    def to_dict(self) -> dict[str, int]:
        return {"offset": self.offset, "length": self.length}


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What verification found. ``records``/``head_*`` describe the verified prefix in every verdict."""

    path: str
    verdict: Verdict
    records: int
    """Records verified from seq 0 without a break (the whole chain when intact)."""
    head_seq: int | None
    head_hash: str | None
    """``record_hash`` of the last verified record; None for an empty chain."""
    first_bad_seq: int | None = None
    reason: Reason | None = None
    line: int | None = None
    """1-based line number of the first line that does not verify."""
    offset: int | None = None
    """Byte offset of that line."""
    detail: str | None = None
    torn_tail: TornTail | None = None
    bytes_verified: int = 0
    dropped_events: int = 0
    """``records-dropped`` events in the verified prefix: gaps where a writer dropped records."""
    dropped_records: int = 0
    """Records those events say were dropped (the sum of their ``count``)."""
    first_seq: int = 0
    """The first record read: the anchor a pass began at (a pruned chain's minimum index, the live file
    alone); the ``records`` before it were not read."""

    @property
    def intact(self) -> bool:
        return self.verdict is Verdict.INTACT

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "verdict": self.verdict.value,
            "intact": self.intact,
            "records": self.records,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "first_seq": self.first_seq,
            "first_bad_seq": self.first_bad_seq,
            "reason": None if self.reason is None else self.reason.value,
            "line": self.line,
            "offset": self.offset,
            "detail": self.detail,
            "torn_tail": None if self.torn_tail is None else self.torn_tail.to_dict(),
            "bytes_verified": self.bytes_verified,
            "dropped_events": self.dropped_events,
            "dropped_records": self.dropped_records,
        }

    def describe(self) -> str:
        return self._summary() + self._gaps()

    def _summary(self) -> str:
        if not self.intact:
            where = f"seq {self.first_bad_seq} (line {self.line}, byte {self.offset})"
            return f"{self.path}: {self.verdict.value} at {where}: {self.reason}: {self.detail}"
        if self.records == 0:
            return f"{self.path}: intact, empty chain (0 records)"
        return f"{self.path}: intact, {self.records} records, head seq {self.head_seq} hash {self.head_hash}"

    def _gaps(self) -> str:
        if not self.dropped_events:
            return ""
        return (
            f"; the writer dropped {self.dropped_records} records in {self.dropped_events} gap(s) "
            f"({DROPPED_KIND} events: the chain was locked by another process for too long)"
        )


@dataclass(frozen=True, slots=True)
class ChainPass:
    """One pass over the chain: its verdict, and where the lines the caller asked about begin."""

    result: VerifyResult
    unchecked: int
    """Lines from the first on that were hashed as leaves only (vouched for by the caller)."""
    marked_offset: int | None
    """The byte offset at which line ``mark`` begins (the end of the complete lines when the chain has
    exactly ``mark`` lines); None when the pass did not get that far."""
