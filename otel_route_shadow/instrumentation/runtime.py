"""The shadow runtime: what one instrumentation holds, and the rules that keep it inert.

Inertness rules, in one place:
- the host's arguments, return value and exceptions are never touched; the very exception object
  propagates, and nothing the shadow path raises may replace it;
- what a sink can plausibly raise (an unwritable directory, a full disk, a file-size limit, a
  corrupt or unreadable snapshot) is contained: logged once per cause, counted, and marked on the
  span as ``route_shadow.error.type``; the spawn proceeds;
- a genuine bug is contained too unless ``strict`` is on, in which case it is raised only before
  the host is called (``loud``); once the host has run, a bug is logged and counted, never raised
  (a retrying caller would spawn twice).

What the runtime remembers between spawns, two structures (what each saves, measured on bench
row 1 with and without it: docs/benchmarks.md, "Caches, windows and threads"):
- ``RuntimeMemo``, one bounded map for everything derived purely from its key: the canonical JSON
  of contexts already seen clean, the decision record (with its payload template) per seam,
  context and snapshot, and the policy index per snapshot;
- the snapshot re-check window (``snapshot_recheck_ms``): the store's verdict is reused for that
  long instead of being looked at again on every spawn.

A large snapshot is read off the spawn path (``SnapshotPrefetch``). When a look at the store finds
it changed, the size of the new ``current.json`` decides, never timing: up to
``PREFETCH_MIN_BYTES`` (64 KiB, about 200 policies, a read of a few milliseconds) it is read in the
spawn as before, so small stores behave exactly as they always did; above it, one background
thread reads it and builds its policy index while seams keep resolving against the snapshot they
had (their records cite that revision and hash: honest about what they used), and the first seam
after the read finished uses the new one. The very first read of a large store starts at
instrument time, in the background too; a seam that comes before it finished holds with snapshot
state ``loading`` and reason ``snapshot-loading`` (revision 0). Not ``absent``, which would say no
policy applies, and not a wait, which would put the read back inside the spawn. Row 8c measures
the host's first spawn after a save of 8,000 policies this way.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, cast

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.trace import Span, Status, StatusCode

from otel_route_shadow.chain import ChainCorruptError, ChainError, PayloadTemplate, canonical_bytes
from otel_route_shadow.core import PolicyIndex, PolicySnapshot, RouteContext
from otel_route_shadow.instrumentation.checkpoint_spans import CheckpointSpans, attach_checkpoint_spans
from otel_route_shadow.instrumentation.config import (
    ResponseHook,
    RouteShadowConfig,
    SeamCall,
    env_disabled,
    make_checkpointer,
)
from otel_route_shadow.instrumentation.conventions import gen_ai_conventions
from otel_route_shadow.instrumentation.error_text import log_contained
from otel_route_shadow.instrumentation.exporter import EXIT_FLUSH_S, RouteShadowChainExporter
from otel_route_shadow.instrumentation.flag_events import FlagEvents
from otel_route_shadow.instrumentation.memo import RuntimeMemo
from otel_route_shadow.instrumentation.package import SCOPE_NAME
from otel_route_shadow.instrumentation.prefetch import SnapshotPrefetch
from otel_route_shadow.instrumentation.processor import RouteShadowSpanProcessor
from otel_route_shadow.instrumentation.served import Lineage, ServedReports, settle
from otel_route_shadow.shadow import (
    ShadowRecord,
    Spawn,
    context_json,
    host_text,
    observe,
    record_template,
    recorded_text,
    sanitize_dumped,
    span_name,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import PolicyStoreError, RoutingPolicyStore, SnapshotLoad, StoreIOError
from otel_route_shadow.version import __version__
from otel_route_shadow.worker import AFTER_FORK, ProcessHook, run_at_exit

__all__ = ["PREFETCH_MIN_BYTES", "SETTINGS_FIELD", "RuntimeMemo", "SeamObservation", "ShadowRuntime"]

SETTINGS_FIELD: Final = "route_shadow_enabled"

PREFETCH_MIN_BYTES: Final = 64 * 1024
"""A changed ``current.json`` larger than this is read in the background (see the module docstring);
snapshots take about 310 bytes per policy."""
_LOADING: Final = SnapshotLoad(
    "absent", PolicySnapshot(available=False, loading=True), note="the first read is under way"
)
"""What a seam resolves against before a large store's first read finished (state ``loading``)."""

