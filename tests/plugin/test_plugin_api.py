"""Manual instrumentation, configuration and bad input, as a host developer meets them."""

from __future__ import annotations

import ast
import asyncio
import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import (
    RouteShadowInstrumentor,
    SeamCall,
    SeamConfigError,
    SeamSpec,
    environment_variables,
    shadow_seam,
    shadow_spawn,
)
from otel_route_shadow.instrumentation.config import RouteShadowConfig, parse_seams
from otel_route_shadow.shadow import Spawn, record_route_shadow
from otel_route_shadow.shadow import attributes as attr

from .conftest import Harness, make_harness


def _extract(call: SeamCall) -> Any:
    return factory.context_for(call.args[0], call.request_face)


@shadow_seam("one-shot", extractor=_extract, name="decorated")
def decorated(job: factory.Job) -> str:
    return f"ran {job.number}"


@shadow_seam("agentic", extractor=_extract, name="decorated_async")
async def decorated_async(job: factory.Job) -> str:
    await asyncio.sleep(0)
    return f"ran {job.number}"


def _jobs(n: int) -> list[factory.Job]:
    return factory.plan_jobs(n, factory.FactorySettings())


def test_decorator_shadows_sync_and_async_seams(harness: Harness) -> None:
    job = _jobs(1)[0]
    assert decorated(job) == "ran 0"
    assert asyncio.run(decorated_async(job)) == "ran 0"
    seams = [s.attributes[attr.SEAM] for s in harness.spans()]
    assert seams == ["decorated", "decorated_async"]
    assert [s.attributes[attr.REQUEST_FACE] for s in harness.spans()] == ["one-shot", "agentic"]
    assert len(harness.records()) == 2


def test_context_manager_yields_a_record_and_nests_host_spans(harness: Harness) -> None:
    job = _jobs(1)[0]
    tracer = harness.provider.get_tracer("host")
    with shadow_spawn(factory.context_for(job, "agentic"), seam="manual") as record:
        assert record is not None
        with tracer.start_as_current_span("host work"):
            pass
    spans = {s.name: s for s in harness.spans()}
    seam_span = spans["invoke_agent implement"]
    assert spans["host work"].parent.span_id == seam_span.context.span_id
    assert record.attributes[attr.DECISION_ID] == seam_span.attributes[attr.DECISION_ID]


def test_context_manager_keeps_the_host_exception(harness: Harness) -> None:
    boom = ValueError("host")
    with (
        pytest.raises(ValueError) as caught,
        shadow_spawn(factory.context_for(_jobs(1)[0], "agentic"), seam="m"),
    ):
        raise boom
    assert caught.value is boom
    assert len(harness.records()) == 1


def test_shadow_spawn_runs_the_block_whatever_context_the_host_passes(harness: Harness) -> None:
    """A context of None (no spawn, as an extractor says it), a ``Spawn`` (what an extractor may return) or
    anything else: shadow_spawn raised AttributeError ('.get') before the host's block ran, so the spawn
    never happened."""
    context = factory.context_for(_jobs(1)[0], "agentic")
    ran = []
    for given in (None, Spawn(context, "conversation-1"), 42):
        with shadow_spawn(given, seam="odd") as record:  # type: ignore[arg-type]
            ran.append(record)
    assert len(ran) == 3
    assert ran[0] is None and ran[1] is not None and ran[2] is None
    spans = harness.spans()
    assert len(spans) == 1 and spans[0].attributes[attr.GEN_AI_CONVERSATION] == "conversation-1"


def test_the_seam_name_on_the_span_is_the_cleaned_value_the_chain_records(harness: Harness) -> None:
    """The seam name went onto the span raw (a credential in it, 100,000 characters, a lone
    surrogate that OTLP cannot encode) while the chain record got it cleaned: one event, two values."""
    key = "sk-ant-api03-" + "S3cr3tK3y" * 10
    names = ["run_agent token=" + key, "x" * 100_000, "bad\udc80seam"]
    for name in names:
        with shadow_spawn(factory.context_for(_jobs(1)[0], "agentic"), seam=name):
            pass
    on_spans = [s.attributes[attr.SEAM] for s in harness.spans()]
    in_chain = [r["attributes"][attr.SEAM] for r in harness.records()]
    assert on_spans == in_chain
    assert on_spans[0] == "run_agent token=[REDACTED]"
    assert on_spans[1] == "x" * 256
    assert on_spans[2].encode("utf-8")  # valid UTF-8: no lone surrogate left
    assert "S3cr3tK3y" not in "".join(s.name for s in harness.spans())


