"""What served a spawn (issue 27, item 1), as a host meets it: the response hook of a seam, the spans of
its run in the host's process, and nothing at all. Real SDK, real in-memory exporter, real chain."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode

from otel_route_shadow.analysis import build_report
from otel_route_shadow.core import ServedRoute
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import SeamCall, shadow_seam, shadow_spawn
from otel_route_shadow.instrumentation.config import parse_seams
from otel_route_shadow.shadow import attributes as attr

from .conftest import Harness, make_harness

# acme/widgets' implementer: legacy compatibility (agrees), anthropic/claude-opus-4-5 via the role dial.
JOB = factory.plan_jobs(1, factory.FactorySettings())[0]
CONTEXT = factory.context_for(JOB, "agentic")
SAME = ServedRoute(provider="anthropic", model="claude-opus-4-5-20251101")
GLM = ServedRoute(provider="zai", model="glm-5.1")
SERVED_KEYS = (*attr.SERVED_KEYS, attr.AGREED, attr.DIVERGENCE, attr.FINDING, attr.GEN_AI_RESPONSE_MODEL)
HOST_RESULT = object()


def _extract(call: SeamCall) -> Any:
    return CONTEXT


def _served(attributes: Any) -> dict[str, Any]:
    return {key: attributes[key] for key in SERVED_KEYS if key in attributes}


def _one(harness: Harness) -> tuple[dict[str, Any], dict[str, Any]]:
    """The seam span's and the one record's served attributes (the span's must equal the record's)."""
    spans = [s for s in harness.spans() if attr.SEAM in (s.attributes or {})]
    [span], [record] = spans, harness.records()
    return _served(span.attributes), _served(record["attributes"])


def _seam(hook: Any = None, face: str = "agentic") -> Any:
    @shadow_seam(face, extractor=_extract, name="seam", response_hook=hook)
    def seam(work: Any = None) -> Any:
        if work is not None:
            work()
        return HOST_RESULT

    return seam


def test_a_hook_that_reports_a_fallback_to_another_route_is_served_differs_never_agreement(
    harness: Harness,
) -> None:
    calls: list[tuple[Any, ...]] = []

    def hook(call: SeamCall, result: Any, error: BaseException | None) -> ServedRoute:
        calls.append((call.seam, result, error))
        return GLM.model_copy(update={"fallback": True})

    assert _seam(hook)() is HOST_RESULT
    assert calls == [("seam", HOST_RESULT, None)]
    span, record = _one(harness)
    assert (
        span
        == record
        == {
            attr.SERVED_STATUS: "differs",
            attr.SERVED_PROVIDER: "zai",
            attr.SERVED_MODEL: "glm-5.1",
            attr.SERVED_SOURCE: "response-hook",
            attr.SERVED_WHY: "fallback",
            attr.AGREED: False,  # the decision agreed; the route that served did not
            attr.DIVERGENCE: "served-differs",
            attr.FINDING: "served-differs",
            attr.GEN_AI_RESPONSE_MODEL: "glm-5.1",
        }
    )


def test_another_route_served_for_no_known_reason_differs_but_is_not_a_disagreement(harness: Harness) -> None:
    _seam(lambda call, result, error: GLM)()
    span, record = _one(harness)
    assert span == record
    assert (record[attr.SERVED_STATUS], record[attr.SERVED_WHY], record[attr.AGREED]) == (
        "differs",
        "unknown",
        True,
    )
    assert attr.FINDING not in record and attr.DIVERGENCE not in record
    report = build_report(harness.chain)
    assert report.served == {"differs": 1} and report.total.agreed == 1 and report.findings == {}


def test_a_hook_that_reports_the_chosen_route_is_same_and_keeps_agreement(harness: Harness) -> None:
    _seam(lambda call, result, error: {"provider": "Anthropic", "model": SAME.model})()
    span, record = _one(harness)
    assert span == record
    assert record[attr.SERVED_STATUS] == "same" and record[attr.AGREED] is True
    assert attr.FINDING not in record and attr.DIVERGENCE not in record


def test_served_differs_joins_an_earlier_finding_and_keeps_the_first_divergence(harness: Harness) -> None:
    # Spawn 19 of the demo's schedule defies its claude-opus requirement (GLM ran it).
    job = factory.plan_jobs(40, factory.FactorySettings())[19]
    defied = factory.context_for(job, "agentic")
    with shadow_spawn(
        defied,
        seam="defied",
        response_hook=lambda call, result, error: ServedRoute(
            provider="anthropic", model="claude-opus-4-5", fallback=True
        ),
    ):
        pass
    _, record = _one(harness)
    assert record[attr.FINDING] == "requirement-defied,served-differs"
    assert record[attr.DIVERGENCE] == "requirement-defied" and record[attr.AGREED] is False


def test_nothing_reported_is_unknown_not_agreement(harness: Harness) -> None:
    _seam()()
    _seam(lambda call, result, error: None)()  # a hook that knows nothing
    records = [r["attributes"] for r in harness.records()]
    assert [r[attr.SERVED_STATUS] for r in records] == ["unknown", "unknown"]
    assert all(attr.SERVED_SOURCE not in r and attr.SERVED_PROVIDER not in r for r in records)
    report = build_report(harness.chain)
    assert report.served == {"unknown": 2} and report.total.agreed == 2  # the decision agreed; nothing more


def _chat(harness: Harness, name: str = "chat", status: StatusCode | None = None, **attributes: Any) -> Any:
    """A span an in-process LLM client would make (GenAI conventions), as the seam's run."""

    def work() -> None:
        tracer = harness.provider.get_tracer("llm-client")
        with tracer.start_as_current_span(name, attributes=attributes) as span:
            if status is not None:
                span.set_status(Status(status))

    return work