_PLAUSIBLE_SINK_ERRORS: Final = (OSError, ChainError, PolicyStoreError)
"""What a disk, a hand-edited snapshot or a damaged chain can raise: contained even in strict mode."""


class SeamObservation:
    """One seam call in flight, owned by its seam: the sanitized context, its record once resolved,
    and whether the chain has it yet."""

    __slots__ = (
        "call",
        "context",
        "encoded",
        "error_type",
        "exported",
        "hook",
        "lineage",
        "overrides",
        "record",
        "reports",
        "runtime",
        "seam",
        "served_template",
        "start_ns",
    )

    def __init__(self, runtime: ShadowRuntime, seam: str, context: RouteContext, encoded: str) -> None:
        self.runtime, self.seam, self.context, self.encoded = runtime, seam, context, encoded
        self.record: ShadowRecord | None = None
        self.error_type: str | None = None
        self.exported = False
        self.start_ns = time.time_ns()
        self.call: SeamCall | None = None
        self.hook: ResponseHook | None = None
        """The seam's response hook, called with ``call`` at finish (``served.settle``)."""
        self.lineage: list[int] | None = None
        self.reports: ServedReports | None = None
        self.overrides: dict[str, Any] | None = None
        """What the record adds to the decision's attributes: the served route, when reported."""
        self.served_template: PayloadTemplate | None = None

    def resolve(self, start_attributes: dict[str, Any]) -> Mapping[str, Any]:
        """Resolve the decision, before the span starts; the span's start attributes: the decision's
        (so every processor and the sampler see it, and it is on the span for its whole life) and
        ``start_attributes``, with the error type of a contained failure."""
        snapshot, state = self.runtime.snapshot(self)
        try:
            self.record = self.runtime.observe(self.seam, self.context, self.encoded, snapshot, state)
        except Exception as exc:
            self.runtime.contain(exc, "resolve", None, loud=True, observation=self)
        attributes: Mapping[str, Any] = start_attributes
        if self.record is not None:
            attributes = {**self.record.attributes, **start_attributes}
        if self.error_type is not None:
            attributes = {**attributes, attr.ERROR_TYPE: self.error_type}
        return attributes

    def announce(self, span: Span) -> None:
        """Emit the decision's flag event, if any, in the started span's context."""
        if self.record is not None and self.record.event is not None:
            try:
                self.runtime.flag_events.emit(span, self.record.event)
            except Exception as exc:  # the host's log pipeline raised
                self.runtime.contain(exc, "flag-event", span, loud=False, observation=self)

    def export(self, span: Span) -> None:
        """Append the chain record while the span is still open, so a failed append can be marked on
        the span itself. Exactly once per observation, even when resolving failed: then the record
        says so (``route_shadow.error.type``), as the span does."""
        if self.exported:
            return
        self.exported = True
        try:
            context = span.get_span_context()
            start = getattr(span, "start_time", None) or self.start_ns
            # The spawn's duration as the span measures it (its start, the SDK's wall clock), up to
            # now: the host has run. Never negative, even when the wall clock stepped back.
            duration = time.time_ns() - start
            duration = duration if duration > 0 else 0
            record = self.record
            template = (
                record.template if record is not None and self.overrides is None else self.served_template
            )
            if template is not None and self.error_type is None:
                self.runtime.exporter.append_templated(
                    template, context.trace_id, context.span_id, start, duration
                )
                return
            attributes: Mapping[str, Any]
            # The very values the span carries: the record's mapping is what it started with,
            # plus the error type contain() marked (reading them back from a live span would cost
            # a lock per attribute).
            attributes = record.attributes if record is not None else self.runtime.bare_attributes(self.seam)
            if self.overrides is not None:
                attributes = {**attributes, **self.overrides}
            if self.error_type is not None:
                attributes = {**attributes, attr.ERROR_TYPE: self.error_type}
            self.runtime.exporter.append(context.trace_id, context.span_id, start, attributes, duration)
        except Exception as exc:
            self.runtime.contain(exc, "chain", span, loud=False, observation=self)  # the host ran
            if not isinstance(exc, (OSError, ChainCorruptError)):  # those the chain counted itself
                self.runtime.exporter.count_not_observed()


