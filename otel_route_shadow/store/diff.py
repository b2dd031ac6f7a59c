"""What changed between two policy snapshots, by policy id and by field.

Policies are matched by id, because the id is what a decision's explanation cites; a renamed policy
therefore shows as one removal and one addition, which is what it is to an auditor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otel_route_shadow.core import PolicySnapshot

__all__ = ["FieldChange", "PolicyChange", "SnapshotDiff", "diff_snapshots"]


@dataclass(frozen=True)
class FieldChange:
    """One leaf that differs; ``path`` is dotted (``action.requirement_map.claude-opus``)."""

    path: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class PolicyChange:
    policy_id: str
    fields: tuple[FieldChange, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"policy_id": self.policy_id, "fields": [field.to_dict() for field in self.fields]}


@dataclass(frozen=True)
class SnapshotDiff:
    from_revision: int
    to_revision: int
    from_hash: str
    to_hash: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[PolicyChange, ...]

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_revision": self.from_revision,
            "to_revision": self.to_revision,
            "from_hash": self.from_hash,
            "to_hash": self.to_hash,
            "identical": self.identical,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [change.to_dict() for change in self.changed],
        }


_MISSING = object()


def _leaves(value: Any, prefix: str) -> dict[str, Any]:
    # Objects are walked; arrays are leaves, because the model stores them as sorted exact sets and a
    # set's change reads better whole than as shifted indexes.
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key in sorted(value):
            flat.update(_leaves(value[key], f"{prefix}.{key}" if prefix else str(key)))
        if not value and prefix:
            flat[prefix] = {}
        return flat
    return {prefix: value}


def _field_changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[FieldChange, ...]:
    old, new = _leaves(before, ""), _leaves(after, "")
    changes = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path, _MISSING), new.get(path, _MISSING)
        if a != b:
            changes.append(FieldChange(path, None if a is _MISSING else a, None if b is _MISSING else b))
    return tuple(changes)


def diff_snapshots(old: PolicySnapshot, new: PolicySnapshot) -> SnapshotDiff:
    before = {policy.id: policy.model_dump(mode="json") for policy in old.policies}
    after = {policy.id: policy.model_dump(mode="json") for policy in new.policies}
    changed = tuple(
        PolicyChange(policy_id, _field_changes(before[policy_id], after[policy_id]))
        for policy_id in sorted(set(before) & set(after))
        if before[policy_id] != after[policy_id]
    )
    return SnapshotDiff(
        from_revision=old.revision,
        to_revision=new.revision,
        from_hash=old.content_hash,
        to_hash=new.content_hash,
        added=tuple(sorted(set(after) - set(before))),
        removed=tuple(sorted(set(before) - set(after))),
        changed=changed,
    )
