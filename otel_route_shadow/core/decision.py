"""The resolver's answer, with its explanation, and the snapshot it was computed against."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, WrapValidator

from otel_route_shadow.core.canonical import digest
from otel_route_shadow.core.policy import RoutingPolicy
from otel_route_shadow.core.policy_set import EncodedPolicies

__all__ = [
    "DECISION_FIELDS",
    "EMPTY_SET_HASH",
    "AccountVerdict",
    "PolicyConsideration",
    "PolicySnapshot",
    "RouteDecision",
]

DECISION_FIELDS: Final = (
    "outcome",
    "reason",
    "policy_source",
    "rung",
    "policy_id",
    "provider",
    "account",
    "model",
)
"""The fields of a :class:`RouteDecision` that say what was decided: a record carries them, a replay
compares them, and the decision id covers them (with the transport and the tied policies)."""

EMPTY_SET_HASH = digest([])
"""``policy_set_hash`` of the empty set: the hash an absent store reports."""


def _keep_encoded(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """An ``EncodedPolicies`` is kept as it is (its encodings were verified where it was built);
    anything else validates as a tuple of policies."""
    return value if isinstance(value, EncodedPolicies) else tuple(handler(value))


class PolicySnapshot(BaseModel):
    """A policy set at one revision. ``available=False`` is how a corrupt store reaches ``explain``;
    with ``loading`` too, it is a store whose first snapshot is still being read in the background
    (the decision holds with ``snapshot-loading`` instead of ``snapshot-unavailable``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policies: Annotated[Sequence[RoutingPolicy], WrapValidator(_keep_encoded)] = ()
    """A tuple of models, or (a snapshot loaded from the policy store) an ``EncodedPolicies``."""
    revision: int = 0
    content_hash: str = EMPTY_SET_HASH
    available: bool = True
    loading: bool = False


class PolicyConsideration(BaseModel):
    """One policy the resolver looked at, and why it did or did not decide."""

    model_config = ConfigDict(frozen=True)

    policy_id: str
    rung: int
    priority: int
    matched: bool
    reason: str


class AccountVerdict(BaseModel):
    """One account the host can see, and whether the deciding policy could use it."""

    model_config = ConfigDict(frozen=True)

    account_id: str
    provider: str
    eligible: bool
    reason: str


class RouteDecision(BaseModel):
    """Exactly one per (context, snapshot). Carries its own explanation and a content-addressed id."""

    model_config = ConfigDict(frozen=True)

    outcome: str
    reason: str
    policy_source: str
    rung: int | None = None
    policy_id: str | None = None
    provider: str | None = None
    account: str | None = None
    model: str | None = None
    transport: str | None = None
    forbid_direct_bypass: bool = False
    tied_policies: tuple[str, ...] = ()
    considered: tuple[PolicyConsideration, ...] = ()
    policies_excluded: int = 0
    accounts: tuple[AccountVerdict, ...] = ()
    repo: str | None = None
    repo_identity: str | None = None
    """``canonical`` or ``legacy-lossy``; None when the host named no repository."""
    role: str | None = None
    """The canonical worker role, or None when the host's role is not one (a loop name, say)."""
    snapshot_revision: int = 0
    snapshot_hash: str = EMPTY_SET_HASH
    decision_id: str = Field(default="")
