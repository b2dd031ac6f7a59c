"""The divergence report: agreement and divergence rates from the chain alone, offline.

Aggregation reads each observation's attributes straight from the parsed payload (no pydantic, no
re-explaining): one tuple of the fields the figures need (a :class:`Cell`) is counted per record
into a small "cube" whose size depends on how many distinct values the chain holds, not on how many
records it has. All figures are then derived from that cube, so memory stays constant over a chain
of any length. The steps, in order: :func:`~otel_route_shadow.analysis.records.observations` picks
the records that count; :class:`_Cube` counts them; :class:`_Timeline` counts them per hour;
:class:`_PolicyUse` (with ``--store``) replays each context against the snapshot it cites; then
:func:`_derive` turns the cube into the figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from otel_route_shadow.analysis.gaps import (
    CLAIM_MISMATCH_KEY,
    DECISION_MARKER_KEY,
    FINDING_KEY,
    GAP_DIMENSIONS,
    GapTally,
    Spawn,
)
from otel_route_shadow.analysis.groups import GroupSpec, as_specs, key_label, label, parse_by, spec_name
from otel_route_shadow.analysis.records import AnalysisResult, Repeats, flag_rows, observations
from otel_route_shadow.analysis.replaying import (
    CitedKey,
    CitedLoader,
    CitedSnapshots,
    Mismatch,
    Replayer,
    Unchecked,
    cited_key,
)
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.tally import Tally, rate, sorted_counts, top_counts
from otel_route_shadow.analysis.timeline import HOUR_NS, TimelinePoint, coarsen
from otel_route_shadow.analysis.usage import UsageTable, usage_table
from otel_route_shadow.analysis.window import TimeWindow, format_ns
from otel_route_shadow.core.shadow import REQUIREMENT_DEFIED
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "BYPASS_DEFINITION",
    "BYPASS_TRANSPORT",
    "Cell",
    "Report",
    "aggregate",
    "build_report",
    "format_report",
]

BYPASS_TRANSPORT: Final = "direct-http"
BYPASS_DEFINITION: Final = (
    "spawns whose recorded transport is direct-http: direct OpenAI-compatible calls that never reach "
    "the gateway, so no gateway policy could bind them; shown as a share of all spawns in the window, "
    "and per legacy mechanism"
)
MANAGED_SOURCE: Final = "managed-policy"
NO_STORE_NOTE: Final = (
    "pass --store DIR to replay each context against the snapshot it cites and list every policy, "
    "with those that decided nothing, outranked and never matched"
)


class Cell(NamedTuple):
    """The fields of one observation the figures need; the cube counts equal cells."""

    agreed: bool
    divergence: Any
    outcome: Any
    reason: Any
    source: Any
    transport: Any
    mechanism: Any
    repo: Any
    role: Any
    principal: Any
    finding: Any
    claim_mismatch: Any
    whole_decision: Any
    revision: Any
    content_hash: Any
    policy_id: Any

    def spawn(self) -> Spawn:
        return Spawn(
            mechanism=self.mechanism,
            managed=self.source == MANAGED_SOURCE,
            agreed=self.agreed,
            bypass=self.transport == BYPASS_TRANSPORT,
            finding=self.finding,
            claim_mismatch=self.claim_mismatch,
            whole_decision=self.whole_decision is not None,
        )

    def facts(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`Tally.add` for this cell."""
        divergence = self.divergence if isinstance(self.divergence, str) else None
        return {
            "agreed": self.agreed,
            "divergence": None if self.agreed else divergence,
            "outcome": self.outcome if isinstance(self.outcome, str) else label(self.outcome),
            "managed": self.source == MANAGED_SOURCE,
            "bypass": self.transport == BYPASS_TRANSPORT,
        }


