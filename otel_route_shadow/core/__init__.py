"""The pure core: vocabulary, policies and the resolver.

Nothing in this package performs I/O, reads a clock, draws randomness, logs, or imports the
OpenTelemetry SDK or any other part of ``otel_route_shadow``; ``tests/test_architecture.py`` fails if
it starts to. Everything else in the project depends on this package, never the reverse.
"""

from otel_route_shadow.core.canonical import canonical_json, digest, digest_bytes
from otel_route_shadow.core.context import Account, LegacyRoute, LegacyStage, RouteContext
from otel_route_shadow.core.decision import (
    EMPTY_SET_HASH,
    AccountVerdict,
    PolicyConsideration,
    PolicySnapshot,
    RouteDecision,
)
from otel_route_shadow.core.identity import (
    RepoIdentity,
    canonical_worker_role,
    canonicalize_repo,
    repo_identity,
)
from otel_route_shadow.core.legacy import (
    CLAIMS,
    MECHANISM_CLASS,
    build_legacy_route,
    classify_legacy_mechanism,
    derive_transport,
    mechanism_class,
    reconcile_context,
    reconcile_legacy_route,
)
from otel_route_shadow.core.outcomes import PolicyOutcomes, policy_outcomes
from otel_route_shadow.core.policy import (
    LEGACY_RUNG,
    WARNING_CODES,
    PolicyProblem,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    matches_overlap,
    parse_policies,
    policy_order_key,
    policy_set_hash,
    precedence_level,
    rung_of_shape,
)
from otel_route_shadow.core.policy_index import PolicyIndex
from otel_route_shadow.core.policy_set import EncodedPolicies
from otel_route_shadow.core.requirements import ModelRequirement, model_provider, parse_requirement
from otel_route_shadow.core.resolver import explain, explain_batch, explain_policies
from otel_route_shadow.core.shadow import (
    DIVERGENCE_CODES,
    FINDINGS,
    REQUIREMENT_DEFIED,
    ShadowDecision,
    compare_routes,
    legacy_finding,
    shadow_decision,
)
from otel_route_shadow.core.validation import DEFAULT_LIMIT_PER_CODE, blocking, validate_policies
from otel_route_shadow.core.vocabulary import (
    PROVIDER_BINDINGS,
    AccountState,
    Capability,
    LegacyMechanism,
    MechanismClass,
    ModelFamily,
    Outcome,
    PolicySource,
    Provider,
    ProviderBinding,
    ReasonCode,
    RepoIdentityVersion,
    RequestFace,
    RequirementKind,
    Transport,
    WorkerRole,
)

__all__ = [
    "CLAIMS",
    "DEFAULT_LIMIT_PER_CODE",
    "DIVERGENCE_CODES",
    "EMPTY_SET_HASH",
    "FINDINGS",
    "LEGACY_RUNG",
    "MECHANISM_CLASS",
    "PROVIDER_BINDINGS",
    "REQUIREMENT_DEFIED",
    "WARNING_CODES",
    "Account",
    "AccountState",
    "AccountVerdict",
    "Capability",
    "EncodedPolicies",
    "LegacyMechanism",
    "LegacyRoute",
    "LegacyStage",
    "MechanismClass",
    "ModelFamily",
    "ModelRequirement",
    "Outcome",
    "PolicyConsideration",
    "PolicyIndex",
    "PolicyOutcomes",
    "PolicyProblem",
    "PolicySnapshot",
    "PolicySource",
    "Provider",
    "ProviderBinding",
    "ReasonCode",
    "RepoIdentity",
    "RepoIdentityVersion",
    "RequestFace",
    "RequirementKind",
    "RouteContext",
    "RouteDecision",
    "RoutingAction",
    "RoutingMatch",
    "RoutingPolicy",
    "ShadowDecision",
    "Transport",
    "WorkerRole",
    "blocking",
    "build_legacy_route",
    "canonical_json",
    "canonical_worker_role",
    "canonicalize_repo",
    "classify_legacy_mechanism",
    "compare_routes",
    "derive_transport",
    "digest",
    "digest_bytes",
    "explain",
    "explain_batch",
    "explain_policies",
    "legacy_finding",
    "matches_overlap",
    "mechanism_class",
    "model_provider",
    "parse_policies",
    "parse_requirement",
    "policy_order_key",
    "policy_outcomes",
    "policy_set_hash",
    "precedence_level",
    "reconcile_context",
    "reconcile_legacy_route",
    "repo_identity",
    "rung_of_shape",
    "shadow_decision",
    "validate_policies",
]
