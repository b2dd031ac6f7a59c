"""The route-shadow span processor: enriches each seam span, at its start, with the decision.

It acts only on spans a route-shadow seam is starting (``PENDING`` holds their observation while
``start_span`` runs, and the span comes from this instrumentation's tracer) and ignores every other
span. Processor exceptions escape into the host call in the current
SDK (opentelemetry-python #5624), so the hook contains its own failures (see ``ShadowRuntime``).
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan

from otel_route_shadow.instrumentation.runtime import PENDING, SCOPE_NAME, ShadowRuntime

__all__ = ["RouteShadowSpanProcessor"]


class RouteShadowSpanProcessor(SpanProcessor):
    """Enrichment happens on start, so the decision is on the span for its whole life. The chain
    record is appended by the seam just before the span ends, sampled or not, so that a failed
    append can still be marked on the span: ``on_end`` has nothing left to do."""

    def __init__(self, runtime: ShadowRuntime | None) -> None:
        self.runtime = runtime

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        observation = PENDING.get()
        if (
            observation is not None
            and observation.runtime is self.runtime
            and span.instrumentation_scope is not None
            and span.instrumentation_scope.name == SCOPE_NAME
        ):
            observation.enrich(span)

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            runtime.checkpoint_now()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
