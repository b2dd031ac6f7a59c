"""What a what-if replay counts: how a candidate's decision differs from the recorded one.

A *change* is a record whose candidate decision differs from its recorded decision in any of
:data:`DECISION_FIELDS` (the decision id always differs between snapshots, so it is not compared). It
is reported as a :data:`Transition` of (outcome, provider, reason), recorded -> candidate, with the names
of the other fields that changed (a change of rung or account alone is not a transition to itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.replaying import Replayed
from otel_route_shadow.analysis.tally import interval, rate, top_counts
from otel_route_shadow.core import DECISION_FIELDS

__all__ = [
    "FIELD_KEYS",
    "ChangeKey",
    "ChangeTally",
    "Fields",
    "Transition",
    "change",
    "transition_dict",
]

FIELD_KEYS: Final = tuple(f"route_shadow.{name}" for name in DECISION_FIELDS)
"""The span attribute of each of :data:`DECISION_FIELDS` (``route_shadow.<field>``), in the same order."""
_OUTCOME_I, _REASON_I, _PROVIDER_I = map(DECISION_FIELDS.index, ("outcome", "reason", "provider"))
_NAMED: Final = frozenset(("outcome", "reason", "provider"))

Fields = tuple[Any, ...]
Transition = tuple[Any, ...]
"""(outcome before, after, provider before, after, reason before, after, the other fields changed)."""
ChangeKey = tuple[Transition | None, tuple[str, ...], bool]
"""(transition or None when nothing changed, the names of the fields that differ, agreed after)."""


@dataclass(slots=True)
class ChangeTally:
    """Replayed records in one group and how many of them the candidate would decide differently."""

    replayed: int = 0
    changed: int = 0
    agreed_before: int = 0
    agreed_after: int = 0
    transitions: dict[Transition, int] = field(default_factory=dict)

    def add(self, n: int, change: ChangeKey, was_agreed: bool) -> None:
        transition, _changed, now_agreed = change
        self.replayed += n
        self.agreed_before += n if was_agreed else 0
        self.agreed_after += n if now_agreed else 0
        if transition is not None:
            self.changed += n
            self.transitions[transition] = self.transitions.get(transition, 0) + n

    def as_dict(self, top: int = 3) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "changed": self.changed,
            "change_rate": rate(self.changed, self.replayed),
            "change_interval": interval(self.changed, self.replayed),
            "agreement_rate_before": rate(self.agreed_before, self.replayed),
            "agreement_interval_before": interval(self.agreed_before, self.replayed),
            "agreement_rate_after": rate(self.agreed_after, self.replayed),
            "agreement_interval_after": interval(self.agreed_after, self.replayed),
            "top_changes": [{**transition_dict(t), "count": n} for t, n in top_counts(self.transitions, top)],
        }


def transition_dict(transition: Transition) -> dict[str, Any]:
    out_b, out_a, prov_b, prov_a, reason_b, reason_a, also = transition
    return {
        "outcome": {"before": out_b, "after": out_a},
        "provider": {"before": prov_b, "after": prov_a},
        "reason": {"before": reason_b, "after": reason_a},
        "also_changed": list(also),
    }


def change(recorded: Fields, after: Replayed, agreed_after: bool) -> ChangeKey:
    """How the candidate's decision differs from the recorded one (``agreed_after``: the candidate
    agrees with the route that ran, the served route considered)."""
    fields = after.fields
    if fields == recorded:
        return (None, (), agreed_after)
    changed = tuple(name for name, a, b in zip(DECISION_FIELDS, recorded, fields, strict=True) if a != b)
    transition = (
        recorded[_OUTCOME_I],
        fields[_OUTCOME_I],
        recorded[_PROVIDER_I],
        fields[_PROVIDER_I],
        recorded[_REASON_I],
        fields[_REASON_I],
        tuple(name for name in changed if name not in _NAMED),
    )
    return (transition, changed, agreed_after)
