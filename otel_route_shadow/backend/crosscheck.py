"""Hold the decision chain against the backend: one event seen twice, compared record by record.

Pure logic, no I/O. Inputs are the chain's payloads as ``(seq, payload)`` pairs and the spans a backend
returned for the chain's time window. A seam event's payload is::

    {"kind": "route-shadow", "trace_id": <32 hex>, "span_id": <16 hex>,
     "start_time_unix_nano": <decimal string (or int)>,
     "attributes": {every route_shadow.* and gen_ai.* attribute, exactly as on the span}}

Payloads of other kinds (``chain-quarantine`` and the like) are not seam events and are skipped.

Records and spans are joined on (trace_id, span_id). The findings:

* **record with no span** - the backend lacks it. Expected under sampling, export lag or a backend
  restart, so it is reported as a *rate* and never fails the audit. A record with the all-zero (invalid)
  trace or span id was made under a span that records nothing (``OTEL_SDK_DISABLED=true``): no backend
  can hold it, so it counts here, never as a duplicate of another such record.
* **span with no record** (orphan) - a seam span the backend holds for the window but the chain does not:
  a truncated tail, a pruned or deleted record. An error.
* **content mismatch** - a joined pair whose ``route_shadow.*`` / ``gen_ai.*`` attributes (either side's
  keys) or start time differ: a rewritten record, even one whose hashes were all recomputed. An error;
  a differing ``route_shadow.decision_id`` is called out separately.
* **duplicate record** - two seam records for one span (a replayed record). An error.
* **malformed seam record** - a ``route-shadow`` payload without valid ids or time. An error.

Values compare by type as well as value: ``True`` is not ``1``. An integer equals a float of the same
whole value (some backends store numbers as floats; the chain never holds floats). The chain scrubs
credential-shaped substrings, values under credential-named keys and lone surrogates before it hashes a
record, so a span string also equals a record string when it does after the chain's own sanitizer
(:func:`otel_route_shadow.chain.sanitize_payload`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from otel_route_shadow.backend.base import (
    SEAM_PREFIXES,
    BackendSpan,
    QueryWindow,
    format_unix_nano,
    is_seam_span,
)
from otel_route_shadow.chain import ChainPayloadError, DroppedGap, sanitize_payload
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "SEAM_KIND",
    "AttributeDiff",
    "ChainSummary",
    "CrossCheckReport",
    "Duplicate",
    "Malformed",
    "Mismatch",
    "Orphan",
    "SeamRecord",
    "cross_check",
    "seam_record",
    "summarize_chain",
]

SEAM_KIND: Final = "route-shadow"
DECISION_ID: Final = "route_shadow.decision_id"
START_TIME: Final = "start_time_unix_nano"

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")


class _Missing:
    """Marks an attribute one side lacks (serialized as JSON null with ``present: false``)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<absent>"


MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class SeamRecord:
    seq: int
    trace_id: str
    span_id: str
    start_time_unix_nano: int
    attributes: Mapping[str, object]

    @property
    def key(self) -> tuple[str, str]:
        return (self.trace_id, self.span_id)


@dataclass(frozen=True, slots=True)
class Malformed:
    seq: int
    reason: str


def seam_record(seq: int, payload: object) -> SeamRecord | Malformed | None:
    """The seam record in a payload; None for other payload kinds; Malformed for a broken seam payload."""
    if not isinstance(payload, Mapping) or payload.get("kind") != SEAM_KIND:
        return None
    trace_id = payload.get("trace_id")
    span_id = payload.get("span_id")
    start = payload.get(START_TIME)
    attributes = payload.get("attributes")
    if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id):
        return Malformed(seq, "trace_id is not 32 lower-case hex digits")
    if not isinstance(span_id, str) or not _SPAN_ID.fullmatch(span_id):
        return Malformed(seq, "span_id is not 16 lower-case hex digits")
    # The chain stores the start time as a decimal string (nanoseconds exceed the 2**53 integers its
    # canonical form allows); an integer is accepted too.
    if isinstance(start, str) and start.isascii() and start.isdigit() and len(start) <= 20:
        start = int(start)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        return Malformed(seq, "start_time_unix_nano is not a non-negative integer or decimal string")
    if not isinstance(attributes, Mapping):
        return Malformed(seq, "attributes is not an object")
    return SeamRecord(seq, trace_id, span_id, start, attributes)


@dataclass(frozen=True, slots=True)
class ChainSummary:
    """First pass over the chain: how many seam records and the time window they span."""

    seam_records: int
    other_records: int
    first_start_unix_nano: int | None
    last_start_unix_nano: int | None
    origin: str | None = None  # the first seam record's route_shadow.origin
    origin_records: int = 0  # seam records carrying that origin
    dropped: DroppedGap = field(default_factory=DroppedGap)  # the records-dropped events read


