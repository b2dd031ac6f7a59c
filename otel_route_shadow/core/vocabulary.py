"""The routing vocabulary, defined once.

Every other module, the policy file format, the chain records and the span attributes use these
values. ADR-0137 and ADR-0138 insist on a single definition: two copies of a role list or an account
state vocabulary disagree sooner or later, and the disagreement reads as a routing bug.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "PROVIDER_BINDINGS",
    "AccountState",
    "Capability",
    "LegacyMechanism",
    "MechanismClass",
    "ModelFamily",
    "Outcome",
    "PolicySource",
    "Provider",
    "ProviderBinding",
    "ReasonCode",
    "RepoIdentityVersion",
    "RequestFace",
    "RequirementKind",
    "ServedSource",
    "ServedStatus",
    "Transport",
    "WorkerRole",
]


class WorkerRole(StrEnum):
    """What a worker does. A loop name such as ``adr_reviewer`` is not a role: policies name loops
    through ``principal_ids``."""

    PLANNER = "planner"
    IMPLEMENTER = "implementer"
    REVIEWER = "reviewer"
    TRIAGER = "triager"
    SUMMARIZER = "summarizer"


class Provider(StrEnum):
    """Who serves the model."""

    ANTHROPIC = "anthropic"
    ZAI = "zai"


class ProviderBinding(StrEnum):
    """What a route resolves to (ADR-0110): a provider reached through the agent harness."""

    ANTHROPIC_HARNESS = "anthropic-harness"
    ZAI_HARNESS = "zai-harness"


PROVIDER_BINDINGS: Mapping[str, Provider] = MappingProxyType(
    {
        ProviderBinding.ANTHROPIC_HARNESS.value: Provider.ANTHROPIC,
        ProviderBinding.ZAI_HARNESS.value: Provider.ZAI,
    }
)
"""Binding name to the provider it routes to (read-only)."""


class AccountState(StrEnum):
    """ADR-0138's account state vocabulary. Only ``available`` accounts are eligible."""

    AVAILABLE = "available"
    EXHAUSTED = "exhausted"
    DISABLED = "disabled"
    UNKNOWN = "unknown"


class RequestFace(StrEnum):
    """How a spawn asks: a CLI harness run (``agentic``) or a single completion call (``one-shot``)."""

    AGENTIC = "agentic"
    ONE_SHOT = "one-shot"


class Transport(StrEnum):
    """How the request travels; derived from the request face and gateway binding, never from the
    provider name alone."""

    GATEWAY = "gateway"
    HARNESS_DIRECT = "harness-direct"
    DIRECT_HTTP = "direct-http"


class LegacyMechanism(StrEnum):
    """The hand-maintained mechanisms, in the order a seam applies them."""

    ROLE_DIAL = "role-dial"
    REPO_OVERRIDE = "repo-override"
    FLEET_RATCHET = "fleet-ratchet"
    CREDIT_FAILOVER = "credit-failover"


class MechanismClass(StrEnum):
    """What kind of gap a legacy mechanism is, for the operator (ADR-0139, Precedent).

    ``policy-gap``: a standing dial no policy describes (a per-role dial, a repo override); it decides
    the same way tomorrow, so a policy should say it. ``transient``: a mechanism that engages and
    lets go (the fleet ratchet, a credit failover); a policy need not describe it. The split of each
    mechanism is :data:`otel_route_shadow.core.legacy.MECHANISM_CLASS`.
    """

    POLICY_GAP = "policy-gap"
    TRANSIENT = "transient"


class RequirementKind(StrEnum):
    NONE = "none"
    LITERAL_FAMILY = "literal-family"
    CAPABILITY = "capability"
    UNRECOGNIZED = "unrecognized"


class ModelFamily(StrEnum):
    """Literal families: satisfied only by an Anthropic model of that family."""

    CLAUDE_OPUS = "claude-opus"
    CLAUDE_SONNET = "claude-sonnet"
    CLAUDE_HAIKU = "claude-haiku"


class Capability(StrEnum):
    """Provider-neutral capabilities: resolved only through an explicit ``requirement_map`` entry."""

    HIGH_REASONING = "high-reasoning"
    FAST = "fast"
    LONG_CONTEXT = "long-context"


