"""Span attribute keys written by the route-shadow span processor (the span schema).

One table, here, is the source of truth: the README's attribute table, the collector configuration
test and the chain exporter all read it. No key is a prefix of another (some backends, Phoenix among
them, cannot filter on either key of such a pair).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACCOUNT",
    "AGREED",
    "ATTRIBUTES",
    "CONTEXT",
    "DECISION_ID",
    "DIVERGENCE",
    "ERROR_TYPE",
    "LEGACY_ACCOUNT",
    "LEGACY_DETAIL",
    "LEGACY_MECHANISM",
    "LEGACY_MODEL",
    "LEGACY_PROVIDER",
    "MODEL",
    "NS",
    "ORIGIN",
    "OUTCOME",
    "POLICY_ID",
    "POLICY_SOURCE",
    "PRINCIPAL",
    "PROVIDER",
    "REASON",
    "REPO",
    "REQUEST_FACE",
    "REQUIREMENT",
    "ROLE",
    "RUNG",
    "SEAM",
    "SNAPSHOT_HASH",
    "SNAPSHOT_REVISION",
    "SNAPSHOT_STATE",
    "TRANSPORT",
    "AttributeSpec",
]

NS: Final = "route_shadow"

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
ORIGIN: Final = "route_shadow.origin"


class AttributeSpec:
    __slots__ = ("description", "key", "type")

    def __init__(self, key: str, type_: str, description: str) -> None:
        self.key = key
        self.type = type_
        self.description = description


ATTRIBUTES: Final[tuple[AttributeSpec, ...]] = (
    AttributeSpec(SEAM, "string", "Name of the instrumented spawn seam."),
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
    AttributeSpec(SNAPSHOT_STATE, "string", "Snapshot load state: ok, absent or corrupt."),
    AttributeSpec(DECISION_ID, "string", "Content-addressed decision id."),
    AttributeSpec(LEGACY_PROVIDER, "string", "Provider the legacy mechanisms actually used."),
    AttributeSpec(LEGACY_MODEL, "string", "Model the legacy mechanisms actually used."),
    AttributeSpec(LEGACY_ACCOUNT, "string", "Account the legacy mechanisms actually used."),
    AttributeSpec(LEGACY_MECHANISM, "string", "Legacy mechanism that decided the route."),
    AttributeSpec(LEGACY_DETAIL, "string", "What that mechanism did, e.g. provider=zai."),
    AttributeSpec(
        TRANSPORT, "string", "Transport of the route that ran: gateway, harness-direct, direct-http."
    ),
    AttributeSpec(AGREED, "bool", "Whether the resolver's decision agrees with the route that ran."),
    AttributeSpec(DIVERGENCE, "string", "Divergence code when not agreed (absent when agreed)."),
    AttributeSpec(REPO, "string", "Canonical owner/repo, or the lossy slug as given."),
    AttributeSpec(ROLE, "string", "Role as given by the host."),
    AttributeSpec(PRINCIPAL, "string", "Principal (loop) id."),
    AttributeSpec(REQUEST_FACE, "string", "agentic or one-shot."),
    AttributeSpec(REQUIREMENT, "string", "Model requirement as given."),
    AttributeSpec(CONTEXT, "string", "The sanitized route context as canonical JSON (for replay)."),
    AttributeSpec(ERROR_TYPE, "string", "Type of a contained shadow-path error; the spawn proceeded."),
    AttributeSpec(ORIGIN, "string", "The chain's origin (its log identity); `audit` selects by it."),
)
