"""The figures of one divergence report (:class:`Report`), as :mod:`~otel_route_shadow.analysis.report`
counts them and :func:`~otel_route_shadow.analysis.cells.derive` derives them, and their JSON form
(documented in ``docs/reports.md``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.cohorts import Cohort, cohorts_dict
from otel_route_shadow.analysis.evidence import LogEvidence
from otel_route_shadow.analysis.gaps import MIN_SPAWNS, GapTally
from otel_route_shadow.analysis.groups import GroupSpec, spec_name
from otel_route_shadow.analysis.noise import NoiseTable
from otel_route_shadow.analysis.records import AnalysisResult, flag_rows
from otel_route_shadow.analysis.served import SERVED_STATES, UNKNOWN
from otel_route_shadow.analysis.tally import Tally, rate, sorted_counts
from otel_route_shadow.analysis.timeline import Timeline, TimelinePoint, width_label
from otel_route_shadow.analysis.usage import UsageTable
from otel_route_shadow.analysis.window import format_ns
from otel_route_shadow.core import REQUIREMENT_DEFIED

__all__ = ["BYPASS_DEFINITION", "DEFIED_COUNTS_NOTE", "NO_STORE_NOTE", "Report"]

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
