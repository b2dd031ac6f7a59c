"""Each checkpoint the chain's writer makes, also sent to the trace backend as a span.

The backend then witnesses the log itself, not only the seam spans the trace sampler kept: ``audit``
proves the chain consistent with every checkpoint of its origin the backend holds.

Why a pipeline of its own, and not the host's tracer provider: ``audit`` needs every checkpoint in
the backend, and the host's sampler may drop any span (a ratio sampler keeps one trace in N; a
parent-based one drops a root span it was not told to keep), while a dropped span reaches no
processor and no exporter. A checkpoint span must also outlive the host's provider: it is made at
uninstrument, after the host may have shut its provider down. So checkpoint spans go through a
provider of their own, always-on, with its own batch processor and OTLP exporter.

* **Whatever the sampler keeps**: the spans come from a ``TracerProvider`` of their own with an
  always-on sampler; the host's provider, sampler and processors are not involved.
* **The SDK's own pieces**: that provider has one ``BatchSpanProcessor`` (one worker thread, a
  bounded queue of :data:`MAX_PENDING` spans that drops the oldest when full, fork handling: a forked
  child gets an empty queue and a worker of its own) in front of the SDK's OTLP span exporter.
* **No second configuration**: the exporter is built from the user's own ``OTEL_EXPORTER_OTLP_*``
  environment (endpoint, headers, protocol, timeout, certificates), and the spans carry the host
  provider's resource, so they land in the same backend project. Emission is on when an OTLP
  endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
  or ``OTEL_TRACES_EXPORTER`` names ``otlp``; ``none`` (or a list without ``otlp``) turns it off.
* **Never blocks a spawn**: the checkpointer's listener ends a span, which only puts it on the batch
  processor's queue; the worker exports every ``OTEL_BSP_SCHEDULE_DELAY`` (5 s by default). A failed
  export is logged once (and counted); its checkpoint is not sent again, since every later checkpoint
  covers every record it did.
* **Bounded at exit**: ``close`` (called by the runtime's one way out, after its last checkpoint)
  waits at most :data:`SHUTDOWN_TIMEOUT_S` for the provider's shutdown, which exports what is queued
  (on a ``Worker``, so a backend that does not answer never holds the caller longer).

The span is named ``route_shadow checkpoint`` and carries ``route_shadow.checkpoint.origin``, ``.size``,
``.root`` (base64), ``.note`` (the whole signed note), ``.signed`` and ``.key_name`` (the key's name,
never the key) - see :mod:`otel_route_shadow.shadow.checkpoint_attributes`.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind

from otel_route_shadow.core import redact_text
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.version import __version__
from otel_route_shadow.worker import Worker, WorkerName

__all__ = [
    "MAX_PENDING",
    "SHUTDOWN_TIMEOUT_S",
    "CheckpointSpans",
    "attach_checkpoint_spans",
    "checkpoint_attributes",
    "exporter_from_environment",
]


SCOPE_NAME: Final = "otel_route_shadow.checkpoints"
MAX_PENDING: Final = 16
"""The batch processor's queue: checkpoints waiting for export; when full the oldest is dropped (the
SDK logs it), and a later checkpoint covers every record an older one did."""
SHUTDOWN_TIMEOUT_S: Final = 5.0
"""The longest ``close`` waits for the last export (at uninstrument and at interpreter exit)."""


class _Checkpoint(Protocol):
    """What this module reads of ``logstore.SignedCheckpoint``."""

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


class _LoggedOnce(SpanExporter):
    """The OTLP exporter, with its first failure logged on our logger (later ones only counted) and
    an exception from it turned into a failed export."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self.failed_exports = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._exporter.export(spans)
        except Exception as exc:  # an exporter should not raise; say what it raised, once
            text, _ = redact_text(f"{type(exc).__name__}: {exc}")
            result = SpanExportResult.FAILURE
            if not self.failed_exports:
                _LOG.warning("route shadow: checkpoint span export raised %s", text)
            self.failed_exports += 1
            return result
        if result is not SpanExportResult.SUCCESS:
            if not self.failed_exports:
                _LOG.warning(
                    "route shadow: checkpoint span export failed; later checkpoints cover its records"
                )
            self.failed_exports += 1
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class CheckpointSpans:
    """The checkpointer's listener: one span per checkpoint, through an always-on provider of its own
    and the SDK's batch processor (see the module docstring)."""

    def __init__(self, exporter: SpanExporter, resource: Resource, *, max_pending: int = MAX_PENDING) -> None:
        self._exporter = _LoggedOnce(exporter)
        self._provider = TracerProvider(resource=resource, sampler=ALWAYS_ON, shutdown_on_exit=False)
        queue = max(1, max_pending)
        self._provider.add_span_processor(
            BatchSpanProcessor(self._exporter, max_queue_size=queue, max_export_batch_size=queue)
        )
        self._tracer = self._provider.get_tracer(SCOPE_NAME, __version__)
        self._closer = Worker(WorkerName.CHECKPOINT_SPANS, self._provider.shutdown)

    @property
    def failed_exports(self) -> int:
        return self._exporter.failed_exports

    def __call__(self, checkpoint: _Checkpoint) -> None:
        """One span for ``checkpoint``, at the time it is made; returns once the span is queued (the
        writer never waits for the network)."""
        now = time.time_ns()
        span = self._tracer.start_span(
            cpa.SPAN_NAME,
            kind=SpanKind.INTERNAL,
            attributes=checkpoint_attributes(checkpoint),
            start_time=now,
        )
        span.end(end_time=now)

    def flush(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Export what is queued now, in the calling thread; False once closed."""
        return self._provider.force_flush(int(timeout_s * 1000))

    def close(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Shut the provider down (its batch processor exports what is queued, then its worker ends),
        waiting at most ``timeout_s``; True if it finished. The shutdown runs on a worker thread, so
        a backend that does not answer never holds the caller (or interpreter exit) longer."""
        self._closer.wake()
        done = self._closer.idle(timeout_s)
        self._closer.stop(0.0)
        return done


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

    The caller closes it (``CheckpointSpans.close``) after its last checkpoint. Never raises: a failure
    is logged once and the host runs on without checkpoint spans.
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
    return emitter