def summarize_chain(payloads: Iterable[tuple[int, object]]) -> ChainSummary:
    seam = other = 0
    first: int | None = None
    last: int | None = None
    origin: str | None = None
    origin_records = 0
    dropped = DroppedGap()
    for seq, payload in payloads:
        record = seam_record(seq, payload)
        if not isinstance(record, SeamRecord):
            if record is None:
                other += 1
                dropped.add(payload)
            else:
                seam += 1
            continue
        seam += 1
        start = record.start_time_unix_nano
        first = start if first is None else min(first, start)
        last = start if last is None else max(last, start)
        value = record.attributes.get(attr.ORIGIN)
        if isinstance(value, str) and origin in (None, value):
            origin = value
            origin_records += 1
    return ChainSummary(seam, other, first, last, origin, origin_records, dropped)


# --------------------------------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttributeDiff:
    key: str
    chain: object  # MISSING when the record lacks the key
    backend: object  # MISSING when the span lacks the key

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "chain": None if self.chain is MISSING else self.chain,
            "chain_present": self.chain is not MISSING,
            "backend": None if self.backend is MISSING else self.backend,
            "backend_present": self.backend is not MISSING,
        }


@dataclass(frozen=True, slots=True)
class Mismatch:
    seq: int
    trace_id: str
    span_id: str
    diffs: tuple[AttributeDiff, ...]

    @property
    def decision_id_differs(self) -> bool:
        return any(d.key == DECISION_ID for d in self.diffs)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "decision_id_differs": self.decision_id_differs,
            "diffs": [d.to_json() for d in self.diffs],
        }


@dataclass(frozen=True, slots=True)
class Orphan:
    trace_id: str
    span_id: str
    start_time_unix_nano: int
    decision_id: object
    name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "start_time": format_unix_nano(self.start_time_unix_nano),
            "decision_id": self.decision_id,
            "name": self.name,
        }


@dataclass(frozen=True, slots=True)
class Duplicate:
    seq: int
    first_seq: int
    trace_id: str
    span_id: str


SpanVerdict = Literal["agree", "disagree"]


@dataclass
class CrossCheckReport:
    window: QueryWindow
    backend: str
    seam_records: int = 0
    other_records: int = 0
    spans_fetched: int = 0
    seam_spans: int = 0
    matched: int = 0
    outside_window: int = 0  # seam records whose start lies outside the audited window (--since/--until)
    missing_in_backend: list[int] = field(default_factory=list)  # chain seqs
    orphan_spans: list[Orphan] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)
    # The chain's own hash-linkage check, when the caller ran it: "intact", "torn-tail" or "broken".
    # A broken chain is a finding; a torn tail (an append cut short by a crash) is only noted.
    chain_linkage: str | None = None
    chain_linkage_detail: str = ""

    @property
    def held_against(self) -> int:
        """Seam records in the window that were looked up in the backend (distinct, well-formed)."""
        return self.matched + len(self.missing_in_backend)

    @property
    def missing_rate(self) -> float:
        """Share of those records the backend lacks (sampling, lag): informational, never an error."""
        return len(self.missing_in_backend) / self.held_against if self.held_against else 0.0

    @property
    def decision_id_mismatches(self) -> list[Mismatch]:
        return [m for m in self.mismatches if m.decision_id_differs]

    @property
    def chain_broken(self) -> bool:
        return self.chain_linkage == "broken"

    @property
    def errors(self) -> int:
        findings = len(self.orphan_spans) + len(self.mismatches) + len(self.duplicates) + len(self.malformed)
        return findings + (1 if self.chain_broken else 0)

    @property
    def verdict(self) -> SpanVerdict:
        return "disagree" if self.errors else "agree"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "backend": self.backend,
            "window": {
                "start": format_unix_nano(self.window.start_unix_nano),
                "end": format_unix_nano(self.window.end_unix_nano),
                "start_unix_nano": self.window.start_unix_nano,
                "end_unix_nano": self.window.end_unix_nano,
            },
            "chain": {
                "seam_records": self.seam_records,
                "other_records": self.other_records,
                "outside_window": self.outside_window,
            },
            "backend_spans": {"fetched": self.spans_fetched, "seam_spans": self.seam_spans},
            "matched": self.matched,
            "missing_in_backend": {
                "count": len(self.missing_in_backend),
                "of": self.held_against,
                "rate": round(self.missing_rate, 6),
                "seqs": self.missing_in_backend,
                "note": "expected under sampling or export lag; not an error",
            },
            "orphan_spans": [o.to_json() for o in self.orphan_spans],
            "mismatches": [m.to_json() for m in self.mismatches],
            "decision_id_mismatches": [m.seq for m in self.decision_id_mismatches],
            "duplicates": [
                {"seq": d.seq, "first_seq": d.first_seq, "trace_id": d.trace_id, "span_id": d.span_id}
                for d in self.duplicates
            ],
            "malformed": [{"seq": m.seq, "reason": m.reason} for m in self.malformed],
            "chain_linkage": {"verdict": self.chain_linkage, "detail": self.chain_linkage_detail}
            if self.chain_linkage is not None
            else None,
            "errors": self.errors,
        }


