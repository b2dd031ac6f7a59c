"""The divergence report: agreement and divergence rates from the chain alone, offline.

Aggregation reads each observation's attributes straight from the parsed payload (no pydantic, no
re-explaining) and counts it into a small cube (:mod:`~otel_route_shadow.analysis.cells`), so memory
stays constant over a chain of any length. The steps of one pass, in order:
:func:`~otel_route_shadow.analysis.records.observations` picks the records that count; the cube counts
them; the timeline counts them per time bucket; the noise tracker follows each decision key's legacy
route in ``seq`` order (:mod:`~otel_route_shadow.analysis.noise`); the lowest-``seq`` divergent
decisions are kept as examples; with a store, each context is replayed against the snapshot it cites.
Then :func:`~otel_route_shadow.analysis.cells.derive` turns the cube into the figures.

Rendering (text, HTML) is the command line's (``otel_route_shadow.cli``): this module computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from otel_route_shadow.analysis.cells import BYPASS_TRANSPORT, Cube, CubeSlot, derive
from otel_route_shadow.analysis.cohorts import Cohort, cohorts_dict
from otel_route_shadow.analysis.evidence import LogEvidence, read_evidence
from otel_route_shadow.analysis.examples import Examples
from otel_route_shadow.analysis.gaps import MIN_SPAWNS, GapTally
from otel_route_shadow.analysis.groups import HOST_KEY, GroupSpec, as_specs, parse_by, spec_name
from otel_route_shadow.analysis.noise import NoiseTable, NoiseTracker
from otel_route_shadow.analysis.records import AnalysisResult, flag_rows, observations
from otel_route_shadow.analysis.replaying import CitedLoader
from otel_route_shadow.analysis.served import (
    SERVED_DIFFERS,
    SERVED_STATES,
    UNKNOWN,
    finding_codes,
)
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.tally import Tally, rate, sorted_counts
from otel_route_shadow.analysis.timeline import Timeline, TimelinePoint, width_label
from otel_route_shadow.analysis.usage import CitedUsage, UsageTable
from otel_route_shadow.analysis.window import TimeWindow, format_ns
from otel_route_shadow.core import REQUIREMENT_DEFIED
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "BYPASS_DEFINITION",
    "BYPASS_TRANSPORT",
    "DEFIED_COUNTS_NOTE",
    "NO_STORE_NOTE",
    "Aggregation",
    "Report",
    "aggregate",
    "build_report",
    "new_aggregation",
]

BYPASS_DEFINITION: Final = (
    "spawns whose recorded transport is direct-http: direct OpenAI-compatible calls that never reach "
    "the gateway, so no gateway policy could bind them; shown as a share of all spawns in the window, "
    "and per legacy mechanism"
)
NO_STORE_NOTE: Final = (
    "pass --store DIR to replay each context against the snapshot it cites and list every policy, "
    "with those that decided nothing, outranked and never matched"
)
DEFIED_COUNTS_NOTE: Final = (
    "a spawn is counted once among the divergences, under its first difference; requirement-defied is "
    "its divergence only when nothing else differed. As a finding, every spawn whose route defied its "
    "requirement is counted, whatever its divergence"
)
"""Why requirement-defied has two counts (``findings.by_divergence`` gives the split)."""


@dataclass
class Report(AnalysisResult):
    """Every figure of one report. ``flagged`` is true when the chain did not verify."""

    total: Tally = field(default_factory=Tally)
    outcomes: dict[str, int] = field(default_factory=dict)
    held_reasons: dict[str, int] = field(default_factory=dict)
    rejected_reasons: dict[str, int] = field(default_factory=dict)
    policy_sources: dict[str, int] = field(default_factory=dict)
    divergences: dict[str, int] = field(default_factory=dict)
    mechanisms: list[tuple[str | None, Tally]] = field(default_factory=list)
    groups: dict[str, list[tuple[tuple[Any, ...], Tally]]] = field(default_factory=dict)
    gap_total: GapTally = field(default_factory=GapTally)
    gaps: dict[str, list[tuple[Any, GapTally]]] = field(default_factory=dict)
    """Per repo, role and principal: spawns by mechanism class and a readiness verdict."""
    findings: dict[str, int] = field(default_factory=dict)
    """Each finding code (``requirement-defied``, ``served-differs``): never suppressed."""
    findings_by_divergence: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per finding code, the spawns carrying it by the divergence they are counted under."""
    claim_mismatches: dict[str, int] = field(default_factory=dict)
    """Each name in ``route_shadow.claim_mismatch`` (``mechanism``, ``transport``), counted."""
    served: dict[str, int] = field(default_factory=dict)
    """Spawns by served state: ``same``, ``differs``, ``unknown``."""
    served_by_mechanism: list[tuple[Any, dict[str, int]]] = field(default_factory=list)
    served_routes: dict[tuple[Any, ...], int] = field(default_factory=dict)
    """Served-differs spawns by (chosen provider, chosen model, served provider, served model)."""
    served_sources: dict[str, int] = field(default_factory=dict)
    served_why: dict[str, int] = field(default_factory=dict)
    """Differs spawns by why (``fallback``, ``alias``, ``load-balance``, ``unknown``, or
    ``(not recorded)``); only a fallback is a disagreement (``findings``' ``served-differs``)."""
    noise: NoiseTable = field(default_factory=NoiseTable)
    divergent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The lowest-seq divergent decisions of each divergence code (each names its ``seq``)."""
    served_examples: list[dict[str, Any]] = field(default_factory=list)
    decided: dict[tuple[Any, Any], dict[str, int]] = field(default_factory=dict)
    """Per cited snapshot (revision, hash): spawns each policy decided, as recorded."""
    usage: list[UsageTable] = field(default_factory=list)
    usage_not_replayed: dict[str, int] = field(default_factory=dict)
    times: Timeline = field(default_factory=Timeline)
    evidence: LogEvidence | None = None
    """The log's last checkpoint and who signed it (set by :func:`build_report`)."""
    min_spawns: int = MIN_SPAWNS
    """The minimum sample of a positive readiness verdict (see :data:`~.gaps.MIN_SPAWNS`)."""
    cohorts: list[tuple[tuple[Any, ...], Cohort]] = field(default_factory=list)
    """Per (mechanism, provider, model, transport): consistency and shadow-path errors."""

    @property
    def spawns(self) -> int:
        return self.total.spawns

    @property
    def first_ns(self) -> int | None:
        return self.times.first_ns

    @property
    def last_ns(self) -> int | None:
        return self.times.last_ns

    @property
    def findings_known(self) -> bool:
        """False when no record carries the whole decision (an older chain): findings are unknown."""
        return self.gap_total.recorded > 0

    @property
    def defied_elsewhere(self) -> dict[str, int]:
        """Spawns with the requirement-defied finding counted under another divergence."""
        split = self.findings_by_divergence.get(REQUIREMENT_DEFIED, {})
        return {code: n for code, n in split.items() if code != REQUIREMENT_DEFIED}

    def timeline(self, max_points: int = 48) -> tuple[int, list[TimelinePoint]]:
        """The bucket width (ns) and the non-empty buckets (see :mod:`.timeline`)."""
        return self.times.points(max_points)

    def mechanism(self, name: str | None) -> Tally:
        for key, tally in self.mechanisms:
            if key == name:
                return tally
        return Tally()

    def group(self, spec: str | GroupSpec) -> dict[tuple[Any, ...], Tally]:
        name = spec if isinstance(spec, str) else spec_name(spec)
        return dict(self.groups.get(name, []))

    def as_dict(self, top: int = 3) -> dict[str, Any]:
        """The JSON form (documented in docs/reports.md). When flagged, every figure row carries
        ``"unverified": true``."""
        data = self.header("route-shadow-report")
        data.update(
            {
                "evidence": None if self.evidence is None else self.evidence.as_dict(),
                "totals": self.total.as_dict(top),
                "outcomes": dict(sorted_counts(self.outcomes)),
                "held_reasons": dict(sorted_counts(self.held_reasons)),
                "rejected_reasons": dict(sorted_counts(self.rejected_reasons)),
                "policy_sources": dict(sorted_counts(self.policy_sources)),
                "divergences": dict(sorted_counts(self.divergences)),
                "divergent_decisions": self._divergent_dict(),
                "findings": self._findings_dict(),
                "served": self._served_dict(),
                "noise": self.noise.as_dict(),
                "bypass": self._bypass_dict(),
                "mechanisms": [{"mechanism": name, **t.as_dict(top)} for name, t in self.mechanisms],
                "policy_gaps": self._gaps_dict(),
                "policy_usage": self._usage_dict(),
                "groups": {
                    name: [{"key": _key_dict(name, key), **t.as_dict(top)} for key, t in rows]
                    for name, rows in self.groups.items()
                },
                "cohorts": cohorts_dict(self.cohorts),
                "timeline": self._timeline_dict(),
            }
        )
        if self.flagged:
            flag_rows(data)
        return data

    def _divergent_dict(self) -> list[dict[str, Any]]:
        return [
            {"divergence": code, "count": n, "examples": self.divergent.get(code, [])}
            for code, n in sorted_counts(self.divergences)
        ]

    def _findings_dict(self) -> dict[str, Any]:
        known = self.findings_known
        return {
            "known": known,
            "requirement_defied": self.findings.get(REQUIREMENT_DEFIED, 0) if known else None,
            "by_code": dict(sorted_counts(self.findings)),
            "by_divergence": {
                code: dict(sorted_counts(split))
                for code, split in sorted(self.findings_by_divergence.items())
            },
            "counting": DEFIED_COUNTS_NOTE,
            "claim_mismatches": dict(sorted_counts(self.claim_mismatches)) if known else None,
        }

    def _served_dict(self) -> dict[str, Any]:
        spawns = self.total.spawns
        return {
            **{state: self.served.get(state, 0) for state in SERVED_STATES},
            "differs_share": rate(self.served.get("differs", 0), spawns),
            "known_share": rate(spawns - self.served.get(UNKNOWN, 0), spawns),
            "sources": dict(sorted_counts(self.served_sources)),
            "why": dict(sorted_counts(self.served_why)),
            "by_mechanism": [
                {"mechanism": name, **{state: counts.get(state, 0) for state in SERVED_STATES}}
                for name, counts in self.served_by_mechanism
            ],
            "routes": [
                {
                    "chosen": {"provider": move[0], "model": move[1]},
                    "served": {"provider": move[2], "model": move[3]},
                    "count": n,
                }
                for move, n in sorted_counts(self.served_routes)
            ],
            "examples": self.served_examples,
        }

    def _bypass_dict(self) -> dict[str, Any]:
        return {
            "definition": BYPASS_DEFINITION,
            "spawns": self.total.bypass,
            "share": rate(self.total.bypass, self.total.spawns),
            "by_mechanism": [
                {
                    "mechanism": mechanism,
                    "bypass": tally.bypass,
                    "spawns": tally.spawns,
                    "share_of_mechanism": rate(tally.bypass, tally.spawns),
                    "share_of_bypass": rate(tally.bypass, self.total.bypass),
                }
                for mechanism, tally in self.mechanisms
                if tally.bypass
            ],
        }

    def _gaps_dict(self) -> dict[str, Any]:
        return {
            "total": self.gap_total.as_dict(),
            **{
                name: [{"key": {name: key}, **tally.as_dict()} for key, tally in rows]
                for name, rows in self.gaps.items()
            },
        }

    def _usage_dict(self) -> dict[str, Any]:
        return {
            "recorded": [
                {"revision": rev, "content_hash": digest, "decided": dict(sorted_counts(counts))}
                for (rev, digest), counts in self.decided.items()
            ],
            "replayed": [table.as_dict() for table in self.usage],
            "not_replayed": dict(sorted_counts(self.usage_not_replayed)),
        }

    def _timeline_dict(self) -> dict[str, Any]:
        width, points = self.timeline()
        return {
            "bucket": width_label(width),
            "bucket_ms": width // 1_000_000,
            "first": _iso(self.first_ns),
            "last": _iso(self.last_ns),
            "points": [point.as_dict() for point in points],
        }


