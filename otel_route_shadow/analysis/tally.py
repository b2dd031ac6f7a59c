"""Counting helpers shared by the report and the what-if replay."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_route_shadow.core import wilson_interval

__all__ = ["Tally", "add_counts", "interval", "rate", "sorted_counts", "top_counts"]


def rate(part: int, whole: int) -> float | None:
    """``part / whole`` rounded to 6 places; None (not 0) when there is nothing to divide."""
    if whole <= 0:
        return None
    return round(part / whole, 6)


def interval(part: int, whole: int) -> list[float] | None:
    """The Wilson 95% interval of ``part / whole`` as ``[low, high]`` rounded to 6 places; None when
    there is nothing to divide."""
    found = wilson_interval(part, whole)
    return None if found is None else [round(found[0], 6), round(found[1], 6)]


def add_counts(counts: dict[Any, int], other: Mapping[Any, int]) -> None:
    """Add ``other``'s counts into ``counts``, key by key."""
    for key, n in other.items():
        counts[key] = counts.get(key, 0) + n


def sorted_counts(counts: Mapping[Any, int]) -> list[tuple[Any, int]]:
    """Largest first; ties by the key's text so output never depends on stream order."""
    return sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))


def top_counts(counts: Mapping[Any, int], n: int) -> list[tuple[Any, int]]:
    return sorted_counts(counts)[: max(n, 0)]


@dataclass(slots=True)
class Tally:
    """Spawns in one group, and what the resolver thought of them.

    ``agreed`` counts records whose ``route_shadow.agreed`` is true; ``managed`` those a managed policy
    decided; ``bypass`` those whose transport is ``direct-http``.
    """

    spawns: int = 0
    agreed: int = 0
    managed: int = 0
    bypass: int = 0
    divergences: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def diverged(self) -> int:
        return self.spawns - self.agreed

    def add(
        self,
        count: int,
        *,
        agreed: bool,
        divergence: str | None,
        outcome: str | None,
        managed: bool,
        bypass: bool,
    ) -> None:
        self.spawns += count
        if agreed:
            self.agreed += count
        elif divergence is not None:
            self.divergences[divergence] = self.divergences.get(divergence, 0) + count
        else:
            self.divergences["(unspecified)"] = self.divergences.get("(unspecified)", 0) + count
        if managed:
            self.managed += count
        if bypass:
            self.bypass += count
        name = outcome if outcome is not None else "(none)"
        self.outcomes[name] = self.outcomes.get(name, 0) + count

    def absorb(self, other: Tally) -> None:
        """Add ``other``'s counts."""
        self.spawns += other.spawns
        self.agreed += other.agreed
        self.managed += other.managed
        self.bypass += other.bypass
        add_counts(self.divergences, other.divergences)
        add_counts(self.outcomes, other.outcomes)

    def as_dict(self, top: int = 3) -> dict[str, Any]:
        return {
            "spawns": self.spawns,
            "agreed": self.agreed,
            "diverged": self.diverged,
            "agreement_rate": rate(self.agreed, self.spawns),
            "agreement_interval": interval(self.agreed, self.spawns),
            "divergence_rate": rate(self.diverged, self.spawns),
            "divergence_interval": interval(self.diverged, self.spawns),
            "managed": self.managed,
            "managed_share": rate(self.managed, self.spawns),
            "bypass": self.bypass,
            "bypass_share": rate(self.bypass, self.spawns),
            "outcomes": dict(sorted_counts(self.outcomes)),
            "top_divergences": [
                {"divergence": code, "count": n} for code, n in top_counts(self.divergences, top)
            ],
        }