class Outcome(StrEnum):
    SELECTED = "selected"
    HELD = "held"
    REJECTED = "rejected"


class PolicySource(StrEnum):
    MANAGED = "managed-policy"
    LEGACY = "legacy-compatibility"


class RepoIdentityVersion(StrEnum):
    CANONICAL = "canonical"
    LEGACY_LOSSY = "legacy-lossy"


class ServedStatus(StrEnum):
    """``route_shadow.served.status``: what served the spawn, against the route chosen."""

    SAME = "same"
    DIFFERS = "differs"
    UNKNOWN = "unknown"


class ServedWhy(StrEnum):
    """``route_shadow.served.why``: why the route that served differs from the route chosen."""

    FALLBACK = "fallback"
    """The gateway or client fell back after a failed attempt: the only disagreement."""
    ALIAS = "alias"
    """The name asked for is a gateway alias (a model group) the same provider serves under another
    model name."""
    LOAD_BALANCE = "load-balance"
    """The name asked for is a gateway model group, and another of its deployments (another provider)
    served."""
    UNKNOWN = "unknown"
    """Nothing says why."""


class ServedSource(StrEnum):
    """``route_shadow.served.source``: where the host's report of the served route came from."""

    RESPONSE_HOOK = "response-hook"
    DESCENDANT_SPAN = "descendant-span"


class ReasonCode(StrEnum):
    """Every reason code the project emits; each is documented in ``docs/core.md``."""

    # From the ADR.
    REPO_IDENTITY_NOT_CANONICAL = "repo-identity-not-canonical"
    NON_CANONICAL_REPO_ID = "non-canonical-repo-id"
    EQUAL_PRECEDENCE_CONFLICT = "equal-precedence-conflict"
    POLICY_CONFLICT = "policy-conflict"
    LITERAL_FAMILY_INCOMPATIBLE = "literal-family-incompatible"
    LITERAL_FAMILY_UNSATISFIABLE = "literal-family-unsatisfiable"
    LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL = "literal-family-mapped-to-foreign-model"
    CAPABILITY_UNMAPPED = "capability-unmapped"
    SNAPSHOT_UNAVAILABLE = "snapshot-unavailable"
    # Decision reasons added here.
    SNAPSHOT_LOADING = "snapshot-loading"
    POLICY_SELECTED = "policy-selected"
    NO_MANAGED_POLICY = "no-managed-policy"
    NO_ELIGIBLE_ACCOUNT = "no-eligible-account"
    REQUIREMENT_UNRECOGNIZED = "requirement-unrecognized"
    MAPPED_MODEL_OUTSIDE_LOCK = "mapped-model-outside-lock"
    UNKNOWN_MODEL = "unknown-model"
    RESOLVER_FAULT = "resolver-fault"
    # Per-policy explanation reasons.
    MATCHED = "matched"
    OUTRANKED = "outranked"
    TIED = "tied"
    POLICY_DISABLED = "policy-disabled"
    REPO_NOT_MATCHED = "repo-not-matched"
    ROLE_NOT_MATCHED = "role-not-matched"
    PRINCIPAL_NOT_MATCHED = "principal-not-matched"
    FACE_NOT_MATCHED = "face-not-matched"
    # Per-account explanation reasons.
    ELIGIBLE = "eligible"
    ACCOUNT_NOT_AVAILABLE = "account-not-available"
    ACCOUNT_NOT_IN_POOL = "account-not-in-pool"
    PROVIDER_LOCKED_OUT = "provider-locked-out"
    PROVIDER_UNKNOWN = "provider-unknown"
    # Validation problems added here.
    DUPLICATE_POLICY_ID = "duplicate-policy-id"
    CREDENTIAL_SHAPED_ID = "credential-shaped-id"
    UNKNOWN_ROLE = "unknown-role"
    UNKNOWN_REQUEST_FACE = "unknown-request-face"
    UNKNOWN_PROVIDER_BINDING = "unknown-provider-binding"
    UNKNOWN_REQUIREMENT = "unknown-requirement"
    MALFORMED_POLICY = "malformed-policy"
    UNREACHABLE_POLICY = "unreachable-policy"
