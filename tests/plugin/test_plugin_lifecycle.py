"""A seam's whole life: streaming seams, the kill switch both ways, strict mode after the host,
an unreadable store, descriptors over instrument cycles, and a bad setting under
``opentelemetry-instrument``."""

from __future__ import annotations

import asyncio
import atexit
import gc
import inspect
import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import SeamSpec, current_runtime, shadow_seam, shadow_spawn
from otel_route_shadow.shadow import attributes as attr
from tests.plugin import readme_host
from tests.plugin.readme_host import HostError, Job

from .conftest import DEMO_SEAMS, Harness, make_harness

HOST_LOG: list[str] = []
BOOM = HostError("the host's own failure, mid-stream")


def echo(job: Job) -> Iterator[Any]:
    """A host generator using the whole protocol: sent values, thrown exceptions, a return value."""
    HOST_LOG.append("started")
    try:
        received = yield "ready"
        while received is not None:
            try:
                received = yield ("echo", received)
            except KeyError as exc:
                received = yield ("caught", exc)
        return ("done", job.number)
    finally:
        HOST_LOG.append("finally")


def failing(job: Job) -> Iterator[int]:
    yield 1
    raise BOOM


def nested(job: Job) -> Iterator[int]:
    tracer = trace.get_tracer("host")
    for step in range(2):
        with tracer.start_as_current_span(f"host step {step}"):
            pass
        yield step


async def aecho(job: Job) -> AsyncIterator[Any]:
    received = yield "ready"
    while received is not None:
        await asyncio.sleep(0)
        received = yield ("echo", received)


async def afailing(job: Job) -> AsyncIterator[int]:
    yield 1
    raise BOOM


async def acoro(job: Job) -> int:
    readme_host.HOST_CALLS[0] += 1
    await asyncio.sleep(0)
    return job.number


def _spec(name: str, face: str = "agentic") -> SeamSpec:
    return SeamSpec(target=f"{__name__}:{name}", request_face=face, extractor=readme_host.extract_execute)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Harness]:
    seams = tuple(
        _spec(name) for name in ("echo", "failing", "nested", "aecho", "afailing", "acoro", "protocol")
    )
    h = make_harness(tmp_path, seams=seams)
    try:
        yield h
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


def _module() -> Any:
    return sys.modules[__name__]


# -- generators ----------------------------------------------------------------------------------


def test_a_generator_seam_is_one_span_over_its_whole_iteration(host: Harness) -> None:
    gen = _module().echo(Job(7))
    assert host.spans() == [] and readme_host.HOST_CALLS is not None
    assert next(gen) == "ready"
    assert gen.send("a") == ("echo", "a")
    assert host.spans() == [], "the span ended before the generator did"
    thrown = KeyError("k")
    kind, caught = gen.throw(thrown)
    assert kind == "caught" and caught is thrown  # thrown values reach the host untouched
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == ("done", 7)  # the return value passes through
    [span] = host.spans()
    assert span.status.status_code is not StatusCode.ERROR and attr.ERROR_TYPE not in span.attributes
    assert len(host.records()) == 1


def test_an_error_raised_while_iterating_is_marked_and_is_the_same_object(host: Harness) -> None:
    gen = _module().failing(Job(1))
    assert next(gen) == 1
    with pytest.raises(HostError) as caught:
        next(gen)
    assert caught.value is BOOM
    [span] = host.spans()
    assert span.attributes["error.type"] == "HostError" and span.status.status_code is StatusCode.ERROR
    # the host's message is never put on the span: no exception event (the decision's is a log record)
    assert [event.name for event in span.events] == []
    assert [log.log_record.event_name for log in host.logs()] == ["feature_flag.evaluation"]
    assert len(host.records()) == 1


def test_closed_and_collected_generators_end_their_span_and_run_the_host_finally(host: Harness) -> None:
    HOST_LOG.clear()
    closed = _module().echo(Job(1))
    next(closed)
    closed.close()
    dropped = _module().echo(Job(2))
    next(dropped)
    del dropped
    gc.collect()
    assert HOST_LOG == ["started", "finally", "started", "finally"]
    assert len(host.spans()) == 2 and len(host.records()) == 2
    assert all("error.type" not in s.attributes for s in host.spans())  # stopping early is no error