def test_the_record_shadow_spawn_yields_cannot_change_later_spans(harness: Harness) -> None:
    """The record shadow_spawn yields is the runtime's cached one, and its attributes were a plain
    dict: a host writing into it changed the spans of every later spawn of the same decision."""
    context = factory.context_for(_jobs(1)[0], "agentic")
    with shadow_spawn(context, seam="looked-at") as record:
        assert record is not None
        with pytest.raises(TypeError):
            record.attributes[attr.OUTCOME] = "changed"  # type: ignore[index]
        assert record.event is not None
        with pytest.raises(TypeError):
            record.event["feature_flag.key"] = "changed"  # type: ignore[index]
    with shadow_spawn(context, seam="looked-at"):
        pass
    outcomes = [s.attributes[attr.OUTCOME] for s in harness.spans()]
    assert outcomes[0] == outcomes[1] != "changed"


class _Job:
    pass


class _Runner:
    def execute(self, job: _Job) -> _Job:
        return job


_SEEN: list[tuple[str, list[str]]] = []


def _extract_shape(call: SeamCall) -> Any:
    _SEEN.append((type(call.instance).__name__, [type(a).__name__ for a in call.args]))
    return factory.context_for(_jobs(1)[0], call.request_face)


class _DecoratedRunner:
    @shadow_seam("agentic", extractor=_extract_shape)
    def execute(self, job: _Job) -> _Job:
        return job


def test_the_docs_say_how_an_extractor_sees_a_method_from_the_instrumentor_and_the_decorator(
    tmp_path: Path,
) -> None:
    """An extractor got ``('Runner', ['Job'])`` from the instrumentor and ``('NoneType', ['Runner', 'Job'])``
    from the decorator on a method, which the docs did not say; they now say which shape comes from which."""
    _SEEN.clear()
    spec = SeamSpec(target=f"{__name__}:_Runner.execute", request_face="agentic", extractor=_extract_shape)
    h = make_harness(tmp_path, seams=(spec,))
    try:
        _Runner().execute(_Job())
        _DecoratedRunner().execute(_Job())
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()
    assert _SEEN == [("_Runner", ["_Job"]), ("NoneType", ["_DecoratedRunner", "_Job"])]
    docs = (Path(__file__).parents[2] / "docs" / "instrumenting.md").read_text()
    assert "`call.args[0] if call.instance is not None else call.args[1]`" in docs


