"""Policy gaps against transient mechanisms, per repo / role / principal, with a readiness verdict.

The ADR's operator must tell a *persistent policy gap* (a per-role dial or a repo override that no
managed policy describes) from a *transient mechanism* (a credit failover or the fleet ratchet that
engaged for a while). The split of mechanisms into the two classes is the core's
(``mechanism_class``); this module counts spawns into it and judges each group.

Records from older chains lack the fields added by issue 15 (``route_shadow.finding``,
``route_shadow.claim_mismatch``, the whole decision): they are read as *unknown*, never as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.tally import rate, sorted_counts
from otel_route_shadow.core.legacy import mechanism_class
from otel_route_shadow.core.shadow import REQUIREMENT_DEFIED
from otel_route_shadow.core.vocabulary import MechanismClass
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "CLAIM_MISMATCH_KEY",
    "DECISION_MARKER_KEY",
    "FINDING_KEY",
    "GAP_DIMENSIONS",
    "NOT_READY",
    "READY",
    "TRANSIENT_ONLY",
    "UNKNOWN",
    "GapTally",
    "Spawn",
]


FINDING_KEY: Final = attr.FINDING
"""A finding on the record, e.g. ``requirement-defied`` (never suppressed)."""
CLAIM_MISMATCH_KEY: Final = attr.CLAIM_MISMATCH
"""Comma-separated names of what the host claimed differently from what was derived."""
DECISION_MARKER_KEY: Final = attr.FORBID_DIRECT_BYPASS
"""Present on every record that carries the whole decision (issue 15); absent on older records."""

GAP_DIMENSIONS: Final = ("repo", "role", "principal")
"""The groups the gap table is given for."""

# Readiness verdicts, each documented where it is defined (and in docs/reports.md).
READY: Final = "ready"
"""Every spawn was decided by a managed policy that agreed with the route that ran."""
TRANSIENT_ONLY: Final = "transient-only"
"""No policy gap: the spawns no managed policy decided followed only a transient mechanism."""
NOT_READY: Final = "not-ready"
"""A persistent policy gap, a requirement defied, bypass traffic or a managed divergence."""
UNKNOWN: Final = "unknown"
"""The records do not say which mechanism ran (an older chain): gaps cannot be told apart."""


@dataclass(frozen=True, slots=True)
class Spawn:
    """The facts of one counted cell of spawns the gap table needs."""

    mechanism: Any
    managed: bool
    agreed: bool
    bypass: bool
    finding: Any
    claim_mismatch: Any
    whole_decision: bool


@dataclass(slots=True)
class GapTally:
    """Spawns of one group by mechanism class, and what stands between the group and policy."""

    spawns: int = 0
    persistent: int = 0
    transient: int = 0
    unknown: int = 0
    gaps: int = 0
    """Persistent-mechanism spawns no managed policy decided: the policy gap itself."""
    uncovered_transient: int = 0
    defied: int = 0
    claim_mismatches: int = 0
    bypass: int = 0
    diverged: int = 0
    recorded: int = 0
    """Spawns whose record carries the whole decision (findings are known for them)."""
    mechanisms: dict[str, int] = field(default_factory=dict)

    def add(self, spawn: Spawn, n: int) -> None:
        self.spawns += n
        self._add_mechanism(spawn, n)
        self.defied += n if spawn.finding == REQUIREMENT_DEFIED else 0
        self.claim_mismatches += n if spawn.claim_mismatch else 0
        self.bypass += n if spawn.bypass else 0
        self.diverged += 0 if spawn.agreed or spawn.finding == REQUIREMENT_DEFIED else n
        self.recorded += n if spawn.whole_decision else 0

    def _add_mechanism(self, spawn: Spawn, n: int) -> None:
        kind = mechanism_class(spawn.mechanism)
        if kind is None:
            self.unknown += n
            return
        self.mechanisms[spawn.mechanism] = self.mechanisms.get(spawn.mechanism, 0) + n
        if kind is MechanismClass.POLICY_GAP:
            self.persistent += n
            self.gaps += 0 if spawn.managed else n
        else:
            self.transient += n
            self.uncovered_transient += 0 if spawn.managed else n

    def verdict(self) -> tuple[str, str]:
        """``(verdict, why)``: one of :data:`READY`, :data:`TRANSIENT_ONLY`, :data:`NOT_READY`,
        :data:`UNKNOWN`, and a sentence with the counts behind it."""
        blockers = self._blockers()
        if blockers:
            return NOT_READY, "; ".join(blockers)
        if self.unknown:
            return UNKNOWN, (
                f"{self.unknown} spawn(s) record no legacy mechanism (an older chain?): "
                "a policy gap cannot be told from a transient mechanism"
            )
        if self.uncovered_transient:
            share = _pct(self.uncovered_transient, self.spawns)
            return TRANSIENT_ONLY, (
                f"no policy gap: {self.uncovered_transient} spawn(s) ({share}) no managed policy decided "
                "followed a transient mechanism only"
            )
        return READY, "every spawn was decided by a managed policy that agrees with the route that ran"

    def _blockers(self) -> list[str]:
        checks = (
            (self.defied, "ran a legacy route that defies its requirement (requirement-defied)"),
            (self.gaps, "followed a role dial or repo override no managed policy decides (policy gap)"),
            (self.bypass, "went direct-http, where no gateway policy can bind them (bypass)"),
            (self.diverged, "are decided differently by policy than the route that ran (divergence)"),
        )
        return [f"{n} spawn(s) ({_pct(n, self.spawns)}) {text}" for n, text in checks if n]

    def as_dict(self) -> dict[str, Any]:
        verdict, why = self.verdict()
        return {
            "spawns": self.spawns,
            "persistent": self.persistent,
            "persistent_share": rate(self.persistent, self.spawns),
            "policy_gap": self.gaps,
            "policy_gap_share": rate(self.gaps, self.spawns),
            "transient": self.transient,
            "transient_share": rate(self.transient, self.spawns),
            "mechanism_unknown": self.unknown,
            "mechanisms": dict(sorted_counts(self.mechanisms)),
            "requirement_defied": self._known(self.defied),
            "claim_mismatches": self._known(self.claim_mismatches),
            "readiness": verdict,
            "why": why,
        }

    def _known(self, count: int) -> int | None:
        """A finding count, or None (unknown) when no record of the group carries the field."""
        return count if self.recorded else None


def _pct(part: int, whole: int) -> str:
    value = rate(part, whole)
    return "-" if value is None else f"{value * 100:.1f}%"