def test_a_span_of_the_run_says_what_served_it(harness: Harness) -> None:
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "z.ai",
        "gen_ai.response.model": "glm-5.1",
    }
    _seam()(_chat(harness, **chat))
    span, record = _one(harness)
    assert span == record
    assert record[attr.SERVED_STATUS] == "differs" and record[attr.SERVED_SOURCE] == "descendant-span"
    assert (record[attr.SERVED_PROVIDER], record[attr.SERVED_MODEL]) == ("z.ai", "glm-5.1")


def test_the_hook_wins_over_the_spans_of_the_run(harness: Harness) -> None:
    chat = {"gen_ai.provider.name": "zai", "gen_ai.response.model": "glm-5.1"}
    _seam(lambda call, result, error: SAME)(_chat(harness, **chat))
    _, record = _one(harness)
    assert (record[attr.SERVED_STATUS], record[attr.SERVED_SOURCE]) == ("same", "response-hook")


def test_spans_that_served_nothing_are_not_read(harness: Harness) -> None:
    def work() -> None:
        _chat(harness, "failed attempt", StatusCode.ERROR, **{"gen_ai.provider.name": "zai"})()
        _chat(
            harness, "embeddings", **{"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "openai"}
        )()
        _chat(harness, "tool", **{"openinference.span.kind": "TOOL", "llm.provider": "openai"})()

    _seam()(work)
    _, record = _one(harness)
    assert record[attr.SERVED_STATUS] == "unknown"


def test_a_grandchild_is_read_and_the_first_that_differs_decides(harness: Harness) -> None:
    tracer = harness.provider.get_tracer("agent")

    def work() -> None:
        with tracer.start_as_current_span("agent turn"):
            _chat(harness, **{"llm.provider": "anthropic", "llm.response.model_name": "claude-opus-4-5"})()
            _chat(harness, **{"litellm.provider.model": "zai/glm-5.1"})()
            _chat(harness, **{"gen_ai.provider.name": "anthropic"})()

    _seam()(work)
    _, record = _one(harness)
    assert record[attr.SERVED_STATUS] == "differs"
    assert (record[attr.SERVED_PROVIDER], record[attr.SERVED_MODEL]) == ("zai", "glm-5.1")


def test_a_gateway_fallback_header_captured_on_a_span_is_differs(harness: Harness) -> None:
    header = {"http.response.header.x-litellm-attempted-fallbacks": ("1",)}
    _seam()(_chat(harness, "POST", **header))
    _, record = _one(harness)
    assert record[attr.SERVED_STATUS] == "differs" and attr.SERVED_MODEL not in record


def test_a_coroutine_seam_reads_the_spans_of_its_whole_run(harness: Harness) -> None:
    @shadow_seam("agentic", extractor=_extract, name="async_seam")
    async def seam() -> object:
        await asyncio.sleep(0)
        _chat(harness, **{"gen_ai.provider.name": "anthropic", "gen_ai.response.model": "claude-opus-4-5"})()
        return HOST_RESULT

    assert asyncio.run(seam()) is HOST_RESULT
    _, record = _one(harness)
    assert (record[attr.SERVED_STATUS], record[attr.SERVED_SOURCE]) == ("same", "descendant-span")


def test_a_seam_that_only_launches_its_run_is_unknown(harness: Harness) -> None:
    """The documented limit: the record is written when the seam span ends; a run that reports after
    that (a thread the seam started) is not read, and nothing else is recorded for the spawn."""
    started = threading.Event()
    done = threading.Event()
    run = _chat(harness, **{"gen_ai.provider.name": "zai", "gen_ai.response.model": "glm-5.1"})

    def launch() -> threading.Thread:
        from opentelemetry import context

        parent = context.get_current()

        def body() -> None:
            token = context.attach(parent)  # the host passes its context on: the run is the seam's child
            try:
                started.wait(5)
                run()
            finally:
                context.detach(token)
                done.set()

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    launched = shadow_seam("agentic", extractor=_extract, name="launcher")(launch)()
    started.set()
    assert done.wait(5)
    launched.join(5)
    [record] = [r["attributes"] for r in harness.records()]  # one record per spawn, no later event
    assert record[attr.SERVED_STATUS] == "unknown"
    chat = [s for s in harness.spans() if s.name == "chat"]
    assert len(chat) == 1 and chat[0].attributes["gen_ai.response.model"] == "glm-5.1"  # it did report


def test_a_context_manager_seam_takes_a_hook_with_the_blocks_exception(harness: Harness) -> None:
    seen: list[Any] = []

    def hook(call: SeamCall, result: Any, error: BaseException | None) -> ServedRoute:
        seen.append((call.seam, call.args, result, error))
        return GLM

    boom = ValueError("host")
    with pytest.raises(ValueError), shadow_spawn(CONTEXT, seam="block", response_hook=hook):
        raise boom
    assert seen == [("block", (), None, boom)]
    _, record = _one(harness)
    assert record[attr.SERVED_STATUS] == "differs"


# -- bad hooks --------------------------------------------------------------------------------------


class _Weird:
    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("no")


@pytest.mark.parametrize(
    ("answer", "error_type"),
    [
        (42, "ServedRouteError"),
        ("zai/glm-5.1", "ServedRouteError"),
        ({"provider": 3}, "ServedRouteError"),
        ({"provider": "zai", "colour": "red"}, "ServedRouteError"),
        ({"fallback": "yes"}, "ServedRouteError"),
        (_Weird(), "ServedRouteError"),
    ],
)
def test_a_hook_that_returns_garbage_is_contained_and_unknown(
    harness: Harness, answer: Any, error_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    seam = _seam(lambda call, result, error: answer)
    with caplog.at_level(logging.ERROR, logger="otel_route_shadow"):
        assert seam() is HOST_RESULT
        assert seam() is HOST_RESULT
    records = [r["attributes"] for r in harness.records()]
    assert [r[attr.SERVED_STATUS] for r in records] == ["unknown", "unknown"]
    assert all(r[attr.ERROR_TYPE] == error_type and r[attr.AGREED] is True for r in records)
    runtime = harness.instrumentor.runtime
    assert runtime is not None and runtime.errors[("response-hook", error_type)] == 2
    assert len([r for r in caplog.records if "response-hook" in r.getMessage()]) == 1  # logged once


def test_a_hook_that_raises_is_contained_and_the_host_result_untouched(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    def hook(call: SeamCall, result: Any, error: BaseException | None) -> Any:
        raise KeyError("hook bug")

    with caplog.at_level(logging.ERROR, logger="otel_route_shadow"):
        assert _seam(hook)() is HOST_RESULT
    span, record = _one(harness)
    assert record[attr.SERVED_STATUS] == "unknown" and span[attr.SERVED_STATUS] == "unknown"
    assert [r["attributes"][attr.ERROR_TYPE] for r in harness.records()] == ["KeyError"]
    assert sum("response-hook" in r.getMessage() for r in caplog.records) == 1


answers = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=20)
    | st.builds(
        ServedRoute, provider=st.none() | st.text(max_size=20), model=st.none() | st.text(max_size=20)
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["provider", "model", "fallback", "x"]) | st.text(max_size=5), inner, max_size=3
        )
    ),
    max_leaves=6,
)


