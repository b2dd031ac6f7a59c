"""The one record reader and filter every analysis uses: which chain records are observations.

``report``, ``whatif`` and ``matrix`` all read ``(seq, payload)`` pairs (the chain's streaming reader,
or any iterable) through :func:`observations`, so the rules below hold for all three, in one place
(documented in ``docs/reports.md``, "Which records count"):

* a payload that is not an object, or whose ``attributes`` are not an object, is ``malformed``;
* a payload whose ``kind`` is not ``route-shadow`` is skipped and counted by kind (``skipped_kinds``);
  a ``records-dropped`` event is also summed into ``dropped`` (:class:`DroppedGap`: the records a
  writer had to drop, so every figure is over what was recorded; whole chain, not windowed), and a
  ``record-truncated`` placeholder into ``truncated`` (:class:`TruncatedRecords`: a record too large
  to keep, whose content is gone; whole chain, not windowed: a placeholder has no time);
* with a time window set, a record outside it, or without a readable ``start_time_unix_nano``, is
  ``outside_window``;
* an observation without ``route_shadow.outcome`` (a shadow path that failed and recorded only its
  error type) is ``without_decision``, and left out of every figure;
* everything else is an *observation* and is yielded.

:class:`RecordCounts` is the shape the results of ``report`` and ``whatif`` share for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from otel_route_shadow.analysis.cohorts import cohort_key
from otel_route_shadow.analysis.groups import GroupSpec, spec_name
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn
from otel_route_shadow.analysis.tally import add_counts, sorted_counts
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.chain import DROPPED_KIND, TRUNCATED_KIND, DroppedGap
from otel_route_shadow.shadow import RECORD_KIND
from otel_route_shadow.shadow import attributes as attr

if TYPE_CHECKING:
    from otel_route_shadow.analysis.fleet_logs import Fleet

__all__ = [
    "PROGRESS_EVERY",
    "AnalysisResult",
    "Observation",
    "RecordCounts",
    "Repeats",
    "TruncatedRecords",
    "flag_rows",
    "observations",
    "start_ns",
]

PROGRESS_EVERY: Final = 1 << 15
"""Records between two ``progress(done, total)`` calls."""
NO_KIND: Final = "(no kind)"
REPEATS_LIMIT: Final = 1 << 12
"""Decision ids :class:`Repeats` remembers before it forgets them all."""
V = TypeVar("V")

Observation = tuple[int, dict[str, Any], dict[str, Any], int]
"""``(seq, payload, attributes, start ns)``; the start is -1 when the record has no readable one."""


TRUNCATED_EXAMPLES: Final = 3
"""The ``seq`` of the first few placeholders are kept (where to look in the chain)."""


@dataclass(slots=True)
class TruncatedRecords:
    """The chain's ``record-truncated`` placeholders (``docs/chain-format.md`` section 6): records whose
    payload was too large for one line, kept as its size and digest only. Their content is in no
    figure; ``observations`` counts those that stood for a seam observation (``original_kind``)."""

    records: int = 0
    observations: int = 0
    first_seqs: list[int] = field(default_factory=list)

    def add(self, seq: int, payload: dict[str, Any]) -> None:
        self.records += 1
        self.observations += int(payload.get("original_kind") == RECORD_KIND)
        if len(self.first_seqs) < TRUNCATED_EXAMPLES:
            self.first_seqs.append(seq)

    def as_dict(self) -> dict[str, Any]:
        return {"records": self.records, "observations": self.observations, "first_seqs": self.first_seqs}

    def describe(self) -> str:
        """One line: ``truncated records: none``, or the placeholders (``TRUNCATED: ...``)."""
        if not self.records:
            return "truncated records: none"
        seqs = ", ".join(map(str, self.first_seqs))
        return (
            f"TRUNCATED: {self.records} record{'s' if self.records != 1 else ''} too large to keep stand as "
            f"record-truncated placeholders ({self.observations} of them observations), first at seq {seqs}"
        )


@dataclass(slots=True)
class RecordCounts:
    """What the reader saw: every record read is in exactly one of these counts."""

    read: int = 0
    observations: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)
    outside_window: int = 0
    without_decision: int = 0
    malformed: int = 0
    dropped: DroppedGap = field(default_factory=DroppedGap)
    """Summed from the ``records-dropped`` events (also counted in ``skipped_kinds``)."""
    truncated: TruncatedRecords = field(default_factory=TruncatedRecords)
    """The ``record-truncated`` placeholders (also counted in ``skipped_kinds``)."""
    shadow_errors: dict[tuple[Any, ...], int] = field(default_factory=dict)
    """Observations without a decision whose shadow path failed (``route_shadow.error.type``), per
    cohort (:mod:`~otel_route_shadow.analysis.cohorts`)."""

    def absorb(self, other: RecordCounts) -> None:
        """Add another log's counts."""
        for name in ("read", "observations", "outside_window", "without_decision", "malformed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        add_counts(self.skipped_kinds, other.skipped_kinds)
        add_counts(self.shadow_errors, other.shadow_errors)
        self.dropped.absorb(other.dropped)
        self.truncated.records += other.truncated.records
        self.truncated.observations += other.truncated.observations
        room = TRUNCATED_EXAMPLES - len(self.truncated.first_seqs)
        self.truncated.first_seqs.extend(other.truncated.first_seqs[: max(room, 0)])

    def demote(self) -> None:
        """An observation a consumer could not use after all (a value no exporter writes)."""
        self.observations -= 1
        self.malformed += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "observations": self.observations,
            "skipped_kinds": dict(sorted_counts(self.skipped_kinds)),
            "outside_window": self.outside_window,
            "without_decision": self.without_decision,
            "malformed": self.malformed,
            "dropped": self.dropped.as_dict(),
            "truncated": self.truncated.as_dict(),
        }

    def gaps(self) -> list[tuple[bool, str]]:
        """The records no figure includes, one line each with whether it is a gap to flag: the
        writer's dropped records, then the truncated ones (``none`` lines unflagged)."""
        return [
            (bool(self.dropped.events), self.dropped.describe()),
            (bool(self.truncated.records), self.truncated.describe()),
        ]

    def describe(self) -> str:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted_counts(self.skipped_kinds)) or "none"
        return (
            f"records read {self.read}: observations {self.observations}; skipped (not observations) "
            f"{skipped}; outside window {self.outside_window}; without a decision "
            f"{self.without_decision}; malformed {self.malformed}"
        )