def _key_dict(name: str, key: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(name.split("+"), key, strict=True))


def _iso(ns: int | None) -> str | None:
    return format_ns(ns) if ns is not None else None


def decision_example(seq: int, payload: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """One decision as the report lists it: its ``seq`` (a receipt is made from it), ids, key, the
    route that ran, the decision, the served route and the findings."""
    get = attributes.get
    host = get(HOST_KEY)
    return {
        **({} if host is None else {"host": host}),
        "seq": seq,
        "trace_id": payload.get("trace_id"),
        "span_id": payload.get("span_id"),
        "start": _iso(_start(payload)),
        "repo": get(attr.REPO),
        "role": get(attr.ROLE),
        "principal": get(attr.PRINCIPAL),
        "request_face": get(attr.REQUEST_FACE),
        "requirement": get(attr.REQUIREMENT),
        "mechanism": get(attr.LEGACY_MECHANISM),
        "legacy": {"provider": get(attr.LEGACY_PROVIDER), "model": get(attr.LEGACY_MODEL)},
        "transport": get(attr.TRANSPORT),
        "decision": {
            "outcome": get(attr.OUTCOME),
            "reason": get(attr.REASON),
            "policy_source": get(attr.POLICY_SOURCE),
            "policy_id": get(attr.POLICY_ID),
            "provider": get(attr.PROVIDER),
            "model": get(attr.MODEL),
        },
        "divergence": get(attr.DIVERGENCE),
        "findings": sorted(finding_codes(get(attr.FINDING))),
        "served": dict(
            zip(("status", "provider", "model", "source", "why"), map(get, attr.SERVED_KEYS), strict=True)
        ),
    }


def _start(payload: dict[str, Any]) -> int | None:
    try:
        ns = int(payload["start_time_unix_nano"])
    except (KeyError, TypeError, ValueError):
        return None
    return ns if ns >= 0 else None


class Aggregation:
    """One report's pass in progress: the cube, the noise tracker, the timeline, the examples and the
    reader's counts, fed with :meth:`feed` (any number of times, records in ``seq`` order) and turned
    into the report by :meth:`finish`. Two aggregations over disjoint logs combine with :meth:`absorb`
    (a fleet); :mod:`~otel_route_shadow.analysis.monitor` saves and restores one (a monitor's state)."""

    def __init__(self, report: Report, *, cited_loader: CitedLoader | None = None, examples: int = 3) -> None:
        self.report = report
        self.tracker = NoiseTracker()
        self.cube = Cube(self.tracker)
        self.divergent: Examples[str] = Examples(examples)
        self.served: Examples[str] = Examples(examples)
        self.usage = CitedUsage(cited_loader) if cited_loader is not None else None

    def feed(
        self, payloads: Iterable[tuple[int, Any]], progress: ProgressFn | None = None, total: int = 0
    ) -> None:
        """Count ``(seq, payload)`` pairs (see :func:`aggregate`)."""
        report, cube, usage, served = self.report, self.cube, self.usage, self.served
        timeline, counts, divergent = report.times, report.records, self.divergent
        example: Callable[..., dict[str, Any]] = decision_example
        bars, open_bar = divergent.bars, divergent.open_bar
        for seq, payload, attributes, ns in observations(
            payloads, counts, window=report.window, progress=progress, total=total
        ):
            slot = cube.add(attributes)
            if slot is None:
                counts.demote()
                continue
            agreed = slot.agreed
            timeline.add(ns, agreed)
            if slot.state.last is not slot.route:
                slot.state.step(slot.route, seq)
            if not agreed:
                if seq < bars.get(slot.divergence, open_bar):
                    divergent.offer(slot.divergence, seq, partial(example, seq, payload, attributes))
                if slot.served_differs and served.wants(SERVED_DIFFERS, seq):
                    served.offer(SERVED_DIFFERS, seq, partial(example, seq, payload, attributes))
            if usage is not None:
                usage.add(attributes)

    def absorb(self, other: Aggregation) -> None:
        """Add the counts of ``other``, an aggregation of another log (its decision keys are another
        host's: the noise baseline never pairs the two)."""
        self.tracker.keys.update(other.tracker.keys)
        for key, slot in other.cube.slots.items():
            mine = self.cube.slots.get(key)
            if mine is None:
                mine = self.cube.slots[key] = CubeSlot(slot.cell, self.tracker)
            mine.count += slot.count
        self.report.times.absorb(other.report.times)
        self.report.records.absorb(other.report.records)
        self.divergent.absorb(other.divergent)
        self.served.absorb(other.served)
        if self.usage is not None and other.usage is not None:
            self.usage.absorb(other.usage)

    def finish(self) -> Report:
        """The report (call once: the noise figures are completed from the cube's counts)."""
        report, usage = self.report, self.usage
        if usage is not None:
            report.usage, report.usage_not_replayed = usage.tables(), usage.not_replayed
        slots = list(self.cube.slots.values())
        for slot in slots:
            slot.state.spawns += slot.count
            slot.state.diverged[0] += 0 if slot.agreed else slot.count
        report.noise = self.tracker.table()
        report.divergent = self.divergent.by_kind
        report.served_examples = self.served.by_kind.get(SERVED_DIFFERS, [])
        derive(report, slots)
        return report


def new_aggregation(
    *,
    chain: ChainStatus,
    by: Sequence[GroupSpec] | None = None,
    window: TimeWindow | None = None,
    cited_loader: CitedLoader | None = None,
    examples: int = 3,
    min_spawns: int = MIN_SPAWNS,
) -> Aggregation:
    """An empty aggregation for a report with these settings (see :func:`aggregate`)."""
    report = Report(
        chain=chain,
        window=window if window is not None else TimeWindow(),
        by=tuple(by) if by is not None else parse_by(None),
        min_spawns=min_spawns,
    )
    return Aggregation(report, cited_loader=cited_loader, examples=examples)


def aggregate(
    payloads: Iterable[tuple[int, Any]],
    *,
    chain: ChainStatus,
    by: Sequence[GroupSpec] | None = None,
    window: TimeWindow | None = None,
    progress: ProgressFn | None = None,
    cited_loader: CitedLoader | None = None,
    examples: int = 3,
    min_spawns: int = MIN_SPAWNS,
) -> Report:
    """Build a report from ``(seq, payload)`` pairs (the chain's streaming reader, or any iterable).

    ``cited_loader`` (a store's ``revision``) adds the replayed policy usage of each cited snapshot;
    ``examples`` is how many divergent decisions of each divergence code are listed; ``min_spawns``
    the minimum sample of a positive readiness verdict.
    """
    aggregation = new_aggregation(
        chain=chain, by=by, window=window, cited_loader=cited_loader, examples=examples, min_spawns=min_spawns
    )
    aggregation.feed(payloads, progress, chain.records)
    return aggregation.finish()


def build_report(
    path: str | Path,
    *,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    window: TimeWindow | None = None,
    allow_unverified: bool = False,
    verify: bool = True,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    verify_progress: ProgressFn | None = None,
    concurrent: bool | None = None,
    cited_loader: CitedLoader | None = None,
    examples: int = 3,
    evidence: Callable[[int], LogEvidence] | None = None,
    min_spawns: int = MIN_SPAWNS,
) -> Report:
    """Verify the chain at ``path`` (refusing an unverifiable one unless ``allow_unverified``), then
    stream it once and aggregate.

    ``by`` takes parsed specs (``[("repo",), ("repo", "role")]``) or ``--by`` strings
    (``["repo", "repo+role"]``). Raises :class:`~otel_route_shadow.analysis.source.ChainAnalysisError`
    subclasses for a missing, empty or (unless allowed) unverifiable chain. ``concurrent`` chooses
    whether verification runs in a worker process while the chain is read (default: for chains of
    8 MiB or more on a machine with two or more CPUs); see :func:`analyse_chain`. ``cited_loader``
    and ``examples``: see :func:`aggregate`. ``evidence(records)`` gives the log's evidence status
    (default: :func:`~otel_route_shadow.analysis.evidence.read_evidence` without keys).
    """
    specs = as_specs(by)
    if window is None:
        window = TimeWindow.parse(since, until)
    chosen = window

    def consume(payloads: Iterable[tuple[int, Any]], hint: int) -> Report:
        pending = ChainStatus(path=str(path), records=hint, verified=False, checked=False)
        return aggregate(
            payloads,
            chain=pending,
            by=specs,
            window=chosen,
            progress=progress,
            cited_loader=cited_loader,
            examples=examples,
            min_spawns=min_spawns,
        )

    status, report = analyse_chain(
        path,
        consume,
        verify=verify,
        allow_unverified=allow_unverified,
        jobs=jobs,
        verify_progress=verify_progress,
        concurrent=concurrent,
    )
    report.chain = status
    report.evidence = (evidence or partial(read_evidence, path))(status.records)
    return report
