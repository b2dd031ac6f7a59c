"""A seam call the plugin failed to observe is never lost silently: the host's call runs, and the chain
counts it in a ``records-dropped`` event (reason ``not-observed``) where the gap is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import DecisionChain, iter_payloads
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import SeamCall, SeamSpec
from otel_route_shadow.instrumentation import runtime as runtime_module
from otel_route_shadow.shadow import attributes as attr

from .conftest import Harness, make_harness

_TARGET = "otel_route_shadow.demo.factory:run_lightweight_agent"


def _harness(tmp_path: Path, extractor: Any) -> Harness:
    spec = SeamSpec(target=_TARGET, request_face="one-shot", extractor=extractor)
    return make_harness(tmp_path, seams=(spec,))


def _kinds_and_counts(chain: Path) -> list[tuple[str, Any]]:
    """Each line's kind, with the reason and count of a ``records-dropped`` event."""
    out: list[tuple[str, Any]] = []
    for _, payload in iter_payloads(chain):
        kind = payload.get("kind")
        out.append((kind, (payload["reason"], payload["count"]) if kind == "records-dropped" else None))
    return out


def _jobs(n: int) -> list[factory.Job]:
    return factory.plan_jobs(n, factory.FactorySettings())


def test_a_seam_call_whose_extractor_raised_is_counted_in_the_chain_where_the_gap_is(tmp_path: Path) -> None:
    jobs = _jobs(4)

    def sometimes_broken(call: SeamCall) -> Any:
        if call.args[0].number < 3:
            raise KeyError("no job")
        return factory.context_for(call.args[0], call.request_face)

    h = _harness(tmp_path, sometimes_broken)
    try:
        assert [factory.run_lightweight_agent(job).job for job in jobs] == [0, 1, 2, 3]
    finally:
        h.instrumentor.uninstrument()
    assert _kinds_and_counts(h.chain) == [("records-dropped", ("not-observed", 3)), ("route-shadow", None)]
    assert DecisionChain(h.chain).verify().intact


def test_a_context_that_does_not_validate_is_counted_as_not_observed_at_close(tmp_path: Path) -> None:
    h = _harness(tmp_path, lambda call: {"repo": 7, "not-a-field": True})
    try:
        assert factory.run_lightweight_agent(_jobs(1)[0]).job == 0
        assert not h.chain.exists() or _kinds_and_counts(h.chain) == []  # written with the next write
    finally:
        h.instrumentor.uninstrument()
    assert h.spans() == []
    assert _kinds_and_counts(h.chain) == [("records-dropped", ("not-observed", 1))]


def test_a_call_that_is_not_a_spawn_or_runs_switched_off_is_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = _harness(tmp_path, lambda call: None)
    try:
        factory.run_lightweight_agent(_jobs(1)[0])
        monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED", "true")
        factory.run_lightweight_agent(_jobs(1)[0])
    finally:
        h.instrumentor.uninstrument()
    assert not h.chain.exists() or _kinds_and_counts(h.chain) == []


def test_a_failure_settling_the_served_route_still_writes_the_record_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def settle_raises(*args: Any) -> None:
        raise RuntimeError("settle broke")

    monkeypatch.setattr(runtime_module, "settle", settle_raises)
    h = _harness(tmp_path, lambda call: factory.context_for(call.args[0], call.request_face))
    try:
        assert factory.run_lightweight_agent(_jobs(1)[0]).job == 0
    finally:
        h.instrumentor.uninstrument()
    [record] = h.records()
    assert record["attributes"][attr.ERROR_TYPE] == "RuntimeError"
    assert [s.attributes[attr.ERROR_TYPE] for s in h.spans()] == ["RuntimeError"]


def test_a_record_that_could_not_be_built_is_counted_as_not_observed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ValueError("cannot build")

    monkeypatch.setattr(runtime_module.RouteShadowChainExporter, "append_templated", refuse)
    monkeypatch.setattr(runtime_module.RouteShadowChainExporter, "append", refuse)
    h = _harness(tmp_path, lambda call: factory.context_for(call.args[0], call.request_face))
    try:
        for job in _jobs(2):
            factory.run_lightweight_agent(job)
    finally:
        h.instrumentor.uninstrument()
    assert _kinds_and_counts(h.chain) == [("records-dropped", ("not-observed", 2))]


def test_a_call_not_observed_after_the_runtime_closed_is_counted_at_once(tmp_path: Path) -> None:
    def broken(call: SeamCall) -> Any:
        raise KeyError("no job")

    h = _harness(tmp_path, broken)
    runtime = h.instrumentor.runtime
    assert runtime is not None
    try:
        runtime.close()
        runtime.extract(SeamCall("late", "one-shot", None, (), {}), broken)
        assert _kinds_and_counts(h.chain) == [("records-dropped", ("not-observed", 1))]
    finally:
        h.instrumentor.uninstrument()
