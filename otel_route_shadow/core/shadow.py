"""Holding the resolver's decision against the route that actually ran (D6, D7).

A disagreement is often the policy being right and the dial being undocumented, so the comparison
names what differs rather than scoring it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

from otel_route_shadow.core.context import LegacyRoute
from otel_route_shadow.core.decision import RouteDecision
from otel_route_shadow.core.vocabulary import Outcome, PolicySource

__all__ = ["DIVERGENCE_CODES", "ShadowDecision", "compare_routes", "shadow_decision"]

DIVERGENCE_CODES: Mapping[str, str] = MappingProxyType(
    {
        "policy-held": "a managed policy (or an unavailable snapshot) would have held the spawn",
        "policy-rejected": "a managed policy would have refused the spawn",
        "provider-differs": "the policy chose another provider",
        "account-differs": "the policy chose another account of the same provider",
        "model-differs": "the policy chose another model on the same provider",
    }
)


class ShadowDecision(BaseModel):
    """The payload of a shadow observation: the decision, the route that ran, and the comparison."""

    model_config = ConfigDict(frozen=True)

    decision: RouteDecision
    legacy: LegacyRoute
    agreed: bool
    divergence: str | None = None


def compare_routes(decision: RouteDecision, legacy: LegacyRoute) -> tuple[bool, str | None]:
    """Whether the decision agrees with the route that ran, and if not, the first difference.

    Legacy compatibility reports the legacy route itself, so it agrees by construction: a policy gap
    shows up as coverage (``policy_source``), not as disagreement.
    """
    if decision.outcome == Outcome.HELD.value:
        return False, "policy-held"
    if decision.outcome == Outcome.REJECTED.value:
        return False, "policy-rejected"
    if decision.policy_source == PolicySource.LEGACY.value:
        return True, None
    if decision.provider != legacy.provider:
        return False, "provider-differs"
    if decision.model is not None and legacy.model is not None and decision.model != legacy.model:
        return False, "model-differs"
    if decision.account is not None and legacy.account is not None and decision.account != legacy.account:
        return False, "account-differs"
    return True, None


def shadow_decision(decision: RouteDecision, legacy: LegacyRoute) -> ShadowDecision:
    agreed, divergence = compare_routes(decision, legacy)
    return ShadowDecision(decision=decision, legacy=legacy, agreed=agreed, divergence=divergence)
