"""The legacy mechanisms, named rather than laundered (D7).

A seam applies its mechanisms in order (role dial, repo override, fleet ratchet, credit failover);
each stage records where the route stood afterwards. The mechanism that decided a spawn is the last
stage that actually moved the route, not the last one that ran: a repo override that re-states the
dial's provider decided nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from types import MappingProxyType

from otel_route_shadow.core.context import LegacyRoute, LegacyStage, RouteContext
from otel_route_shadow.core.vocabulary import LegacyMechanism, MechanismClass, RequestFace, Transport

__all__ = [
    "CLAIMS",
    "MECHANISM_CLASS",
    "build_legacy_route",
    "classify_legacy_mechanism",
    "derive_transport",
    "mechanism_class",
    "reconcile_context",
    "reconcile_legacy_route",
]

MECHANISM_CLASS: Mapping[str, MechanismClass] = MappingProxyType(
    {
        LegacyMechanism.ROLE_DIAL.value: MechanismClass.POLICY_GAP,
        LegacyMechanism.REPO_OVERRIDE.value: MechanismClass.POLICY_GAP,
        LegacyMechanism.FLEET_RATCHET.value: MechanismClass.TRANSIENT,
        LegacyMechanism.CREDIT_FAILOVER.value: MechanismClass.TRANSIENT,
    }
)
"""The one split of the legacy mechanisms into persistent policy gaps and transient mechanisms."""


def mechanism_class(mechanism: object) -> MechanismClass | None:
    """The class of a recorded mechanism; None for anything that is not one of the four (an old
    record without the field, a host's own name): unknown, never guessed."""
    if not isinstance(mechanism, str):
        return None
    return MECHANISM_CLASS.get(mechanism)


def derive_transport(request_face: str, gateway: bool) -> Transport:
    """Transport follows the request face and the gateway binding, never the provider name.

    The same ``zai`` means the agent CLI pointed at GLM's Anthropic-shaped endpoint at an agentic seam
    (``harness-direct``) and a direct OpenAI-compatible call at a one-shot seam (``direct-http``).
    """
    if gateway:
        return Transport.GATEWAY
    if request_face == RequestFace.AGENTIC.value:
        return Transport.HARNESS_DIRECT
    return Transport.DIRECT_HTTP


def _moved(before: LegacyStage, after: LegacyStage) -> bool:
    return before.provider != after.provider or before.gateway != after.gateway


def classify_legacy_mechanism(stages: Sequence[LegacyStage]) -> LegacyStage | None:
    """Return the last stage that moved the route (its provider, or onto the gateway), else the first.

    The first stage is the dial the spawn started on; with no stages there is nothing to name.
    """
    if not stages:
        return None
    decided = stages[0]
    for previous, current in pairwise(stages):
        if _moved(previous, current):
            decided = current
    return decided


def _detail(stage: LegacyStage) -> str:
    """What a stage did: its own detail, else ``provider=<p>``."""
    return stage.detail if stage.detail is not None else f"provider={stage.provider}"


def build_legacy_route(
    stages: Sequence[LegacyStage], request_face: str, account: str | None = None
) -> LegacyRoute | None:
    """The route that ran, from the stages a seam applied; None without stages."""
    decided = classify_legacy_mechanism(stages)
    if decided is None:
        return None
    final = stages[-1]
    model = next((stage.model for stage in reversed(stages) if stage.model is not None), None)
    return LegacyRoute(
        provider=final.provider,
        model=model,
        account=account,
        transport=derive_transport(request_face, final.gateway).value,
        mechanism=decided.mechanism,
        mechanism_detail=_detail(decided),
        stages=tuple(stages),
    )


CLAIMS: tuple[str, ...] = ("mechanism", "transport")
"""The legacy route's fields the shadow layer derives rather than takes from the host (D7)."""


def reconcile_legacy_route(route: LegacyRoute, request_face: str) -> tuple[LegacyRoute, tuple[str, ...]]:
    """The route with its mechanism and transport derived from its own stages, and the sorted names of
    the host's claims that said otherwise (an extractor cannot launder a mechanism).

    A mechanism that is re-derived brings its stage's detail with it (the claimed detail described
    another mechanism). Without stages nothing can be derived: the claims stand, and nothing is
    flagged.
    """
    decided = classify_legacy_mechanism(route.stages)
    if decided is None:
        return route, ()
    transport = derive_transport(request_face, route.stages[-1].gateway).value
    update: dict[str, str | None] = {}
    if route.mechanism != decided.mechanism:
        update["mechanism"] = decided.mechanism
        update["mechanism_detail"] = _detail(decided)
    if route.transport != transport:
        update["transport"] = transport
    if not update:
        return route, ()
    mismatched = tuple(sorted(name for name in CLAIMS if name in update))
    return route.model_copy(update=update), mismatched


def reconcile_context(context: RouteContext) -> tuple[RouteContext, tuple[str, ...]]:
    """:func:`reconcile_legacy_route` applied to a context's legacy route, at its request face."""
    route, mismatched = reconcile_legacy_route(context.legacy_route, context.request_face)
    if not mismatched:
        return context, ()
    return context.model_copy(update={"legacy_route": route}), mismatched
