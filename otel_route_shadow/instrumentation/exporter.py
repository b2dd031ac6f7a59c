"""The chain exporter: each seam span becomes one record in the hash-linked decision chain.

The record is built from the span's own ``route_shadow.*`` and ``gen_ai.*`` attribute values, so the
trace in the backend and the chain record are the same event. Completeness must not depend on trace
sampling, so the route-shadow processor hands seam spans to this exporter itself (sampled or not)
instead of relying on the SDK's simple or batch processors, which skip unsampled spans.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_route_shadow.chain import PayloadTemplate, RoutingAuditLog
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.record import record_payload, record_tokens
from otel_route_shadow.tlog import Checkpointer

__all__ = ["RouteShadowChainExporter"]


class RouteShadowChainExporter(SpanExporter):
    """Appends seam spans to a decision chain. Non-seam spans are ignored."""

    def __init__(
        self,
        chain_path: str | Path,
        durability: str = "flush",
        hold_ms: int = 0,
        checkpointer: Checkpointer | None = None,
    ) -> None:
        self._path = Path(chain_path)
        self.checkpointer = checkpointer
        """Told of every appended record (``after_append``: cheap unless a checkpoint is due, never raises)."""
        self._durability = durability
        self._hold_ns = hold_ms * 1_000_000
        self._log: RoutingAuditLog | None = None
        self._lock = threading.Lock()
        self._shutdown = False

    @property
    def chain_path(self) -> Path:
        return self._path

    def _audit_log(self) -> RoutingAuditLog:
        log = self._log
        if log is None:
            with self._lock:
                if self._log is None:
                    self._path.parent.mkdir(parents=True, exist_ok=True)
                    self._log = RoutingAuditLog(
                        self._path,
                        durability=self._durability,  # type: ignore[arg-type]
                        hold_ns=self._hold_ns,
                    )
                log = self._log
        return log

    def append(
        self, trace_id: int, span_id: int, start_time_unix_nano: int, attributes: Mapping[str, Any]
    ) -> None:
        """Append one seam event; raises what the disk raises (the caller contains it)."""
        self._audit_log().append(record_payload(trace_id, span_id, start_time_unix_nano, attributes))
        if self.checkpointer is not None:
            self.checkpointer.after_append()

    def append_templated(
        self, template: PayloadTemplate, trace_id: int, span_id: int, start_time_unix_nano: int
    ) -> None:
        """:meth:`append` for attributes whose payload shape was prepared once (``record_template``)."""
        self._audit_log().append_templated(template, record_tokens(trace_id, span_id, start_time_unix_nano))
        if self.checkpointer is not None:
            self.checkpointer.after_append()

    def append_span(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is None:
            return
        self.append(context.trace_id, context.span_id, span.start_time or 0, span.attributes or {})

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """The standard exporter interface, for users who wire this exporter into their own processor."""
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            for span in spans:
                if span.attributes and attr.SEAM in span.attributes:
                    self.append_span(span)
        except (OSError, ValueError):
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Stop exporting and give the chain's file descriptors back (an ``append`` reopens them)."""
        self._shutdown = True
        if self.checkpointer is not None:
            self.checkpointer.checkpoint_now()
        log = self._log
        if log is not None:
            log.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
