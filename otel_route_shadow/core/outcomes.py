"""What one decision says about each policy of its snapshot: decided, tied, outranked, or not matched.

For counting, over a chain, which policies decided nothing: a policy of the cited snapshot
that is in none of a decision's sets below did not match that context (or was disabled).
"""

from __future__ import annotations

from dataclasses import dataclass

from otel_route_shadow.core.decision import RouteDecision
from otel_route_shadow.core.vocabulary import ReasonCode

__all__ = ["PolicyOutcomes", "policy_outcomes"]


@dataclass(frozen=True, slots=True)
class PolicyOutcomes:
    """One decision's verdict on the policies it considered. The sets are disjoint."""

    decided: str | None
    """The policy that decided (``decision.policy_id``); None for legacy compatibility, a conflict
    and an unavailable snapshot."""
    tied: tuple[str, ...]
    """The policies of a conflict (``decision.tied_policies``): they matched and none decided."""
    outranked: tuple[str, ...]
    """Policies that matched but lost on rung, priority or id (rows with reason ``outranked``)."""
    refused: tuple[str, ...]
    """Repository-scoped policies that would have matched but the repository identity was not
    canonical (rows with reason ``repo-identity-not-canonical``): they did not match."""

    @property
    def matched(self) -> tuple[str, ...]:
        """Every policy that matched the context: the decider, the tied and the outranked, sorted."""
        found = {*self.tied, *self.outranked}
        if self.decided is not None:
            found.add(self.decided)
        return tuple(sorted(found))


def _ids(decision: RouteDecision, reason: ReasonCode) -> tuple[str, ...]:
    return tuple(sorted(row.policy_id for row in decision.considered if row.reason == reason.value))


def policy_outcomes(decision: RouteDecision) -> PolicyOutcomes:
    """Pure and total. Reads ``policy_id``, ``tied_policies`` and the ``considered`` rows only."""
    return PolicyOutcomes(
        decided=decision.policy_id,
        tied=tuple(sorted(decision.tied_policies)),
        outranked=_ids(decision, ReasonCode.OUTRANKED),
        refused=_ids(decision, ReasonCode.REPO_IDENTITY_NOT_CANONICAL),
    )
