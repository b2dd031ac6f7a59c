"""Holding the resolver's decision against the route that actually ran (D6, D7).

A disagreement is often the policy being right and the dial being undocumented, so the comparison
names what differs rather than scoring it. Separately from the comparison, a legacy route that does
not satisfy the spawn's own model requirement is a finding (D4, last paragraph): the divergence
signal the shadow phase exists to produce, reported and never suppressed.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

from otel_route_shadow.core.context import LegacyRoute
from otel_route_shadow.core.decision import RouteDecision
from otel_route_shadow.core.requirements import parse_requirement
from otel_route_shadow.core.served import SERVED_DIFFERS
from otel_route_shadow.core.vocabulary import Outcome, PolicySource, RequirementKind

__all__ = [
    "DIVERGENCE_CODES",
    "FINDINGS",
    "REQUIREMENT_DEFIED",
    "ShadowDecision",
    "compare_routes",
    "legacy_finding",
    "shadow_decision",
]

REQUIREMENT_DEFIED = "requirement-defied"

DIVERGENCE_CODES: Mapping[str, str] = MappingProxyType(
    {
        "policy-held": "a managed policy (or an unavailable snapshot) would have held the spawn",
        "policy-rejected": "a managed policy would have refused the spawn",
        "provider-differs": "the policy chose another provider",
        "account-differs": "the policy chose another account of the same provider",
        "model-differs": "the policy chose another model on the same provider",
        REQUIREMENT_DEFIED: "the decision agrees, but the route that ran defies the spawn's literal "
        "model family (a finding, see FINDINGS)",
        SERVED_DIFFERS: "the decision agrees, but the spawn was served by another route than the one "
        "chosen (a finding, see FINDINGS)",
    }
)

FINDINGS: Mapping[str, str] = MappingProxyType(
    {
        REQUIREMENT_DEFIED: "the route that ran does not satisfy the spawn's literal model family "
        "(a claude-opus request served by GLM after a credit failover, say)",
        SERVED_DIFFERS: "the route that served the spawn is not the route its legacy mechanism chose "
        "(a gateway or provider client fell back on its own; recorded when the seam span ends, from "
        "what the host reported: core.served)",
    }
)
"""What the shadow layer finds in the route that ran, whatever the decision says."""


class ShadowDecision(BaseModel):
    """The payload of a shadow observation: the decision, the route that ran, and the comparison."""

    model_config = ConfigDict(frozen=True)

    decision: RouteDecision
    legacy: LegacyRoute
    agreed: bool
    divergence: str | None = None
    finding: str | None = None
    """A code of :data:`FINDINGS`, or None. Records made before findings existed have none."""


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


def legacy_finding(requirement: str | None, legacy: LegacyRoute) -> str | None:
    """``requirement-defied`` when the route that ran does not satisfy a literal family the spawn asked
    for by name (D4: the rule binds what a policy may resolve to; what legacy did is reported).

    Only a literal family is judged: any model of a known provider satisfies a capability, an
    unrecognised requirement cannot be read, and a route whose model the host did not give is not
    known to defy anything.
    """
    parsed = parse_requirement(requirement)
    if parsed.kind is not RequirementKind.LITERAL_FAMILY or legacy.model is None:
        return None
    return None if parsed.satisfied_by(legacy.model) else REQUIREMENT_DEFIED


def shadow_decision(
    decision: RouteDecision, legacy: LegacyRoute, requirement: str | None = None
) -> ShadowDecision:
    """The comparison and the finding. A finding is never suppressed: it makes ``agreed`` false, and
    names the divergence when the comparison found no other difference."""
    agreed, divergence = compare_routes(decision, legacy)
    finding = legacy_finding(requirement, legacy)
    if finding is not None:
        agreed = False
        divergence = divergence or finding
    return ShadowDecision(
        decision=decision, legacy=legacy, agreed=agreed, divergence=divergence, finding=finding
    )
