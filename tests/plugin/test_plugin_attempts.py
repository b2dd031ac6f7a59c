"""Per-attempt evidence: every attempt a gateway or client made for a spawn (provider, model, error
type, in order) from the run's spans and the gateway's headers, and why the served route differs
(fallback, alias, load balance, unknown); only a real fallback is a disagreement."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode

from otel_route_shadow.analysis import build_report
from otel_route_shadow.core import (
    ATTEMPTS_MAX,
    Attempt,
    ServedRoute,
    ServedStatus,
    ServedWhy,
    served_status,
    served_why,
)
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import SeamCall, shadow_seam
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import served_from_headers

from .conftest import Harness

JOB = factory.plan_jobs(1, factory.FactorySettings())[0]
CONTEXT = factory.context_for(JOB, "agentic")  # anthropic/claude-opus-4-5, agreed by legacy compatibility
LEGACY = CONTEXT.legacy_route


def _seam(hook: Any = None) -> Any:
    @shadow_seam("agentic", extractor=lambda call: CONTEXT, name="seam", response_hook=hook)
    def seam(work: Any = None) -> None:
        if work is not None:
            work()

    return seam


def _record(harness: Harness) -> dict[str, Any]:
    [record] = harness.records()
    attributes: dict[str, Any] = record["attributes"]
    return attributes


def _span(harness: Harness, name: str, failed: bool = False, **attributes: Any) -> None:
    tracer = harness.provider.get_tracer("llm-client")
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        if failed:
            span.set_status(Status(StatusCode.ERROR))


# -- why a served route differs: one total rule ------------------------------------------------------

names = st.none() | st.sampled_from(["anthropic", "zai", "azure", "claude-opus-4-5", "glm-5.1", "gpt-4o"])
attempts = st.lists(
    st.builds(Attempt, provider=names, model=names, error_type=st.none() | st.just("RateLimitError")),
    max_size=4,
).map(tuple)
served_routes = st.builds(
    ServedRoute, provider=names, model=names, fallback=st.booleans(), model_group=names, attempts=attempts
)


@given(served=st.none() | served_routes)
def test_why_is_total_and_given_exactly_when_the_served_route_differs(served: ServedRoute | None) -> None:
    why = served_why(LEGACY, served)
    assert (why is not None) == (served_status(LEGACY, served) is ServedStatus.DIFFERS)
    if why is not None and (served is not None and (served.fallback or served.failed_before)):
        assert why is ServedWhy.FALLBACK


def test_an_alias_and_a_load_balanced_deployment_are_told_apart_from_a_fallback() -> None:
    group = LEGACY.model
    alias = ServedRoute(provider="anthropic", model="claude-opus-prod", model_group=group)
    balanced = ServedRoute(provider="bedrock", model="claude-opus-prod", model_group=group)
    unknown = ServedRoute(provider="zai", model="glm-5.1")
    failed_first = unknown.model_copy(
        update={
            "attempts": (Attempt(provider="anthropic", error_type="RateLimitError"), Attempt(provider="zai"))
        }
    )
    assert served_why(LEGACY, alias) is ServedWhy.ALIAS
    assert served_why(LEGACY, balanced) is ServedWhy.LOAD_BALANCE
    assert served_why(LEGACY, unknown) is ServedWhy.UNKNOWN
    assert served_why(LEGACY, failed_first) is ServedWhy.FALLBACK
    assert served_why(LEGACY, ServedRoute(fallback=True, model_group=group)) is ServedWhy.FALLBACK
    assert served_why(LEGACY, ServedRoute(provider="anthropic", model=LEGACY.model)) is None
    modelless = LEGACY.model_copy(update={"model": None})
    assert served_why(modelless, alias) is None  # nothing comparable: unknown, not differs


# -- the gateway's headers ---------------------------------------------------------------------------


def test_litellm_fallback_errors_name_each_failed_attempt_in_order() -> None:
    served = served_from_headers(
        {
            "X-LiteLLM-Attempted-Fallbacks": "2",
            "x-litellm-fallback-errors": "RateLimitError, Timeout",
            "x-litellm-model-group": "claude-opus-4-5",
            "ngrok-aig-model": "glm-5.1",
        }
    )
    assert served == ServedRoute(
        model="glm-5.1",
        fallback=True,
        model_group="claude-opus-4-5",
        attempts=(
            Attempt(error_type="RateLimitError"),
            Attempt(error_type="Timeout"),
            Attempt(model="glm-5.1"),
        ),
    )
    as_json = served_from_headers({"x-litellm-fallback-errors": '["APIConnectionError"]'})
    assert as_json is not None and [a.error_type for a in as_json.attempts] == ["APIConnectionError", None]
    counted = served_from_headers({"x-litellm-attempted-fallbacks": "3"})
    assert counted is not None and [a.error_type for a in counted.attempts] == ["_OTHER"] * 3 + [None]
    # a model group alone says what was asked for, not what served: nothing reported
    assert served_from_headers({"x-litellm-attempted-fallbacks": "0", "x-litellm-model-group": "g"}) is None


@given(
    headers=st.dictionaries(
        st.sampled_from(
            ["x-litellm-attempted-fallbacks", "x-litellm-fallback-errors", "x-litellm-model-group", "other"]
        ),
        st.text(max_size=30) | st.integers() | st.lists(st.text(max_size=10), max_size=3),
        max_size=4,
    )
)
def test_any_gateway_headers_give_a_route_or_nothing_never_an_error(headers: dict[str, Any]) -> None:
    served = served_from_headers(headers)
    assert served is None or (served.reported and len(served.attempts) <= ATTEMPTS_MAX)


# -- the record and the span -------------------------------------------------------------------------


def test_a_failed_attempt_then_another_route_lists_both_and_is_a_fallback(harness: Harness) -> None:
    def work() -> None:
        _span(
            harness,
            "chat claude-opus-4-5",
            failed=True,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.response.model": "claude-opus-4-5",
                "error.type": "RateLimitError",
            },
        )
        _span(harness, "chat glm-5.1", **{"gen_ai.provider.name": "zai", "gen_ai.response.model": "glm-5.1"})

    _seam()(work)
    record = _record(harness)
    [span] = [s for s in harness.spans() if attr.SEAM in (s.attributes or {})]
    assert json.loads(record[attr.SERVED_ATTEMPTS]) == [
        {"provider": "anthropic", "model": "claude-opus-4-5", "error_type": "RateLimitError"},
        {"provider": "zai", "model": "glm-5.1"},
    ]
    assert (record[attr.SERVED_STATUS], record[attr.SERVED_WHY], record[attr.FINDING]) == (
        "differs",
        "fallback",
        "served-differs",
    )
    assert record[attr.AGREED] is False
    assert {k: span.attributes[k] for k in record if k.startswith("route_shadow.served.")} == {
        k: v for k, v in record.items() if k.startswith("route_shadow.served.")
    }


def test_a_retry_that_served_the_chosen_route_is_same_with_its_attempts(harness: Harness) -> None:
    chosen = {"gen_ai.provider.name": "anthropic", "gen_ai.response.model": "claude-opus-4-5"}

    def work() -> None:
        _span(harness, "chat", failed=True, **chosen)
        _span(harness, "chat", **chosen)

    _seam()(work)
    record = _record(harness)
    assert record[attr.SERVED_STATUS] == "same" and attr.SERVED_WHY not in record
    assert [a.get("error_type") for a in json.loads(record[attr.SERVED_ATTEMPTS])] == ["_OTHER", None]


def test_an_alias_served_is_differs_but_agrees(harness: Harness) -> None:
    def hook(call: SeamCall, result: Any, error: BaseException | None) -> Any:
        return {"provider": "anthropic", "model": "claude-opus-prod-eu", "model_group": "claude-opus-4-5"}

    _seam(hook)()
    record = _record(harness)
    assert (record[attr.SERVED_STATUS], record[attr.SERVED_WHY], record[attr.AGREED]) == (
        "differs",
        "alias",
        True,
    )
    assert attr.FINDING not in record
    report = build_report(harness.chain)
    assert report.total.agreed == 1 and report.served_why == {"alias": 1} and report.findings == {}


def test_attempts_beyond_the_recorded_ones_are_counted_not_lost(harness: Harness) -> None:
    failed = [Attempt(provider=f"p{i}", error_type="Timeout") for i in range(11)]
    many = (*failed, Attempt(provider="zai"))
    _seam(lambda call, result, error: ServedRoute(provider="zai", attempts=many))()
    record = _record(harness)
    listed = json.loads(record[attr.SERVED_ATTEMPTS])
    assert len(listed) == attr.ATTEMPTS_RECORDED and listed[-1] == {"provider": "zai"}
    assert [a["provider"] for a in listed[:-1]] == [f"p{i}" for i in range(attr.ATTEMPTS_RECORDED - 1)]
    assert record[attr.SERVED_ATTEMPTS_OMITTED] == len(many) - attr.ATTEMPTS_RECORDED
    assert record[attr.SERVED_WHY] == "fallback"


def test_a_secret_in_an_attempt_error_type_is_redacted(harness: Harness) -> None:
    secret = "sk-ant-api03-" + "A" * 40
    _seam(
        lambda call, result, error: ServedRoute(
            provider="zai", attempts=(Attempt(error_type=f"AuthError {secret}"), Attempt(provider="zai"))
        )
    )()
    record = _record(harness)
    assert secret not in record[attr.SERVED_ATTEMPTS]
    assert not any(secret in str(v) for s in harness.spans() for v in (s.attributes or {}).values())


def test_gateway_headers_captured_on_a_span_of_the_run_list_the_failed_attempts_first(
    harness: Harness,
) -> None:
    headers = {
        "http.response.header.x-litellm-attempted-fallbacks": ("1",),
        "http.response.header.x-litellm-fallback-errors": ("RateLimitError",),
        "gen_ai.provider.name": "zai",
        "gen_ai.response.model": "glm-5.1",
    }
    _seam()(lambda: _span(harness, "POST /chat/completions", **headers))
    record = _record(harness)
    assert json.loads(record[attr.SERVED_ATTEMPTS]) == [
        {"error_type": "RateLimitError"},
        {"provider": "zai", "model": "glm-5.1"},
    ]
    assert (record[attr.SERVED_WHY], record[attr.FINDING]) == ("fallback", "served-differs")


def test_a_fallback_errors_header_nested_past_the_json_depth_limit_is_no_error_never_a_recursion_error() -> None:
    """The header's JSON list was parsed with no depth limit: a host's 100,000 nested brackets raised
    RecursionError (not the ValueError it caught) out of the served-route path, and the whole header then
    became one error name over the attempt's bound (a ValidationError)."""
    deep = "[" * 100_000 + "]" * 100_000
    served = served_from_headers(
        {"x-litellm-attempted-fallbacks": "1", "x-litellm-fallback-errors": deep, "x-litellm-model-group": "g"}
    )
    assert served is not None and [a.error_type for a in served.attempts] == ["_OTHER", None]  # named by nothing