def test_the_seam_span_is_current_while_the_generator_runs(host: Harness) -> None:
    with mock.patch.object(trace, "get_tracer", host.provider.get_tracer):
        assert list(_module().nested(Job(3))) == [0, 1]
    spans = {s.name: s for s in host.spans()}
    seam = next(s for s in spans.values() if s.attributes.get(attr.SEAM) == "nested")
    assert spans["host step 0"].parent.span_id == seam.context.span_id
    assert spans["host step 1"].parent.span_id == seam.context.span_id


def test_a_generator_never_started_ran_no_host_code_and_is_counted(host: Harness) -> None:
    HOST_LOG.clear()
    gen = _module().echo(Job(1))
    del gen
    gc.collect()
    assert HOST_LOG == [] and host.spans() == [] and host.records() == []
    assert host.instrumentor.runtime is not None and host.instrumentor.runtime.never_awaited == 1


def test_a_decorated_generator_function_stays_a_generator_function(host: Harness) -> None:
    """shadow_seam turned generator and async-generator functions into plain functions
    (inspect.isgeneratorfunction True -> False); the span over the whole run is kept."""
    decorate = shadow_seam("agentic", extractor=readme_host.extract_execute, name="decorated")
    # the functions as the host wrote them (the fixture instruments the module's names)
    gen_fn, agen_fn = decorate(_module().echo.__wrapped__), decorate(_module().aecho.__wrapped__)
    assert inspect.isgeneratorfunction(gen_fn) and inspect.isasyncgenfunction(agen_fn)
    gen = gen_fn(Job(7))
    assert next(gen) == "ready" and gen.send("a") == ("echo", "a")
    assert host.spans() == [], "the span ended before the generator did"
    thrown = KeyError("k")
    assert gen.throw(thrown) == ("caught", thrown)  # thrown values reach the host untouched
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == ("done", 7)
    early = gen_fn(Job(8))
    next(early)
    early.close()  # closing early is not an error, and ends the span

    async def consume() -> list[Any]:
        agen = agen_fn(Job(4))
        got = [await agen.asend(None), await agen.asend("x")]
        with pytest.raises(StopAsyncIteration):
            await agen.asend(None)
        return got

    assert asyncio.run(consume()) == ["ready", ("echo", "x")]
    spans = host.spans()
    assert [s.attributes[attr.SEAM] for s in spans] == ["decorated"] * 3
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET] * 3
    assert len(host.records()) == 3


# -- async generators and coroutines -------------------------------------------------------------


def test_an_async_generator_seam_is_one_span_over_its_whole_iteration(host: Harness) -> None:
    async def consume() -> list[Any]:
        agen = _module().aecho(Job(4))
        got = [await agen.asend(None), await agen.asend("x")]
        assert host.spans() == []
        with pytest.raises(StopAsyncIteration):
            await agen.asend(None)
        return got

    assert asyncio.run(consume()) == ["ready", ("echo", "x")]
    assert len(host.spans()) == 1 and len(host.records()) == 1


def test_an_async_generator_error_and_an_early_aclose(host: Harness) -> None:
    async def consume() -> BaseException:
        early = _module().aecho(Job(5))
        await early.asend(None)
        await early.aclose()
        failing = _module().afailing(Job(6))
        try:
            async for _ in failing:
                pass
        except HostError as exc:
            return exc
        raise AssertionError("the host's error was lost")

    assert asyncio.run(consume()) is BOOM
    by_seam = {s.attributes[attr.SEAM]: s for s in host.spans()}
    assert "error.type" not in by_seam["aecho"].attributes
    assert by_seam["afailing"].attributes["error.type"] == "HostError"
    assert len(host.records()) == 2