def test_threads_share_one_chain_without_gaps(harness: Harness) -> None:
    jobs = _jobs(200)

    def work(part: list[factory.Job]) -> None:
        for job in part:
            factory.dispatch(job)

    threads = [threading.Thread(target=work, args=(jobs[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    from otel_route_shadow.chain import verify_chain

    result = verify_chain(harness.chain)
    assert result.intact and result.records == 200
    assert len({(r["trace_id"], r["span_id"]) for r in harness.records()}) == 200


def test_with_the_sdk_disabled_every_spawn_still_gets_its_chain_record_and_no_span_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what docs/instrumenting.md says of OTEL_SDK_DISABLED=true: the chain, the audit record, is kept
    from otel_route_shadow.chain import verify_chain

    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    h = make_harness(tmp_path)
    try:
        for job in _jobs(3):
            factory.dispatch(job)
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()
    result = verify_chain(h.chain)
    assert result.intact and result.records == 3
    assert not h.exporter.get_finished_spans()
    assert {(r["trace_id"], r["span_id"]) for r in h.records()} == {("0" * 32, "0" * 16)}


def test_an_extractor_that_returns_none_leaves_the_call_bare(tmp_path: Path) -> None:
    h = make_harness(tmp_path, seams="otel_route_shadow.demo.factory:run_lightweight_agent,one-shot")
    try:
        job = next(j for j in _jobs(10) if j.loop.seam == "one-shot")
        factory.run_lightweight_agent(job)  # the default extractor needs route_context=
    finally:
        h.instrumentor.uninstrument()
    assert h.spans() == [] and h.records() == []


def test_a_failing_extractor_is_contained(tmp_path: Path) -> None:
    def broken(call: SeamCall) -> Any:
        raise KeyError("no job")

    from otel_route_shadow.instrumentation import SeamSpec

    spec = SeamSpec(
        target="otel_route_shadow.demo.factory:run_lightweight_agent",
        request_face="one-shot",
        extractor=broken,
    )
    h = make_harness(tmp_path, seams=(spec,))
    try:
        job = _jobs(1)[0]
        assert factory.run_lightweight_agent(job).job == 0
        assert h.instrumentor.runtime is not None
        assert h.instrumentor.runtime.errors[("extract", "KeyError")] == 1
    finally:
        h.instrumentor.uninstrument()


def test_an_empty_response_hook_field_is_no_hook_as_an_empty_extractor_is_the_default() -> None:
    # "mod:fn,agentic,," (a trailing comma) was refused, naming a response hook '' the operator never wrote.
    [spec] = parse_seams("pkg.mod:fn,agentic,, ")
    assert spec.response_hook is None and spec.target == "pkg.mod:fn"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("no_colon_here,agentic", "module:Qualified.name"),
        ("pkg.mod:fn,sideways", "unknown request face"),
        ("pkg.mod:fn", "target,face"),
        ("pkg.mod:fn,agentic,not.a.module:x", "cannot import"),
        ("pkg.mod:fn,agentic,nocolon", "module:function"),
    ],
)
def test_bad_seam_settings_say_what_is_wrong(value: str, message: str) -> None:
    with pytest.raises(SeamConfigError, match=message):
        parse_seams(value)


def test_instrument_refuses_an_unknown_seam_and_wraps_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    original = factory.run_lightweight_agent
    with caplog.at_level(logging.ERROR, logger="otel_route_shadow"):
        h = make_harness(
            tmp_path,
            seams="otel_route_shadow.demo.factory:run_lightweight_agent,one-shot;"
            "otel_route_shadow.demo.factory:missing,one-shot",
        )
    assert factory.run_lightweight_agent is original
    assert not RouteShadowInstrumentor().is_instrumented_by_opentelemetry
    lines = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow"]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "'missing' not found" in lines[0] and "not instrumented" in lines[0]
    # A corrected call instruments normally afterwards.
    h2 = make_harness(tmp_path, seams="otel_route_shadow.demo.factory:run_lightweight_agent,one-shot")
    assert factory.run_lightweight_agent is not original
    h2.instrumentor.uninstrument()
    assert h.instrumentor is h2.instrumentor


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"OTEL_PYTHON_ROUTE_SHADOW_SEAMS": "no_such_module_xyz:fn,agentic"}, "cannot import"),
        ({"OTEL_PYTHON_ROUTE_SHADOW_SEAMS": "pkg.mod:fn,sideways"}, "unknown request face"),
        ({"OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS": "soon"}, "whole number"),
        ({"OTEL_PYTHON_ROUTE_SHADOW_DURABILITY": "maybe"}, "durability"),
    ],
)
def test_a_bad_setting_is_one_log_line_and_never_raises(
    setting: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    instrumentor = RouteShadowInstrumentor()
    with caplog.at_level(logging.ERROR, logger="otel_route_shadow"):
        instrumentor.instrument()
    lines = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow"]
    assert len(lines) == 1 and "\n" not in lines[0] and expected in lines[0]
    assert instrumentor.refused == lines[0] and instrumentor.runtime is None
    assert not instrumentor.is_instrumented_by_opentelemetry


def test_settings_come_from_the_environment_and_keywords_win() -> None:
    env = {
        "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": "/var/chain.jsonl",
        "OTEL_PYTHON_ROUTE_SHADOW_STORE": "/var/store",
        "OTEL_PYTHON_ROUTE_SHADOW_DURABILITY": "FSYNC",
        "OTEL_PYTHON_ROUTE_SHADOW_STRICT": "True",
        "OTEL_PYTHON_ROUTE_SHADOW_DISABLED": "yes",  # only "true" is true
    }
    config = RouteShadowConfig.resolve(environ=env)
    assert config.chain_path == Path("/var/chain.jsonl") and config.store == Path("/var/store")
    assert config.durability == "fsync" and config.strict is True and config.disabled is False
    assert RouteShadowConfig.resolve(environ=env, strict=False, chain_path="x.jsonl").strict is False
    with pytest.raises(TypeError, match="unknown route-shadow settings"):
        RouteShadowConfig.resolve(environ={}, chian_path="typo")


def test_a_keyword_given_as_a_string_is_read_as_its_environment_variable_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # instrument(durability="FSYNC") and instrument(checkpoint_records="100") were refused (nothing
    # wrapped, the host unshadowed) while OTEL_PYTHON_ROUTE_SHADOW_DURABILITY=FSYNC was accepted.
    config = RouteShadowConfig.resolve(
        environ={},
        durability=" FSYNC",
        checkpoint_records="100",
        checkpoint_seconds="2.5",
        flag_event="Span",
        strict="TRUE",
        retention_delete="yes",  # only "true" is true, as in the variable
        chain_path="x.jsonl\r",
    )
    assert (config.durability, config.checkpoint_records, config.checkpoint_seconds) == ("fsync", 100, 2.5)
    assert config.flag_event == "span" and config.strict is True and config.retention_delete is False
    assert config.chain_path == Path("x.jsonl").absolute()
    env = {"OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS": "7"}
    assert RouteShadowConfig.resolve(environ=env, checkpoint_records=" ").checkpoint_records == 7  # blank
    with pytest.raises(ValueError, match=r"^checkpoint_records: expected a whole number$"):
        RouteShadowConfig.resolve(environ={}, checkpoint_records="sk-not-a-number")
    instrumentor = RouteShadowInstrumentor()
    with caplog.at_level(logging.ERROR, logger="otel_route_shadow"):
        instrumentor.instrument(checkpoint_records="sk-not-a-number")
    lines = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow"]
    assert len(lines) == 1 and "checkpoint_records" in lines[0] and "sk-not" not in lines[0]
    assert not instrumentor.is_instrumented_by_opentelemetry


def test_a_path_from_an_env_file_with_crlf_line_ends_names_the_file_without_the_cr() -> None:
    # Only some settings were stripped: CHAIN_PATH="/var/chain.jsonl\r" wrote a chain named with the CR
    # beside the one the operator then verified, and a blank path was a file named with spaces.
    env = {"OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": "/var/chain.jsonl\r", "OTEL_PYTHON_ROUTE_SHADOW_STORE": " "}
    config = RouteShadowConfig.resolve(environ=env)
    assert config.chain_path == Path("/var/chain.jsonl") and config.store is None


def test_a_store_path_holding_a_nul_is_a_bad_setting_never_a_bug_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # store="a\0b" was taken: each spawn then logged "route shadow bug in store" with a traceback (and
    # under OTEL_PYTHON_ROUTE_SHADOW_STRICT=true raised into the host before its call).
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        h = make_harness(tmp_path, store="policies\0x", strict=True)
        with shadow_spawn(factory.context_for(_jobs(1)[0], "agentic"), seam="m"):
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow"]
    assert lines == [h.instrumentor.refused] and "store: Value error, a path holds a NUL character" in lines[0]


def test_a_host_that_changes_directory_after_instrument_keeps_writing_its_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a relative chain path was opened anew from each later working directory: after the host's chdir
    # every record was lost, unmarked, and the store was looked for under the new directory
    monkeypatch.chdir(tmp_path)
    h = make_harness(tmp_path, chain_path="route-shadow/chain.jsonl", store="store")
    elsewhere = tmp_path / "job-workdir"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    try:
        for job in _jobs(2):
            with shadow_spawn(factory.context_for(job, "agentic"), seam="m"):
                pass
    finally:
        h.instrumentor.uninstrument()
    assert not any(elsewhere.iterdir())
    monkeypatch.chdir(tmp_path)
    assert len(h.records()) == 2


def test_record_route_shadow_returns_a_record_or_none_never_a_route() -> None:
    job = _jobs(1)[0]
    record = record_route_shadow("seam", factory.context_for(job, "agentic"), PolicySnapshot())
    assert record is not None and record.shadow.decision.policy_source == "legacy-compatibility"
    assert record_route_shadow("seam", None, PolicySnapshot()) is None  # type: ignore[arg-type]


class AsyncHost:
    async def run(self, job: factory.Job) -> Any:
        await asyncio.sleep(0)
        return trace.get_current_span()


def test_instrumentor_shadows_an_async_method_for_its_whole_await(tmp_path: Path) -> None:
    spec = SeamSpec(
        target=f"{__name__}:AsyncHost.run", request_face="agentic", extractor=_extract, name="async_host"
    )
    h = make_harness(tmp_path, seams=(spec,))
    try:
        current = asyncio.run(AsyncHost().run(_jobs(1)[0]))
        spans = h.spans()
        assert [s.attributes[attr.SEAM] for s in spans] == ["async_host"]
        assert current.get_span_context().span_id == spans[0].context.span_id
        assert spans[0].end_time is not None
        assert len(h.records()) == 1
    finally:
        h.instrumentor.uninstrument()


class _SpanStartingSampler:
    """A (strange) sampler that starts a span of its own while a seam span is being sampled."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        self.inner = ALWAYS_ON
        self.provider: Any = None
        self.busy = False

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:
        if not self.busy and self.provider is not None:
            self.busy = True
            try:
                self.provider.get_tracer("sampler-side-effect").start_span("side effect").end()
            finally:
                self.busy = False
        return self.inner.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "span-starting"


def test_only_the_seam_span_is_enriched_even_when_another_span_starts_meanwhile(tmp_path: Path) -> None:
    sampler = _SpanStartingSampler()
    h = make_harness(tmp_path, sampler=sampler)  # type: ignore[arg-type]
    sampler.provider = h.provider
    try:
        factory.dispatch(_jobs(1)[0])
        spans = {s.name: s for s in h.spans()}
        assert attr.DECISION_ID not in (spans["side effect"].attributes or {})
        (seam_span,) = [s for name, s in spans.items() if name != "side effect"]
        assert attr.DECISION_ID in seam_span.attributes
        assert h.records()[0]["attributes"] == {
            k: v for k, v in seam_span.attributes.items() if k.startswith(("route_shadow.", "gen_ai."))
        }
    finally:
        h.instrumentor.uninstrument()


def test_every_setting_is_named_once_documented_and_in_the_readme_table() -> None:
    """``environment_variables.py`` names each variable once with its docstring; the configuration
    reads exactly those, each mirrored by a keyword; the settings table of docs/instrumenting.md lists the same."""
    source = Path(environment_variables.__file__).read_text(encoding="utf-8")
    body = ast.parse(source).body
    names = []
    for node, following in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            assert isinstance(node.value, ast.Constant) and node.value.value == name
            assert isinstance(following, ast.Expr) and f".. envvar:: {name}" in str(following.value.value)  # type: ignore[attr-defined]
            names.append(name)
    assert len(names) == len(set(names)) and names
    prefix = "OTEL_PYTHON_ROUTE_SHADOW_"
    assert {n.removeprefix(prefix).lower() for n in names} <= set(RouteShadowConfig.model_fields)
    readme = (Path(__file__).parents[2] / "docs" / "instrumenting.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(OTEL_PYTHON_ROUTE_SHADOW_\w+)` \| `(\w+)` \|", readme, flags=re.MULTILINE))
    assert table == {(n, n.removeprefix(prefix).lower()) for n in names}
    package = Path(environment_variables.__file__).parents[1]
    elsewhere = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p.name != "environment_variables.py"
        and re.search(r"\"OTEL_PYTHON_ROUTE_SHADOW_\w*\"", p.read_text(encoding="utf-8"))
    ]
    assert elsewhere == []  # no second definition of a name
