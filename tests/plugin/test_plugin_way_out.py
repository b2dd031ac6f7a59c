"""The instrumentation's one way out (uninstrument, or the host provider's shutdown), with real
components: the workers drained first (the last checkpoint made while the chain is still open), then
the chain closed, then the checkpoint span exporter; the exporter closes no checkpointer."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, ShadowRuntime, shadow_spawn
from otel_route_shadow.instrumentation.checkpoint_spans import attach_checkpoint_spans
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.worker import WorkerName


def _state(runtime: ShadowRuntime) -> dict[str, Any]:
    log = runtime.exporter._log
    return {
        "chain open": log is not None and log._fd != -1,
        "checkpointer thread": any(t.name == WorkerName.CHECKPOINTER for t in threading.enumerate()),
    }


@pytest.mark.parametrize("way_out", ["uninstrument", "provider shutdown"])
def test_the_way_out_drains_the_workers_then_closes_the_chain_then_the_exporter(
    tmp_path: Path, way_out: str
) -> None:
    provider = TracerProvider()
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider, chain_path=tmp_path / "chain.jsonl", seams=(), checkpoint_records=2
    )
    runtime = instrumentor.runtime
    assert runtime is not None
    events: list[tuple[Any, ...]] = []

    class Recording(InMemorySpanExporter):
        def shutdown(self) -> None:
            events.append(("exporter shut down", _state(runtime)))
            super().shutdown()

    exporter = Recording()
    runtime.checkpoint_spans = attach_checkpoint_spans(runtime.checkpointer, provider, exporter)
    runtime.checkpointer.add_listener(lambda c: events.append(("checkpoint", c.size, _state(runtime))))
    try:
        jobs = factory.plan_jobs(3, factory.FactorySettings())
        for job in jobs[:2]:  # the second record is due: the checkpointer's thread makes 2
            with shadow_spawn(factory.context_for(job, "agentic"), seam="t"):
                pass
        assert runtime.checkpointer._worker.idle(30)  # a hang guard, not a speed assertion
        assert runtime.checkpointer.last is not None and runtime.checkpointer.last.size == 2
        with shadow_spawn(factory.context_for(jobs[2], "agentic"), seam="t"):  # not due: left for the way out
            pass
        assert any(t.name == WorkerName.CHECKPOINTER for t in threading.enumerate())
        events.clear()
        if way_out == "uninstrument":
            instrumentor.uninstrument()
        else:
            provider.shutdown()
        assert events[-1] == ("exporter shut down", {"chain open": False, "checkpointer thread": False})
        last = [e for e in events if e[0] == "checkpoint"]
        assert [e[1:] for e in last] == [(3, {"chain open": True, "checkpointer thread": True})]
        assert runtime.checkpointer.last is not None and runtime.checkpointer.last.size == 3
        sizes = [span.attributes[cpa.SIZE] for span in exporter.get_finished_spans() if span.attributes]
        assert sizes[-1] == 3  # the last checkpoint's span went out before its exporter shut down
    finally:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()


def test_the_chain_exporter_closes_the_chain_only(tmp_path: Path) -> None:
    provider = TracerProvider()
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=provider, chain_path=tmp_path / "chain.jsonl", seams=())
    runtime = instrumentor.runtime
    assert runtime is not None
    try:
        with shadow_spawn(
            factory.context_for(factory.plan_jobs(1, factory.FactorySettings())[0], "agentic"), seam="t"
        ):
            pass
        made: list[int] = []
        runtime.checkpointer.add_listener(lambda c: made.append(c.size))
        runtime.exporter.close()
        assert made == [] and runtime.checkpointer.last is None  # no checkpoint made by the exporter
        assert not hasattr(runtime.exporter, "checkpointer")
    finally:
        instrumentor.uninstrument()
    assert runtime.checkpointer.last is not None and runtime.checkpointer.last.size == 1


def test_records_lost_unmarked_are_reported_once_on_the_way_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Records neither the chain, the spill file nor ``<chain>.lost`` could take were reported lost
    twice: the way out flushed the backlog, then the chain's close flushed the same records again."""
    chain = tmp_path / "chain.jsonl"
    chain.touch()
    (tmp_path / "chain.jsonl.spill").mkdir()  # a spill file that is a folder is refused
    (tmp_path / "chain.jsonl.lost").mkdir()  # and so is a lost-count file
    provider = TracerProvider()
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=provider, chain_path=chain, seams=(), chain_lock_timeout_ms=1)
    holder = os.open(chain, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # the chain's lock, held (by another open of the file)
        job = factory.plan_jobs(1, factory.FactorySettings())[0]
        with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
            for _ in range(3):
                with shadow_spawn(factory.context_for(job, "agentic"), seam="manual") as record:
                    assert record is not None
            instrumentor.uninstrument()
    finally:
        os.close(holder)
        provider.shutdown()
    lost = [r.getMessage() for r in caplog.records if "lost, unmarked" in r.getMessage()]
    assert len(lost) == 1, lost
    assert lost[0].startswith("route shadow: 3 chain records for ")
