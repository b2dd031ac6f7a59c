"""The GenAI conventions in effect: by default every seam span is CLIENT with the v1.37.0 schema; with
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` (read as the contrib instrumentations read
it) an agentic seam whose agent runs in process is an INTERNAL ``invoke_agent`` span, with the v1.44.0
schema on the spans and the flag evaluation log records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.instrumentation._semconv import _OpenTelemetrySemanticConventionStability
from opentelemetry.trace import SpanKind

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowConfig, environment_variables
from otel_route_shadow.instrumentation.conventions import LATEST_SCHEMA_URL, Conventions, gen_ai_conventions
from otel_route_shadow.instrumentation.package import SCHEMA_URL

from .conftest import make_harness

AGENTIC_IN_PROCESS = "agentic"  # the demo's AgentRunner._execute seam, declared in process below


@pytest.fixture
def opt_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """A fresh read of OTEL_SEMCONV_STABILITY_OPT_IN (contrib caches it per process); restored after."""
    monkeypatch.setattr(_OpenTelemetrySemanticConventionStability, "_initialized", False)
    monkeypatch.setattr(
        _OpenTelemetrySemanticConventionStability, "_OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING", {}
    )
    yield monkeypatch


def _kinds(tmp_path: Path) -> tuple[dict[str, set[SpanKind]], set[str], set[str]]:
    h = make_harness(tmp_path, seams=factory.seam_specs(), in_process_seams=AGENTIC_IN_PROCESS)
    try:
        for job in factory.plan_jobs(40, factory.FactorySettings()):
            factory.dispatch(job)
        spans, logs = h.spans(), h.logs()
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()
    kinds: dict[str, set[SpanKind]] = {}
    for span in spans:
        kinds.setdefault(span.attributes["route_shadow.seam"], set()).add(span.kind)
    span_schemas = {span.instrumentation_scope.schema_url for span in spans}
    log_schemas = {log.instrumentation_scope.schema_url for log in logs}
    return kinds, span_schemas, log_schemas


def test_by_default_every_seam_span_stays_client_with_the_default_schema(
    tmp_path: Path, opt_in: pytest.MonkeyPatch
) -> None:
    opt_in.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    kinds, span_schemas, log_schemas = _kinds(tmp_path)
    assert set(kinds) == set(factory.SEAMS)
    assert all(found == {SpanKind.CLIENT} for found in kinds.values())  # in-process declared, not opted in
    assert span_schemas == log_schemas == {SCHEMA_URL}


def test_gen_ai_latest_experimental_makes_an_in_process_agent_internal(
    tmp_path: Path, opt_in: pytest.MonkeyPatch
) -> None:
    opt_in.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")
    kinds, span_schemas, log_schemas = _kinds(tmp_path)
    assert kinds.pop(AGENTIC_IN_PROCESS) == {SpanKind.INTERNAL}
    assert all(found == {SpanKind.CLIENT} for found in kinds.values())  # remote agents, inference calls
    assert span_schemas == log_schemas == {LATEST_SCHEMA_URL}


def test_an_opt_in_for_other_signals_leaves_the_gen_ai_conventions_alone(opt_in: pytest.MonkeyPatch) -> None:
    opt_in.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http/dup,database,gen_ai_latest_experimentalX")
    assert gen_ai_conventions().latest is False


@given(
    latest=st.booleans(),
    seam=st.text(max_size=8),
    face=st.sampled_from(["agentic", "one-shot", "other"]),
    in_process=st.frozensets(st.text(max_size=8), max_size=3),
)
def test_only_an_in_process_agentic_seam_under_the_newest_conventions_is_internal(
    latest: bool, seam: str, face: str, in_process: frozenset[str]
) -> None:
    kind = Conventions(latest, in_process).span_kind(seam, face)
    internal = latest and face == "agentic" and seam in in_process
    assert kind is (SpanKind.INTERNAL if internal else SpanKind.CLIENT)


def test_in_process_seams_are_comma_separated_names_from_the_environment_or_the_keyword() -> None:
    name = environment_variables.OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS
    assert RouteShadowConfig.resolve(environ={name: " a, b ,,"}).in_process_seams == ("a", "b")
    assert RouteShadowConfig.resolve(environ={name: "a"}, in_process_seams="c,d").in_process_seams == (
        "c",
        "d",
    )
    assert RouteShadowConfig.resolve(environ={}, in_process_seams=("e",)).in_process_seams == ("e",)
