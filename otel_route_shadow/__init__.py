"""otel-route-shadow: shadow LLM-agent routing with OpenTelemetry.

The pure resolver lives in :mod:`otel_route_shadow.core`; the policy snapshot store in
:mod:`otel_route_shadow.store`; the hash-linked decision chain in :mod:`otel_route_shadow.chain`; the
OpenTelemetry glue in :mod:`otel_route_shadow.instrumentation`.
"""

from otel_route_shadow.core import (
    Account,
    LegacyRoute,
    LegacyStage,
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    ShadowDecision,
    canonical_worker_role,
    canonicalize_repo,
    classify_legacy_mechanism,
    explain,
    explain_batch,
    precedence_level,
    validate_policies,
)
from otel_route_shadow.version import __version__

__all__ = [
    "Account",
    "LegacyRoute",
    "LegacyStage",
    "PolicySnapshot",
    "RouteContext",
    "RouteDecision",
    "RoutingAction",
    "RoutingMatch",
    "RoutingPolicy",
    "ShadowDecision",
    "__version__",
    "canonical_worker_role",
    "canonicalize_repo",
    "classify_legacy_mechanism",
    "explain",
    "explain_batch",
    "precedence_level",
    "validate_policies",
]
