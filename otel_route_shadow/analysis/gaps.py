"""Policy gaps against transient mechanisms, per repo / role / principal, with a readiness verdict.

The ADR's operator must tell a *persistent policy gap* (a per-role dial or a repo override that no
managed policy describes) from a *transient mechanism* (a credit failover or the fleet ratchet that
engaged for a while). The split of mechanisms into the two classes is the core's
(``mechanism_class``); this module counts spawns into it and judges each group.

The verdict is given on the group's **stable part**: the spawns of decision keys whose legacy route
did not flap in the window (:mod:`~otel_route_shadow.analysis.noise`). Spawns of flapping keys are
counted in the group's composition and judged apart (the report lists the flapping keys), and the
verdict's reasons say how many were left out.

Records from older chains lack the later fields (``route_shadow.finding``,
``route_shadow.claim_mismatch``, the whole decision): they are read as *unknown*, never as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.served import SERVED_DIFFERS
from otel_route_shadow.analysis.tally import add_counts, rate, sorted_counts
from otel_route_shadow.core import REQUIREMENT_DEFIED, MechanismClass, mechanism_class
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "CLAIM_MISMATCH_KEY",
    "DECISION_MARKER_KEY",
    "FINDING_KEY",
    "GAP_DIMENSIONS",
    "MIN_SPAWNS",
    "NOT_ENOUGH",
    "NOT_READY",
    "READY",
    "TRANSIENT_ONLY",
    "UNKNOWN",
    "GapCounts",
    "GapTally",
    "SpawnFacts",
]


FINDING_KEY: Final = attr.FINDING
"""Findings on the record, e.g. ``requirement-defied`` (never suppressed); comma-separated when several."""
CLAIM_MISMATCH_KEY: Final = attr.CLAIM_MISMATCH
"""Comma-separated names of what the host claimed differently from what was derived."""
DECISION_MARKER_KEY: Final = attr.FORBID_DIRECT_BYPASS
"""Present on every record that carries the whole decision; absent on older records."""

GAP_DIMENSIONS: Final = ("repo", "role", "principal")
"""The groups the gap table is given for."""

# Readiness verdicts, each documented where it is defined (and in docs/reports.md).
READY: Final = "ready"
"""Every stable spawn was decided by a managed policy that agreed with the route that ran."""
TRANSIENT_ONLY: Final = "transient-only"
"""No policy gap: the stable spawns no managed policy decided followed only a transient mechanism."""
NOT_READY: Final = "not-ready"
"""A persistent policy gap, a requirement defied, a served route that differs, bypass traffic or a
managed divergence, among the stable spawns."""
UNKNOWN: Final = "unknown"
"""The records do not say which mechanism ran (an older chain), or the group has no stable part."""
NOT_ENOUGH: Final = "not-enough-spawns"
"""No blocker, but too few stable spawns (fewer than the minimum sample) to call the group ready."""
MIN_SPAWNS: Final = 30
"""The default minimum sample of a positive verdict (``--min-spawns``): at 30 spawns that all agree,
the Wilson 95% interval of the agreement rate still reaches down to 88.6%; at 10, to 72.2%."""


@dataclass(frozen=True, slots=True)
class SpawnFacts:
    """The facts of one counted cell of spawns the gap table needs."""

    mechanism: Any
    managed: bool
    agreed: bool
    """After the served route: a spawn served by another route never agrees."""
    bypass: bool
    findings: frozenset[str]
    """The spawn's finding codes, ``served-differs`` when its served route disagrees (a fallback)."""
    claim_mismatch: Any
    whole_decision: bool
    flapping: bool = False
    """The spawn's decision key flaps: it is judged apart from the stable part."""


