"""The route-shadow span processor: enriches each seam span, at its start, with the decision.

It acts only on spans started by a route-shadow seam (they carry their observation in the parent
context) and ignores every other span. Processor exceptions escape into the host call in the current
SDK (opentelemetry-python #5624), so the hook contains its own failures (see ``ShadowRuntime``).
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan

from otel_route_shadow.instrumentation.runtime import OBSERVATION_KEY, SeamObservation, ShadowRuntime

__all__ = ["RouteShadowSpanProcessor"]


class RouteShadowSpanProcessor(SpanProcessor):
    """Enrichment happens on start, so the decision is on the span for its whole life. The chain
    record is appended by the seam just before the span ends, sampled or not, so that a failed
    append can still be marked on the span: ``on_end`` has nothing left to do."""

    def __init__(self, runtime: ShadowRuntime | None) -> None:
        self.runtime = runtime

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        if self.runtime is None or parent_context is None:
            return
        observation = otel_context.get_value(OBSERVATION_KEY, parent_context)
        if isinstance(observation, SeamObservation) and observation.runtime is self.runtime:
            observation.enrich(span)

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        self.runtime = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
