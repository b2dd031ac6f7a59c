"""The legacy mechanisms, named rather than laundered (D7).

A seam applies its mechanisms in order (role dial, repo override, fleet ratchet, credit failover);
each stage records where the route stood afterwards. The mechanism that decided a spawn is the last
stage that actually moved the route, not the last one that ran: a repo override that re-states the
dial's provider decided nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from otel_route_shadow.core.context import LegacyRoute, LegacyStage
from otel_route_shadow.core.vocabulary import RequestFace, Transport

__all__ = ["build_legacy_route", "classify_legacy_mechanism", "derive_transport"]


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
        mechanism_detail=decided.detail if decided.detail is not None else f"provider={decided.provider}",
        stages=tuple(stages),
    )
