"""The served route at the seam: the response hook, and the run's own spans.

The chain holds one record per spawn, written when the seam span ends; what served the spawn is
settled just before, from one of two sources:

1. the seam's **response hook** (``Seam.response_hook``), called with the seam call, its result and
   its exception: what it returns decides. A hook that raises or returns anything but a route, a
   mapping of its fields or None is contained (logged once per cause, counted, marked as
   ``route_shadow.error.type``): the host's result is untouched and the served route is ``unknown``;
2. else the **run's own spans**: while a seam span is open, the span processor follows the spans
   started under it in the host's process (children, their children, ...) and reads each one that
   ends before the seam span does (``served_from_attributes``; a span whose status is ERROR is a
   failed attempt and served nothing). The first that differs from the route chosen decides; if none
   differs, the last that reported. Each of them, failed or not, is an attempt (in the order the
   spans started, at most ``ATTEMPTS_MAX``), recorded with what served. Only recording spans reach a processor: a span the sampler drops,
   and what runs under it, is not read. In the call and coroutine cases the run ends before the seam
   span; a seam that only launches the run (returns a handle, starts a thread) ends first, and what
   its run reports afterwards is not read: its served route is ``unknown``, unless its hook knows.

Nothing reported is ``unknown`` (the record's default), never agreement. A seam with no hook whose run
starts no span costs two dictionary operations (follow and release).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.trace import Span, StatusCode

from otel_route_shadow.chain import PayloadTemplate
from otel_route_shadow.core import (
    ATTEMPTS_MAX,
    Attempt,
    LegacyRoute,
    ServedRoute,
    ServedSource,
    ServedStatus,
    served_status,
)
from otel_route_shadow.instrumentation.config import ResponseHook, SeamCall
from otel_route_shadow.instrumentation.memo import RuntimeMemo
from otel_route_shadow.instrumentation.package import SCOPE_NAME
from otel_route_shadow.shadow import (
    ShadowRecord,
    attempts_from_attributes,
    record_template,
    served_attributes,
    served_from_attributes,
    served_route,
)

__all__ = ["DESCENDANTS_MAX", "SERVED_KEY", "Lineage", "ServedReports", "settle"]

DESCENDANTS_MAX: Final = 4096
"""Spans followed under one open seam span; later ones are not read (their seam may say ``unknown``)."""
SERVED_KEY: Final = "served"
"""First item of the runtime memo's keys for a decision record with a served route: ``(SERVED_KEY,
id(record), served route, source)`` -> ``(record, the attributes that change, their payload
template)``. A hit must hold the very record (an id outlives its object), so it is exact: a factory
served the same few routes records the served-route variant of a decision as cheaply as the decision
itself (docs/benchmarks.md, "Caches, windows and threads")."""


class ServedReports:
    """What the run's spans reported while its seam span was open: the first report that differs from
    the route chosen, else the last report, and every attempt (by start time)."""

    __slots__ = ("attempts", "differs", "last")

    def __init__(self) -> None:
        self.differs: ServedRoute | None = None
        self.last: ServedRoute | None = None
        self.attempts: list[tuple[int, Attempt]] = []

    def attempt(self, start: int, attempt: Attempt) -> None:
        if len(self.attempts) < ATTEMPTS_MAX:
            self.attempts.append((start, attempt))

    def add(self, served: ServedRoute, legacy: LegacyRoute | None) -> None:
        if self.differs is not None:
            return
        if legacy is not None and served_status(legacy, served) is ServedStatus.DIFFERS:
            self.differs = served
        else:
            self.last = served

    def route(self) -> ServedRoute | None:
        served = self.differs if self.differs is not None else self.last
        if not self.attempts:
            return served
        attempts = tuple(attempt for _, attempt in sorted(self.attempts, key=lambda item: item[0]))
        return (served or ServedRoute()).model_copy(update={"attempts": attempts})


class _Runtime(Protocol):
    """What this module uses of the runtime (``ShadowRuntime``)."""

    @property
    def memo(self) -> RuntimeMemo: ...

    def contain(
        self, exc: BaseException, where: str, span: Span | None, *, loud: bool, observation: Any
    ) -> None: ...


class _Observation(Protocol):
    """What this module reads and writes of a seam's observation (``runtime.SeamObservation``)."""

    lineage: list[int] | None
    reports: ServedReports | None
    overrides: dict[str, Any] | None
    served_template: PayloadTemplate | None

    @property
    def record(self) -> ShadowRecord | None: ...

    @property
    def hook(self) -> ResponseHook | None: ...

    @property
    def call(self) -> SeamCall | None: ...

    @property
    def runtime(self) -> _Runtime: ...