class ShadowRuntime:
    """Configuration, tracer, sinks and error accounting of one instrumentation."""

    def __init__(
        self,
        config: RouteShadowConfig,
        tracer_provider: trace.TracerProvider | None = None,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        self.config = config
        self._tracer_provider = tracer_provider
        self.conventions = gen_ai_conventions(config.in_process_seams)
        schema_url = self.conventions.schema_url
        self.tracer = trace.get_tracer(SCOPE_NAME, __version__, tracer_provider, schema_url=schema_url)
        self.flag_events = FlagEvents(config.flag_event, logger_provider, schema_url)
        self.checkpointer = make_checkpointer(config)
        self.exporter = RouteShadowChainExporter(
            config.chain_path,
            config.durability,
            config.chain_lock_timeout_ms,
            listener=self.checkpointer.line_written,
        )
        self.errors: Counter[tuple[str, str]] = Counter()
        self._logged: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._store: Any = None
        self.memo = RuntimeMemo()
        self._recheck_ns = config.snapshot_recheck_ms * 1_000_000
        self._last_load: tuple[int, SnapshotLoad] | None = None
        self._held: SnapshotLoad | None = None
        """The verdict seams resolve against while a newer snapshot is read in the background."""
        self._held_index: tuple[PolicySnapshot, PolicyIndex] | None = None
        """The index the background read built for the snapshot it handed over."""
        self.prefetch: SnapshotPrefetch[PolicyIndex] = SnapshotPrefetch(
            self._read_store, self._prepare, self._prefetch_failed
        )
        self.never_awaited = 0
        """Coroutine and generator seams dropped before their first step: the host's code never ran,
        so they have no span and no record; this counts them (see ``seams``)."""
        self.processor: RouteShadowSpanProcessor | None = None
        self.lineage = Lineage()
        """Open seam spans and the spans of their runs (``served``), followed by the processor."""
        self.checkpoint_spans: CheckpointSpans | None = None
        self.closed = False
        """Set by ``close``, for good: a later record is written at once, and no thread starts again."""
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): the lock of ``contain`` and
        ``_policy_store`` may have been copied held by another thread of the parent's."""
        self._lock = threading.Lock()

    def checkpoint_now(self) -> None:
        """Write the records still waiting for the chain's lock (bounded: ``EXIT_FLUSH_S``), then
        checkpoint what the chain holds (at uninstrument and provider shutdown); never raises. A chain path
        refused at start has no chain to checkpoint: nothing is made beside it (no ``.tlog`` folder)."""
        self.exporter.flush_backlog(EXIT_FLUSH_S)
        if self.exporter.refused is None:
            self.checkpointer.checkpoint_now()

    # -- switches -------------------------------------------------------------------------------
    @property
    def origin(self) -> str:
        """The chain's origin (its checkpointer's): on every span and record, so audit can select by it."""
        return self.checkpointer.origin

    def bare_attributes(self, seam: str) -> dict[str, Any]:
        """What a record says when the decision could not be resolved: the seam and the origin."""
        return {attr.SEAM: seam, attr.ORIGIN: self.origin}

    def enabled(self) -> bool:
        """The kill switch, checked live on every call: the environment variable (live in both
        directions: the configuration never copies it), the ``disabled`` keyword, and a host
        settings object whose field counts as on only when it is exactly ``True``. A field that raises
        counts as off (logged once per exception type, counted): the host's plain call runs."""
        if self.config.disabled or env_disabled():
            return False
        settings = self.config.settings
        try:
            return settings is None or getattr(settings, SETTINGS_FIELD, None) is True
        except Exception as exc:  # the host's settings object raised: off for this call
            self.contain(exc, "settings", None, loud=False)
            return False

    # -- sinks ----------------------------------------------------------------------------------
    def _policy_store(self) -> Any:
        if self._store is None and self.config.store is not None:
            with self._lock:
                if self._store is None:
                    self._store = RoutingPolicyStore(self.config.store)
        return self._store

    def snapshot(self, observation: SeamObservation | None = None) -> tuple[PolicySnapshot, str]:
        """The policy snapshot and its load state; an unreadable store holds, never raises.

        The store is looked at again once ``snapshot_recheck_ms`` has passed since the last look
        (each record names the revision and hash it was resolved against, so a record made just
        after a save is still exact about what it used)."""
        now = time.monotonic_ns()
        last = self._last_load
        if last is not None and now - last[0] < self._recheck_ns:
            load = last[1]
        elif self.config.store is None:
            return PolicySnapshot(), "absent"
        else:
            try:
                load = self._look()
            except Exception as exc:
                self._last_load = None
                self.contain(exc, "store", None, loud=True, observation=observation)
                return PolicySnapshot(available=False), "corrupt"
            self._last_load = (now, load)
        if load.snapshot.loading:
            return load.snapshot, "loading"
        if load.unreadable:
            self._report_unreadable(load, observation)
        return load.snapshot, load.state

    def _look(self) -> SnapshotLoad:
        """Look at the store: its cached verdict if unchanged, else a read in this spawn when the
        new snapshot is small, else the verdict held so far while the background reads it. A large
        snapshot reaches the seams only through the background read, with its index built."""
        store = self._policy_store()
        running = self.prefetch.running
        ready = self.prefetch.take()
        if ready is not None:
            self._held, self._held_index = ready[0], (ready[0].snapshot, ready[1])
        if running:
            return self._held if self._held is not None else _LOADING
        unchanged = cast(SnapshotLoad | None, store.peek())
        if unchanged is not None and unchanged is self._held:
            return unchanged
        if self._prefetch_worthwhile():
            # Changed, or not cached yet (a verdict is cached only once its files are older than the
            # store's racy window, 1 s): read again in the background, at most one read at a time.
            self.prefetch.start()  # none once closed: the runtime holds what it had
            return self._held if self._held is not None else _LOADING
        if unchanged is None:
            unchanged = cast(SnapshotLoad | None, store.load_within(PREFETCH_MIN_BYTES))
        if unchanged is None:  # a large snapshot saved since the size was taken: not in this spawn
            self.prefetch.start()
            return self._held if self._held is not None else _LOADING
        self._held = unchanged
        return self._held

    def _prefetch_worthwhile(self) -> bool:
        size = self._policy_store().current_size()
        return size is not None and size > PREFETCH_MIN_BYTES

    def start_prefetch(self) -> None:
        """At instrument time: start reading a large store's first snapshot in the background, so
        the first spawns do not pay for it (a small one is read by the first spawn, as before)."""
        try:
            if self.config.store is not None and self._held is None and self._prefetch_worthwhile():
                self.prefetch.start()
        except Exception as exc:
            self.contain(exc, "prefetch", None, loud=False)

    def _read_store(self) -> SnapshotLoad:
        return cast(SnapshotLoad, self._policy_store().load())

    def _prepare(self, load: SnapshotLoad) -> PolicyIndex:
        """Build the new snapshot's policy index in the background too, before seams see it."""
        return self._index(load.snapshot)

    def _prefetch_failed(self, exc: BaseException) -> None:
        """A background read that raised: logged once per cause and counted; seams keep what they
        had, and the next look that finds the store changed starts a new read."""
        self.contain(exc, "prefetch", None, loud=False)

    def _report_unreadable(self, load: SnapshotLoad, observation: SeamObservation | None) -> None:
        """A store the environment keeps us from reading (permissions, a file in place of the
        folder, an I/O error) holds every decision like a corrupt one, and is also a sink fault:
        logged once per cause (``problem_kind``), counted, and marked on the record (and so its span)."""
        problem = StoreIOError(f"{self.config.store}: {load.problem} [{load.problem_kind}]")
        self.contain(
            problem, "store", None, loud=False, observation=observation, detail=load.problem_kind or ""
        )

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
            known: str | None = self.memo.get(raw)
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
        self.memo.put(raw, encoded)
        return clean, encoded

    def _index(self, snapshot: PolicySnapshot) -> PolicyIndex:
        """One policy index per snapshot (by hash and revision), not one per spawn."""
        held = self._held_index
        if held is not None and held[0] is snapshot:
            return held[1]
        key = ("index", snapshot.content_hash, snapshot.revision, snapshot.available)
        cached: PolicyIndex | None = self.memo.get(key)
        if cached is not None:
            return cached
        index = PolicyIndex(snapshot.policies)
        self.memo.put(key, index)
        return index

    def observe(
        self, seam: str, context: RouteContext, encoded: str, snapshot: PolicySnapshot, state: str
    ) -> ShadowRecord:
        """Resolve a sanitized context, memoised: a decision is a pure function of the context and
        the snapshot, and a factory spawns the same few contexts over and over. The key holds the
        whole canonical context and the snapshot's identity, so a hit is exact, never a guess."""
        key = (seam, encoded, snapshot.content_hash, snapshot.revision, snapshot.available, state)
        cached: ShadowRecord | None = self.memo.get(key)
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
            origin=self.origin,
        )
        # Recorded many times over: prepare its chain payload shape once.
        record = dataclasses.replace(record, template=record_template(record.attributes))
        self.memo.put(key, record)
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
        detail: str = "",
    ) -> None:
        """Count, mark and log once per cause; raise a genuine bug in strict mode when ``loud``.

        ``loud`` is true only before the host is called: after it ran, raising would turn a spawn
        that happened into an exception (and a retrying caller would spawn twice). ``detail``
        splits one exception type into several causes for logging (the store's problem kinds).
        """
        plausible = isinstance(exc, _PLAUSIBLE_SINK_ERRORS)
        name = type(exc).__qualname__
        if observation is not None:
            observation.error_type = name
        with self._lock:
            self.errors[(where, name)] += 1
            first = (where, name, detail) not in self._logged
            self._logged.add((where, name, detail))
        if span is not None and span.is_recording():
            span.set_attribute(attr.ERROR_TYPE, name)
        raising = loud and self.config.strict and not plausible
        if first:
            log_contained(exc, where, plausible=plausible, raising=raising, strict=self.config.strict)
        if raising:
            raise exc

    # -- seam lifecycle -------------------------------------------------------------------------
    def begin(
        self,
        seam: str,
        request_face: str,
        context: RouteContext | Mapping[str, Any] | Spawn | None,
        call: SeamCall | None = None,
        hook: ResponseHook | None = None,
    ) -> tuple[Span, SeamObservation] | None:
        """Resolve the decision and start the seam span with it. None: call the bare host. ``hook``
        (with ``call``) says at finish what served the spawn (``served.settle``)."""
        if context is None:
            return None
        try:
            recorded = recorded_text(seam)  # the span and the record carry this one cleaned value
            start_attributes: dict[str, str] = {attr.SEAM: recorded}
            if isinstance(context, Spawn):
                conversation = host_text(context.conversation_id)
                if conversation is not None:
                    start_attributes[attr.GEN_AI_CONVERSATION] = conversation
                context = context.context
            if not isinstance(context, RouteContext):
                context = RouteContext.model_validate(context)
            if context.request_face != request_face:
                context = context.model_copy(update={"request_face": request_face})
            clean, encoded = self.sanitize(context)
            observation = SeamObservation(self, recorded, clean, encoded)
            observation.call, observation.hook = call, hook
            name = span_name(recorded, clean)
            attributes = observation.resolve(start_attributes)
            kind = self.conventions.span_kind(seam, request_face)
            span = self.tracer.start_span(name, kind=kind, attributes=attributes)
        except Exception as exc:
            self.contain(exc, "start", None, loud=True)
            self.exporter.count_not_observed()  # the host's call runs bare: the chain counts it
            return None
        observation.announce(span)
        if self.processor is not None:
            self.lineage.follow(span, observation)
        return span, observation

    def extract(self, call: SeamCall, extractor: Any) -> RouteContext | Mapping[str, Any] | Spawn | None:
        try:
            result: RouteContext | Mapping[str, Any] | Spawn | None = extractor(call)
        except Exception as exc:
            self.contain(exc, "extract", None, loud=True)
            self.exporter.count_not_observed()  # maybe a spawn: the chain counts it
            return None
        return result

    def finish(
        self, span: Span, observation: SeamObservation, host_error: BaseException | None, result: Any = None
    ) -> None:
        """Settle the served route, export and end, after the host ran (``result`` is what it returned):
        never raises (not even in strict mode)."""
        try:
            if host_error is not None and span.is_recording():
                span.set_attribute("error.type", type(host_error).__qualname__)
                span.set_status(Status(StatusCode.ERROR))
            if observation.lineage is not None:
                self.lineage.release(observation)
            settle(observation, span, result, host_error)
        except Exception as exc:
            self.contain(exc, "finish", span, loud=False, observation=observation)
        observation.export(span)  # the record, whatever failed before it (it says so)
        try:
            span.end()
        except Exception as exc:
            self.contain(exc, "end", None, loud=False)

    def count_never_started(self) -> None:
        """A coroutine or generator seam was dropped before its first step (see ``never_awaited``)."""
        with self._lock:
            self.never_awaited += 1

    def attach(self) -> None:
        """Start what runs beside the seams: the span processor on the host's SDK tracer provider
        (the global one when none was given; any other provider gets nothing, and the seam wrapper
        resolves by itself), checkpoint spans when OTLP export is configured, and the first read of
        a large store. ``close`` undoes it."""
        provider = self._tracer_provider if self._tracer_provider is not None else trace.get_tracer_provider()
        add = getattr(provider, "add_span_processor", None)
        if add is not None:
            self.processor = RouteShadowSpanProcessor(self)
            add(self.processor)
        self.checkpoint_spans = attach_checkpoint_spans(self.checkpointer, provider)
        _AT_EXIT.add(self)
        self.start_prefetch()

    def close(self) -> None:
        """The one way out (uninstrument, the provider's shutdown, interpreter exit), in order: the
        span processor becomes a no-op that holds nothing; the workers are drained, each wait
        bounded (a snapshot read in flight; the backlog written and a last checkpoint made and
        pushed to the witnesses; the checkpointer's and the pusher's threads ended); the chain is
        closed (what still waits goes to its spill file, and its file descriptors are given back); then
        the checkpoint span exporter sends the last checkpoint (waiting at most ``SHUTDOWN_TIMEOUT_S``).
        Closed for good: a seam still running records at once (``RouteShadowChainExporter``). Never raises."""
        self.closed = True
        _AT_EXIT.discard(self)
        if self.processor is not None:
            self.processor.detach()
            self.processor = None
        self.prefetch.close()
        self.exporter.flush_backlog(EXIT_FLUSH_S, spill=True)  # one bounded wait; what is left is spilled
        if self.exporter.refused is None:  # a refused chain path: nothing to checkpoint or make beside it
            self.checkpointer.checkpoint_now()
        self.checkpointer.close()
        self.exporter.close()
        spans, self.checkpoint_spans = self.checkpoint_spans, None
        if spans is not None:
            spans.close()


_AT_EXIT: Final[ProcessHook[ShadowRuntime]] = ProcessHook("closing at exit", ShadowRuntime.close)
"""The runtimes attached and not closed yet: closed at interpreter exit, a ``multiprocessing`` child's too
(``worker.run_at_exit``: one entry for all)."""
run_at_exit(_AT_EXIT)
