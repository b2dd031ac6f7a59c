"""The shadow runtime: what one instrumentation holds, and the rules that keep it inert.

Inertness rules, in one place:
- the host's arguments, return value and exceptions are never touched; the very exception object
  propagates, and nothing the shadow path raises may replace it;
- what a sink can plausibly raise (an unwritable directory, a full disk, a file-size limit, a
  corrupt or unreadable snapshot) is contained: logged once per cause, counted, and marked on the
  span as ``route_shadow.error.type``; the spawn proceeds;
- a genuine bug is contained too unless ``strict`` is on, in which case it is raised where that is
  safe: before the host is called, or after it returned normally, never over a host exception.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from otel_route_shadow.chain import ChainError, canonical_bytes
from otel_route_shadow.core import PolicyIndex, PolicySnapshot, RouteContext
from otel_route_shadow.core.redaction import redact_text
from otel_route_shadow.instrumentation.config import RouteShadowConfig, SeamCall, env_disabled
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.record import (
    SEAM_SPAN_KIND,
    ShadowRecord,
    Spawn,
    context_json,
    conversation_attribute,
    observe,
    record_template,
    sanitize_dumped,
    span_name,
)
from otel_route_shadow.store import PolicyStoreError, RoutingPolicyStore
from otel_route_shadow.version import __version__

__all__ = ["PENDING", "SCHEMA_URL", "SCOPE_NAME", "SETTINGS_FIELD", "SeamObservation", "ShadowRuntime"]

_LOG = logging.getLogger("otel_route_shadow")

SCOPE_NAME: Final = "otel_route_shadow.instrumentation"
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.37.0"
SETTINGS_FIELD: Final = "route_shadow_enabled"
_MEMO_SIZE: Final = 4096
PENDING: Final[ContextVar[SeamObservation | None]] = ContextVar("route_shadow_pending", default=None)
"""The observation whose span is being started right now, in this thread or task: set by
``ShadowRuntime.begin`` only around its ``start_span`` call, read by the span processor's ``on_start``
(which also checks the span came from this instrumentation's tracer)."""


_PLAUSIBLE_SINK_ERRORS: Final = (OSError, ChainError, PolicyStoreError)
"""What a disk, a hand-edited snapshot or a damaged chain can raise: contained even in strict mode."""


class SeamObservation:
    """One seam call in flight: the sanitized context, its record once resolved, and whether the
    chain has it yet. Handed to the span processor through ``PENDING`` while its span starts."""

    __slots__ = (
        "attempted",
        "context",
        "encoded",
        "error_type",
        "exported",
        "record",
        "runtime",
        "seam",
        "start_ns",
    )

    def __init__(self, runtime: ShadowRuntime, seam: str, context: RouteContext, encoded: str) -> None:
        self.runtime = runtime
        self.seam = seam
        self.context = context
        self.encoded = encoded
        self.record: ShadowRecord | None = None
        self.attempted = False
        self.error_type: str | None = None
        self.exported = False
        self.start_ns = time.time_ns()

    def enrich(self, span: Span) -> None:
        """Resolve and put the decision on the span. Called by the span processor at span start, or
        by the seam wrapper when no route-shadow processor saw the span (a dropped span, a
        non-SDK provider)."""
        if self.attempted:
            return
        self.attempted = True
        snapshot, state = self.runtime.snapshot(span, self)
        try:
            self.record = self.runtime.observe(self.seam, self.context, self.encoded, snapshot, state)
        except Exception as exc:
            self.runtime.contain(exc, "resolve", span, loud=True, observation=self)
            return
        if span.is_recording():
            span.set_attributes(self.record.attributes)

    def export(self, span: Span, *, loud: bool = True) -> None:
        """Append the chain record while the span is still open, so a failed append can be marked on
        the span itself. Exactly once per observation, even when resolving failed: then the record
        says so (``route_shadow.error.type``), as the span does."""
        if self.exported:
            return
        self.exported = True
        try:
            context = span.get_span_context()
            start = getattr(span, "start_time", None) or self.start_ns
            record = self.record
            if record is not None and record.template is not None and self.error_type is None:
                self.runtime.exporter.append_templated(
                    record.template, context.trace_id, context.span_id, start
                )
                return
            attributes: Mapping[str, Any]
            # The very values the span carries: the record's mapping is what enrich() set on it,
            # plus the error type contain() marked (reading them back from a live span would cost
            # a lock per attribute).
            attributes = record.attributes if record is not None else {attr.SEAM: self.seam}
            if self.error_type is not None:
                attributes = {**attributes, attr.ERROR_TYPE: self.error_type}
            self.runtime.exporter.append(context.trace_id, context.span_id, start, attributes)
        except Exception as exc:
            self.runtime.contain(exc, "chain", span, loud=loud, observation=self)


class ShadowRuntime:
    """Configuration, tracer, sinks and error accounting of one instrumentation."""

    def __init__(
        self, config: RouteShadowConfig, tracer_provider: trace.TracerProvider | None = None
    ) -> None:
        self.config = config
        self.tracer = trace.get_tracer(SCOPE_NAME, __version__, tracer_provider, schema_url=SCHEMA_URL)
        self.exporter = RouteShadowChainExporter(config.chain_path, config.durability, config.chain_hold_ms)
        self.errors: Counter[tuple[str, str]] = Counter()
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._store: Any = None
        self._clean: dict[bytes, str] = {}
        self._policy_index: tuple[tuple[str, int, bool], PolicyIndex] | None = None
        self._memo: dict[tuple[str, str, str, int, bool, str], ShadowRecord] = {}
        self._recheck_ns = config.snapshot_recheck_ms * 1_000_000
        self._last_load: tuple[int, PolicySnapshot, str] | None = None

    # -- switches -------------------------------------------------------------------------------
    def enabled(self) -> bool:
        """The kill switch, checked live on every call: the environment, the configuration, and a
        host settings object whose field counts as on only when it is exactly ``True``."""
        if self.config.disabled or env_disabled():
            return False
        settings = self.config.settings
        return settings is None or getattr(settings, SETTINGS_FIELD, None) is True

    # -- sinks ----------------------------------------------------------------------------------
    def _policy_store(self) -> Any:
        if self._store is None and self.config.store is not None:
            with self._lock:
                if self._store is None:
                    self._store = RoutingPolicyStore(self.config.store)
        return self._store

    def snapshot(
        self, span: Span | None, observation: SeamObservation | None = None
    ) -> tuple[PolicySnapshot, str]:
        """The policy snapshot and its load state; an unreadable store holds, never raises.

        The store is looked at again once ``snapshot_recheck_ms`` has passed since the last look
        (each record names the revision and hash it was resolved against, so a record made just
        after a save is still exact about what it used)."""
        if self.config.store is None:
            return PolicySnapshot(), "absent"
        now = time.monotonic_ns()
        last = self._last_load
        if last is not None and now - last[0] < self._recheck_ns:
            return last[1], last[2]
        try:
            load = self._policy_store().load()
        except Exception as exc:
            self._last_load = None
            self.contain(exc, "store", span, loud=True, observation=observation)
            return PolicySnapshot(available=False), "corrupt"
        snapshot: PolicySnapshot = load.snapshot
        state: str = load.state
        self._last_load = (now, snapshot, state)
        return snapshot, state

    def sanitize(self, context: RouteContext) -> tuple[RouteContext, str]:
        """Redact the context before anything is hashed; return it with its canonical JSON.

        A context already seen clean is not searched again. It is recognised by pydantic's own JSON
        of it, which is exact (one value, one encoding: every field is a string, a bool, None or a
        tuple of such models) and costs a fraction of building the canonical form. Only clean
        contexts are remembered, so no secret is kept here.
        """
        try:
            raw: bytes | None = context.__pydantic_serializer__.to_json(context)
        except Exception:
            raw = None  # lone surrogates: sanitize replaces them below
        if raw is not None:
            known = self._clean.get(raw)
            if known is not None:
                return context, known
        dumped = context.model_dump(mode="json")
        try:
            encoded = canonical_bytes(dumped).decode("utf-8")
        except TypeError:
            encoded = None
        clean, paths = sanitize_dumped(context, dumped)
        if paths or clean is not context or encoded is None or raw is None:
            return clean, context_json(clean)
        with self._lock:
            if len(self._clean) >= _MEMO_SIZE:
                self._clean.clear()
            self._clean[raw] = encoded
        return clean, encoded

    def _index(self, snapshot: PolicySnapshot) -> PolicyIndex:
        """One policy index per snapshot (by hash and revision), not one per spawn."""
        key = (snapshot.content_hash, snapshot.revision, snapshot.available)
        cached = self._policy_index
        if cached is not None and cached[0] == key:
            return cached[1]
        index = PolicyIndex(snapshot.policies)
        self._policy_index = (key, index)
        return index

    def observe(
        self, seam: str, context: RouteContext, encoded: str, snapshot: PolicySnapshot, state: str
    ) -> ShadowRecord:
        """Resolve a sanitized context, memoised: a decision is a pure function of the context and
        the snapshot, and a factory spawns the same few contexts over and over. The key holds the
        whole canonical context and the snapshot's identity, so a hit is exact, never a guess."""
        key = (seam, encoded, snapshot.content_hash, snapshot.revision, snapshot.available, state)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        record = observe(
            seam,
            context,
            snapshot,
            state,
            sanitized=True,
            encoded_context=encoded,
            index=self._index(snapshot),
        )
        # Recorded many times over: prepare its chain payload shape once.
        record = dataclasses.replace(record, template=record_template(record.attributes))
        with self._lock:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = record
        return record

    # -- containment ----------------------------------------------------------------------------
    def contain(
        self,
        exc: BaseException,
        where: str,
        span: Span | None,
        *,
        loud: bool,
        observation: SeamObservation | None = None,
    ) -> None:
        """Count, mark and log once; raise a genuine bug in strict mode when ``loud`` allows it."""
        plausible = isinstance(exc, _PLAUSIBLE_SINK_ERRORS)
        if observation is not None:
            observation.error_type = type(exc).__qualname__
        cause = (where, type(exc).__qualname__)
        with self._lock:
            self.errors[cause] += 1
            first = cause not in self._logged
            self._logged.add(cause)
        if span is not None and span.is_recording():
            span.set_attribute(attr.ERROR_TYPE, type(exc).__qualname__)
        if first:
            text, _ = redact_text("".join(traceback.format_exception_only(type(exc), exc)).strip())
            if plausible:
                _LOG.warning("route shadow %s failed, the spawn proceeds: %s", where, text)
            else:
                detail, _ = redact_text("".join(traceback.format_exception(exc)))
                _LOG.error(
                    "route shadow bug in %s (contained; set OTEL_PYTHON_ROUTE_SHADOW_STRICT=true to raise):\n%s",
                    where,
                    detail,
                )
        if loud and self.config.strict and not plausible:
            raise exc

    # -- seam lifecycle -------------------------------------------------------------------------
    def begin(
        self, seam: str, request_face: str, context: RouteContext | Mapping[str, Any] | Spawn | None
    ) -> tuple[Span, SeamObservation] | None:
        """Start the seam span (the processor enriches it on start). None: call the bare host."""
        if context is None:
            return None
        try:
            start_attributes: dict[str, str] = {attr.SEAM: seam}
            if isinstance(context, Spawn):
                conversation = conversation_attribute(context.conversation_id)
                if conversation is not None:
                    start_attributes[attr.GEN_AI_CONVERSATION] = conversation
                context = context.context
            if not isinstance(context, RouteContext):
                context = RouteContext.model_validate(context)
            if context.request_face != request_face:
                context = context.model_copy(update={"request_face": request_face})
            clean, encoded = self.sanitize(context)
            observation = SeamObservation(self, seam, clean, encoded)
            name = span_name(seam, clean)
            token = PENDING.set(observation)
            try:
                span = self.tracer.start_span(name, kind=SEAM_SPAN_KIND, attributes=start_attributes)
            finally:
                PENDING.reset(token)
        except Exception as exc:
            self.contain(exc, "start", None, loud=True)
            return None
        if not observation.attempted:  # no route-shadow processor saw the span (dropped, or no SDK)
            observation.enrich(span)
        return span, observation

    def extract(self, call: SeamCall, extractor: Any) -> RouteContext | Mapping[str, Any] | Spawn | None:
        try:
            result: RouteContext | Mapping[str, Any] | Spawn | None = extractor(call)
        except Exception as exc:
            self.contain(exc, "extract", None, loud=True)
            return None
        return result

    def finish(self, span: Span, observation: SeamObservation, host_error: BaseException | None) -> None:
        """Export and end. Raises only a strict-mode bug, and only when the host did not raise."""
        loud = host_error is None
        try:
            if host_error is not None and span.is_recording():
                span.set_attribute("error.type", type(host_error).__qualname__)
                span.set_status(Status(StatusCode.ERROR))
            observation.export(span, loud=loud)
        finally:
            try:
                span.end()
            except Exception as exc:
                self.contain(exc, "end", None, loud=loud)
