"""The shadow layer (ADR-0139 D6, D7): legacy mechanism, transport, comparison and the record.

Nothing here returns a route to a caller: ``record_route_shadow`` returns a record or None.
"""

from otel_route_shadow.core import (
    Attempt,
    LegacyRoute,
    LegacyStage,
    ServedRoute,
    ShadowDecision,
    build_legacy_route,
    classify_legacy_mechanism,
    compare_routes,
    derive_transport,
)
from otel_route_shadow.shadow import attributes, checkpoint_attributes
from otel_route_shadow.shadow.availability import local_account_availability
from otel_route_shadow.shadow.flag_event import flag_evaluation
from otel_route_shadow.shadow.record import (
    RECORD_KIND,
    ShadowRecord,
    Spawn,
    context_json,
    host_text,
    observe,
    record_payload,
    record_route_shadow,
    record_template,
    record_tokens,
    recorded_text,
    sanitize_context,
    sanitize_dumped,
    shadow_attributes,
    span_name,
)
from otel_route_shadow.shadow.served import (
    ServedRouteError,
    attempts_from_attributes,
    served_attributes,
    served_from_attributes,
    served_from_headers,
    served_route,
)

__all__ = [
    "RECORD_KIND",
    "Attempt",
    "LegacyRoute",
    "LegacyStage",
    "ServedRoute",
    "ServedRouteError",
    "ShadowDecision",
    "ShadowRecord",
    "Spawn",
    "attempts_from_attributes",
    "attributes",
    "build_legacy_route",
    "checkpoint_attributes",
    "classify_legacy_mechanism",
    "compare_routes",
    "context_json",
    "derive_transport",
    "flag_evaluation",
    "host_text",
    "local_account_availability",
    "observe",
    "record_payload",
    "record_route_shadow",
    "record_template",
    "record_tokens",
    "recorded_text",
    "sanitize_context",
    "sanitize_dumped",
    "served_attributes",
    "served_from_attributes",
    "served_from_headers",
    "served_route",
    "shadow_attributes",
    "span_name",
]