class Lineage:
    """Open seam spans and the spans started under them in this process, by span id.

    The seam registers its span (``follow``) and lets go of it and of everything followed under it
    when it finishes (``release``), so what is held is bounded by the seams open at once and
    :data:`DESCENDANTS_MAX` each. Dictionary and list operations are atomic under the interpreter
    lock, so spans ending in other threads need no lock of ours."""

    __slots__ = ("spans",)

    def __init__(self) -> None:
        self.spans: dict[int, _Observation] = {}

    def follow(self, span: Span, observation: _Observation) -> None:
        span_id = span.get_span_context().span_id
        self.spans[span_id] = observation
        observation.lineage = [span_id]

    def started(self, span: SdkSpan) -> None:
        """A span started while a seam span is open: followed when its parent is followed."""
        parent = span.parent
        if parent is None:
            return
        observation = self.spans.get(parent.span_id)
        lineage = observation.lineage if observation is not None else None
        if observation is None or lineage is None or len(lineage) > DESCENDANTS_MAX:
            return
        span_id = span.get_span_context().span_id
        self.spans[span_id] = observation
        lineage.append(span_id)

    def ended(self, span: ReadableSpan) -> None:
        """A followed span ended: what it says served the run is kept for its seam."""
        context = span.context
        observation = self.spans.get(context.span_id) if context is not None else None
        if observation is None:
            return
        scope = span.instrumentation_scope
        if scope is not None and scope.name == SCOPE_NAME:
            return  # a seam span (of a seam nested in this one) says what was chosen, not what served
        failed = span.status.status_code is StatusCode.ERROR
        attempts = attempts_from_attributes(span.attributes, failed)
        if not attempts:
            return
        if observation.reports is None:
            observation.reports = ServedReports()
        for attempt in attempts:
            observation.reports.attempt(span.start_time or 0, attempt)
        served = None if failed else served_from_attributes(span.attributes)
        if served is not None:
            record = observation.record
            observation.reports.add(served, record.shadow.legacy if record is not None else None)

    def release(self, observation: _Observation) -> None:
        lineage, observation.lineage = observation.lineage, None
        for span_id in lineage or ():
            self.spans.pop(span_id, None)


def settle(observation: _Observation, span: Span, result: Any, error: BaseException | None) -> None:
    """Decide what served the spawn (the hook, else the run's spans) and put it on the span and the
    observation (``overrides``, what the record adds to the decision's attributes, and the record's
    payload template with them, memoised per decision record and route). Nothing reported, or a hook
    that failed: nothing changes, and the record says ``unknown``."""
    record = observation.record
    if record is None or (observation.hook is None and observation.reports is None):
        return
    served: ServedRoute | None = None
    source = ServedSource.RESPONSE_HOOK
    hook, call = observation.hook, observation.call
    if hook is not None and call is not None:
        try:
            served = served_route(hook(call, result, error))
        except Exception as exc:
            observation.runtime.contain(exc, "response-hook", span, loud=False, observation=observation)
            return
    if served is None and observation.reports is not None:
        served, source = observation.reports.route(), ServedSource.DESCENDANT_SPAN
    if served is None:
        return
    memo = observation.runtime.memo
    key = (SERVED_KEY, id(record), served, source)
    cached = memo.get(key)
    if cached is None or cached[0] is not record:  # an id reused by another record is a miss
        overrides = served_attributes(record.attributes, record.shadow.legacy, served, source.value)
        cached = (record, overrides, record_template({**record.attributes, **overrides}))
        memo.put(key, cached)
    observation.overrides, observation.served_template = cached[1], cached[2]
    if span.is_recording():
        span.set_attributes(observation.overrides)
