"""The route-shadow span processor: follows the spans of an open seam's run, and is the provider's
way into the runtime's one way out.

The seam puts its decision on its span itself, as the span starts (``SeamObservation``): the processor
never sees an observation. While a seam span is open, ``on_start`` and ``on_end`` follow the spans of
its run, for what served it (``served.Lineage``). Processor exceptions escape into the host call in the
current SDK (opentelemetry-python #5624), so the hooks contain their own failures.

It is all the host's tracer provider gets from us, and the SDK cannot remove a processor again: at
uninstrument ``detach`` turns it into a no-op for good (it forwards nothing and holds nothing, not
even its runtime), and the next ``instrument()`` adds a new one. The provider's ``shutdown`` closes
the runtime (``ShadowRuntime.close``: everything the instrumentation started, in order).
"""

from __future__ import annotations

from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.trace import Span

from otel_route_shadow.instrumentation.served import Lineage

__all__ = ["RouteShadowSpanProcessor"]


class _Runtime(Protocol):
    """What the processor reads of its runtime (``ShadowRuntime``)."""

    @property
    def lineage(self) -> Lineage: ...

    def contain(self, exc: BaseException, where: str, span: Span | None, *, loud: bool) -> None: ...

    def close(self) -> None: ...


class RouteShadowSpanProcessor(SpanProcessor):
    """Follows the spans of an open seam span's run (``served.Lineage``); closes the runtime when the
    provider shuts down."""

    def __init__(self, runtime: _Runtime) -> None:
        self._runtime: _Runtime | None = runtime

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        runtime = self._runtime
        if runtime is not None and runtime.lineage.spans:  # a seam span is open: follow what starts under it
            try:
                runtime.lineage.started(span)
            except Exception as exc:
                runtime.contain(exc, "served", None, loud=False)

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
        """The host's provider shuts down: close the runtime (which detaches this processor)."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
