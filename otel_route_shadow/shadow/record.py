"""One shadow observation: sanitize, explain, compare, and express it as span attributes.

The span attributes are the observation's only form: the span processor writes them onto the seam
span, and the chain exporter builds the chain record from the very same mapping, so the trace in
the backend and the audit record are one event seen twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from otel_route_shadow.chain import (
    ChainPayloadError,
    PayloadTemplate,
    canonical_bytes,
    sanitize_payload,
)
from otel_route_shadow.core import (
    AccountVerdict,
    PolicyIndex,
    PolicySnapshot,
    RequestFace,
    RouteContext,
    RouteDecision,
    ServedStatus,
    ShadowDecision,
    canonical_json,
    explain,
    reconcile_context,
    redact_text,
    redact_value,
    shadow_decision,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.flag_event import flag_evaluation

__all__ = [
    "RECORD_KIND",
    "RECORD_SLOTS",
    "AttributeValue",
    "ShadowRecord",
    "Spawn",
    "accounts_json",
    "context_json",
    "decision_attributes",
    "host_text",
    "observe",
    "record_payload",
    "record_route_shadow",
    "record_template",
    "record_tokens",
    "recorded_attributes",
    "recorded_text",
    "sanitize_context",
    "sanitize_dumped",
    "shadow_attributes",
    "span_name",
]

AttributeValue = str | int | bool

RECORD_KIND: Final = "route-shadow"
"""``payload.kind`` of a seam observation in the chain."""

GEN_AI_OPERATION: Final = attr.GEN_AI_OPERATION
GEN_AI_PROVIDER: Final = attr.GEN_AI_PROVIDER
GEN_AI_MODEL: Final = attr.GEN_AI_MODEL
GEN_AI_AGENT: Final = attr.GEN_AI_AGENT

_HOST_TEXT_MAX: Final = 256
_TEXT_MAX: Final = 4096


class Spawn(NamedTuple):
    """What an extractor (or ``shadow_spawn``) may give instead of a bare context: the context, and
    the host's conversation id when it has one (``gen_ai.conversation.id``, conditionally required
    by the GenAI conventions when available).

    The conversation id is not a routing input: it stays out of the context, so it does not change
    the content-addressed decision id or defeat the runtime's memo, and it goes on the span only
    (the chain record carries the decision; the trace id joins the two)."""

    context: RouteContext | Mapping[str, Any]
    conversation_id: str | None = None


def host_text(value: object) -> str | None:
    """A host's string for a span attribute (a conversation id, a served model): a non-empty string
    of at most 4096 characters, redacted like every recorded string, then cut to 256 (so no part of
    a credential survives the cut); None for anything else."""
    if not isinstance(value, str) or not value or len(value) > _TEXT_MAX:
        return None
    return recorded_text(value)


def recorded_text(text: str) -> str:
    """A host's string as recorded: made valid UTF-8, redacted like every recorded string, then cut to
    256 (so no part of a credential survives the cut). The seam name is cleaned so once, before its span
    starts, so the span and the chain record carry the same value."""
    clean, _ = redact_text(text.encode("utf-8", "replace").decode("utf-8"))
    return clean[:_HOST_TEXT_MAX]


_RECORDED_PREFIXES: Final = ("route_shadow.", "gen_ai.")
_ONE_SHOT: Final = RequestFace.ONE_SHOT.value


@dataclass(frozen=True, slots=True)
class ShadowRecord:
    """The result of shadowing one spawn. It holds no route a caller could act on. Read-only throughout
    (its mappings are read-only views): the runtime hands one record to every spawn of the same decision,
    so a host changing the record it looks at would change the spans of later spawns."""

    seam: str
    context: RouteContext
    shadow: ShadowDecision
    attributes: Mapping[str, AttributeValue]
    template: PayloadTemplate | None = None
    """The chain payload shape of every span carrying ``attributes`` (:func:`record_template`),
    when the plugin's runtime prepared it for a decision it will record many times."""
    event: Mapping[str, str] | None = None
    """The ``feature_flag.evaluation`` event's attributes (``flag_event.flag_evaluation``)."""


def _strings(value: Any, out: list[str]) -> list[str]:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append(key)
            _strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, out)
    return out


