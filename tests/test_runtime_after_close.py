"""The host is never disturbed by what it hands the plugin, nor by the plugin's way out: a settings
object or a provider that raises leaves the host's calls as they are, and a runtime closed while the
host still spawns (provider shutdown before the last jobs) writes each late record at once, starts no
thread and keeps no descriptor open."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from plugin.conftest import DEMO_SEAMS, Harness, make_harness

from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn


def _dispatch(n: int) -> list[Any]:
    return [factory.dispatch(job) for job in factory.plan_jobs(n, factory.FactorySettings())]


def _route_shadow_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("route-shadow")]


def _descriptors_on(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            continue
    return count


def _shut_down(h: Harness) -> None:
    if h.instrumentor.is_instrumented_by_opentelemetry:
        h.instrumentor.uninstrument()
    h.provider.shutdown()


class _RaisingSettings:
    @property
    def route_shadow_enabled(self) -> bool:
        raise RuntimeError("settings backend unavailable")


def test_a_settings_object_that_raises_never_breaks_the_spawn(tmp_path: Path) -> None:
    h = make_harness(tmp_path, settings=_RaisingSettings())
    try:
        results = _dispatch(3)
        stages = [LegacyStage(mechanism="role-dial", provider="zai", model="glm-4.6")]
        context = RouteContext(
            repo="acme/widgets",
            principal_id="adr_reviewer",
            request_face="agentic",
            legacy_route=build_legacy_route(stages, "agentic", "zai-legacy"),
        )
        with shadow_spawn(context, seam="run_agent") as record:
            assert record is None  # off: the block runs unshadowed
        runtime = h.instrumentor.runtime
        assert runtime is not None
        assert runtime.errors[("settings", "RuntimeError")] >= 4  # each call counted, logged once
    finally:
        _shut_down(h)
    assert len(results) == 3
    assert h.spans() == []
    assert h.records() == []


class _RefusingProvider(TracerProvider):
    def add_span_processor(self, span_processor: Any) -> None:
        raise RuntimeError("provider refuses processors")


class _RefusingLogs:
    def get_logger(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("log pipeline not ready")


@pytest.mark.parametrize(
    "providers",
    [{"tracer_provider": _RefusingProvider()}, {"logger_provider": _RefusingLogs()}],
    ids=["tracer-provider-raises", "logger-provider-raises"],
)
def test_instrument_never_raises_when_the_host_providers_raise(
    tmp_path: Path, providers: dict[str, Any]
) -> None:
    instrumentor = RouteShadowInstrumentor()
    chain = tmp_path / "chain.jsonl"
    try:
        instrumentor.instrument(seams=DEMO_SEAMS, chain_path=chain, **providers)
        assert instrumentor.refused is not None
        assert "not ready" in instrumentor.refused or "refuses" in instrumentor.refused
        assert not instrumentor.is_instrumented_by_opentelemetry
        assert instrumentor.runtime is None
        assert not hasattr(factory.run_lightweight_agent, "__wrapped__")  # nothing wrapped
        assert _route_shadow_threads() == []
        _dispatch(2)
    finally:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
    assert not chain.exists()


def test_a_closed_runtime_writes_a_late_record_at_once_and_starts_no_thread(tmp_path: Path) -> None:
    h = make_harness(tmp_path, checkpoint_records=1)
    try:
        _dispatch(1)
        h.provider.shutdown()  # the host shuts tracing down first, then drains its last jobs
        assert _route_shadow_threads() == []
        _dispatch(2)
        assert len(h.records()) == 3  # written in the spawn, not left in a backlog
        assert _route_shadow_threads() == []  # the checkpointer did not start again
        assert _descriptors_on(h.chain) == 0  # the descriptor the late append opened is closed
    finally:
        _shut_down(h)


def test_a_late_record_that_misses_the_lock_is_spilled_not_left_behind(tmp_path: Path) -> None:
    h = make_harness(tmp_path, chain_lock_timeout_ms=0)
    try:
        _dispatch(1)
        runtime = h.instrumentor.runtime
        assert runtime is not None
        h.provider.shutdown()
        fd = os.open(h.chain, os.O_RDWR)  # another writer holds the chain's lock
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _dispatch(1)
        finally:
            os.close(fd)
        log = runtime.exporter._log
        assert log is not None and log.backlog == 0  # nothing waits for an exit that never writes it
        assert Path(log.spill_path).stat().st_size > 0
        _dispatch(1)  # the next writer writes the spill file into the chain first
        assert len(h.records()) == 3
    finally:
        _shut_down(h)
