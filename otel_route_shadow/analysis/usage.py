"""Policy usage: for one snapshot, how many recorded spawns each policy decided, was outranked in, or
never matched, so a policy that decided nothing is visible (issue 18).

Counted from replays (:func:`~otel_route_shadow.analysis.replaying.policy_usage` of each spawn's
decision): a spawn's *decided* policy is the one that decided it; *outranked* are the policies that
matched it but lost to a higher one or to a conflict; every other policy of the snapshot *never
matched* it. A disabled policy is listed with its counts at zero and ``enabled: false``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_route_shadow.analysis.replaying import DECIDED, Usage
from otel_route_shadow.core import PolicySnapshot

__all__ = ["PolicyUse", "UsageTable", "usage_table"]


@dataclass(slots=True)
class PolicyUse:
    """One policy's share of the spawns replayed against its snapshot."""

    policy_id: str
    enabled: bool = True
    decided: int = 0
    outranked: int = 0
    never_matched: int = 0

    @property
    def idle(self) -> bool:
        """An enabled policy that decided no spawn at all."""
        return self.enabled and self.decided == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy_id": self.policy_id,
            "enabled": self.enabled,
            "decided": self.decided,
            "outranked": self.outranked,
            "never_matched": self.never_matched,
            "idle": self.idle,
        }


@dataclass(slots=True)
class UsageTable:
    """Policy usage under one snapshot, over ``spawns`` replayed spawns."""

    revision: int
    content_hash: str
    spawns: int = 0
    policies: list[PolicyUse] = field(default_factory=list)

    @property
    def idle(self) -> list[str]:
        return [use.policy_id for use in self.policies if use.idle]

    def as_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "content_hash": self.content_hash,
            "spawns": self.spawns,
            "idle": self.idle,
            "policies": [use.as_dict() for use in self.policies],
        }

    def lines(self, mark: str) -> list[str]:
        """The text form: one line per policy, the idle ones said so."""
        out = [f"{mark} snapshot revision {self.revision} ({self.spawns} spawns replayed):"]
        for use in self.policies:
            note = "  <- decided nothing" if use.idle else ("  (disabled)" if not use.enabled else "")
            out.append(
                f"{mark}   {use.policy_id}: decided {use.decided}, outranked {use.outranked}, "
                f"never matched {use.never_matched}{note}"
            )
        return out


def usage_table(snapshot: PolicySnapshot, counts: Mapping[Usage, int]) -> UsageTable:
    """Fold ``usage -> spawns`` counts into one row per policy of ``snapshot``, in file order."""
    table = UsageTable(snapshot.revision, snapshot.content_hash, spawns=sum(counts.values()))
    rows = {p.id: PolicyUse(p.id, enabled=p.enabled) for p in snapshot.policies}
    for usage, n in counts.items():
        _count(rows, usage, n)
    for use in rows.values():
        use.never_matched = table.spawns - use.decided - use.outranked if use.enabled else table.spawns
    table.policies = list(rows.values())
    return table


def _count(rows: dict[str, PolicyUse], usage: Iterable[tuple[str, str]], n: int) -> None:
    for policy_id, role in usage:
        use = rows.get(policy_id)
        if use is None:
            continue
        if role == DECIDED:
            use.decided += n
        else:
            use.outranked += n