_CELL_KEYS: Final = (
    attr.DIVERGENCE,
    attr.OUTCOME,
    attr.REASON,
    attr.POLICY_SOURCE,
    attr.TRANSPORT,
    attr.LEGACY_MECHANISM,
    attr.REPO,
    attr.ROLE,
    attr.PRINCIPAL,
    FINDING_KEY,
    CLAIM_MISMATCH_KEY,
    DECISION_MARKER_KEY,
    attr.SNAPSHOT_REVISION,
    attr.SNAPSHOT_HASH,
    attr.POLICY_ID,
)
"""The attributes of a :class:`Cell` after ``agreed``, in its field order."""


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
    """``route_shadow.finding`` codes (``requirement-defied``): never suppressed."""
    claim_mismatches: dict[str, int] = field(default_factory=dict)
    """Each name in ``route_shadow.claim_mismatch`` (``mechanism``, ``transport``), counted."""
    decided: dict[tuple[Any, Any], dict[str, int]] = field(default_factory=dict)
    """Per cited snapshot (revision, hash): spawns each policy decided, as recorded."""
    usage: list[UsageTable] = field(default_factory=list)
    usage_not_replayed: dict[str, int] = field(default_factory=dict)
    hours: dict[int, list[int]] = field(default_factory=dict)
    first_ns: int | None = None
    last_ns: int | None = None

    @property
    def spawns(self) -> int:
        return self.total.spawns

    @property
    def findings_known(self) -> bool:
        """False when no record carries the whole decision (an older chain): findings are unknown."""
        return self.gap_total.recorded > 0

    def timeline(self, max_points: int = 48) -> tuple[int, list[TimelinePoint]]:
        return coarsen(self.hours, max_points)

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
                "totals": self.total.as_dict(top),
                "outcomes": dict(sorted_counts(self.outcomes)),
                "held_reasons": dict(sorted_counts(self.held_reasons)),
                "rejected_reasons": dict(sorted_counts(self.rejected_reasons)),
                "policy_sources": dict(sorted_counts(self.policy_sources)),
                "divergences": dict(sorted_counts(self.divergences)),
                "findings": self._findings_dict(),
                "bypass": self._bypass_dict(),
                "mechanisms": [{"mechanism": name, **t.as_dict(top)} for name, t in self.mechanisms],
                "policy_gaps": self._gaps_dict(),
                "policy_usage": self._usage_dict(),
                "groups": {
                    name: [{"key": _key_dict(name, key), **t.as_dict(top)} for key, t in rows]
                    for name, rows in self.groups.items()
                },
                "timeline": self._timeline_dict(),
            }
        )
        if self.flagged:
            flag_rows(data)
        return data

    def _findings_dict(self) -> dict[str, Any]:
        known = self.findings_known
        return {
            "known": known,
            "requirement_defied": self.findings.get(REQUIREMENT_DEFIED, 0) if known else None,
            "by_code": dict(sorted_counts(self.findings)),
            "claim_mismatches": dict(sorted_counts(self.claim_mismatches)) if known else None,
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
            "bucket_hours": width,
            "first": _iso(self.first_ns),
            "last": _iso(self.last_ns),
            "points": [point.as_dict() for point in points],
        }


def _key_dict(name: str, key: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(name.split("+"), key, strict=True))


def _iso(ns: int | None) -> str | None:
    return format_ns(ns) if ns is not None else None


def _add(counts: dict[str, int], key: Any, n: int) -> None:
    name = key if isinstance(key, str) else label(key)
    counts[name] = counts.get(name, 0) + n


# ---------------------------------------------------------------------------------------------
# The steps of one pass


class _Cube:
    """Counts of equal :class:`Cell` tuples (a repeated observation reuses its cell: :class:`Repeats`)."""

    __slots__ = ("counts", "repeats")

    def __init__(self) -> None:
        self.counts: defaultdict[tuple[Any, ...], int] = defaultdict(int)
        self.repeats: Repeats[tuple[Any, ...]] = Repeats()

    def add(self, attributes: dict[str, Any]) -> bool | None:
        """Count one observation; its agreement, or None when a value cannot be counted (a value no
        exporter writes, such as a list)."""
        key = self.repeats.get(attributes)
        if key is None:
            key = (attributes.get(attr.AGREED) is True, *map(attributes.get, _CELL_KEYS))
            try:
                self.counts[key] += 1
            except TypeError:
                return None
            self.repeats.remember(attributes, key)
        else:
            self.counts[key] += 1
        agreed: bool = key[0]
        return agreed


