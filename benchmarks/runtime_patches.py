"""One patch per cache or window of the instrumentation's seam path, for ``benchmarks.seam_variants``
(row 1), which measures each with and without (``docs/benchmarks.md``, "Caches, windows and
threads"). A patch is a context manager: it changes the process it runs in while it is entered, and
puts everything back on exit. The payload template has its patch in ``benchmarks.chain_patches``
(``no-template``).

* ``no-memo``: ``RuntimeMemo`` keeps nothing (no context seen clean, no decision record, no policy
  index is remembered).
* ``no-decision-memo``: only the decision records are not kept (each call resolves again).
* ``no-sanitize-memo``: only the contexts seen clean are not kept (each call searches its context for
  secrets and builds its canonical JSON again).
* ``export-path``: the record built from the attributes read back from the span, as a
  ``SpanExporter.export()`` of the span would build it (recording spans; row 1 samples every span).
* ``chain-reopened``: the chain opened and closed around every append instead of kept open.
* ``recheck-every-call``: the snapshot re-check window off (``snapshot_recheck_ms`` 0, through the
  documented environment setting): every call looks at the store (two ``stat`` calls).
* ``no-flag-event``: no ``feature_flag.evaluation`` event (issue 27).
* ``flag-event-span``: the event on the seam span instead of a log record
  (``OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT=span``, through the documented setting).
* ``flag-event-logged``: a host that exports logs: a global SDK ``LoggerProvider`` whose batch processor
  hands every record to an exporter that drops it, so the event's log record is built and queued.
* ``no-served-path``: the served route's seam path off: the seam span is not followed for the spans of
  its run, and nothing is settled at finish (what a seam without a response hook costs, issue 27).
* ``no-issue-27``: both of the above: the seam path as it was before the served route and the event.
* ``with-hook``: every seam has the demo's response hook (``factory.served_by``): the served route is
  settled from each call's result.
* ``with-hook-no-served-memo``: ``with-hook``, and the memo keeps no served-route variant of a decision
  record (each record with a served route walks, sanitizes and encodes its attributes again).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.chain_patches import Probe, swapped

__all__ = ["PATCHES"]


def _memo_without(kept: Callable[[Any], bool]) -> Callable[[], contextlib.AbstractContextManager[Probe]]:
    @contextlib.contextmanager
    def patch() -> Iterator[Probe]:
        from otel_route_shadow.instrumentation.runtime import RuntimeMemo

        original = RuntimeMemo.put

        def put(self: Any, key: Any, value: Any) -> None:
            if kept(key):
                original(self, key, value)

        with swapped(RuntimeMemo, "put", put):
            yield dict

    return patch


@contextlib.contextmanager
def _export_path() -> Iterator[Probe]:
    from otel_route_shadow.instrumentation.runtime import SeamObservation

    def export(self: Any, span: Any) -> None:
        if self.exported:
            return
        self.exported = True
        try:
            context = span.get_span_context()
            attributes = dict(span.attributes) if span.is_recording() else self.record.attributes
            self.runtime.exporter.append(context.trace_id, context.span_id, span.start_time, attributes)
        except Exception as exc:
            self.runtime.contain(exc, "chain", span, loud=False, observation=self)

    with swapped(SeamObservation, "export", export):
        yield dict


@contextlib.contextmanager
def _chain_reopened() -> Iterator[Probe]:
    from otel_route_shadow.chain import DecisionChain
    from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter
    from otel_route_shadow.shadow.record import record_tokens

    def append_templated(
        self: Any, template: Any, trace_id: int, span_id: int, start: int, duration: int
    ) -> None:
        log = DecisionChain(
            self._path,
            durability=self._durability,
            lock_timeout=self._lock_timeout,
            backlog=self._backlog,
            listener=self._listener,
        )
        try:
            log.submit(template.encode(record_tokens(trace_id, span_id, start, duration)))
        finally:
            log.close()

    with swapped(RouteShadowChainExporter, "append_templated", append_templated):
        yield dict


def _setting(name: str, value: str) -> Callable[[], contextlib.AbstractContextManager[Probe]]:
    @contextlib.contextmanager
    def patch() -> Iterator[Probe]:
        before = os.environ.get(name)
        os.environ[name] = value
        try:
            yield dict
        finally:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before

    return patch


@contextlib.contextmanager
def _flag_event_logged() -> Iterator[Probe]:
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        LogRecordExporter,
        LogRecordExportResult,
    )

    exported = [0]

    class Drop(LogRecordExporter):
        def export(self, batch: Any) -> LogRecordExportResult:
            exported[0] += len(batch)
            return LogRecordExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(BatchLogRecordProcessor(Drop()))
    set_logger_provider(provider)  # a fresh process per variant: set once, for this variant only

    def probe() -> dict[str, int]:
        provider.force_flush()
        return {"log_records_exported": exported[0]}

    try:
        yield probe
    finally:
        provider.shutdown()


@contextlib.contextmanager
def _no_flag_event() -> Iterator[Probe]:
    from otel_route_shadow.shadow import record

    with swapped(record, "flag_evaluation", lambda attributes: None):
        yield dict


@contextlib.contextmanager
def _no_served_path() -> Iterator[Probe]:
    from otel_route_shadow.instrumentation import runtime
    from otel_route_shadow.instrumentation.served import Lineage

    with (
        swapped(Lineage, "follow", lambda self, span, observation: None),
        swapped(runtime, "settle", lambda observation, span, result, error: None),
    ):
        yield dict


@contextlib.contextmanager
def _no_issue_27() -> Iterator[Probe]:
    with _no_flag_event(), _no_served_path():
        yield dict


@contextlib.contextmanager
def _with_hook() -> Iterator[Probe]:
    from otel_route_shadow.demo import factory
    from otel_route_shadow.instrumentation.config import Seam, SeamSpec

    def seam(self: Any) -> Seam:
        return Seam(self._resolved_name, self.request_face, self.extractor, factory.served_by)

    with swapped(SeamSpec, "seam", property(seam)):
        yield dict


@contextlib.contextmanager
def _with_hook_no_served_memo() -> Iterator[Probe]:
    from otel_route_shadow.instrumentation.served import SERVED_KEY

    with _with_hook(), _memo_without(lambda key: not (isinstance(key, tuple) and key[0] == SERVED_KEY))():
        yield dict


PATCHES: dict[str, Callable[[], contextlib.AbstractContextManager[Probe]]] = {
    "no-memo": _memo_without(lambda key: False),
    "no-decision-memo": _memo_without(lambda key: not (isinstance(key, tuple) and len(key) == 6)),
    "no-sanitize-memo": _memo_without(lambda key: not isinstance(key, bytes)),
    "export-path": _export_path,
    "chain-reopened": _chain_reopened,
    "recheck-every-call": _setting("OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS", "0"),
    "no-flag-event": _no_flag_event,
    "flag-event-span": _setting("OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT", "span"),
    "flag-event-logged": _flag_event_logged,
    "no-served-path": _no_served_path,
    "no-issue-27": _no_issue_27,
    "with-hook": _with_hook,
    "with-hook-no-served-memo": _with_hook_no_served_memo,
}