_EXAMPLES = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=answers, raises=st.booleans())
def test_a_hook_returning_anything_never_breaks_the_host(tmp_path: Path, answer: Any, raises: bool) -> None:
    harness = make_harness(tmp_path / str(next(_EXAMPLES)))

    def hook(call: SeamCall, result: Any, error: BaseException | None) -> Any:
        if raises:
            raise RuntimeError("hook")
        return answer

    try:
        assert _seam(hook)() is HOST_RESULT
        [record] = [r["attributes"] for r in harness.records()]
    finally:
        harness.instrumentor.uninstrument()
        harness.provider.shutdown()
    assert record[attr.SERVED_STATUS] in {"same", "differs", "unknown"}
    valid = answer is None or isinstance(answer, ServedRoute)
    if raises or not (valid or isinstance(answer, dict)):
        assert record[attr.SERVED_STATUS] == "unknown" and attr.ERROR_TYPE in record
    assert (attr.SERVED_WHY in record) == (record[attr.SERVED_STATUS] == "differs")
    if record.get(attr.SERVED_WHY) == "fallback":  # only a fallback disagrees
        assert record[attr.AGREED] is False and "served-differs" in record[attr.FINDING]
    else:
        assert "served-differs" not in str(record.get(attr.FINDING))


# -- configuration -----------------------------------------------------------------------------------


