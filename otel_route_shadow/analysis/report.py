"""The divergence report: agreement and divergence rates from the chain alone, offline.

Aggregation reads each observation's attributes straight from the parsed payload (no pydantic, no
re-explaining): one tuple of the fields the figures need is counted per record into a small "cube"
whose size depends on how many distinct values the chain holds, not on how many records it has. All
figures are then derived from that cube, so memory stays constant over a chain of any length.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from otel_route_shadow.analysis.groups import DIMENSIONS, GroupSpec, key_label, label, parse_by, spec_name
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.tally import Tally, rate, sorted_counts, top_counts
from otel_route_shadow.analysis.timeline import HOUR_NS, TimelinePoint, coarsen
from otel_route_shadow.analysis.window import TimeWindow, format_ns
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.record import RECORD_KIND

__all__ = [
    "BYPASS_DEFINITION",
    "BYPASS_TRANSPORT",
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
PROGRESS_EVERY: Final = 1 << 15
KNOWN_LIMIT: Final = 1 << 12
"""Distinct observations remembered for the fast path before the memory is folded and cleared."""

# Cube key layout: fixed fields first, then the dimensions only some breakdowns need.
_AGREED, _DIVERGENCE, _OUTCOME, _REASON, _SOURCE, _TRANSPORT, _MECHANISM = range(7)
_FIXED_KEYS: Final = (
    attr.DIVERGENCE,
    attr.OUTCOME,
    attr.REASON,
    attr.POLICY_SOURCE,
    attr.TRANSPORT,
    attr.LEGACY_MECHANISM,
)
_FIXED_POSITION: Final = {
    "outcome": _OUTCOME,
    "transport": _TRANSPORT,
    "mechanism": _MECHANISM,
}


@dataclass
class Report:
    """Every figure of one report. ``flagged`` is true when the chain did not verify."""

    chain: ChainStatus
    window: TimeWindow
    by: tuple[GroupSpec, ...]
    records_read: int = 0
    observations: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)
    outside_window: int = 0
    without_decision: int = 0
    malformed: int = 0
    total: Tally = field(default_factory=Tally)
    outcomes: dict[str, int] = field(default_factory=dict)
    held_reasons: dict[str, int] = field(default_factory=dict)
    rejected_reasons: dict[str, int] = field(default_factory=dict)
    policy_sources: dict[str, int] = field(default_factory=dict)
    divergences: dict[str, int] = field(default_factory=dict)
    mechanisms: list[tuple[str | None, Tally]] = field(default_factory=list)
    groups: dict[str, list[tuple[tuple[Any, ...], Tally]]] = field(default_factory=dict)
    hours: dict[int, list[int]] = field(default_factory=dict)
    first_ns: int | None = None
    last_ns: int | None = None

    @property
    def flagged(self) -> bool:
        return self.chain.flagged

    @property
    def spawns(self) -> int:
        return self.total.spawns

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
        width, points = self.timeline()
        data: dict[str, Any] = {
            "kind": "route-shadow-report",
            "chain": self.chain.as_dict(),
            "flagged": self.flagged,
            "flag": "UNVERIFIED" if self.flagged else None,
            "window": self.window.describe(),
            "by": [spec_name(spec) for spec in self.by],
            "records": {
                "read": self.records_read,
                "observations": self.observations,
                "skipped_kinds": dict(sorted_counts(self.skipped_kinds)),
                "outside_window": self.outside_window,
                "without_decision": self.without_decision,
                "malformed": self.malformed,
            },
            "totals": self.total.as_dict(top),
            "outcomes": dict(sorted_counts(self.outcomes)),
            "held_reasons": dict(sorted_counts(self.held_reasons)),
            "rejected_reasons": dict(sorted_counts(self.rejected_reasons)),
            "policy_sources": dict(sorted_counts(self.policy_sources)),
            "divergences": dict(sorted_counts(self.divergences)),
            "bypass": {
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
            },
            "mechanisms": [{"mechanism": name, **tally.as_dict(top)} for name, tally in self.mechanisms],
            "groups": {
                name: [
                    {"key": dict(zip(name.split("+"), key, strict=True)), **tally.as_dict(top)}
                    for key, tally in rows
                ]
                for name, rows in self.groups.items()
            },
            "timeline": {
                "bucket_hours": width,
                "first": _iso(self.first_ns),
                "last": _iso(self.last_ns),
                "points": [point.as_dict() for point in points],
            },
        }
        if self.flagged:
            _flag_rows(data)
        return data


def _iso(ns: int | None) -> str | None:
    return format_ns(ns) if ns is not None else None


def _flag_rows(value: Any) -> None:
    """Mark every figure row (any object with a count in it) as unverified."""
    if isinstance(value, dict):
        if any(key in value for key in ("spawns", "count", "agreement_rate")):
            value["unverified"] = True
        for item in value.values():
            _flag_rows(item)
    elif isinstance(value, list):
        for item in value:
            _flag_rows(item)


def _fold(known: dict[str, list[Any]], cube: defaultdict[tuple[Any, ...], int]) -> None:
    """Move the counts of repeated observations into the cube, and forget them (bounded memory)."""
    for _attributes, copies, _agreed, key in known.values():
        if copies:
            cube[key] += copies
    known.clear()


def _add(counts: dict[str, int], key: Any, n: int) -> None:
    name = key if isinstance(key, str) else label(key)
    counts[name] = counts.get(name, 0) + n


def aggregate(
    payloads: Iterable[tuple[int, Any]],
    *,
    chain: ChainStatus,
    by: Sequence[GroupSpec] | None = None,
    window: TimeWindow | None = None,
    progress: ProgressFn | None = None,
) -> Report:
    """Build a report from ``(seq, payload)`` pairs (the chain's streaming reader, or any iterable)."""
    specs = tuple(by) if by is not None else parse_by(None)
    window = window if window is not None else TimeWindow()
    extra = [name for name in ("repo", "role", "principal") if any(name in spec for spec in specs)]
    extra_keys = tuple(DIMENSIONS[name] for name in extra)
    keys = _FIXED_KEYS + extra_keys
    position = dict(_FIXED_POSITION)
    for offset, name in enumerate(extra):
        position[name] = 7 + offset

    cube: defaultdict[tuple[Any, ...], int] = defaultdict(int)
    hours: dict[int, list[int]] = {}
    skipped: dict[str, int] = {}
    outside = without_decision = malformed = read = 0
    first_ns: int | None = None
    last_ns: int | None = None
    bounded = not window.unbounded
    total = chain.records
    agreed_key = attr.AGREED
    outcome_key = attr.OUTCOME
    id_key = attr.DECISION_ID
    # Observations already counted once, by decision id: [attributes, further copies, agreed, cube key].
    known: dict[str, list[Any]] = {}
    known_get = known.get

    for _seq, payload in payloads:
        read += 1
        if progress is not None and not read % PROGRESS_EVERY:
            progress(read, total)
        if not isinstance(payload, dict):
            malformed += 1
            continue
        kind = payload.get("kind")
        if kind != RECORD_KIND:
            name = kind if isinstance(kind, str) else "(no kind)"
            skipped[name] = skipped.get(name, 0) + 1
            continue
        attributes = payload.get("attributes")
        if not isinstance(attributes, dict):
            malformed += 1
            continue
        try:
            ns = int(payload["start_time_unix_nano"])
        except (KeyError, TypeError, ValueError):
            ns = -1
        if ns < 0:
            if bounded:
                outside += 1
                continue
        elif bounded and not window.contains(ns):
            outside += 1
            continue
        get = attributes.get
        decision_id = get(id_key)
        seen = known_get(decision_id) if decision_id.__class__ is str else None
        if seen is not None and attributes == seen[0]:
            # The very same observation as an earlier record (only trace, span and time differ).
            seen[1] += 1
            agreed = seen[2]
        else:
            if get(outcome_key) is None:
                without_decision += 1
                continue
            agreed = get(agreed_key) is True
            key = (agreed, *map(get, keys))
            try:
                cube[key] += 1
            except TypeError:  # an unhashable value: not something the exporter writes
                malformed += 1
                continue
            if decision_id.__class__ is str:
                if len(known) >= KNOWN_LIMIT:
                    _fold(known, cube)
                known[decision_id] = [attributes, 0, agreed, key]
        if ns >= 0:
            slot = hours.get(ns // HOUR_NS)
            if slot is None:
                hours[ns // HOUR_NS] = [1, 1 if agreed else 0]
            else:
                slot[0] += 1
                if agreed:
                    slot[1] += 1
            if first_ns is None or ns < first_ns:
                first_ns = ns
            if last_ns is None or ns > last_ns:
                last_ns = ns
    _fold(known, cube)
    if progress is not None:
        progress(read, total)

    report = Report(
        chain=chain,
        window=window,
        by=specs,
        records_read=read,
        skipped_kinds=skipped,
        outside_window=outside,
        without_decision=without_decision,
        malformed=malformed,
        hours=hours,
        first_ns=first_ns,
        last_ns=last_ns,
    )
    mechanisms: dict[Any, Tally] = {}
    groups: dict[str, dict[tuple[Any, ...], Tally]] = {spec_name(spec): {} for spec in specs}
    spec_positions = [(spec_name(spec), tuple(position[name] for name in spec)) for spec in specs]
    for key, n in cube.items():
        agreed, divergence, outcome, reason = key[_AGREED], key[_DIVERGENCE], key[_OUTCOME], key[_REASON]
        source, transport, mechanism = key[_SOURCE], key[_TRANSPORT], key[_MECHANISM]
        facts = {
            "agreed": agreed,
            "divergence": None if agreed else (divergence if isinstance(divergence, str) else None),
            "outcome": outcome if isinstance(outcome, str) else label(outcome),
            "managed": source == MANAGED_SOURCE,
            "bypass": transport == BYPASS_TRANSPORT,
        }
        report.observations += n
        report.total.add(n, **facts)
        _add(report.outcomes, outcome, n)
        _add(report.policy_sources, source, n)
        if outcome == "held":
            _add(report.held_reasons, reason, n)
        elif outcome == "rejected":
            _add(report.rejected_reasons, reason, n)
        if not agreed:
            _add(report.divergences, divergence if divergence is not None else "(unspecified)", n)
        mechanisms.setdefault(mechanism, Tally()).add(n, **facts)
        for name, positions in spec_positions:
            group_key = tuple(key[p] for p in positions)
            groups[name].setdefault(group_key, Tally()).add(n, **facts)
    report.mechanisms = sorted(mechanisms.items(), key=lambda item: (-item[1].spawns, label(item[0])))
    report.groups = {
        name: sorted(rows.items(), key=lambda item: (-item[1].spawns, key_label(item[0])))
        for name, rows in groups.items()
    }
    return report


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
) -> Report:
    """Verify the chain at ``path`` (refusing an unverifiable one unless ``allow_unverified``), then
    stream it once and aggregate.

    ``by`` takes parsed specs (``[("repo",), ("repo", "role")]``) or ``--by`` strings
    (``["repo", "repo+role"]``). Raises :class:`~otel_route_shadow.analysis.source.ChainAnalysisError`
    subclasses for a missing, empty or (unless allowed) unverifiable chain. ``concurrent`` chooses
    whether verification runs in a worker process while the chain is read (default: for chains of
    8 MiB or more on a machine with two or more CPUs); see :func:`analyse_chain`.
    """
    specs = _specs(by)
    if window is None:
        window = TimeWindow.parse(since, until)
    chosen = window

    def consume(payloads: Iterable[tuple[int, Any]], hint: int) -> Report:
        pending = ChainStatus(path=str(path), records=hint, verified=False, checked=False)
        return aggregate(payloads, chain=pending, by=specs, window=chosen, progress=progress)

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


def _specs(by: Sequence[GroupSpec] | Sequence[str] | None) -> tuple[GroupSpec, ...]:
    if by is None:
        return parse_by(None)
    if all(isinstance(item, str) for item in by):
        return parse_by([item for item in by if isinstance(item, str)])
    return tuple(tuple(item) for item in by)


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
    mark = "!" if report.flagged else " "
    out: list[str] = []
    banner = f"!!! UNVERIFIED CHAIN: every figure below is flagged ({report.chain.describe()}) !!!"
    if report.flagged:
        out.append(banner)
    out.append(f"route-shadow divergence report: {report.chain.path}")
    out.append(f"  chain: {report.chain.describe()}")
    win = report.window.describe()
    out.append(f"  window: since {win['since'] or '(start)'} until {win['until'] or '(end)'}")
    skipped = ", ".join(f"{k} {v}" for k, v in sorted_counts(report.skipped_kinds)) or "none"
    out.append(
        f"{mark} records read {report.records_read}: observations {report.observations}; "
        f"skipped (not observations) {skipped}; outside window {report.outside_window}; "
        f"without a decision {report.without_decision}; malformed {report.malformed}"
    )
    t = report.total
    if not t.spawns:
        out.append(f"{mark} no observations in this window: nothing to report")
        if report.flagged:
            out.append(banner)
        return "\n".join(out) + "\n"
    out.append("")
    out.append(
        f"{mark} spawns {t.spawns}: agreed {t.agreed} ({_pct(rate(t.agreed, t.spawns))}), "
        f"diverged {t.diverged} ({_pct(rate(t.diverged, t.spawns))}); decided by a managed policy "
        f"{t.managed} ({_pct(rate(t.managed, t.spawns))})"
    )
    for title, counts in (
        ("outcomes", report.outcomes),
        ("policy sources", report.policy_sources),
        ("divergences", report.divergences),
        ("held reasons", report.held_reasons),
        ("rejected reasons", report.rejected_reasons),
    ):
        text = ", ".join(f"{k} {v} ({_pct(rate(v, t.spawns))})" for k, v in sorted_counts(counts))
        out.append(f"{mark} {title}: {text or 'none'}")
    out.append("")
    out.append(
        f"{mark} bypass traffic (direct-http, no gateway policy could bind it): {t.bypass} of "
        f"{t.spawns} spawns ({_pct(rate(t.bypass, t.spawns))})"
    )
    for name, tally in report.mechanisms:
        if tally.bypass:
            out.append(
                f"{mark}   {label(name)}: {tally.bypass} of its {tally.spawns} spawns "
                f"({_pct(rate(tally.bypass, tally.spawns))}); {_pct(rate(tally.bypass, t.bypass))} of all bypass"
            )
    out.append("")
    out.append("per-mechanism readiness:")
    out.extend(_table(_TALLY_HEADERS, _tally_rows([(label(k), v) for k, v in report.mechanisms], top), mark))
    for name, rows in report.groups.items():
        out.append("")
        out.append(f"by {name}:")
        out.extend(_table(_TALLY_HEADERS, _tally_rows([(key_label(k), v) for k, v in rows], top), mark))
    width, points = report.timeline()
    if points:
        out.append("")
        out.append(f"agreement over time ({width}h buckets):")
        out.extend(
            _table(
                ("bucket start", "spawns", "agreed", "agree%"),
                [
                    [p.as_dict()["start"], str(p.spawns), str(p.agreed), _pct(rate(p.agreed, p.spawns))]
                    for p in points
                ],
                mark,
            )
        )
    if report.flagged:
        out.append("")
        out.append(banner)
    return "\n".join(out) + "\n"