@dataclass(slots=True)
class GapCounts:
    """Spawns of one part of a group by mechanism class, and what stands between them and policy."""

    spawns: int = 0
    persistent: int = 0
    transient: int = 0
    unknown: int = 0
    gaps: int = 0
    """Persistent-mechanism spawns no managed policy decided: the policy gap itself."""
    uncovered_transient: int = 0
    defied: int = 0
    served_differs: int = 0
    claim_mismatches: int = 0
    bypass: int = 0
    diverged: int = 0
    """Spawns that do not agree for a reason other than a finding: the policy decides otherwise."""
    recorded: int = 0
    """Spawns whose record carries the whole decision (findings are known for them)."""
    mechanisms: dict[str, int] = field(default_factory=dict)

    def add(self, spawn: SpawnFacts, n: int) -> None:
        self.spawns += n
        self._add_mechanism(spawn, n)
        self.defied += n if REQUIREMENT_DEFIED in spawn.findings else 0
        self.served_differs += n if SERVED_DIFFERS in spawn.findings else 0
        self.claim_mismatches += n if spawn.claim_mismatch else 0
        self.bypass += n if spawn.bypass else 0
        explained = REQUIREMENT_DEFIED in spawn.findings or SERVED_DIFFERS in spawn.findings
        self.diverged += 0 if spawn.agreed or explained else n
        self.recorded += n if spawn.whole_decision else 0

    def _add_mechanism(self, spawn: SpawnFacts, n: int) -> None:
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

    def merged(self, other: GapCounts) -> GapCounts:
        total = GapCounts()
        for name in _SUMMED:
            setattr(total, name, getattr(self, name) + getattr(other, name))
        for counts in (self.mechanisms, other.mechanisms):
            add_counts(total.mechanisms, counts)
        return total

    def judge(self) -> tuple[str, list[str]]:
        """The verdict on these spawns and its reasons, the main one first."""
        found = [
            (n, text)
            for n, text in (
                (self.defied, "ran a legacy route that defies its requirement (requirement-defied)"),
                (self.served_differs, "were served by another route than the one chosen (served-differs)"),
                (self.gaps, "followed a role dial or repo override no managed policy decides (policy gap)"),
                (self.bypass, "went direct-http, where no gateway policy can bind them (bypass)"),
                (self.diverged, "are decided differently by policy than the route that ran (divergence)"),
            )
            if n
        ]
        if found:
            found.sort(key=lambda item: -item[0])  # the main reason first; ties keep this order
            return NOT_READY, [
                f"{n} of {self.spawns} spawn(s) ({_pct(n, self.spawns)}) {text}" for n, text in found
            ]
        if self.unknown:
            return UNKNOWN, [
                f"{self.unknown} spawn(s) record no legacy mechanism (an older chain?): "
                "a policy gap cannot be told from a transient mechanism"
            ]
        if self.uncovered_transient:
            share = _pct(self.uncovered_transient, self.spawns)
            return TRANSIENT_ONLY, [
                f"no policy gap: {self.uncovered_transient} of {self.spawns} spawn(s) ({share}) no managed "
                "policy decided followed a transient mechanism only"
            ]
        return READY, ["every spawn was decided by a managed policy that agrees with the route that ran"]


_SUMMED: Final = (
    "spawns",
    "persistent",
    "transient",
    "unknown",
    "gaps",
    "uncovered_transient",
    "defied",
    "served_differs",
    "claim_mismatches",
    "bypass",
    "diverged",
    "recorded",
)


