"""Policy usage: for one snapshot, how many recorded spawns each policy decided, was outranked in, or
never matched, so a policy that decided nothing is visible (issue 18).

Counted from replays (:func:`~otel_route_shadow.analysis.replaying.policy_usage` of each spawn's
decision): a spawn's *decided* policy is the one that decided it; *outranked* are the policies that
matched it but lost to a higher one or to a conflict; every other policy of the snapshot *never
matched* it. A disabled policy is listed with its counts at zero and ``enabled: false``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_route_shadow.analysis.replaying import (
    DECIDED,
    CitedKey,
    CitedLoader,
    CitedSnapshots,
    Mismatch,
    Replayer,
    Unchecked,
    Usage,
    cited_key,
)
from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.shadow import attributes as attr

__all__ = ["CitedUsage", "PolicyUse", "UsageTable", "usage_table"]


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


class CitedUsage:
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

    def absorb(self, other: CitedUsage) -> None:
        """Add another log's counts (its snapshots are looked up in this one's store)."""
        for key, counts in other.counts.items():
            mine = self.counts.setdefault(key, defaultdict(int))
            for usage, n in counts.items():
                mine[usage] += n
        for reason, n in other.not_replayed.items():
            self.not_replayed[reason] = self.not_replayed.get(reason, 0) + n

    def _skip(self, reason: str) -> None:
        self.not_replayed[reason] = self.not_replayed.get(reason, 0) + 1

    def tables(self) -> list[UsageTable]:
        tables = []
        for key, counts in sorted(self.counts.items(), key=lambda item: item[0][0]):
            found = self.cited.lookup(key)
            if isinstance(found, Replayer) and found.snapshot.available:
                tables.append(usage_table(found.snapshot, counts))
        return tables
