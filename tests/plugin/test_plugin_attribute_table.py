"""The span attribute tables of docs/instrumenting.md are generated from the one definition, and that definition
matches what real spans carry (SDK in-memory exporter, the demo's seams, the demo's policies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_route_shadow.core import Account
from otel_route_shadow.demo import factory
from otel_route_shadow.demo.run import default_policy_file
from otel_route_shadow.instrumentation import shadow_spawn
from otel_route_shadow.shadow import attribute_table
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import RoutingPolicyStore

from .conftest import make_harness

README = Path(__file__).resolve().parents[2] / "docs" / "instrumenting.md"
DEFINED = {spec.key: spec for spec in (*attr.ATTRIBUTES, *attr.CONVENTION_ATTRIBUTES)}
NOT_IN_THE_SWEEP = {
    attr.TIED_POLICIES: "a conflicting set cannot be saved to a store; "
    "tests/plugin/test_plugin_scenarios.py::test_tied_policies_are_recorded_when_a_conflict_reaches_the_resolver",
    attr.ERROR_TYPE: "a contained shadow-path error; tests/plugin/test_plugin_inertness.py",
    attr.SERVED_ATTEMPTS_OMITTED: "more attempts than are recorded; "
    "tests/plugin/test_plugin_attempts.py::test_attempts_beyond_the_recorded_ones_are_counted_not_lost",
}
_PY_TYPES: dict[str, type] = {"string": str, "int": int, "bool": bool}


def test_the_readme_tables_are_the_generated_ones() -> None:
    text = README.read_text(encoding="utf-8")
    assert attribute_table.render() in text, (
        "docs/instrumenting.md's span attribute tables are stale: run python -m otel_route_shadow.shadow.attribute_table docs/instrumenting.md"
    )


def test_the_generator_rewrites_only_its_block(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text(
        f"# top\n\n{attribute_table.BEGIN}\nold\n{attribute_table.END}\n\nbottom\n", encoding="utf-8"
    )
    assert attribute_table.main([str(page)]) == 0
    assert page.read_text(encoding="utf-8") == f"# top\n\n{attribute_table.render()}\n\nbottom\n"


def test_the_generator_refuses_a_page_without_markers_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "README.md"
    page.write_text("# no markers\n", encoding="utf-8")
    assert attribute_table.main([str(page)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "markers missing" in err
    assert page.read_text(encoding="utf-8") == "# no markers\n"


def _sweep(tmp_path: Path, **instrument_kwargs: Any) -> list[ReadableSpan]:
    """Spans of every kind of spawn the demo and a host produce: the demo's schedule over its own
    policies (failover included), many accounts, a conversation id, a host exception."""
    h = make_harness(tmp_path, seams=factory.seam_specs(), **instrument_kwargs)
    try:
        RoutingPolicyStore(h.store).save(list(default_policy_file().policies))
        for job in factory.plan_jobs(40, factory.FactorySettings()):
            factory.dispatch(job)
        # A project-x spawn (a policy judges its accounts) whose extractor claims another transport.
        job = next(j for j in factory.plan_jobs(40, factory.FactorySettings()) if j.repo == "acme/project-x")
        many = tuple(Account(id=f"a{i}", provider="zai") for i in range(attr.ACCOUNTS_RECORDED + 1))
        context = factory.context_for(job, "agentic")
        claimed = context.legacy_route.model_copy(update={"transport": "gateway"})
        context = context.model_copy(update={"accounts": many, "legacy_route": claimed})
        with shadow_spawn(context, seam="many_accounts", conversation_id="conv-1"):
            pass
        with pytest.raises(RuntimeError), shadow_spawn(context, seam="host_raises"):
            raise RuntimeError("host failure")
        return h.spans()
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


def _is(value: Any, type_name: str) -> bool:
    expected = _PY_TYPES[type_name]
    return isinstance(value, expected) and (expected is bool or not isinstance(value, bool))


def test_every_attribute_a_span_carries_is_defined_with_its_type(tmp_path: Path) -> None:
    spans = _sweep(tmp_path)
    assert len(spans) == 42
    seen: set[str] = set()
    for span in spans:
        for key, value in (span.attributes or {}).items():
            assert key in DEFINED, f"{key} is on a span but not defined in shadow/attributes.py"
            assert _is(value, DEFINED[key].type), (key, value, DEFINED[key].type)
            seen.add(key)
    never = set(DEFINED) - seen - set(NOT_IN_THE_SWEEP)
    assert not never, f"defined but never on a span of the sweep: {sorted(never)}"


def test_every_seam_span_carries_one_flag_evaluation_event_of_defined_attributes(tmp_path: Path) -> None:
    """With ``flag_event="span"`` (the setting for backends that take no logs); the log event carries
    the same attributes (tests/plugin/test_plugin_flag_log.py)."""
    event_keys = {spec.key: spec for spec in attr.FLAG_EVENT_ATTRIBUTES}
    seen: set[str] = set()
    for span in _sweep(tmp_path, flag_event="span"):
        (event,) = span.events
        assert event.name == attr.FLAG_EVALUATION
        for key, value in (event.attributes or {}).items():
            assert key in event_keys and _is(value, event_keys[key].type), (key, value)
            seen.add(key)
        assert (
            event.attributes is not None and event.attributes[attr.FLAG_PROVIDER] == attr.FLAG_PROVIDER_NAME
        )
    # error.type: only for a decision the resolver could not make (tests/test_flag_event.py)
    assert set(event_keys) - seen == {attr.FLAG_ERROR_TYPE}
