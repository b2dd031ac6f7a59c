"""The decision as a ``feature_flag.evaluation`` log event: a LogRecord with that ``event_name``,
emitted through the host's logger provider in the seam span's context (real SDK providers, in-memory
exporters), and the span event kept behind ``OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import (
    RouteShadowConfig,
    RouteShadowInstrumentor,
    environment_variables,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import flag_evaluation

from .conftest import Harness, make_harness


def _dispatch(count: int) -> None:
    for job in factory.plan_jobs(count, factory.FactorySettings()):
        factory.dispatch(job)


def _close(h: Harness) -> None:
    h.instrumentor.uninstrument()
    h.provider.shutdown()


def test_each_seam_call_emits_one_flag_evaluation_log_record_in_its_span_context(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    try:
        _dispatch(12)
        spans, logs = h.spans(), h.logs()
    finally:
        _close(h)
    assert len(spans) == len(logs) == 12
    by_span = {span.context.span_id: span for span in spans}
    for log in logs:
        record = log.log_record
        assert record.event_name == attr.FLAG_EVALUATION
        span = by_span[record.span_id]  # correlated: the seam span's ids
        assert record.trace_id == span.context.trace_id and record.timestamp is not None
        assert dict(record.attributes or {}) == flag_evaluation(span.attributes)
        assert log.instrumentation_scope is not None and log.instrumentation_scope.name == (
            "otel_route_shadow.instrumentation"
        )
        assert span.events == ()  # the default sink is the log alone


def test_the_value_is_the_route_the_variant_names(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    try:
        _dispatch(3)
        logs = h.logs()
    finally:
        _close(h)
    for log in logs:
        attributes = log.log_record.attributes or {}
        assert attributes[attr.FLAG_VALUE] == attributes[attr.FLAG_VARIANT]
        assert attributes[attr.FLAG_KEY].startswith("route_shadow.route/")


@pytest.mark.parametrize(("sink", "on_span", "as_log"), [("span", 1, 0), ("both", 1, 1), ("log", 0, 1)])
def test_the_span_event_stays_available_behind_the_setting(
    tmp_path: Path, sink: str, on_span: int, as_log: int
) -> None:
    h = make_harness(tmp_path, flag_event=sink)
    try:
        _dispatch(2)
        spans, logs = h.spans(), h.logs()
    finally:
        _close(h)
    assert len(logs) == 2 * as_log
    for span in spans:
        assert [event.name for event in span.events] == [attr.FLAG_EVALUATION] * on_span
        if on_span:
            assert dict(span.events[0].attributes or {}) == flag_evaluation(span.attributes)


def test_the_flag_event_setting_is_read_from_the_environment_without_case() -> None:
    name = environment_variables.OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT
    assert RouteShadowConfig.resolve(environ={}).flag_event == "log"
    assert RouteShadowConfig.resolve(environ={name: " Span "}).flag_event == "span"
    assert RouteShadowConfig.resolve(environ={name: ""}).flag_event == "log"  # empty is unset
    assert RouteShadowConfig.resolve(environ={name: "span"}, flag_event="both").flag_event == "both"


def test_an_unknown_flag_event_sink_is_refused_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(chain_path=tmp_path / "chain.jsonl", flag_event="otlp")
    assert instrumentor.refused is not None and "flag_event" in instrumentor.refused
    assert not instrumentor.is_instrumented_by_opentelemetry


class _Raising(LogRecordProcessor):
    def on_emit(self, log_record: Any) -> None:
        raise RuntimeError("the host's log pipeline broke")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def test_a_log_pipeline_that_raises_is_contained_marked_and_the_spawn_proceeds(tmp_path: Path) -> None:
    broken = LoggerProvider()
    broken.add_log_record_processor(_Raising())
    h = make_harness(tmp_path, logger_provider=broken)
    try:
        _dispatch(2)
        records, spans = h.records(), h.spans()
        errors = dict(h.instrumentor.runtime.errors)  # type: ignore[union-attr]
    finally:
        _close(h)
    assert len(records) == len(spans) == 2  # the spawns ran and were recorded
    assert all(r["attributes"][attr.ERROR_TYPE] == "RuntimeError" for r in records)
    assert all(span.attributes[attr.ERROR_TYPE] == "RuntimeError" for span in spans)
    assert errors == {("flag-event", "RuntimeError"): 2}