# --------------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------------


def _as_stored(key: str, value: object) -> object:
    """What the chain's writer would store for ``value`` under attribute ``key``: its own sanitizer
    (credential-shaped substrings, values under credential-named keys, lone surrogates)."""
    try:
        clean, _ = sanitize_payload({key: value})
    except ChainPayloadError:
        return value
    return next(iter(clean.values()), value)


def _same_value(a: object, b: object) -> bool:
    """``a`` from the chain, ``b`` from the backend, compared as stored."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int) and isinstance(b, float):
        return b.is_integer() and a == int(b)
    if isinstance(a, float) and isinstance(b, int):
        return a.is_integer() and int(a) == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _compared(attributes: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in attributes.items() if k.startswith(SEAM_PREFIXES)}


def _agree(key: str, chain: object, backend: object) -> bool:
    if chain is MISSING or backend is MISSING:
        return False
    if _same_value(chain, backend):
        return True
    return isinstance(backend, str) and _same_value(chain, _as_stored(key, backend))


def compare(record: SeamRecord, span: BackendSpan, time_tolerance_ns: int) -> tuple[AttributeDiff, ...]:
    """Differences between a record and its span (empty when they agree)."""
    diffs: list[AttributeDiff] = []
    ours = _compared(record.attributes)
    theirs = _compared(span.attributes)
    for key in sorted(ours.keys() | theirs.keys()):
        a = ours.get(key, MISSING)
        b = theirs.get(key, MISSING)
        if not _agree(key, a, b):
            diffs.append(AttributeDiff(key, a, b))
    if abs(record.start_time_unix_nano - span.start_time_unix_nano) > time_tolerance_ns:
        diffs.append(AttributeDiff(START_TIME, record.start_time_unix_nano, span.start_time_unix_nano))
    return tuple(diffs)


def cross_check(
    payloads: Iterable[tuple[int, object]],
    spans: Iterable[BackendSpan],
    *,
    window: QueryWindow,
    backend: str = "",
    time_tolerance_ns: int = 0,
) -> CrossCheckReport:
    """Join chain payloads with the backend's spans for ``window`` and report every disagreement.

    ``spans`` should be what the backend returned for ``window``; only seam spans take part. Memory is
    proportional to the seam spans in the window plus one small key per chain record.
    """
    report = CrossCheckReport(window=window, backend=backend)
    by_key: dict[tuple[str, str], BackendSpan] = {}
    for span in spans:
        report.spans_fetched += 1
        if is_seam_span(span):
            report.seam_spans += 1
            by_key.setdefault(span.key, span)  # a backend holding one span twice is not the chain's fault
    first_seq: dict[bytes, int] = {}
    for seq, payload in payloads:
        record = seam_record(seq, payload)
        if record is None:
            report.other_records += 1
            continue
        report.seam_records += 1
        if isinstance(record, Malformed):
            report.malformed.append(record)
            continue
        start = record.start_time_unix_nano
        if not window.start_unix_nano <= start < window.end_unix_nano:
            report.outside_window += 1
            continue
        compact = bytes.fromhex(record.trace_id + record.span_id)
        if not (any(compact[:16]) and any(compact[16:])):  # the invalid ids of a span that records nothing
            report.missing_in_backend.append(seq)
            continue
        if compact in first_seq:
            report.duplicates.append(Duplicate(seq, first_seq[compact], record.trace_id, record.span_id))
            continue
        first_seq[compact] = seq
        held = by_key.pop(record.key, None)
        if held is None:
            report.missing_in_backend.append(seq)
            continue
        report.matched += 1
        diffs = compare(record, held, time_tolerance_ns)
        if diffs:
            report.mismatches.append(Mismatch(seq, record.trace_id, record.span_id, diffs))
    for left in sorted(by_key.values(), key=lambda s: (s.start_time_unix_nano, s.trace_id, s.span_id)):
        report.orphan_spans.append(
            Orphan(
                left.trace_id,
                left.span_id,
                left.start_time_unix_nano,
                left.attributes.get(DECISION_ID),
                left.name,
            )
        )
    return report