class _Timeline:
    """Spawns and agreements per UTC hour, and the first and last start seen."""

    __slots__ = ("first_ns", "hours", "last_ns")

    def __init__(self) -> None:
        self.hours: dict[int, list[int]] = {}
        self.first_ns: int | None = None
        self.last_ns: int | None = None

    def add(self, ns: int, agreed: bool) -> None:
        if ns < 0:
            return
        hour = ns // HOUR_NS
        slot = self.hours.get(hour)
        if slot is None:
            slot = self.hours[hour] = [0, 0]
        slot[0] += 1
        slot[1] += agreed
        if self.first_ns is None or ns < self.first_ns:
            self.first_ns = ns
        if self.last_ns is None or ns > self.last_ns:
            self.last_ns = ns


class _PolicyUse:
    """With a store: each observation's context replayed against the snapshot it cites, counting
    which policies decided it, were outranked in it, or never matched it (issue 18)."""

    def __init__(self, loader: CitedLoader) -> None:
        self.cited = CitedSnapshots(loader)
        self.counts: dict[CitedKey, defaultdict[Any, int]] = {}
        self.not_replayed: dict[str, int] = {}

    def add(self, attributes: dict[str, Any]) -> None:
        key = cited_key(attributes)
        text = attributes.get(attr.CONTEXT)
        if key is None or type(text) is not str:
            self._skip("no snapshot citation or no context")
            return
        found = self.cited.lookup(key)
        if isinstance(found, Unchecked):
            self._skip(found.reason)
            return
        if isinstance(found, Mismatch):
            self._skip(found.detail)
            return
        self.counts.setdefault(key, defaultdict(int))[found.replay(text).usage] += 1

    def _skip(self, reason: str) -> None:
        self.not_replayed[reason] = self.not_replayed.get(reason, 0) + 1

    def tables(self) -> list[UsageTable]:
        tables = []
        for key, counts in sorted(self.counts.items(), key=lambda item: item[0][0]):
            found = self.cited.lookup(key)
            if isinstance(found, Replayer) and found.snapshot.available:
                tables.append(usage_table(found.snapshot, counts))
        return tables


def aggregate(
    payloads: Iterable[tuple[int, Any]],
    *,
    chain: ChainStatus,
    by: Sequence[GroupSpec] | None = None,
    window: TimeWindow | None = None,
    progress: ProgressFn | None = None,
    cited_loader: CitedLoader | None = None,
) -> Report:
    """Build a report from ``(seq, payload)`` pairs (the chain's streaming reader, or any iterable).

    ``cited_loader`` (a store's ``revision``) adds the replayed policy usage of each cited snapshot.
    """
    report = Report(
        chain=chain,
        window=window if window is not None else TimeWindow(),
        by=tuple(by) if by is not None else parse_by(None),
    )
    cube, timeline = _Cube(), _Timeline()
    usage = _PolicyUse(cited_loader) if cited_loader is not None else None
    counts = report.records
    for _seq, _payload, attributes, ns in observations(
        payloads, counts, window=report.window, progress=progress, total=chain.records
    ):
        agreed = cube.add(attributes)
        if agreed is None:
            counts.demote()
            continue
        timeline.add(ns, agreed)
        if usage is not None:
            usage.add(attributes)
    report.hours, report.first_ns, report.last_ns = timeline.hours, timeline.first_ns, timeline.last_ns
    if usage is not None:
        report.usage, report.usage_not_replayed = usage.tables(), usage.not_replayed
    _derive(report, cube.counts)
    return report


# ---------------------------------------------------------------------------------------------
# From the cube to the figures