class Repeats(Generic[V]):
    """What an analysis made of an observation, remembered by decision id, for the records that repeat
    it exactly: same ``attributes`` object content (only trace id, span id and start time differ).

    A host re-spawning the same job produces such records by the thousand; an analysis then compares
    one dictionary instead of building, hashing and checking its figures again. What it buys, measured
    in process on the first 100,000 records of the benchmark's chain (rows 5a/5b, CPU seconds on a
    shared 2-CPU machine): report's counting 0.98 -> 0.64 s, whatif's replay 1.2-1.6 -> 0.7 s, against
    about 2.4 s to read and parse those records. Bounded: past :data:`REPEATS_LIMIT` decision
    ids it forgets them all and starts again. A record is never settled by its decision id alone: a
    forged copy with other attributes misses and goes the careful way.
    """

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[str, tuple[dict[str, Any], V]] = {}

    def get(self, attributes: dict[str, Any]) -> V | None:
        decision_id = attributes.get(attr.DECISION_ID)
        if type(decision_id) is not str:
            return None
        seen = self.seen.get(decision_id)
        if seen is None or seen[0] != attributes:
            return None
        return seen[1]

    def remember(self, attributes: dict[str, Any], value: V) -> None:
        decision_id = attributes.get(attr.DECISION_ID)
        if type(decision_id) is not str:
            return
        if len(self.seen) >= REPEATS_LIMIT:
            self.seen.clear()
        self.seen[decision_id] = (attributes, value)


LATEST_NS: Final = 253_402_300_799 * 10**9
"""9999-12-31T23:59:59Z: a later start cannot be written as a date."""


def start_ns(payload: dict[str, Any], key: str = "start_time_unix_nano") -> int:
    """The record's span start (or another ``key``) in nanoseconds, or -1 when it has none that
    reads as one (negative, or later than a date can be written for: :data:`LATEST_NS`)."""
    try:
        ns = int(payload[key])
    except (KeyError, TypeError, ValueError):
        return -1
    return ns if 0 <= ns <= LATEST_NS else -1


