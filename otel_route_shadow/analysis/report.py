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
from functools import partial
from pathlib import Path
from typing import Any

from otel_route_shadow.analysis.cells import Cube, derive
from otel_route_shadow.analysis.evidence import LogEvidence, read_evidence
from otel_route_shadow.analysis.examples import Examples
from otel_route_shadow.analysis.figures import Report
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import HOST_KEY, GroupSpec, as_specs, parse_by
from otel_route_shadow.analysis.latency import duration_ns
from otel_route_shadow.analysis.noise import NoiseTracker
from otel_route_shadow.analysis.records import observations, start_ns
from otel_route_shadow.analysis.replaying import CitedLoader
from otel_route_shadow.analysis.served import (
    SERVED_DIFFERS,
    finding_codes,
)
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.usage import CitedUsage
from otel_route_shadow.analysis.window import TimeWindow, format_ns
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "Aggregation",
    "aggregate",
    "build_report",
    "new_aggregation",
]


def decision_example(seq: int, payload: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """One decision as the report lists it: its ``seq`` (a receipt is made from it), ids, key, the
    route that ran, the decision, the served route and the findings."""
    get = attributes.get
    host = get(HOST_KEY)
    start = _start(payload)
    return {
        **({} if host is None else {"host": host}),
        "seq": seq,
        "trace_id": payload.get("trace_id"),
        "span_id": payload.get("span_id"),
        "start": None if start is None else format_ns(start),
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
    ns = start_ns(payload)
    return ns if ns >= 0 else None


class Aggregation:
    """One report's pass in progress: the cube, the noise tracker, the timeline, the examples and the
    reader's counts, fed with :meth:`feed` (any number of times, records in ``seq`` order) and turned
    into the report by :meth:`finish`, alone or with the aggregations of other logs (a fleet);
    :mod:`~otel_route_shadow.analysis.monitor_state` saves and restores one (a monitor's state)."""

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
        duration = duration_ns
        bars, open_bar = divergent.bars, divergent.open_bar
        for seq, payload, attributes, ns in observations(
            payloads, counts, window=report.window, progress=progress, total=total
        ):
            slot = cube.add(attributes)
            if slot is None:
                counts.demote()
                continue
            slot.latency.add(duration(payload))
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

    def finish(self, together: Sequence[Aggregation] = ()) -> Report:
        """The report (call once: the noise figures are completed from the cube's counts), with the
        counts of ``together`` (the aggregations of other logs, disjoint: a fleet's) added in: the
        records read, the timeline and the examples summed, the figures derived once over every
        log's cells (:func:`~otel_route_shadow.analysis.cells.derive`)."""
        report, usage = self.report, self.usage
        for other in together:
            report.records.absorb(other.report.records)
            report.times.absorb(other.report.times)
            for kind, found in other.divergent.by_kind.items():
                self.divergent.restore(kind, [*self.divergent.by_kind.get(kind, []), *found])
            served = other.served.by_kind.get(SERVED_DIFFERS, [])
            self.served.restore(SERVED_DIFFERS, [*self.served.by_kind.get(SERVED_DIFFERS, []), *served])
        if usage is not None:
            report.usage, report.usage_not_replayed = usage.tables(), usage.not_replayed
        report.divergent = self.divergent.by_kind
        report.served_examples = self.served.by_kind.get(SERVED_DIFFERS, [])
        derive(report, [self.cube, *(other.cube for other in together)])
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
    keys: Sequence[str] = (),
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
        keys=keys,
    )
    report.chain = status
    report.evidence = (evidence or partial(read_evidence, path))(status.records)
    return report