def test_a_coroutine_never_awaited_leaks_no_span_and_is_counted(host: Harness) -> None:
    before = readme_host.HOST_CALLS[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "coroutine ... was never awaited", as bare
        coro = _module().acoro(Job(1))
        del coro
        gc.collect()
    assert readme_host.HOST_CALLS[0] == before
    assert host.spans() == [] and host.records() == []
    assert host.instrumentor.runtime is not None and host.instrumentor.runtime.never_awaited == 1
    assert asyncio.run(_module().acoro(Job(2))) == 2
    assert len(host.spans()) == 1 and len(host.records()) == 1


# -- the kill switch, both ways ------------------------------------------------------------------


def _dispatch(n: int) -> list[factory.SpawnResult]:
    return [factory.dispatch(job) for job in factory.plan_jobs(n, factory.FactorySettings())]


def test_started_with_the_kill_switch_set_unsetting_it_turns_shadowing_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED", "true")
    h = make_harness(tmp_path)
    try:
        _dispatch(4)
        assert h.records() == []
        monkeypatch.delenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED")
        _dispatch(4)
        assert len(h.records()) == 4
        monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED", "true")
        _dispatch(4)
        assert len(h.records()) == 4
    finally:
        h.instrumentor.uninstrument()


class _Settings:
    route_shadow_enabled: object = False


def test_a_settings_object_that_starts_off_turns_on_and_off_live(tmp_path: Path) -> None:
    settings = _Settings()
    h = make_harness(tmp_path, settings=settings)
    try:
        _dispatch(3)
        settings.route_shadow_enabled = True
        _dispatch(3)
        settings.route_shadow_enabled = False
        _dispatch(3)
    finally:
        h.instrumentor.uninstrument()
    assert len(h.records()) == len(h.spans()) == 3


# -- strict mode after the host ------------------------------------------------------------------


def _explode(*args: object, **kwargs: object) -> None:
    raise TypeError("a bug in the shadow path")


@pytest.mark.parametrize("strict", [True, False])
def test_a_bug_after_the_host_returned_is_logged_never_raised(
    strict: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = make_harness(tmp_path, strict=strict)
    runtime = h.instrumentor.runtime
    assert runtime is not None
    calls: list[factory.Job] = []
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    try:
        with (
            caplog.at_level(logging.ERROR, logger="otel_route_shadow"),
            mock.patch.object(runtime.exporter, "append_templated", _explode),
            mock.patch.object(runtime.exporter, "append", _explode),
            mock.patch.object(factory, "_spawn", side_effect=lambda j: calls.append(j) or "spawned"),
        ):
            assert factory.dispatch(job) == "spawned"
            assert factory.dispatch(job) == "spawned"
    finally:
        h.instrumentor.uninstrument()
    assert calls == [job, job]  # each spawn ran exactly once: nothing for a retrying caller to redo
    assert runtime.errors[("chain", "TypeError")] == 2
    [line] = [r.getMessage().splitlines()[0] for r in caplog.records]
    if strict:
        assert "the host already ran, and strict mode raises only before it runs" in line
    else:
        assert "set OTEL_PYTHON_ROUTE_SHADOW_STRICT=true to raise it before the host runs" in line


# -- an unreadable store -------------------------------------------------------------------------


@pytest.mark.parametrize("recheck_ms", [0, 100])
def test_an_unreadable_store_is_logged_once_and_marked(
    recheck_ms: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "store"
    store.write_text("a file where the store folder should be")
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        h = make_harness(tmp_path, store=store, snapshot_recheck_ms=recheck_ms)
        try:
            results = _dispatch(10)
        finally:
            runtime = h.instrumentor.runtime
            h.instrumentor.uninstrument()
    assert results == _dispatch(10)
    assert {s.attributes[attr.ERROR_TYPE] for s in h.spans()} == {"StoreIOError"}
    assert {s.attributes[attr.REASON] for s in h.spans()} == {"snapshot-unavailable"}
    assert {r["attributes"][attr.ERROR_TYPE] for r in h.records()} == {"StoreIOError"}
    assert runtime is not None and runtime.errors[("store", "StoreIOError")] == 10
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "store-not-a-directory" in lines[0], lines


# -- descriptors ---------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_no_descriptor_leaks_over_fifty_instrument_cycles(tmp_path: Path) -> None:
    def cycle() -> None:
        h = make_harness(tmp_path, store=tmp_path / "store")
        _dispatch(1)
        h.instrumentor.uninstrument()
        h.provider.shutdown()

    cycle()  # lazily opened, process-wide descriptors (if any) are opened here
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        cycle()
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_fifty_instrument_cycles_leave_no_atexit_entry_behind(tmp_path: Path) -> None:
    """Each attach registered an ``atexit`` entry that close never took back (a dead weakref a cycle):
    one entry, registered once, closes the runtimes still attached at exit."""
    h = make_harness(tmp_path)  # its providers register their own atexit entries, once
    h.instrumentor.uninstrument()
    before = atexit._ncallbacks()
    for _ in range(50):
        h.instrumentor.instrument(tracer_provider=h.provider, seams=DEMO_SEAMS, chain_path=h.chain, store=h.store)
        _dispatch(1)
        h.instrumentor.uninstrument()
    assert atexit._ncallbacks() == before
    h.provider.shutdown()


_EXIT_HOST = """
import sys
from opentelemetry import trace
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

RouteShadowInstrumentor().instrument(
    tracer_provider=trace.NoOpTracerProvider(), seams=(), chain_path=sys.argv[1], checkpoint_records=1000
)
for job in factory.plan_jobs(3, factory.FactorySettings()):
    with shadow_spawn(factory.context_for(job, "agentic"), seam="manual"):
        pass
"""


def test_a_runtime_still_attached_at_exit_is_closed_with_a_last_checkpoint(tmp_path: Path) -> None:
    """No uninstrument and no SDK provider to shut down: the one atexit entry takes the way out."""
    chain = tmp_path / "chain.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_HOST, str(chain)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert len(chain.read_bytes().splitlines()) == 3
    checkpoint = (tmp_path / "chain.jsonl.tlog" / "checkpoint").read_text()
    assert checkpoint.splitlines()[1] == "3", checkpoint


# -- what the host's provider keeps, and the runtime the instrumentor owns ----------------------


def test_after_uninstrument_nothing_of_ours_holds_the_runtime_and_the_processor_is_a_no_op(
    tmp_path: Path,
) -> None:
    """The SDK cannot remove a span processor: the one ``instrument()`` added stays on the host's
    provider, detached, and a second instrumentation on that provider adds its own."""
    h = make_harness(tmp_path)
    runtime = h.instrumentor.runtime
    assert runtime is not None and runtime.processor is not None
    first = runtime.processor
    _dispatch(1)
    h.instrumentor.uninstrument()
    gone = weakref.ref(runtime)
    del runtime
    gc.collect()
    assert gone() is None  # no wrapper, processor, module or exit hook of ours still holds it
    h.instrumentor.instrument(tracer_provider=h.provider, seams=DEMO_SEAMS, chain_path=h.chain, store=h.store)
    try:
        second = h.instrumentor.runtime
        assert second is not None and second.processor is not None and second.processor is not first
        h.exporter.clear()
        _dispatch(2)
        spans = h.spans()
        assert len(spans) == 2 and all(s.attributes and attr.OUTCOME in s.attributes for s in spans)
        assert len(h.records()) == 3  # one per seam call, under either instrumentation
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


_DEFAULT_RUNTIME_HOST = """
import json, sys
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, current_runtime, shadow_spawn

job = factory.plan_jobs(1, factory.FactorySettings())[0]
context = factory.context_for(job, "agentic")
seen = []
for _ in range(2):
    with shadow_spawn(context, seam="manual") as record:
        seen.append(record is not None)
default = current_runtime()
RouteShadowInstrumentor().instrument(seams=(), chain_path=sys.argv[1])
during = current_runtime()
RouteShadowInstrumentor().uninstrument()
print(json.dumps({
    "shadowed": seen,
    "default_closed_by_instrument": default is not None and default.closed,
    "instrumentors_while_instrumented": during is not None and during is not default,
    "bare_after_uninstrument": current_runtime() is None,
}))
"""


def _default_runtime_host(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": str(tmp_path / "default.jsonl"), **settings}
    done = subprocess.run(
        [sys.executable, "-c", _DEFAULT_RUNTIME_HOST, str(tmp_path / "instrumented.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_decorators_without_an_instrumentor_share_one_default_runtime(tmp_path: Path) -> None:
    done = _default_runtime_host(tmp_path)
    assert json.loads(done.stdout) == {
        "shadowed": [True, True],
        "default_closed_by_instrument": True,
        "instrumentors_while_instrumented": True,
        "bare_after_uninstrument": True,
    }
    assert len((tmp_path / "default.jsonl").read_bytes().splitlines()) == 2


@pytest.mark.parametrize("how", ["uninstrumented", "refused"])
def test_decorators_and_context_managers_run_bare_after_uninstrument_or_a_refused_instrument(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After uninstrument(), or an instrument() that logged "the host runs unshadowed", decorator and
    context-manager seams went on recording into a chain made from the environment alone
    (./route-shadow/chain.jsonl) with one more span processor on the host's provider."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH", raising=False)
    h = make_harness(tmp_path, **({"durability": "fsync-please"} if how == "refused" else {}))
    assert (h.instrumentor.refused is not None) == (how == "refused")
    h.instrumentor.uninstrument()
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    sentinel = object()
    try:
        context = factory.context_for(job, "agentic")
        seam = shadow_seam("agentic", extractor=lambda call: context)(lambda: sentinel)
        assert seam() is sentinel
        with shadow_spawn(context, seam="manual") as record:
            assert record is None
        assert current_runtime() is None
    finally:
        h.provider.shutdown()
    assert h.spans() == []
    assert list(tmp_path.rglob("*.jsonl")) == []


def test_decorators_under_a_bad_setting_run_bare_and_say_so_once(tmp_path: Path) -> None:
    done = _default_runtime_host(tmp_path, OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS="soon")
    assert json.loads(done.stdout)["shadowed"] == [False, False]
    assert done.stderr.count("route shadow decorators run bare") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "default.jsonl").exists()


# -- a bad setting under opentelemetry-instrument ------------------------------------------------


def test_a_bad_setting_lets_the_other_instrumentors_and_hooks_run(tmp_path: Path) -> None:
    """A post-instrument hook is loaded after every instrumentor: it runs only if ours did not raise."""
    site = tmp_path / "site"
    dist = site / "route_shadow_witness-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: route-shadow-witness\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[opentelemetry_post_instrument]\nwitness = witness_hook:post\n")
    (site / "witness_hook.py").write_text(
        "import os\n\ndef post():\n    open(os.environ['WITNESS_FILE'], 'w').write('hook ran')\n"
    )
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            from otel_route_shadow.demo import factory
            print([factory.dispatch(j).job for j in factory.plan_jobs(3, factory.FactorySettings())])
            """
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "WITNESS_FILE": str(tmp_path / "witness"),
        "OTEL_PYTHON_ROUTE_SHADOW_SEAMS": "otel_route_shadow.demo.factory:no_such_seam,agentic",
        "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": str(tmp_path / "chain.jsonl"),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    tool = Path(sys.executable).with_name("opentelemetry-instrument")
    done = subprocess.run(
        [str(tool), sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1, 2]"
    assert (tmp_path / "witness").read_text() == "hook ran"
    assert done.stderr.count("route shadow not instrumented") == 1, done.stderr
    assert "Traceback" not in done.stderr and "Instrumenting of" not in done.stderr
    assert not (tmp_path / "chain.jsonl").exists()


# -- pass-through, as a property -----------------------------------------------------------------


class Refused(Exception):
    """Thrown in and not handled by the host: it must come back out as the same object."""


def protocol(job: Job) -> Iterator[Any]:
    """A host generator that reacts to everything the generator protocol can bring."""
    received: Any = yield "start"
    while True:
        try:
            received = yield ("got", received)
        except ValueError as exc:
            received = yield ("handled", exc)
        if received == -1:
            return ("returned", job.number)


_STEP = st.one_of(
    st.tuples(st.just("send"), st.integers(min_value=-1, max_value=3)),
    st.tuples(st.just("throw"), st.sampled_from([ValueError, Refused])),
    st.just(("close", None)),
)


def _drive(gen: Iterator[Any], steps: list[tuple[str, Any]]) -> list[Any]:
    """Apply ``steps`` to a started generator; what came out, thrown objects compared by identity."""
    seen: list[Any] = [next(gen)]
    for action, value in steps:
        thrown = value("in") if action == "throw" else None
        try:
            if action == "send":
                seen.append(gen.send(value))  # type: ignore[attr-defined]
            elif thrown is not None:
                out = gen.throw(thrown)  # type: ignore[attr-defined]
                seen.append(("handled", out[1] is thrown) if out[0] == "handled" else out)
            else:
                gen.close()  # type: ignore[attr-defined]
                seen.append("closed")
        except StopIteration as stop:
            seen.append(("stop", stop.value))
            break
        except (Refused, ValueError) as exc:
            seen.append(("raised", type(exc).__name__, exc is thrown))
            break
    return seen


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_STEP, max_size=8))
def test_values_sent_thrown_and_returned_pass_through_untouched(
    host: Harness, steps: list[tuple[str, Any]]
) -> None:
    bare = _drive(protocol.__wrapped__(Job(1)), steps)  # type: ignore[attr-defined]
    assert _drive(_module().protocol(Job(1)), steps) == bare
