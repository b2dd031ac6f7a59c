"""The served route against the route chosen (core/served.py): one rule a function, total, and a
reported route that is the chosen one is always ``same``; the readers of what a host has are total."""

from __future__ import annotations

from typing import Any

import pytest
from core_strategies import MODELS, PROVIDERS, legacy_routes
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.core import (
    DIVERGENCE_CODES,
    FINDINGS,
    SERVED_DIFFERS,
    Attempt,
    LegacyRoute,
    ServedRoute,
    ServedStatus,
    same_model,
    same_provider,
    served_status,
    with_finding,
)
from otel_route_shadow.shadow import (
    ServedRouteError,
    served_from_attributes,
    served_from_headers,
    served_route,
)

CHOSEN = LegacyRoute(
    provider="anthropic", model="claude-opus-4-5", transport="gateway", mechanism="role-dial"
)


@pytest.mark.parametrize(
    ("chosen", "served", "same"),
    [
        ("zai", "zai", True),
        ("zai", "z.ai", True),
        ("zai", "Z_AI", True),
        ("anthropic", "aws.bedrock", False),
        ("anthropic", "zai", False),
    ],
)
def test_same_provider_folds_case_and_punctuation(chosen: str, served: str, same: bool) -> None:
    assert same_provider(chosen, served) is same


@pytest.mark.parametrize(
    ("chosen", "served", "same"),
    [
        ("claude-opus-4-5", "claude-opus-4-5", True),
        ("claude-opus-4-5", "Claude-Opus-4-5", True),
        ("claude-opus-4-5", "anthropic/claude-opus-4-5", True),
        ("claude-opus-4-5", "claude-opus-4-5-20251101", True),
        ("claude-opus-4-5", "claude-opus-4-5@20251101", True),
        ("claude-opus-4-5", "claude-opus-4-5-2025-11-01", True),
        ("claude-opus-4-5", "claude-opus-4-5-20251101-v1:0", True),
        ("claude-opus-4", "claude-opus-4-5", False),  # another model, not a dated snapshot
        ("claude-opus-4-5", "claude-opus-4-5-fast", False),
        ("claude-opus-4-5", "glm-5.1", False),
    ],
)
def test_same_model_allows_a_provider_path_and_a_dated_snapshot_only(
    chosen: str, served: str, same: bool
) -> None:
    assert same_model(chosen, served) is same


@pytest.mark.parametrize(
    ("served", "status"),
    [
        (None, "unknown"),
        (ServedRoute(), "unknown"),
        (ServedRoute(model="glm-5.1"), "differs"),
        (ServedRoute(provider="anthropic"), "same"),
        (ServedRoute(provider="anthropic", model="claude-opus-4-5-20251101"), "same"),
        (ServedRoute(provider="anthropic", model="claude-sonnet-4-5"), "differs"),  # a model fallback
        (ServedRoute(provider="zai", model="claude-opus-4-5"), "differs"),
        (ServedRoute(provider="anthropic", fallback=True), "differs"),  # the gateway says it fell back
    ],
)
def test_served_status(served: ServedRoute | None, status: str) -> None:
    assert served_status(CHOSEN, served) is ServedStatus(status)


def test_a_model_is_unknown_against_a_route_that_named_none() -> None:
    chosen = CHOSEN.model_copy(update={"model": None})
    assert served_status(chosen, ServedRoute(model="glm-5.1")) is ServedStatus.UNKNOWN
    assert served_status(chosen, ServedRoute(provider="zai", model="glm-5.1")) is ServedStatus.DIFFERS


reported = st.builds(
    ServedRoute,
    provider=st.none() | st.sampled_from([*PROVIDERS, "z.ai", "Anthropic"]) | st.text(max_size=8),
    model=st.none() | st.sampled_from(MODELS) | st.text(max_size=12),
    fallback=st.booleans(),
)


@settings(max_examples=200)
@given(legacy_routes, reported)
def test_served_status_is_total_and_the_chosen_route_is_same(
    legacy: LegacyRoute, served: ServedRoute
) -> None:
    status = served_status(legacy, served)
    assert status in set(ServedStatus)
    if served.fallback:
        assert status is ServedStatus.DIFFERS
    if not served.reported:
        assert status is ServedStatus.UNKNOWN
    itself = ServedRoute(provider=legacy.provider, model=legacy.model)
    assert served_status(legacy, itself) is ServedStatus.SAME


