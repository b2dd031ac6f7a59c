"""Real OpenTelemetry SDK, real in-memory exporter, real chain: no mocks of OpenTelemetry."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, SeamSpec

DEMO_SEAMS = tuple(
    SeamSpec(target=target, request_face=face, extractor=factory.extract_job, name=name)
    for name, (target, face) in factory.SEAMS.items()
)


@dataclass
class Harness:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    instrumentor: RouteShadowInstrumentor
    chain: Path
    store: Path
    log_exporter: InMemoryLogRecordExporter

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def logs(self) -> list[Any]:
        """The log records emitted through the harness's logger provider (``ReadableLogRecord``)."""
        return list(self.log_exporter.get_finished_logs())

    def records(self) -> list[dict[str, Any]]:
        if not self.chain.exists():
            return []
        return [payload for _, payload in iter_payloads(self.chain) if payload.get("kind") == "route-shadow"]


def make_harness(tmp_path: Path, sampler: Sampler | None = None, **instrument_kwargs: Any) -> Harness:
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log_exporter = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    instrumentor = RouteShadowInstrumentor()
    kwargs: dict[str, Any] = {
        "tracer_provider": provider,
        "logger_provider": logger_provider,
        "seams": DEMO_SEAMS,
        "chain_path": tmp_path / "chain" / "chain.jsonl",
        "store": tmp_path / "store",
    }
    kwargs.update(instrument_kwargs)
    instrumentor.instrument(**kwargs)
    return Harness(
        provider, exporter, instrumentor, Path(kwargs["chain_path"]), Path(kwargs["store"]), log_exporter
    )


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = make_harness(tmp_path)
    try:
        yield h
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


@pytest.fixture(autouse=True)
def _always_uninstrument() -> Iterator[None]:
    yield
    instrumentor = RouteShadowInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