@dataclass(slots=True)
class GapTally:
    """Spawns of one group: the stable part (judged) and the flapping part (shown apart)."""

    stable: GapCounts = field(default_factory=GapCounts)
    flapping: GapCounts = field(default_factory=GapCounts)
    min_spawns: int = MIN_SPAWNS
    """Below this many stable spawns a group with no blocker is :data:`NOT_ENOUGH`, not ready: a
    readiness claim is a statistical one. A blocker is reported whatever the sample (it was seen)."""

    def add(self, spawn: SpawnFacts, n: int) -> None:
        (self.flapping if spawn.flapping else self.stable).add(spawn, n)

    def absorb(self, other: GapTally) -> None:
        """Add ``other``'s spawns (another log's of the same group)."""
        self.stable = self.stable.merged(other.stable)
        self.flapping = self.flapping.merged(other.flapping)

    @property
    def all(self) -> GapCounts:
        """Both parts together: the group's composition."""
        return self.stable.merged(self.flapping)

    @property
    def spawns(self) -> int:
        return self.stable.spawns + self.flapping.spawns

    @property
    def persistent(self) -> int:
        return self.stable.persistent + self.flapping.persistent

    @property
    def transient(self) -> int:
        return self.stable.transient + self.flapping.transient

    @property
    def unknown(self) -> int:
        return self.stable.unknown + self.flapping.unknown

    @property
    def gaps(self) -> int:
        return self.stable.gaps + self.flapping.gaps

    @property
    def uncovered_transient(self) -> int:
        return self.stable.uncovered_transient + self.flapping.uncovered_transient

    @property
    def recorded(self) -> int:
        return self.stable.recorded + self.flapping.recorded

    def reasons(self) -> tuple[str, list[str]]:
        """``(verdict, reasons)``: judged on the stable part, the main reason first; the last reason
        says how many spawns of flapping keys were judged apart."""
        if not self.stable.spawns and self.flapping.spawns:
            return UNKNOWN, [
                f"all {self.flapping.spawns} spawn(s) belong to decision keys whose legacy route flaps: "
                "no stable part to judge (see the flapping keys)"
            ]
        verdict, reasons = self.stable.judge()
        if verdict in (READY, TRANSIENT_ONLY) and self.stable.spawns < self.min_spawns:
            reasons = [
                f"not enough spawns: {self.stable.spawns} stable spawn(s), fewer than the minimum sample of "
                f"{self.min_spawns} (--min-spawns) for a verdict; on these it would read {verdict}: {reasons[0]}"
            ]
            verdict = NOT_ENOUGH
        if self.flapping.spawns:
            reasons.append(
                f"judged on the stable part ({self.stable.spawns} spawn(s)); {self.flapping.spawns} "
                f"spawn(s) ({_pct(self.flapping.spawns, self.spawns)}) of decision keys whose legacy route "
                "flaps are judged apart (see the flapping keys)"
            )
        return verdict, reasons

    def verdict(self) -> tuple[str, str]:
        """``(verdict, why)``: one of :data:`READY`, :data:`TRANSIENT_ONLY`, :data:`NOT_READY`,
        :data:`UNKNOWN`, :data:`NOT_ENOUGH`, and a sentence with the counts behind it."""
        verdict, reasons = self.reasons()
        return verdict, "; ".join(reasons)

    def as_dict(self) -> dict[str, Any]:
        every = self.all
        verdict, reasons = self.reasons()
        return {
            "spawns": every.spawns,
            "persistent": every.persistent,
            "persistent_share": rate(every.persistent, every.spawns),
            "policy_gap": every.gaps,
            "policy_gap_share": rate(every.gaps, every.spawns),
            "transient": every.transient,
            "transient_share": rate(every.transient, every.spawns),
            "mechanism_unknown": every.unknown,
            "mechanisms": dict(sorted_counts(every.mechanisms)),
            "requirement_defied": self._known(every.defied),
            "served_differs": every.served_differs,
            "claim_mismatches": self._known(every.claim_mismatches),
            "stable_spawns": self.stable.spawns,
            "flapping_spawns": self.flapping.spawns,
            "readiness": verdict,
            "min_spawns": self.min_spawns,
            "why": "; ".join(reasons),
            "reasons": reasons,
        }

    def _known(self, count: int) -> int | None:
        """A finding count, or None (unknown) when no record of the group carries the field."""
        return count if self.recorded else None


def _pct(part: int, whole: int) -> str:
    value = rate(part, whole)
    return "-" if value is None else f"{value * 100:.1f}%"
