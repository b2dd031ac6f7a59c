"""Observation is inert: sampling never costs a record, faults never cost a spawn."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import pytest
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation.config import env_disabled
from otel_route_shadow.shadow import attributes as attr

from .conftest import Harness, make_harness


def _run(spawns: int) -> list[factory.SpawnResult]:
    settings = factory.FactorySettings()
    return [factory.dispatch(job) for job in factory.plan_jobs(spawns, settings)]


@pytest.mark.parametrize("ratio", [0.0, 0.01, 1.0])
def test_chain_is_complete_whatever_the_sampler_keeps(tmp_path: Path, ratio: float) -> None:
    h = make_harness(tmp_path, sampler=ParentBased(TraceIdRatioBased(ratio)))
    try:
        _run(200)
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()
    records = h.records()
    assert len(records) == 200
    assert len({(r["trace_id"], r["span_id"]) for r in records}) == 200
    exported = len(h.spans())
    if ratio == 0.0:
        assert exported == 0
    elif ratio == 1.0:
        assert exported == 200
    else:
        assert exported < 40  # the OTLP path stays sampled as configured
    # Unsampled records still carry the full decision.
    assert all(attr.DECISION_ID in r["attributes"] for r in records)


def test_uninstrument_restores_the_originals_exactly(tmp_path: Path) -> None:
    originals = (
        factory.AgentRunner.__dict__["_execute"],
        factory.SubprocessRunner.__dict__["run"],
        factory.run_lightweight_agent,
        factory.stream_claude_with_telemetry,
    )
    h = make_harness(tmp_path)
    assert factory.AgentRunner.__dict__["_execute"] is not originals[0]
    h.instrumentor.uninstrument()
    assert factory.AgentRunner.__dict__["_execute"] is originals[0]
    assert factory.SubprocessRunner.__dict__["run"] is originals[1]
    assert factory.run_lightweight_agent is originals[2]
    assert factory.stream_claude_with_telemetry is originals[3]
    _run(5)
    assert h.records() == [] and h.spans() == []


def test_results_are_identical_to_an_uninstrumented_run(harness: Harness) -> None:
    instrumented = _run(60)
    harness.instrumentor.uninstrument()
    assert instrumented == _run(60)


def test_a_seam_that_raises_keeps_its_exception_object(harness: Harness) -> None:
    boom = RuntimeError("host failure")
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    with mock.patch.object(factory, "_spawn", side_effect=boom), pytest.raises(RuntimeError) as caught:
        factory.dispatch(job)
    assert caught.value is boom
    assert len(harness.records()) == 1
    span = harness.spans()[0]
    assert span.attributes["error.type"] == "RuntimeError"
    # no exception event (the host's message stays off the span); the decision's event is a log record
    assert [event.name for event in span.events] == []
    [log] = harness.logs()
    assert log.log_record.event_name == "feature_flag.evaluation"
    assert "host failure" not in str(dict(log.log_record.attributes or {}))


def test_unwritable_chain_directory_is_contained_and_marked(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the chain directory should be")
    h = make_harness(tmp_path, chain_path=blocker / "chain.jsonl")
    try:
        results = _run(10)
    finally:
        runtime = h.instrumentor.runtime
        h.instrumentor.uninstrument()
    assert results == _run(10)
    assert all(s.attributes[attr.ERROR_TYPE] in {"NotADirectoryError", "FileExistsError"} for s in h.spans())
    assert runtime is not None and sum(runtime.errors.values()) == 10


def test_corrupt_snapshot_holds_and_the_spawn_proceeds(tmp_path: Path) -> None:
    from otel_route_shadow.store import RoutingPolicyStore
    from otel_route_shadow.store.policy_file import parse_policy_document

    store = tmp_path / "store"
    policies = parse_policy_document(
        {"policies": [{"id": "p", "match": {"roles": ["reviewer"]}, "action": {}}]}, "t"
    )
    RoutingPolicyStore(store).save(list(policies.policies))
    for path in store.rglob("*.json"):
        path.write_text(path.read_text().replace('"reviewer"', '"planner"'))
    h = make_harness(tmp_path, store=store)
    try:
        results = _run(12)
    finally:
        h.instrumentor.uninstrument()
    assert results == _run(12)
    assert {s.attributes[attr.REASON] for s in h.spans()} == {"snapshot-unavailable"}
    assert {s.attributes[attr.SNAPSHOT_STATE] for s in h.spans()} == {"corrupt"}
    assert len(h.records()) == 12


def test_file_size_limit_is_contained(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import resource, sys
        sys.path.insert(0, {str(Path(__file__).parent.parent.parent)!r})
        from pathlib import Path
        from opentelemetry.sdk.trace import TracerProvider
        from otel_route_shadow.demo import factory
        from otel_route_shadow.instrumentation import RouteShadowInstrumentor, SeamSpec
        seams = [SeamSpec(target=t, request_face=f, extractor=factory.extract_job, name=n)
                 for n, (t, f) in factory.SEAMS.items()]
        def run():
            return [factory.dispatch(j) for j in factory.plan_jobs(50, factory.FactorySettings())]
        bare = run()
        inst = RouteShadowInstrumentor()
        inst.instrument(tracer_provider=TracerProvider(), seams=seams,
                        chain_path=Path({str(tmp_path)!r}) / "chain.jsonl")
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
        shadowed = run()
        errors = sum(inst.runtime.errors.values())
        inst.uninstrument()
        assert shadowed == bare, "host results changed"
        print("errors", errors)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    errors = int(done.stdout.split()[-1])
    assert errors > 0
    assert (tmp_path / "chain.jsonl").stat().st_size <= 8192


class _Settings:
    route_shadow_enabled: object = True


def test_kill_switch_toggles_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _Settings()
    h = make_harness(tmp_path, settings=settings)
    try:
        _run(5)
        monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED", "true")
        _run(5)
        monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED", "")
        _run(5)
        settings.route_shadow_enabled = mock.MagicMock()  # truthy, but not True: off
        _run(5)
        settings.route_shadow_enabled = 1
        _run(5)
        settings.route_shadow_enabled = True
        _run(5)
    finally:
        h.instrumentor.uninstrument()
    assert len(h.records()) == 15
    assert len(h.spans()) == 15


@pytest.mark.parametrize(
    "how",
    ["os.environ", "monkeypatch.setenv", "a plain dict in place of os.environ"],
)
def test_the_kill_switch_variable_is_read_live_however_it_is_set(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "OTEL_PYTHON_ROUTE_SHADOW_DISABLED"
    monkeypatch.delenv(name, raising=False)
    if how == "a plain dict in place of os.environ":
        monkeypatch.setattr(os, "environ", dict(os.environ))

    def set_to(value: str | None) -> None:
        if value is None:
            os.environ.pop(name, None)
        elif how == "monkeypatch.setenv":
            monkeypatch.setenv(name, value)
        else:
            os.environ[name] = value

    h = make_harness(tmp_path)
    try:
        for value, shadowed in [
            (None, True),
            (" TRUE ", False),
            ("false", True),
            ("true", False),
            (None, True),
        ]:
            set_to(value)
            assert env_disabled() is not shadowed
            before = len(h.records())
            _run(1)
            assert len(h.records()) - before == (1 if shadowed else 0), (how, value)
    finally:
        os.environ.pop(name, None)
        h.instrumentor.uninstrument()


def test_suppression_is_honoured(harness: Harness) -> None:
    with suppress_instrumentation():
        _run(5)
    assert harness.spans() == [] and harness.records() == []


def _explode(*args: object, **kwargs: object) -> None:
    raise TypeError("a bug in the shadow path")


def test_processor_bug_is_contained_when_not_strict(harness: Harness) -> None:
    with mock.patch("otel_route_shadow.instrumentation.runtime.observe", _explode):
        results = _run(8)
    runtime = harness.instrumentor.runtime
    assert runtime is not None and runtime.errors[("resolve", "TypeError")] == 8
    assert all(s.attributes[attr.ERROR_TYPE] == "TypeError" for s in harness.spans())
    harness.instrumentor.uninstrument()
    assert results == _run(8)


def test_processor_bug_raises_in_strict_mode_before_the_host_runs(tmp_path: Path) -> None:
    h = make_harness(tmp_path, strict=True)
    calls = []
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    try:
        with (
            mock.patch("otel_route_shadow.instrumentation.runtime.observe", _explode),
            mock.patch.object(factory, "_spawn", side_effect=lambda j: calls.append(j)),
            pytest.raises(TypeError, match="shadow path"),
        ):
            factory.dispatch(job)
    finally:
        h.instrumentor.uninstrument()
    assert calls == []


def test_strict_mode_never_replaces_the_host_exception(tmp_path: Path) -> None:
    h = make_harness(tmp_path, strict=True)
    boom = KeyError("host")
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    try:
        with (
            mock.patch.object(h.instrumentor.runtime.exporter, "append", _explode),
            mock.patch.object(factory, "_spawn", side_effect=boom),
            pytest.raises(KeyError) as caught,
        ):
            factory.dispatch(job)
    finally:
        h.instrumentor.uninstrument()
    assert caught.value is boom


def test_opentelemetry_instrument_picks_up_entry_point_and_seams(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            from otel_route_shadow.demo import factory
            for job in factory.plan_jobs(12, factory.FactorySettings()):
                factory.dispatch(job)
            print("done")
            """
        )
    )
    seams = ";".join(
        f"{target},{face},otel_route_shadow.demo.factory:extract_job"
        for target, face in factory.SEAMS.values()
    )
    env = {
        **os.environ,
        "OTEL_PYTHON_ROUTE_SHADOW_SEAMS": seams,
        "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": str(tmp_path / "chain.jsonl"),
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "auto-app",
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    tool = Path(sys.executable).with_name("opentelemetry-instrument")
    done = subprocess.run(
        [str(tool), sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout
    assert done.stdout.count('"route_shadow.decision_id"') == 12
    from otel_route_shadow.chain import iter_payloads

    assert sum(1 for _ in iter_payloads(tmp_path / "chain.jsonl")) == 12


def test_a_damaged_chain_is_contained_even_in_strict_mode(tmp_path: Path) -> None:
    chain = tmp_path / "chain" / "chain.jsonl"
    chain.parent.mkdir()
    chain.write_text('{"not": "a chain record"}\n')
    h = make_harness(tmp_path, strict=True, chain_path=chain)
    try:
        results = _run(6)
    finally:
        runtime = h.instrumentor.runtime
        h.instrumentor.uninstrument()
    assert results == _run(6)
    assert {s.attributes[attr.ERROR_TYPE] for s in h.spans()} == {"ChainCorruptError"}
    assert runtime is not None and runtime.errors[("chain", "ChainCorruptError")] == 6
    assert chain.read_text() == '{"not": "a chain record"}\n'  # nothing built on a damaged chain
