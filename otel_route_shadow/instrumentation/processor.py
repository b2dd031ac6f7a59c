"""The route-shadow span processor: enriches each seam span, at its start, with the decision.

It acts only on spans a route-shadow seam is starting (``PENDING`` holds their observation while
``start_span`` runs, and the span comes from this instrumentation's tracer) and ignores every other
span. Processor exceptions escape into the host call in the current SDK (opentelemetry-python
#5624), so the hook contains its own failures (see ``ShadowRuntime``).

It is all the host's tracer provider gets from us, and the SDK cannot remove a processor again: at
uninstrument ``detach`` turns it into a no-op for good (it forwards nothing and holds nothing, not
even its runtime), and the next ``instrument()`` adds a new one.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan

from otel_route_shadow.instrumentation.package import SCOPE_NAME

if TYPE_CHECKING:
    from otel_route_shadow.instrumentation.runtime import SeamObservation, ShadowRuntime

__all__ = ["PENDING", "RouteShadowSpanProcessor"]

PENDING: Final[ContextVar[SeamObservation | None]] = ContextVar("route_shadow_pending", default=None)
"""The observation whose span is being started right now, in this thread or task: set by
``ShadowRuntime.begin`` only around its ``start_span`` call, read by ``on_start`` (which also checks
the span came from this instrumentation's tracer, and the observation from this processor's runtime)."""


class RouteShadowSpanProcessor(SpanProcessor):
    """Enrichment happens on start, so the decision is on the span for its whole life. The chain
    record is appended by the seam just before the span ends, sampled or not, so that a failed
    append can still be marked on the span. While a seam span is open, ``on_start`` and ``on_end``
    also follow the spans of its run, for what served it (``served.Lineage``)."""

    def __init__(self, runtime: ShadowRuntime) -> None:
        self._runtime: ShadowRuntime | None = runtime

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        runtime = self._runtime
        if runtime is None:
            return
        if runtime.lineage.spans:  # a seam span is open: follow what starts under it
            try:
                runtime.lineage.started(span)
            except Exception as exc:
                runtime.contain(exc, "served", None, loud=False)
        observation = PENDING.get()
        if (
            observation is not None
            and observation.runtime is runtime
            and span.instrumentation_scope is not None
            and span.instrumentation_scope.name == SCOPE_NAME
        ):
            observation.enrich(span)

    def on_end(self, span: ReadableSpan) -> None:
        """A span that ran under an open seam span may say what served it (``served.Lineage``)."""
        runtime = self._runtime
        if runtime is not None and runtime.lineage.spans:
            try:
                runtime.lineage.ended(span)
            except Exception as exc:
                runtime.contain(exc, "served", None, loud=False)

    def detach(self) -> None:
        """From now on a no-op that holds nothing (uninstrument: the SDK cannot remove a processor)."""
        self._runtime = None

    def shutdown(self) -> None:
        """The host's provider shuts down: checkpoint what the chain holds, then detach."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.checkpoint_now()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