def _derive(report: Report, cube: dict[tuple[Any, ...], int]) -> None:
    """Every figure of ``report`` from the counted cells."""
    mechanisms: dict[Any, Tally] = {}
    groups: dict[str, dict[tuple[Any, ...], Tally]] = {spec_name(spec): {} for spec in report.by}
    gaps: dict[str, dict[Any, GapTally]] = {name: {} for name in GAP_DIMENSIONS}
    for key, n in cube.items():
        cell = Cell._make(key)
        facts = cell.facts()
        report.total.add(n, **facts)
        mechanisms.setdefault(cell.mechanism, Tally()).add(n, **facts)
        _add_counts(report, cell, n)
        _add_groups(groups, report.by, cell, facts, n)
        _add_gaps(report.gap_total, gaps, cell, n)
    report.mechanisms = sorted(mechanisms.items(), key=lambda item: (-item[1].spawns, label(item[0])))
    report.groups = {
        name: sorted(rows.items(), key=lambda item: (-item[1].spawns, key_label(item[0])))
        for name, rows in groups.items()
    }
    report.gaps = {
        name: sorted(rows.items(), key=lambda item: (-item[1].spawns, label(item[0])))
        for name, rows in gaps.items()
    }


def _add_counts(report: Report, cell: Cell, n: int) -> None:
    """The flat counts: outcomes, sources, reasons, divergences, findings, recorded deciders."""
    _add(report.outcomes, cell.outcome, n)
    _add(report.policy_sources, cell.source, n)
    if cell.outcome == "held":
        _add(report.held_reasons, cell.reason, n)
    elif cell.outcome == "rejected":
        _add(report.rejected_reasons, cell.reason, n)
    if not cell.agreed:
        _add(report.divergences, cell.divergence if cell.divergence is not None else "(unspecified)", n)
    if isinstance(cell.finding, str):
        _add(report.findings, cell.finding, n)
    if isinstance(cell.claim_mismatch, str):
        for name in cell.claim_mismatch.split(","):
            _add(report.claim_mismatches, name.strip(), n)
    if isinstance(cell.policy_id, str):
        decided = report.decided.setdefault((cell.revision, cell.content_hash), {})
        decided[cell.policy_id] = decided.get(cell.policy_id, 0) + n


def _add_groups(
    groups: dict[str, dict[tuple[Any, ...], Tally]],
    specs: Sequence[GroupSpec],
    cell: Cell,
    facts: dict[str, Any],
    n: int,
) -> None:
    values = cell._asdict()
    for spec in specs:
        key = tuple(values[_CELL_FIELD[name]] for name in spec)
        groups[spec_name(spec)].setdefault(key, Tally()).add(n, **facts)


_CELL_FIELD: Final = {
    "repo": "repo",
    "role": "role",
    "principal": "principal",
    "mechanism": "mechanism",
    "transport": "transport",
    "outcome": "outcome",
}
"""``--by`` name -> the :class:`Cell` field it groups on (see ``groups.DIMENSIONS``)."""