def test_the_seams_variable_takes_a_response_hook_as_fourth_field() -> None:
    [with_extractor, default_extractor] = parse_seams(
        "otel_route_shadow.demo.factory:run_lightweight_agent,one-shot,"
        "otel_route_shadow.demo.factory:extract_job,otel_route_shadow.demo.factory:served_by;"
        "otel_route_shadow.demo.factory:AgentRunner._execute,agentic,,otel_route_shadow.demo.factory:served_by"
    )
    assert with_extractor.seam.response_hook is factory.served_by
    assert with_extractor.seam.extractor is factory.extract_job
    assert default_extractor.seam.response_hook is factory.served_by
    assert default_extractor.seam.extractor.__name__ == "default_extractor"


# -- the report, from a chain the plugin recorded ----------------------------------------------------


def test_the_report_counts_what_the_hooks_reported(tmp_path: Path) -> None:
    h = make_harness(tmp_path, seams=factory.seam_specs())
    try:
        results = [factory.dispatch(job) for job in factory.plan_jobs(60, factory.FactorySettings())]
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()
    hooked = {name for name in factory.RESPONSE_HOOKS}
    fallbacks = sum(
        (r.provider, r.model) != (r.served_provider, r.served_model)
        for r, job in zip(results, factory.plan_jobs(60, factory.FactorySettings()), strict=True)
        if job.loop.seam in hooked
    )
    report = build_report(h.chain)
    assert fallbacks > 0 and report.served.get("differs", 0) == fallbacks
    assert report.findings.get("served-differs", 0) == fallbacks
    spans = [s for s in h.spans() if s.attributes.get(attr.SERVED_STATUS) == "differs"]
    assert len(spans) == fallbacks and all(s.attributes[attr.AGREED] is False for s in spans)
    unhooked = sum(job.loop.seam not in hooked for job in factory.plan_jobs(60, factory.FactorySettings()))
    assert report.served.get("unknown", 0) == unhooked
    assert report.as_dict()["served"]["sources"] == {"response-hook": 60 - unhooked}


def test_a_served_record_is_the_same_from_its_memoised_template(tmp_path: Path) -> None:
    """The served-route variant of a decision record is prepared once (the runtime memo): its records
    say what the attributes say without the memo, and later spawns reuse it."""
    from otel_route_shadow.instrumentation.served import SERVED_KEY

    recorded: dict[bool, list[dict[str, Any]]] = {}
    for memo_on in (True, False):
        h = make_harness(tmp_path / str(memo_on))
        runtime = h.instrumentor.runtime
        assert runtime is not None
        runtime.memo.limit = runtime.memo.limit if memo_on else 0
        seam = _seam(lambda call, result, error: GLM)
        try:
            for _ in range(3):
                assert seam() is HOST_RESULT
            served = [k for k in list(runtime.memo._entries) if isinstance(k, tuple) and k[0] == SERVED_KEY]
            assert len(served) == (1 if memo_on else 0)
        finally:
            h.instrumentor.uninstrument()
            h.provider.shutdown()
        # the origin names the chain (its path): the one attribute two chains may not share
        recorded[memo_on] = [{**r["attributes"], attr.ORIGIN: None} for r in h.records()]
    assert recorded[True] == recorded[False] and len(recorded[True]) == 3
    assert recorded[True][0][attr.SERVED_STATUS] == "differs"
