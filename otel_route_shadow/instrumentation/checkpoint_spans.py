"""Each checkpoint the chain's writer makes, also sent to the trace backend as a span.

The backend then witnesses the log itself, not only the seam spans the trace sampler kept: ``audit``
proves the chain consistent with every checkpoint of its origin the backend holds.

* **Whatever the sampler keeps**: the spans come from a small ``TracerProvider`` of their own with an
  always-on sampler, and go straight to an OTLP span exporter; the host's provider, sampler and
  processors are not involved.
* **No second configuration**: the exporter is the OpenTelemetry SDK's OTLP exporter built from the
  user's own ``OTEL_EXPORTER_OTLP_*`` environment (endpoint, headers, protocol, timeout, certificates),
  and the spans carry the host provider's resource, so they land in the same backend project. Emission
  is on when an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or ``OTEL_TRACES_EXPORTER`` names ``otlp``; ``none`` (or a list
  without ``otlp``) turns it off.
* **Never blocks a spawn**: the checkpointer's listener only appends to a bounded queue
  (:data:`MAX_PENDING` checkpoints) and wakes one background thread, which exports. A checkpoint whose
  export fails stays queued and is sent again with the next one; when the queue is full the oldest is
  dropped, counted and logged (a later checkpoint covers every record an older one did).
* **Bounded at exit**: ``shutdown`` (registered with ``atexit``) makes a last checkpoint, then waits at
  most :data:`SHUTDOWN_TIMEOUT_S` for the export.

The span is named ``route_shadow checkpoint`` and carries ``route_shadow.checkpoint.origin``, ``.size``,
``.root`` (base64), ``.note`` (the whole signed note), ``.signed`` and ``.key_name`` (the key's name,
never the key) - see :mod:`otel_route_shadow.shadow.checkpoint_attributes`.
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind

from otel_route_shadow.core.redaction import redact_text
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.version import __version__

__all__ = [
    "MAX_PENDING",
    "SHUTDOWN_TIMEOUT_S",
    "CheckpointSpans",
    "attach_checkpoint_spans",
    "checkpoint_attributes",
    "exporter_from_environment",
]

_LOG = logging.getLogger("otel_route_shadow")

SCOPE_NAME: Final = "otel_route_shadow.checkpoints"
MAX_PENDING: Final = 16
"""Checkpoints kept for a retry when exports fail; older ones are dropped (counted and logged)."""
SHUTDOWN_TIMEOUT_S: Final = 5.0


class _Checkpoint(Protocol):
    """What this module reads of ``tlog.SignedCheckpoint``."""

    @property
    def origin(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def root(self) -> bytes: ...
    @property
    def note(self) -> str: ...
    @property
    def signed(self) -> bool: ...
    @property
    def key_name(self) -> str | None: ...


class _Checkpointer(Protocol):
    def add_listener(self, listener: Callable[[Any], None]) -> None: ...
    def checkpoint_now(self) -> Any: ...


def checkpoint_attributes(checkpoint: _Checkpoint) -> dict[str, str | int | bool]:
    """The span attributes of one checkpoint."""
    attributes: dict[str, str | int | bool] = {
        cpa.ORIGIN: checkpoint.origin,
        cpa.SIZE: checkpoint.size,
        cpa.ROOT: base64.b64encode(checkpoint.root).decode("ascii"),
        cpa.NOTE: checkpoint.note,
        cpa.SIGNED: checkpoint.signed,
    }
    if checkpoint.key_name:
        attributes[cpa.KEY_NAME] = checkpoint.key_name
    return attributes


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def exporter_from_environment() -> SpanExporter | None:
    """The OTLP span exporter the user's ``OTEL_EXPORTER_OTLP_*`` settings describe; None when the
    environment configures no OTLP export (see the module docstring)."""
    names = [n.strip().lower() for n in _env("OTEL_TRACES_EXPORTER").split(",") if n.strip()]
    endpoint = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    if (names and "otlp" not in names) or (not names and not endpoint):
        return None
    protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _env("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            _LOG.warning(
                "route shadow: OTLP protocol grpc but its exporter is not installed; checkpoints not sent"
            )
            return None
        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


class CheckpointSpans:
    """The checkpointer's listener: see the module docstring. Call ``close`` (or let ``atexit``) to
    stop the thread after a last bounded export."""

    def __init__(
        self,
        exporter: SpanExporter,
        resource: Resource,
        *,
        max_pending: int = MAX_PENDING,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._exporter = exporter
        self._tracer = TracerProvider(
            resource=resource, sampler=ALWAYS_ON, shutdown_on_exit=False
        ).get_tracer(SCOPE_NAME, __version__)
        self._clock = clock
        self._pending: deque[ReadableSpan] = deque()
        self._max_pending = max(1, max_pending)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._busy = False
        self._closing = False
        self._shut = False
        self._arrivals = 0
        self._failed_at = -1  # the arrival count when an export last failed
        self._logged: set[str] = set()
        self.dropped = 0
        self.exported = 0
        self.failed_exports = 0
        self._thread = threading.Thread(target=self._run, name="route-shadow-checkpoint-spans", daemon=True)
        self._thread.start()

    # ---- the listener (the writer's thread: never blocks on the network) ------------------------------

    def __call__(self, checkpoint: _Checkpoint) -> None:
        now = self._clock()
        span = self._tracer.start_span(
            cpa.SPAN_NAME,
            kind=SpanKind.INTERNAL,
            attributes=checkpoint_attributes(checkpoint),
            start_time=now,
        )
        span.end(end_time=now)
        with self._lock:
            if self._closing:
                return
            if len(self._pending) >= self._max_pending:
                self._pending.popleft()
                self.dropped += 1
                self._log_once("dropped", "route shadow: checkpoint span queue full; the oldest was dropped")
            self._pending.append(span)  # type: ignore[arg-type]  # an ended SDK span is a ReadableSpan
            self._arrivals += 1
            self._wake.notify_all()

    # ---- the exporting thread --------------------------------------------------------------------------

    def _next_batch(self) -> list[ReadableSpan] | None:
        """(Under the lock.) What to export next: everything queued, once something arrived since the
        last failed attempt (or at close, for a last attempt); None when closing with nothing to do."""
        while True:
            if self._pending and (self._arrivals != self._failed_at or self._closing):
                return list(self._pending)
            if self._closing:
                return None
            self._wake.wait()

    def _run(self) -> None:
        while True:
            with self._lock:
                batch = self._next_batch()
                if batch is None:
                    self._wake.notify_all()
                    return
                arrivals = self._arrivals
                self._busy = True
            ok = self._export(batch)
            with self._lock:
                self._busy = False
                if ok:
                    self._pending = deque(s for s in self._pending if s not in batch)
                    self.exported += len(batch)
                    self._failed_at = -1
                else:
                    self._failed_at = arrivals  # sent again with the next checkpoint
                self._wake.notify_all()
                if not ok and self._closing:
                    return

    def _export(self, batch: list[ReadableSpan]) -> bool:
        try:
            result = self._exporter.export(batch)
        except Exception as exc:  # an exporter should not raise; one that does must not kill the thread
            text, _ = redact_text(f"{type(exc).__name__}: {exc}")
            result = SpanExportResult.FAILURE
            self._log_once(
                f"raised:{type(exc).__name__}", "route shadow: checkpoint span export raised %s", text
            )
        if result is not SpanExportResult.SUCCESS:
            self.failed_exports += 1
            self._log_once(
                "failed",
                "route shadow: checkpoint span export failed; it is sent again with the next checkpoint",
            )
            return False
        return True

    def _log_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._logged:
            self._logged.add(key)
            _LOG.warning(message, *args)

    # ---- shutdown ---------------------------------------------------------------------------------------

    def flush(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Wait (at most ``timeout_s``) until every queued checkpoint was exported or its export failed
        with nothing new to send; True when nothing is left queued."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._busy or (self._pending and self._arrivals != self._failed_at):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            return not self._pending

    def stop(self) -> None:
        """Stop taking checkpoints; the thread makes one last attempt at what is queued, then ends.
        Never waits (called when the instrumentation is removed)."""
        with self._lock:
            self._closing = True
            self._wake.notify_all()

    def close(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """``stop``, wait at most ``timeout_s`` for that last attempt, then shut the exporter down."""
        self.stop()
        self._thread.join(timeout_s)
        with self._lock:
            if self._shut:
                return
            self._shut = True
        try:
            self._exporter.shutdown()
        except Exception:  # shutting down must not raise into interpreter exit
            self._log_once("shutdown", "route shadow: the checkpoint span exporter failed to shut down")


def _host_resource(tracer_provider: Any) -> Resource:
    """The host provider's resource (the global provider's when none was passed to ``instrument``)."""
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    resource = getattr(provider, "resource", None)
    return resource if isinstance(resource, Resource) else Resource.create()


def attach_checkpoint_spans(
    checkpointer: _Checkpointer | None,
    tracer_provider: Any,
    exporter: SpanExporter | None = None,
) -> CheckpointSpans | None:
    """Register checkpoint spans on ``checkpointer`` when OTLP export is configured; the emitter, or None.

    At exit a last checkpoint is made and exported (bounded). Never raises: a failure is logged once
    and the host runs on without checkpoint spans.
    """
    if checkpointer is None:
        return None
    try:
        exporter = exporter if exporter is not None else exporter_from_environment()
        if exporter is None:
            return None
        emitter = CheckpointSpans(exporter, _host_resource(tracer_provider))
        checkpointer.add_listener(emitter)
    except Exception as exc:  # never disturb the host
        text, _ = redact_text(f"{type(exc).__name__}: {exc}")
        _LOG.warning("route shadow: checkpoint spans are off: %s", text)
        return None

    def at_exit() -> None:
        checkpointer.checkpoint_now()
        emitter.close()

    atexit.register(at_exit)
    return emitter