def _add_gaps(total: GapTally, gaps: dict[str, dict[Any, GapTally]], cell: Cell, n: int) -> None:
    spawn = cell.spawn()
    total.add(spawn, n)
    values = cell._asdict()
    for name in GAP_DIMENSIONS:
        gaps[name].setdefault(values[name], GapTally()).add(spawn, n)


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
) -> Report:
    """Verify the chain at ``path`` (refusing an unverifiable one unless ``allow_unverified``), then
    stream it once and aggregate.

    ``by`` takes parsed specs (``[("repo",), ("repo", "role")]``) or ``--by`` strings
    (``["repo", "repo+role"]``). Raises :class:`~otel_route_shadow.analysis.source.ChainAnalysisError`
    subclasses for a missing, empty or (unless allowed) unverifiable chain. ``concurrent`` chooses
    whether verification runs in a worker process while the chain is read (default: for chains of
    8 MiB or more on a machine with two or more CPUs); see :func:`analyse_chain`. ``cited_loader``:
    see :func:`aggregate`.
    """
    specs = as_specs(by)
    if window is None:
        window = TimeWindow.parse(since, until)
    chosen = window

    def consume(payloads: Iterable[tuple[int, Any]], hint: int) -> Report:
        pending = ChainStatus(path=str(path), records=hint, verified=False, checked=False)
        return aggregate(
            payloads, chain=pending, by=specs, window=chosen, progress=progress, cited_loader=cited_loader
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
    return report


# ---------------------------------------------------------------------------------------------
# Text rendering


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], mark: str) -> list[str]:
    """Aligned columns: the first and the last (text) to the left, the figures between to the right."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    last = len(headers) - 1

    def align(i: int, cell: str) -> str:
        return cell.rjust(widths[i]) if 0 < i < last else cell.ljust(widths[i])

    lines = [mark + " " + "  ".join(align(i, h) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append(mark + " " + "  ".join(align(i, cell) for i, cell in enumerate(row)).rstrip())
    return lines


def _divergence_text(tally: Tally, top: int) -> str:
    items = top_counts(tally.divergences, top)
    return ", ".join(f"{code} {n}" for code, n in items) if items else "-"


def _tally_rows(rows: Sequence[tuple[str, Tally]], top: int) -> list[list[str]]:
    return [
        [
            name,
            str(t.spawns),
            str(t.agreed),
            _pct(rate(t.agreed, t.spawns)),
            str(t.diverged),
            _pct(rate(t.diverged, t.spawns)),
            _pct(rate(t.managed, t.spawns)),
            str(t.bypass),
            _divergence_text(t, top),
        ]
        for name, t in rows
    ]


_TALLY_HEADERS: Final = (
    "group",
    "spawns",
    "agreed",
    "agree%",
    "diverged",
    "diverge%",
    "managed%",
    "bypass",
    "top divergences",
)


def format_report(report: Report, top: int = 3) -> str:
    """The terminal form. When flagged, a banner opens and closes it and every figure line starts
    with ``!``."""
    mark = report.mark()
    out = [report.banner()] if report.flagged else []
    out.extend(_text_header(report))
    if not report.total.spawns:
        out.append(f"{mark} no observations in this window: nothing to report")
    else:
        for section in (_text_totals, _text_findings, _text_bypass, _text_gaps, _text_usage, _text_groups):
            out.append("")
            out.extend(section(report, mark, top))
        out.extend(_text_timeline(report, mark))
    if report.flagged:
        out.extend(["", report.banner()] if report.total.spawns else [report.banner()])
    return "\n".join(out) + "\n"


def _text_header(report: Report) -> list[str]:
    win = report.window.describe()
    return [
        f"route-shadow divergence report: {report.chain.path}",
        f"  chain: {report.chain.describe()}",
        f"  window: since {win['since'] or '(start)'} until {win['until'] or '(end)'}",
        f"{report.mark()} {report.records.describe()}",
        _text_dropped(report),
    ]


def _text_dropped(report: Report) -> str:
    """The gap the chain records, marked ``!`` (the figures leave those records out), or ``none``."""
    gap = report.records.dropped
    if not gap.events:
        return f"{report.mark()} {gap.describe()}"
    return f"! {gap.describe()}; every figure is over the recorded records only"


def _text_totals(report: Report, mark: str, top: int) -> list[str]:
    t = report.total
    out = [
        f"{mark} spawns {t.spawns}: agreed {t.agreed} ({_pct(rate(t.agreed, t.spawns))}), "
        f"diverged {t.diverged} ({_pct(rate(t.diverged, t.spawns))}); decided by a managed policy "
        f"{t.managed} ({_pct(rate(t.managed, t.spawns))})"
    ]
    for title, counts in (
        ("outcomes", report.outcomes),
        ("policy sources", report.policy_sources),
        ("divergences", report.divergences),
        ("held reasons", report.held_reasons),
        ("rejected reasons", report.rejected_reasons),
    ):
        text = ", ".join(f"{k} {v} ({_pct(rate(v, t.spawns))})" for k, v in sorted_counts(counts))
        out.append(f"{mark} {title}: {text or 'none'}")
    return out


def _text_findings(report: Report, mark: str, top: int) -> list[str]:
    """Findings and claim mismatches: always shown, never suppressed (unknown for older chains)."""
    if not report.findings_known:
        unknown = "unknown (no record carries the whole decision: an older chain)"
        return [f"{mark} findings (requirement-defied): {unknown}", f"{mark} claim mismatches: {unknown}"]
    t = report.total
    defied = report.findings.get(REQUIREMENT_DEFIED, 0)
    others = ", ".join(f"{k} {v}" for k, v in sorted_counts(report.findings) if k != REQUIREMENT_DEFIED)
    mismatches = ", ".join(f"{k} {v}" for k, v in sorted_counts(report.claim_mismatches)) or "none"
    return [
        f"{mark} findings: requirement-defied {defied} ({_pct(rate(defied, t.spawns))}) "
        "(a legacy route that did not satisfy its model requirement)" + (f"; {others}" if others else ""),
        f"{mark} claim mismatches (the host claimed otherwise than derived): {mismatches}",
    ]


def _text_bypass(report: Report, mark: str, top: int) -> list[str]:
    t = report.total
    out = [
        f"{mark} bypass traffic (direct-http, no gateway policy could bind it): {t.bypass} of "
        f"{t.spawns} spawns ({_pct(rate(t.bypass, t.spawns))})"
    ]
    for name, tally in report.mechanisms:
        if tally.bypass:
            out.append(
                f"{mark}   {label(name)}: {tally.bypass} of its {tally.spawns} spawns "
                f"({_pct(rate(tally.bypass, tally.spawns))}); {_pct(rate(tally.bypass, t.bypass))} of all bypass"
            )
    out.append("")
    out.append("per-mechanism readiness:")
    out.extend(_table(_TALLY_HEADERS, _tally_rows([(label(k), v) for k, v in report.mechanisms], top), mark))
    return out


_GAP_HEADERS: Final = ("group", "spawns", "persistent%", "policy gap%", "transient%", "unknown", "readiness")


def _gap_rows(rows: Sequence[tuple[Any, GapTally]]) -> list[list[str]]:
    return [
        [
            label(key),
            str(g.spawns),
            _pct(rate(g.persistent, g.spawns)),
            _pct(rate(g.gaps, g.spawns)),
            _pct(rate(g.transient, g.spawns)),
            str(g.unknown),
            "{}: {}".format(*g.verdict()),
        ]
        for key, g in rows
    ]


def _text_gaps(report: Report, mark: str, top: int) -> list[str]:
    """Persistent policy gaps (role dial, repo override) against transient mechanisms (credit
    failover, fleet ratchet), per repo, role and principal, each with a readiness verdict."""
    verdict, why = report.gap_total.verdict()
    out = [
        "policy gaps (role dial, repo override: persistent) and transient mechanisms (credit failover, "
        "fleet ratchet):",
        f"{mark} all spawns: {verdict}: {why}",
    ]
    for name, rows in report.gaps.items():
        out.append(f"by {name}:")
        out.extend(_table(_GAP_HEADERS, _gap_rows(rows), mark))
    return out


def _text_usage(report: Report, mark: str, top: int) -> list[str]:
    out = ["policy usage (spawns each policy decided, was outranked in, never matched):"]
    for table in report.usage:
        out.extend(table.lines(mark))
    for reason, n in sorted_counts(report.usage_not_replayed):
        out.append(f"{mark}   not replayed: {n} spawn(s): {reason}")
    if not report.usage:
        for (revision, _digest), decided in report.decided.items():
            text = ", ".join(f"{k} {v}" for k, v in sorted_counts(decided))
            out.append(f"{mark}   snapshot revision {label(revision)}, as recorded: decided {text}")
        out.append(f"{mark}   {NO_STORE_NOTE}")
    return out


def _text_groups(report: Report, mark: str, top: int) -> list[str]:
    out: list[str] = []
    for name, rows in report.groups.items():
        out.extend(["", f"by {name}:"] if out else [f"by {name}:"])
        out.extend(_table(_TALLY_HEADERS, _tally_rows([(key_label(k), v) for k, v in rows], top), mark))
    return out


def _text_timeline(report: Report, mark: str) -> list[str]:
    width, points = report.timeline()
    if not points:
        return []
    rows = [
        [p.as_dict()["start"], str(p.spawns), str(p.agreed), _pct(rate(p.agreed, p.spawns))] for p in points
    ]
    return [
        "",
        f"agreement over time ({width}h buckets):",
        *_table(("bucket start", "spawns", "agreed", "agree%"), rows, mark),
    ]