def _replace_lone_surrogates(value: Any) -> Any:
    """Lone surrogates cannot be written as UTF-8: U+FFFD stands in, before anything is hashed."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace_lone_surrogates(item) for item in value]
    return value


def sanitize_dumped(context: RouteContext, dumped: dict[str, Any]) -> tuple[RouteContext, list[str]]:
    """:func:`sanitize_context` for a caller that already holds ``context.model_dump(mode="json")``."""
    try:
        canonical_bytes(dumped)
    except TypeError:
        dumped = _replace_lone_surrogates(dumped)
        context = RouteContext.model_validate(dumped)
    _, hits = redact_text("\x00".join(_strings(dumped, [])))
    if not hits:
        return context, []
    redacted, paths = redact_value(dumped)
    if not paths:
        return context, []
    return RouteContext.model_validate(redacted), paths


def sanitize_context(context: RouteContext) -> tuple[RouteContext, list[str]]:
    """Redact credential-shaped strings before anything is hashed (the decision id included).

    Fast path: every string of the context joined by NUL is searched once. NUL is a boundary for
    every redaction pattern, so any credential in one field is also found in the joined text; only
    then is the context walked field by field (which also yields the redacted paths).
    """
    return sanitize_dumped(context, context.model_dump(mode="json"))


def operation_name(request_face: str) -> str:
    """GenAI operation: an agent run at an agentic seam, a chat completion at a one-shot seam."""
    return "chat" if request_face == _ONE_SHOT else "invoke_agent"


def agent_name(seam: str, context: RouteContext) -> str:
    return context.principal_id or context.role or seam


def span_name(seam: str, context: RouteContext) -> str:
    """Span names per the GenAI conventions: ``invoke_agent {gen_ai.agent.name}`` at an agentic seam;
    ``chat {gen_ai.request.model}`` at a one-shot seam, or plain ``chat`` when the model is unknown
    (the conventions' fallback: the operation name alone)."""
    operation = operation_name(context.request_face)
    if operation == "chat":
        model = context.legacy_route.model
        return f"chat {model}" if model else "chat"
    return f"invoke_agent {agent_name(seam, context)}"


def context_json(context: RouteContext) -> str:
    """The context in canonical JSON: the ``route_shadow.context`` attribute, replayable by ``whatif``.

    The chain's orjson encoder is byte-identical to ``core.canonical_json`` (pinned by its tests)."""
    dumped = context.model_dump(mode="json")
    try:
        return canonical_bytes(dumped).decode("utf-8")
    except TypeError:
        return canonical_json(dumped).decode("utf-8", "replace")


def accounts_json(verdicts: tuple[AccountVerdict, ...]) -> tuple[str | None, int | None]:
    """The decision's account verdicts, bounded: canonical JSON of the first
    :data:`~otel_route_shadow.shadow.attributes.ACCOUNTS_RECORDED`, and how many were left out (None
    when none were). Both None without verdicts (legacy compatibility, a held snapshot)."""
    if not verdicts:
        return None, None
    kept = [verdict.model_dump(mode="json") for verdict in verdicts[: attr.ACCOUNTS_RECORDED]]
    omitted = len(verdicts) - len(kept)
    return canonical_json(kept).decode("utf-8", "replace"), omitted or None


def decision_attributes(decision: RouteDecision) -> dict[str, AttributeValue | None]:
    """The whole decision an auditor needs without a replay (the ``considered`` rows excepted: they
    follow from the recorded context and the cited snapshot)."""
    accounts, omitted = accounts_json(decision.accounts)
    return {
        attr.OUTCOME: decision.outcome,
        attr.REASON: decision.reason,
        attr.POLICY_SOURCE: decision.policy_source,
        attr.RUNG: decision.rung,
        attr.POLICY_ID: decision.policy_id,
        attr.PROVIDER: decision.provider,
        attr.ACCOUNT: decision.account,
        attr.MODEL: decision.model,
        attr.DECISION_TRANSPORT: decision.transport,
        attr.FORBID_DIRECT_BYPASS: decision.forbid_direct_bypass,
        attr.TIED_POLICIES: ",".join(decision.tied_policies) or None,
        attr.ACCOUNTS: accounts,
        attr.ACCOUNTS_OMITTED: omitted,
        attr.SNAPSHOT_REVISION: decision.snapshot_revision,
        attr.SNAPSHOT_HASH: decision.snapshot_hash,
        attr.DECISION_ID: decision.decision_id,
        attr.REPO: decision.repo,
        attr.REPO_IDENTITY_VERSION: decision.repo_identity,
        attr.ROLE: decision.role,
    }


def shadow_attributes(
    seam: str,
    context: RouteContext,
    shadow: ShadowDecision,
    snapshot_state: str,
    encoded_context: str | None = None,
    claim_mismatch: tuple[str, ...] = (),
    origin: str | None = None,
) -> dict[str, AttributeValue]:
    """Every attribute of a seam span; a None value is left out (absent means none).

    ``context`` is the context as explained (its legacy route's mechanism and transport derived from
    its stages); ``claim_mismatch`` names what the host claimed differently.
    """
    legacy = shadow.legacy
    values: dict[str, AttributeValue | None] = {
        GEN_AI_OPERATION: operation_name(context.request_face),
        GEN_AI_PROVIDER: legacy.provider,
        GEN_AI_MODEL: legacy.model,
        GEN_AI_AGENT: agent_name(seam, context),
        attr.SEAM: seam,
        **decision_attributes(shadow.decision),
        attr.SNAPSHOT_STATE: snapshot_state,
        attr.LEGACY_PROVIDER: legacy.provider,
        attr.LEGACY_MODEL: legacy.model,
        attr.LEGACY_ACCOUNT: legacy.account,
        attr.LEGACY_MECHANISM: legacy.mechanism,
        attr.LEGACY_DETAIL: legacy.mechanism_detail,
        attr.TRANSPORT: legacy.transport,
        attr.CLAIM_MISMATCH: ",".join(claim_mismatch) or None,
        attr.AGREED: shadow.agreed,
        attr.DIVERGENCE: shadow.divergence,
        attr.FINDING: shadow.finding,
        attr.SERVED_STATUS: ServedStatus.UNKNOWN.value,
        attr.HOST_ROLE: context.role,
        attr.PRINCIPAL: context.principal_id,
        attr.REQUEST_FACE: context.request_face,
        attr.REQUIREMENT: context.requirement,
        attr.CONTEXT: encoded_context if encoded_context is not None else context_json(context),
        attr.ORIGIN: origin,
    }
    return {key: value for key, value in values.items() if value is not None}


def observe(
    seam: str,
    context: RouteContext,
    snapshot: PolicySnapshot,
    snapshot_state: str = "ok",
    *,
    sanitized: bool = False,
    encoded_context: str | None = None,
    index: PolicyIndex | None = None,
    origin: str | None = None,
) -> ShadowRecord:
    """Sanitize (unless the caller already did), derive the legacy mechanism and transport from the
    stages (D7), resolve and compare. Raises only on a bug.

    A host whose claims contradict its stages is recorded with the derived values and the
    ``route_shadow.claim_mismatch`` flag, never rejected; the recorded context is then the derived
    one, so that a replay of ``route_shadow.context`` explains exactly what was explained here.
    """
    clean = context if sanitized else sanitize_context(context)[0]
    derived, mismatched = reconcile_context(clean)
    if mismatched:
        encoded_context = context_json(derived)
    decision = explain(derived, snapshot, index=index)
    shadow = shadow_decision(decision, derived.legacy_route, derived.requirement)
    # Sanitized by the chain's own rules, so the span carries what the chain record holds.
    attributes, _ = sanitize_payload(
        shadow_attributes(seam, derived, shadow, snapshot_state, encoded_context, mismatched, origin)
    )
    return ShadowRecord(
        seam=seam,
        context=derived,
        shadow=shadow,
        attributes=MappingProxyType(attributes),
        event=MappingProxyType(flag_evaluation(attributes)),
    )


def record_route_shadow(
    seam: str, context: RouteContext, snapshot: PolicySnapshot, snapshot_state: str = "ok"
) -> ShadowRecord | None:
    """The ADR's entry point: a record, or None if the observation could not be made. Never a route,
    never an exception."""
    try:
        return observe(seam, context, snapshot, snapshot_state)
    except Exception:
        return None


RECORD_SLOTS: Final = ("trace_id", "span_id", "start_time_unix_nano", "duration_ns")


def record_template(attributes: Mapping[str, Any]) -> PayloadTemplate | None:
    """The payload of :func:`record_payload` for these attributes as a chain template, its ids,
    start time and duration left as slots (:func:`record_tokens`): the same record bytes, with the
    attributes walked and encoded once instead of on every record. None when the attributes cannot
    be recorded as they are (a value the chain cannot carry; :func:`record_payload` then says why)."""
    try:
        return PayloadTemplate(
            {"kind": RECORD_KIND, "attributes": recorded_attributes(attributes)}, RECORD_SLOTS
        )
    except ChainPayloadError:
        return None


def record_tokens(
    trace_id: int, span_id: int, start_time_unix_nano: int, duration_ns: int
) -> tuple[str, str, str, str]:
    """The slot values of :func:`record_template`, formatted as :func:`record_payload` does."""
    return (
        trace_id.to_bytes(16, "big").hex(),
        span_id.to_bytes(8, "big").hex(),
        str(start_time_unix_nano),
        str(duration_ns),
    )


def recorded_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The span attributes a chain record holds: ``route_shadow.*`` and ``gen_ai.*`` scalars."""
    return {
        key: value
        for key, value in attributes.items()
        if key.startswith(_RECORDED_PREFIXES) and isinstance(value, str | int | bool)
    }


def record_payload(
    trace_id: int,
    span_id: int,
    start_time_unix_nano: int,
    attributes: Mapping[str, Any],
    duration_ns: int | None = None,
) -> dict[str, Any]:
    """The chain payload of a seam span, built from the span's own attribute values.

    The start time and the spawn's duration (from the span's start to the seam's finish, never
    negative; left out when not given, as in a record written before durations were recorded) are
    decimal strings: nanoseconds since the epoch exceed the 2**53 integer range that the chain's
    canonical form allows.
    """
    payload = {
        "kind": RECORD_KIND,
        "trace_id": f"{trace_id:032x}",
        "span_id": f"{span_id:016x}",
        "start_time_unix_nano": str(start_time_unix_nano),
        "attributes": recorded_attributes(attributes),
    }
    if duration_ns is not None:
        payload["duration_ns"] = str(duration_ns)
    return payload