@given(
    st.none() | st.sampled_from(["requirement-defied", "served-differs", "a,b", ""]),
    st.sampled_from(["x", "a"]),
)
def test_with_finding_keeps_codes_sorted_and_once(finding: str | None, code: str) -> None:
    merged = with_finding(finding, code)
    codes = merged.split(",")
    assert codes == sorted(set(codes)) and code in codes
    assert with_finding(merged, code) == merged


def test_served_differs_is_a_finding_and_a_divergence_code() -> None:
    assert SERVED_DIFFERS in FINDINGS and SERVED_DIFFERS in DIVERGENCE_CODES


# -- what a host has ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        (
            {"gen_ai.provider.name": "anthropic", "gen_ai.response.model": "m"},
            ServedRoute(provider="anthropic", model="m"),
        ),
        (
            {"llm.provider": "openai", "llm.response.model_name": "gpt"},
            ServedRoute(provider="openai", model="gpt"),
        ),
        ({"litellm.provider.model": "zai/glm-5.1"}, ServedRoute(provider="zai", model="glm-5.1")),
        ({"litellm.provider.model": "glm-5.1"}, ServedRoute(model="glm-5.1")),
        ({"litellm.model_group": "opus"}, ServedRoute(model="opus", model_group="opus")),
        ({"x-litellm-attempted-fallbacks": 2}, ServedRoute(fallback=True)),
        ({"http.response.header.x-litellm-attempted-fallbacks": ("0",)}, None),
        ({"gen_ai.request.model": "m"}, None),  # asked for, not served
        ({"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "openai"}, None),
        ({"openinference.span.kind": "EMBEDDING", "llm.provider": "openai"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_served_from_attributes(attributes: Any, expected: ServedRoute | None) -> None:
    assert served_from_attributes(attributes) == expected


def test_served_from_headers_ignores_case_and_the_opaque_deployment_id() -> None:
    headers = {
        "X-LiteLLM-Attempted-Fallbacks": "1",
        "x-litellm-model-id": "0f3a9c",
        "Ngrok-AIG-Model": "glm-5.1",
    }
    assert served_from_headers(headers) == ServedRoute(
        model="glm-5.1", fallback=True, attempts=(Attempt(error_type="_OTHER"), Attempt(model="glm-5.1"))
    )
    assert served_from_headers({"x-litellm-model-id": "0f3a9c"}) is None
    assert served_from_headers(None) is None


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)
keys = st.sampled_from(
    [
        "gen_ai.provider.name",
        "gen_ai.response.model",
        "gen_ai.operation.name",
        "llm.provider",
        "llm.response.model_name",
        "openinference.span.kind",
        "litellm.provider.model",
        "litellm.model_group",
        "x-litellm-attempted-fallbacks",
        "http.response.header.x-litellm-attempted-fallbacks",
        "ngrok-aig-model",
    ]
) | st.text(max_size=6)


@settings(max_examples=300)
@given(st.dictionaries(keys, values, max_size=6))
def test_the_readers_are_total(attributes: dict[str, Any]) -> None:
    for read in (served_from_attributes, served_from_headers):
        served = read(attributes)
        assert served is None or (isinstance(served, ServedRoute) and served.reported)
        if served is not None:
            for text in (served.provider, served.model):
                assert text is None or (isinstance(text, str) and 0 < len(text) <= 256)


def test_a_served_string_is_redacted_and_cut() -> None:
    secret = "sk-ant-api03-" + "Qk9" * 14 + "AA"
    served = served_route({"provider": "zai", "model": f"glm {secret} " + "x" * 400})
    assert served is not None and served.model is not None
    assert "Qk9Qk9" not in served.model and len(served.model) == 256


@pytest.mark.parametrize("answer", [1, "zai", ["zai"], {"provider": 1}, {"vendor": "zai"}])
def test_served_route_names_the_type_never_the_value(answer: Any) -> None:
    with pytest.raises(ServedRouteError) as caught:
        served_route(answer)
    assert "zai" not in str(caught.value)
