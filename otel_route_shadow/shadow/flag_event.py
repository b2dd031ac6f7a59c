"""The ``feature_flag.evaluation`` event of a seam span: the route decision in the shape of
OpenTelemetry's feature-flag conventions (release candidate), which backends already chart.

No convention exists for a routing decision; the feature-flag evaluation is the closest standard
shape. The route slot is the flag, the managed decision its variant, the policy snapshot its flag set
and version. The event is built from a record's span attributes (already sanitized), once per
decision record, and emitted when the seam span starts (as a log event in the span's context, or on
the span: ``instrumentation/flag_events.py``); the chain record does not repeat it (its attributes
carry the same facts).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from otel_route_shadow.core import Outcome, ReasonCode
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "FLAG_KEY_PREFIX",
    "FLAG_REASONS",
    "REASONS_NOT_USED",
    "UNMAPPED",
    "flag_evaluation",
    "flag_key",
    "flag_reason",
]

FLAG_KEY_PREFIX: Final = "route_shadow.route"
NONE: Final = "-"

_MATCH: Final = ("targeting_match", None)
_GENERAL_ERROR: Final = ("error", "general")

FLAG_REASONS: Mapping[str, tuple[str, str | None]] = MappingProxyType(
    {
        ReasonCode.POLICY_SELECTED.value: _MATCH,
        ReasonCode.NO_MANAGED_POLICY.value: ("default", None),
        ReasonCode.SNAPSHOT_LOADING.value: ("error", "provider_not_ready"),
        ReasonCode.SNAPSHOT_UNAVAILABLE.value: _GENERAL_ERROR,
        ReasonCode.RESOLVER_FAULT.value: _GENERAL_ERROR,
        ReasonCode.POLICY_CONFLICT.value: _GENERAL_ERROR,
        ReasonCode.NO_ELIGIBLE_ACCOUNT.value: _MATCH,
        ReasonCode.CAPABILITY_UNMAPPED.value: _MATCH,
        ReasonCode.REQUIREMENT_UNRECOGNIZED.value: _MATCH,
        ReasonCode.UNKNOWN_MODEL.value: _MATCH,
        ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK.value: _MATCH,
        ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL.value: _MATCH,
        ReasonCode.LITERAL_FAMILY_UNSATISFIABLE.value: _MATCH,
        ReasonCode.UNKNOWN_PROVIDER_BINDING.value: _MATCH,
    }
)
"""Decision reason code -> (``feature_flag.result.reason``, ``error.type`` or None). A policy that
matched and decided (selected, or held or rejected by its own rules) is ``targeting_match``; legacy
compatibility (no policy claims the spawn, the legacy route stands) is ``default``; a decision the
resolver could not make from its policies (a snapshot still loading or unusable, a conflict, a fault)
is ``error``, with the conventions' ``error.type``."""

UNMAPPED: Final = ("unknown", None)
"""Any reason code the table does not name (a record from a newer resolver, say)."""

REASONS_NOT_USED: Mapping[str, str] = MappingProxyType(
    {
        "static": "every decision is evaluated against the spawn's context",
        "split": "nothing is assigned at random",
        "cached": "a memoised decision is the exact decision for its context and snapshot, not a "
        "possibly older one",
        "disabled": "a disabled policy is skipped; with the kill switch on there is no span",
        "stale": "a decision cites the snapshot it used; whether a newer one was being read is not "
        "part of the decision",
    }
)
"""The conventions' reasons no decision maps to, and why."""


def flag_reason(reason: Any) -> tuple[str, str | None]:
    """``feature_flag.result.reason`` and ``error.type`` (or None) of a decision reason code."""
    return FLAG_REASONS.get(reason, UNMAPPED) if isinstance(reason, str) else UNMAPPED


def _part(value: Any) -> str:
    return value if isinstance(value, str) and value else NONE


def flag_key(attributes: Mapping[str, Any]) -> str:
    """``route_shadow.route/<repo>/<role or principal>/<request face>``: the canonical worker role,
    else the principal (a loop name), else ``-``; ``-`` for a repository or face not given."""
    who = attributes.get(attr.ROLE) or attributes.get(attr.PRINCIPAL)
    return "/".join(
        (
            FLAG_KEY_PREFIX,
            _part(attributes.get(attr.REPO)),
            _part(who),
            _part(attributes.get(attr.REQUEST_FACE)),
        )
    )


def _variant(attributes: Mapping[str, Any]) -> str:
    outcome = attributes.get(attr.OUTCOME)
    if outcome != Outcome.SELECTED.value:
        return _part(outcome)
    provider, model = _part(attributes.get(attr.PROVIDER)), attributes.get(attr.MODEL)
    return f"{provider}/{model}" if isinstance(model, str) and model else provider


def flag_evaluation(attributes: Mapping[str, Any]) -> dict[str, str]:
    """The event's attributes for a decision record's span attributes."""
    reason, error_type = flag_reason(attributes.get(attr.REASON))
    variant = _variant(attributes)
    event = {
        attr.FLAG_KEY: flag_key(attributes),
        attr.FLAG_VARIANT: variant,
        attr.FLAG_VALUE: variant,
        attr.FLAG_REASON: reason,
        attr.FLAG_PROVIDER: attr.FLAG_PROVIDER_NAME,
    }
    snapshot_hash, revision = attributes.get(attr.SNAPSHOT_HASH), attributes.get(attr.SNAPSHOT_REVISION)
    if isinstance(snapshot_hash, str) and snapshot_hash:
        event[attr.FLAG_SET_ID] = snapshot_hash
    if isinstance(revision, int) and not isinstance(revision, bool):
        event[attr.FLAG_VERSION] = str(revision)
    if error_type is not None:
        event[attr.FLAG_ERROR_TYPE] = error_type
    return event
