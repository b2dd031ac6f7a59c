"""Span attribute keys written by the route-shadow span processor (the span schema).

One table, here, is the source of truth: the attribute tables of docs/instrumenting.md are generated from it
(``python -m otel_route_shadow.shadow.attribute_table``, checked by ``tests/test_attribute_table.py``
against real spans), and the collector configuration test and the chain exporter read it. No key is
a dotted prefix of another (some backends, Phoenix among them, cannot filter on either key of such a
pair). ``CONVENTION_ATTRIBUTES`` are the OpenTelemetry (GenAI) convention attributes a seam span
carries besides its own ``route_shadow.*`` ones, and ``FLAG_EVENT_ATTRIBUTES`` those of the
``feature_flag.evaluation`` event of each seam span (OpenTelemetry's feature-flag conventions).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACCOUNT",
    "ACCOUNTS",
    "ACCOUNTS_OMITTED",
    "ACCOUNTS_RECORDED",
    "AGREED",
    "ATTEMPTS_RECORDED",
    "ATTRIBUTES",
    "CLAIM_MISMATCH",
    "CONTEXT",
    "CONVENTION_ATTRIBUTES",
    "DECISION_ID",
    "DECISION_TRANSPORT",
    "DIVERGENCE",
    "ERROR_TYPE",
    "FINDING",
    "FLAG_ERROR_TYPE",
    "FLAG_EVALUATION",
    "FLAG_EVENT_ATTRIBUTES",
    "FLAG_KEY",
    "FLAG_PROVIDER",
    "FLAG_PROVIDER_NAME",
    "FLAG_REASON",
    "FLAG_SET_ID",
    "FLAG_VALUE",
    "FLAG_VARIANT",
    "FLAG_VERSION",
    "FORBID_DIRECT_BYPASS",
    "GEN_AI_AGENT",
    "GEN_AI_CONVERSATION",
    "GEN_AI_MODEL",
    "GEN_AI_OPERATION",
    "GEN_AI_PROVIDER",
    "GEN_AI_RESPONSE_MODEL",
    "HOST_ERROR_TYPE",
    "HOST_ROLE",
    "LEGACY_ACCOUNT",
    "LEGACY_DETAIL",
    "LEGACY_MECHANISM",
    "LEGACY_MODEL",
    "LEGACY_PROVIDER",
    "MODEL",
    "ORIGIN",
    "OUTCOME",
    "POLICY_ID",
    "POLICY_SOURCE",
    "PRINCIPAL",
    "PROVIDER",
    "REASON",
    "REPO",
    "REPO_IDENTITY_VERSION",
    "REQUEST_FACE",
    "REQUIREMENT",
    "ROLE",
    "RUNG",
    "SEAM",
    "SERVED_ATTEMPTS",
    "SERVED_ATTEMPTS_OMITTED",
    "SERVED_KEYS",
    "SERVED_MODEL",
    "SERVED_PROVIDER",
    "SERVED_SOURCE",
    "SERVED_STATUS",
    "SERVED_WHY",
    "SNAPSHOT_HASH",
    "SNAPSHOT_REVISION",
    "SNAPSHOT_STATE",
    "TIED_POLICIES",
    "TRANSPORT",
    "AttributeSpec",
]

SEAM: Final = "route_shadow.seam"
OUTCOME: Final = "route_shadow.outcome"
REASON: Final = "route_shadow.reason"
POLICY_SOURCE: Final = "route_shadow.policy_source"
RUNG: Final = "route_shadow.rung"
POLICY_ID: Final = "route_shadow.policy_id"
PROVIDER: Final = "route_shadow.provider"
ACCOUNT: Final = "route_shadow.account"
MODEL: Final = "route_shadow.model"
SNAPSHOT_REVISION: Final = "route_shadow.snapshot.revision"
SNAPSHOT_HASH: Final = "route_shadow.snapshot.hash"
SNAPSHOT_STATE: Final = "route_shadow.snapshot.state"
DECISION_ID: Final = "route_shadow.decision_id"
LEGACY_PROVIDER: Final = "route_shadow.legacy.provider"
LEGACY_MODEL: Final = "route_shadow.legacy.model"
LEGACY_ACCOUNT: Final = "route_shadow.legacy.account"
LEGACY_MECHANISM: Final = "route_shadow.legacy.mechanism"
LEGACY_DETAIL: Final = "route_shadow.legacy.detail"
TRANSPORT: Final = "route_shadow.transport"
AGREED: Final = "route_shadow.agreed"
DIVERGENCE: Final = "route_shadow.divergence"
REPO: Final = "route_shadow.repo"
ROLE: Final = "route_shadow.role"
PRINCIPAL: Final = "route_shadow.principal_id"
REQUEST_FACE: Final = "route_shadow.request_face"
REQUIREMENT: Final = "route_shadow.requirement"
CONTEXT: Final = "route_shadow.context"
ERROR_TYPE: Final = "route_shadow.error.type"
HOST_ROLE: Final = "route_shadow.host_role"
CLAIM_MISMATCH: Final = "route_shadow.claim_mismatch"
FINDING: Final = "route_shadow.finding"
FORBID_DIRECT_BYPASS: Final = "route_shadow.forbid_direct_bypass"
TIED_POLICIES: Final = "route_shadow.tied_policies"
DECISION_TRANSPORT: Final = "route_shadow.decision.transport"
REPO_IDENTITY_VERSION: Final = "route_shadow.identity_version"
"""Of the repository identity. Not ``route_shadow.repo_identity_version``: ``route_shadow.repo`` would
be a prefix of it."""
SERVED_STATUS: Final = "route_shadow.served.status"
SERVED_PROVIDER: Final = "route_shadow.served.provider"
SERVED_MODEL: Final = "route_shadow.served.model"
SERVED_SOURCE: Final = "route_shadow.served.source"
SERVED_WHY: Final = "route_shadow.served.why"
SERVED_KEYS: Final = (SERVED_STATUS, SERVED_PROVIDER, SERVED_MODEL, SERVED_SOURCE, SERVED_WHY)
"""The served-route attributes a report counts by, in this order."""
SERVED_ATTEMPTS: Final = "route_shadow.served.attempts"
SERVED_ATTEMPTS_OMITTED: Final = "route_shadow.served.omitted_attempts"
"""Not ``route_shadow.served.attempts_omitted``: ``route_shadow.served.attempts`` would be a prefix of it."""
ATTEMPTS_RECORDED: Final = 8
"""At most this many attempts are recorded (``route_shadow.served.attempts``): the first ones and the
last (the one that served)."""
ACCOUNTS: Final = "route_shadow.verdicts.accounts"
ACCOUNTS_OMITTED: Final = "route_shadow.verdicts.omitted"

ACCOUNTS_RECORDED: Final = 8
"""At most this many account verdicts are recorded (``route_shadow.accounts``), in the resolver's
order (the policy's pool order), so the account it chose is always among them. (Not
``route_shadow.accounts``: ``route_shadow.account`` would be a prefix of it.)"""

GEN_AI_OPERATION: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER: Final = "gen_ai.provider.name"
GEN_AI_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_AGENT: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION: Final = "gen_ai.conversation.id"
HOST_ERROR_TYPE: Final = "error.type"
ORIGIN: Final = "route_shadow.origin"

FLAG_EVALUATION: Final = "feature_flag.evaluation"
"""The event's name (OpenTelemetry semantic conventions, feature flags: release candidate)."""
FLAG_KEY: Final = "feature_flag.key"
FLAG_VARIANT: Final = "feature_flag.result.variant"
FLAG_VALUE: Final = "feature_flag.result.value"
FLAG_REASON: Final = "feature_flag.result.reason"
FLAG_PROVIDER: Final = "feature_flag.provider.name"
FLAG_SET_ID: Final = "feature_flag.set.id"
FLAG_VERSION: Final = "feature_flag.version"
FLAG_ERROR_TYPE: Final = "error.type"
FLAG_PROVIDER_NAME: Final = "otel-route-shadow"
"""``feature_flag.provider.name``: the evaluating provider is this plugin's resolver."""


