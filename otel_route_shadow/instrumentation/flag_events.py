"""Where each seam's ``feature_flag.evaluation`` goes: a log event, a span event, or both.

The feature-flag conventions (release candidate) define the evaluation as a **log event**: a
LogRecord whose ``event_name`` is ``feature_flag.evaluation``, emitted through a Logger of the host's
LoggerProvider (the ``logger_provider`` keyword of ``instrument()``, else the global one). It is
emitted in the seam span's context, so the record carries the span's trace and span ids. A backend
that takes no logs can have the event on the seam span instead, or both
(``OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT``: ``log``, the default, ``span`` or ``both``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Literal

from opentelemetry import trace
from opentelemetry._logs import Logger, LoggerProvider, LogRecord, get_logger
from opentelemetry.trace import Span

from otel_route_shadow.instrumentation.package import SCHEMA_URL, SCOPE_NAME
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.version import __version__

__all__ = ["FlagEventSink", "FlagEvents"]

FlagEventSink = Literal["log", "span", "both"]


class FlagEvents:
    """The sink of one instrumentation's flag evaluation events."""

    __slots__ = ("logger", "on_span")

    def __init__(
        self, sink: FlagEventSink, logger_provider: LoggerProvider | None = None, schema_url: str = SCHEMA_URL
    ) -> None:
        self.on_span = sink != "log"
        self.logger: Logger | None = (
            None
            if sink == "span"
            else get_logger(SCOPE_NAME, __version__, logger_provider, schema_url=schema_url)
        )

    def emit(self, span: Span, event: Mapping[str, str]) -> None:
        """Emit ``event`` (the evaluation's attributes) for the seam ``span``: on the span when it
        records and the sink says so, and as a log record in the span's context. Raises what the
        host's log processors raise (the runtime contains it)."""
        if self.on_span and span.is_recording():
            span.add_event(attr.FLAG_EVALUATION, event)
        logger = self.logger
        if logger is None:
            return
        enabled = getattr(logger, "enabled", None)  # older APIs lack it
        if enabled is not None and not enabled(event_name=attr.FLAG_EVALUATION):
            return  # no logger provider, or none of its processors takes the event: nothing to build
        logger.emit(
            LogRecord(
                timestamp=time.time_ns(),
                context=trace.set_span_in_context(span),
                event_name=attr.FLAG_EVALUATION,
                attributes=event,
            )
        )