def _attributes(seq: int, payload: Any, counts: RecordCounts) -> dict[str, Any] | None:
    """The attributes of an observation, or None (counted as malformed or skipped)."""
    if not isinstance(payload, dict):
        counts.malformed += 1
        return None
    kind = payload.get("kind")
    if kind != RECORD_KIND:
        name = kind if isinstance(kind, str) else NO_KIND
        counts.skipped_kinds[name] = counts.skipped_kinds.get(name, 0) + 1
        if kind == DROPPED_KIND:
            counts.dropped.add(payload)
        elif kind == TRUNCATED_KIND:
            counts.truncated.add(seq, payload)
        return None
    attributes = payload.get("attributes")
    if not isinstance(attributes, dict):
        counts.malformed += 1
        return None
    return attributes


def observations(
    payloads: Iterable[tuple[int, Any]],
    counts: RecordCounts,
    *,
    window: TimeWindow,
    progress: ProgressFn | None = None,
    total: int = 0,
    require_decision: bool = True,
) -> Iterator[Observation]:
    """Every observation of ``payloads`` (see the module rules), counting the rest into ``counts``.

    ``progress(done, total)`` is called every :data:`PROGRESS_EVERY` records and once at the end.
    ``require_decision=False`` also yields observations without an outcome (for reading axis values).
    """
    bounded = not window.unbounded
    contains = window.contains
    outcome_key = attr.OUTCOME
    for seq, payload in payloads:
        counts.read += 1
        if progress is not None and not counts.read % PROGRESS_EVERY:
            progress(counts.read, total)
        attributes = _attributes(seq, payload, counts)
        if attributes is None:
            continue
        ns = start_ns(payload)
        if bounded and (ns < 0 or not contains(ns)):
            counts.outside_window += 1
            continue
        if require_decision and attributes.get(outcome_key) is None:
            counts.without_decision += 1
            if attributes.get(attr.ERROR_TYPE) is not None:
                key = cohort_key(attributes)
                counts.shadow_errors[key] = counts.shadow_errors.get(key, 0) + 1
            continue
        counts.observations += 1
        yield seq, payload, attributes, ns
    if progress is not None:
        progress(counts.read, total)


@dataclass
class AnalysisResult:
    """What every chain analysis result carries: the chain's status, the window, the breakdowns and
    the reader's counts. ``flagged`` is true when the chain did not verify."""

    chain: ChainStatus
    window: TimeWindow = field(default_factory=TimeWindow)
    by: tuple[GroupSpec, ...] = ()
    records: RecordCounts = field(default_factory=RecordCounts)
    fleet: Fleet | None = None
    """The logs of a fleet report, included and excluded (None for one chain)."""

    @property
    def flagged(self) -> bool:
        return self.chain.flagged

    @property
    def records_read(self) -> int:
        return self.records.read

    @property
    def observations(self) -> int:
        return self.records.observations

    @property
    def skipped_kinds(self) -> dict[str, int]:
        return self.records.skipped_kinds

    @property
    def outside_window(self) -> int:
        return self.records.outside_window

    @property
    def without_decision(self) -> int:
        return self.records.without_decision

    @property
    def malformed(self) -> int:
        return self.records.malformed

    def header(self, kind: str) -> dict[str, Any]:
        """The JSON fields every result opens with (documented in docs/reports.md)."""
        return {
            "kind": kind,
            "chain": self.chain.as_dict(),
            "flagged": self.flagged,
            "flag": "UNVERIFIED" if self.flagged else None,
            "window": self.window.describe(),
            "by": [spec_name(spec) for spec in self.by],
            "records": self.records.as_dict(),
            **({} if self.fleet is None else {"fleet": self.fleet.as_dict()}),
        }

    def banner(self) -> str:
        return f"!!! UNVERIFIED CHAIN: every figure below is flagged ({self.chain.describe()}) !!!"

    def mark(self) -> str:
        """The prefix of every figure line: ``!`` when flagged."""
        return "!" if self.flagged else " "


ROW_KEYS: Final = frozenset({"spawns", "count", "agreement_rate", "replayed", "checked", "decided"})
"""A JSON object holding one of these is a figure row, and carries ``"unverified": true`` when flagged."""


def flag_rows(value: Any) -> None:
    """Mark every figure row (any object with a count in it) as unverified."""
    if isinstance(value, dict):
        if not ROW_KEYS.isdisjoint(value):
            value["unverified"] = True
        for item in value.values():
            flag_rows(item)
    elif isinstance(value, list):
        for item in value:
            flag_rows(item)