class AttributeSpec:
    __slots__ = ("description", "key", "type")

    def __init__(self, key: str, type_: str, description: str) -> None:
        self.key = key
        self.type = type_
        self.description = description


ATTRIBUTES: Final[tuple[AttributeSpec, ...]] = (
    AttributeSpec(SEAM, "string", "Name of the instrumented spawn seam (redacted, cut to 256 characters)."),
    AttributeSpec(OUTCOME, "string", "Decision outcome: selected, held or rejected."),
    AttributeSpec(REASON, "string", "Decision reason code."),
    AttributeSpec(POLICY_SOURCE, "string", "managed-policy or legacy-compatibility."),
    AttributeSpec(RUNG, "int", "Precedence rung of the deciding policy (9 = legacy compatibility)."),
    AttributeSpec(POLICY_ID, "string", "Id of the deciding policy, when a managed policy decided."),
    AttributeSpec(PROVIDER, "string", "Provider the resolver chose."),
    AttributeSpec(ACCOUNT, "string", "Account id the resolver chose."),
    AttributeSpec(MODEL, "string", "Model the resolver chose."),
    AttributeSpec(SNAPSHOT_REVISION, "int", "Policy snapshot revision the decision cites."),
    AttributeSpec(SNAPSHOT_HASH, "string", "Content hash of that snapshot."),
    AttributeSpec(SNAPSHOT_STATE, "string", "Snapshot load state: ok, absent, corrupt or loading."),
    AttributeSpec(DECISION_ID, "string", "Content-addressed decision id."),
    AttributeSpec(
        DECISION_TRANSPORT, "string", "Transport the decision would use (gateway for a managed selection)."
    ),
    AttributeSpec(
        FORBID_DIRECT_BYPASS,
        "bool",
        "The deciding policy's forbid_direct_bypass (recorded, not enforced); false under legacy.",
    ),
    AttributeSpec(TIED_POLICIES, "string", "Comma-separated ids of the policies in an equal-precedence tie."),
    AttributeSpec(
        ACCOUNTS,
        "string",
        f"The deciding policy's account verdicts as canonical JSON: a list of at most {ACCOUNTS_RECORDED} "
        "{account_id, provider, eligible, reason} objects, in pool order.",
    ),
    AttributeSpec(ACCOUNTS_OMITTED, "int", "How many account verdicts were left out of that list."),
    AttributeSpec(LEGACY_PROVIDER, "string", "Provider the legacy mechanisms actually used."),
    AttributeSpec(LEGACY_MODEL, "string", "Model the legacy mechanisms actually used."),
    AttributeSpec(LEGACY_ACCOUNT, "string", "Account the legacy mechanisms actually used."),
    AttributeSpec(LEGACY_MECHANISM, "string", "Legacy mechanism that decided the route."),
    AttributeSpec(LEGACY_DETAIL, "string", "What that mechanism did, e.g. provider=zai."),
    AttributeSpec(
        TRANSPORT, "string", "Transport of the route that ran: gateway, harness-direct, direct-http."
    ),
    AttributeSpec(
        AGREED,
        "bool",
        "Whether the resolver's decision agrees with the route that ran (false when a finding says "
        "otherwise).",
    ),
    AttributeSpec(
        DIVERGENCE,
        "string",
        "Divergence code when not agreed (absent when agreed); requirement-defied or served-differs "
        "when only that finding disagrees.",
    ),
    AttributeSpec(
        FINDING,
        "string",
        "Finding codes, comma-separated and sorted: requirement-defied (the route that ran does not "
        "satisfy the spawn's literal model family), served-differs (another route than the one chosen "
        "served the spawn after a fallback). Never suppressed; agreed is then false.",
    ),
    AttributeSpec(
        SERVED_STATUS,
        "string",
        "What served the spawn against the route chosen: same, differs, or unknown (nothing reported; "
        "never agreement).",
    ),
    AttributeSpec(SERVED_PROVIDER, "string", "The provider that served the spawn, as the host reported it."),
    AttributeSpec(SERVED_MODEL, "string", "The model that served the spawn, as the host reported it."),
    AttributeSpec(
        SERVED_SOURCE,
        "string",
        "Where that report came from: response-hook (the seam's hook) or descendant-span (a span of "
        "the run, in process).",
    ),
    AttributeSpec(
        SERVED_WHY,
        "string",
        "Why the served route differs (with differs only): fallback (after a failed attempt, or a "
        "gateway said so: the only disagreement), alias, load-balance (the gateway's model group is "
        "the model asked for) or unknown.",
    ),
    AttributeSpec(
        SERVED_ATTEMPTS,
        "string",
        f"The attempts the gateway or client made, in order, as canonical JSON: a list of at most "
        f"{ATTEMPTS_RECORDED} {{provider, model, error_type}} objects (each field when known), the last "
        "being the one that served.",
    ),
    AttributeSpec(SERVED_ATTEMPTS_OMITTED, "int", "How many attempts were left out of that list."),
    AttributeSpec(
        CLAIM_MISMATCH,
        "string",
        "Comma-separated sorted names (mechanism, transport) the host claimed differently from what "
        "its stages show; the recorded values are the derived ones.",
    ),
    AttributeSpec(REPO, "string", "Canonical owner/repo, or the lossy slug as given."),
    AttributeSpec(
        REPO_IDENTITY_VERSION,
        "string",
        "Repository identity version: canonical or legacy-lossy (may it join a repo policy).",
    ),
    AttributeSpec(
        ROLE,
        "string",
        "Canonical worker role (planner, implementer, reviewer, triager, summarizer); "
        "absent for a loop name such as adr_reviewer, which is a principal.",
    ),
    AttributeSpec(HOST_ROLE, "string", "The host's role string exactly as given (a loop name, say)."),
    AttributeSpec(PRINCIPAL, "string", "Principal (loop) id."),
    AttributeSpec(REQUEST_FACE, "string", "agentic or one-shot."),
    AttributeSpec(REQUIREMENT, "string", "Model requirement as given."),
    AttributeSpec(
        CONTEXT,
        "string",
        "The sanitized route context as canonical JSON (for replay), with the derived legacy mechanism "
        "and transport.",
    ),
    AttributeSpec(ERROR_TYPE, "string", "Type of a contained shadow-path error; the spawn proceeded."),
    AttributeSpec(ORIGIN, "string", "The chain's origin (its log identity); `audit` selects by it."),
)

