"""One chain, one identity: the plugin puts its chain's origin on every seam span and record, and its
checkpoints reach the OTLP exporter as spans whatever the host's sampler keeps."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from plugin.conftest import make_harness

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import checkpoint_spans
from otel_route_shadow.shadow import checkpoint_attributes as cpa

ORIGIN = "example.test/route-shadow/origin"


class SignallingExporter(InMemorySpanExporter):
    def __init__(self, wanted_size: int) -> None:
        super().__init__()
        self.wanted_size = wanted_size
        self.done = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if any(s.attributes and s.attributes.get(cpa.SIZE) == self.wanted_size for s in spans):
            self.done.set()
        return result


def _dispatch(n: int) -> None:
    for job in factory.plan_jobs(n, factory.FactorySettings()):
        factory.dispatch(job)


def test_every_span_and_record_carries_the_origin(tmp_path: Path) -> None:
    h = make_harness(tmp_path, origin=ORIGIN)
    try:
        _dispatch(6)
        spans = [s for s in h.spans() if s.attributes and "route_shadow.seam" in s.attributes]
        assert spans and all(s.attributes["route_shadow.origin"] == ORIGIN for s in spans)
        records = h.records()
        assert len(records) == len(spans)
        assert all(r["attributes"]["route_shadow.origin"] == ORIGIN for r in records)
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


def test_checkpoints_leave_as_spans_even_when_the_host_samples_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = SignallingExporter(wanted_size=12)
    monkeypatch.setattr(checkpoint_spans, "exporter_from_environment", lambda: exporter)
    h = make_harness(tmp_path, sampler=ALWAYS_OFF, origin=ORIGIN, checkpoint_records=5)
    try:
        _dispatch(12)
        assert h.spans() == []  # the host's sampler kept nothing
        assert len(h.records()) == 12
    finally:
        h.instrumentor.uninstrument()  # checkpoints what the chain holds
        h.provider.shutdown()
    assert exporter.done.wait(30)
    sizes = [s.attributes[cpa.SIZE] for s in exporter.get_finished_spans() if s.attributes]
    # The plugin checkpoints in a background thread (every 5 records here, and at uninstrument): how
    # many checkpoints fell before the last one depends on that thread, the sizes' order does not.
    assert sizes == sorted(set(sizes)) and sizes[-1] == 12
    assert {s.attributes[cpa.ORIGIN] for s in exporter.get_finished_spans() if s.attributes} == {ORIGIN}
    # Uninstrumenting shut the checkpoint spans' provider down once that last checkpoint was out.
    assert [t for t in threading.enumerate() if t.name == "route-shadow-checkpoint-spans-close"] == []