CONVENTION_ATTRIBUTES: Final[tuple[AttributeSpec, ...]] = (
    AttributeSpec(GEN_AI_OPERATION, "string", "invoke_agent at an agentic seam, chat at a one-shot seam."),
    AttributeSpec(
        GEN_AI_PROVIDER,
        "string",
        "The provider the route that ran was sent to (the legacy route's; what served it is "
        "route_shadow.served.provider).",
    ),
    AttributeSpec(GEN_AI_MODEL, "string", "The model the route that ran asked for, when known."),
    AttributeSpec(
        GEN_AI_RESPONSE_MODEL, "string", "The model that served the spawn, when the host reported it."
    ),
    AttributeSpec(GEN_AI_AGENT, "string", "The principal, else the host's role, else the seam name."),
    AttributeSpec(
        GEN_AI_CONVERSATION,
        "string",
        "The host's conversation id, when its extractor gives one (span only, not in the record).",
    ),
    AttributeSpec(HOST_ERROR_TYPE, "string", "Type of the host's own exception, when it raised."),
)

FLAG_EVENT_ATTRIBUTES: Final[tuple[AttributeSpec, ...]] = (
    AttributeSpec(
        FLAG_KEY,
        "string",
        "The route slot: `route_shadow.route/<repo>/<role or principal>/<request face>` (`-` for none).",
    ),
    AttributeSpec(
        FLAG_VARIANT,
        "string",
        "The managed decision: provider/model (provider alone without a model) when selected, else "
        "the outcome (held, rejected).",
    ),
    AttributeSpec(
        FLAG_VALUE,
        "string",
        "The evaluated value: the route the decision names, the same string as the variant (the "
        "decision's value is a route, and a route is its own name).",
    ),
    AttributeSpec(FLAG_REASON, "string", "The decision's reason code, mapped (table below)."),
    AttributeSpec(FLAG_PROVIDER, "string", f"`{FLAG_PROVIDER_NAME}`."),
    AttributeSpec(FLAG_SET_ID, "string", "Content hash of the policy snapshot the decision cites."),
    AttributeSpec(FLAG_VERSION, "string", "That snapshot's revision."),
    AttributeSpec(
        FLAG_ERROR_TYPE, "string", "When the reason maps to error: why the evaluation failed (table below)."
    ),
)
