"""The attributes a user relies on, per legacy scenario, and one event seen twice."""

from __future__ import annotations

from typing import Any

from otel_route_shadow.core import LegacyStage
from otel_route_shadow.demo import factory
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import RoutingPolicyStore
from otel_route_shadow.store.policy_file import parse_policy_document

from .conftest import Harness


def _loop(name: str) -> factory.Loop:
    return next(loop for loop in factory.LOOPS if loop.name == name)


def _job(loop: str, repo: str, *, credit_exhausted: bool = False, number: int = 0) -> factory.Job:
    settings = factory.FactorySettings(credit_exhausted=credit_exhausted)
    chosen = _loop(loop)
    return factory.Job(
        number=number,
        loop=chosen,
        repo=repo,
        stages=factory.legacy_stages(chosen, repo, settings),
        accounts=factory.accounts_for(settings),
    )


def _only_span(h: Harness) -> dict[str, Any]:
    spans = h.spans()
    assert len(spans) == 1
    return dict(spans[0].attributes)


def test_role_dial_pins_adr_review_to_zai_as_legacy_compatibility(harness: Harness) -> None:
    factory.dispatch(_job("adr_review", "acme/widgets"))
    a = _only_span(harness)
    assert a[attr.LEGACY_MECHANISM] == "role-dial"
    assert a[attr.LEGACY_DETAIL] == "provider=zai"
    assert a[attr.POLICY_SOURCE] == "legacy-compatibility"
    assert a[attr.RUNG] == 9
    assert a[attr.TRANSPORT] == "harness-direct"
    assert a[attr.OUTCOME] == "selected"
    assert a["gen_ai.provider.name"] == "zai"
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert harness.spans()[0].name == "invoke_agent adr_review"


def test_one_shot_zai_is_direct_http_bypass(harness: Harness) -> None:
    factory.dispatch(_job("wiki_compilation", "acme/widgets"))
    a = _only_span(harness)
    assert a[attr.TRANSPORT] == "direct-http"
    assert a["gen_ai.operation.name"] == "chat"
    assert harness.spans()[0].name == "chat glm-5.1"


def test_repo_override_is_named_as_the_mechanism(harness: Harness) -> None:
    factory.dispatch(_job("implement", "acme/project-y"))
    a = _only_span(harness)
    assert a[attr.LEGACY_MECHANISM] == "repo-override"
    assert a[attr.LEGACY_PROVIDER] == "zai"
    assert a[attr.LEGACY_DETAIL] == "repo_provider=zai"


def test_fleet_ratchet_is_gateway_transport(harness: Harness) -> None:
    factory.dispatch(_job("review", "acme/widgets"))
    a = _only_span(harness)
    assert a[attr.LEGACY_MECHANISM] == "fleet-ratchet"
    assert a[attr.TRANSPORT] == "gateway"
    assert a[attr.LEGACY_PROVIDER] == "anthropic"


def test_a_legacy_route_that_defies_the_requirement_is_reported_not_suppressed(harness: Harness) -> None:
    """ADR D4, last paragraph: a claude-opus request served by GLM after credit failover is the
    divergence signal; it was recorded as agreement (agreed=true, no divergence)."""
    factory.dispatch(_job("implement", "acme/widgets", credit_exhausted=True))
    a = _only_span(harness)
    assert a[attr.LEGACY_MECHANISM] == "credit-failover"
    assert a[attr.REQUIREMENT] == "claude-opus"
    # No managed policy claims implementers: legacy compatibility reports the GLM route as it ran...
    assert a[attr.POLICY_SOURCE] == "legacy-compatibility"
    assert a[attr.PROVIDER] == "zai"
    assert a[attr.MODEL] == "glm-5.1"
    # ...and the route defies the literal family it was asked for: a finding, never agreement.
    assert a[attr.FINDING] == "requirement-defied"
    assert a[attr.AGREED] is False
    assert a[attr.DIVERGENCE] == "requirement-defied"
    assert harness.records()[0]["attributes"][attr.FINDING] == "requirement-defied"


def test_managed_policy_refuses_literal_family_under_zai_lock(harness: Harness) -> None:
    policies = parse_policy_document(
        {
            "policies": [
                {
                    "id": "project-x-uses-zai",
                    "match": {"repo_ids": ["acme/project-x"]},
                    "action": {"provider_lock": "zai-harness"},
                }
            ]
        },
        "test",
    )
    RoutingPolicyStore(harness.store).save(list(policies.policies))
    factory.dispatch(_job("implement", "acme/project-x"))
    a = _only_span(harness)
    assert a[attr.OUTCOME] == "rejected"
    assert a[attr.REASON] == "literal-family-unsatisfiable"
    assert a[attr.POLICY_ID] == "project-x-uses-zai"
    assert a[attr.SNAPSHOT_REVISION] == 1
    assert a[attr.AGREED] is False
    assert a[attr.DIVERGENCE] == "policy-rejected"


def test_every_chain_record_joins_exactly_one_span_with_equal_values(harness: Harness) -> None:
    settings = factory.FactorySettings()
    for job in factory.plan_jobs(40, settings):
        factory.dispatch(job)
    spans = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"): s for s in harness.spans()}
    records = harness.records()
    assert len(records) == 40 == len(spans)
    joined = set()
    for record in records:
        key = (record["trace_id"], record["span_id"])
        assert key in spans and key not in joined
        joined.add(key)
        span_attrs = {
            k: v for k, v in spans[key].attributes.items() if k.startswith(("route_shadow.", "gen_ai."))
        }
        assert record["attributes"] == span_attrs
        assert record["start_time_unix_nano"] == str(spans[key].start_time)


def test_no_attribute_key_is_a_prefix_of_another() -> None:
    keys = [spec.key for spec in (*attr.ATTRIBUTES, *attr.CONVENTION_ATTRIBUTES)]
    assert len(keys) == len(set(keys))
    for a in keys:
        for b in keys:
            assert a == b or not b.startswith(a), (a, b)


def test_stage_classifier_ignores_a_stage_that_moved_nothing() -> None:
    from otel_route_shadow.shadow import classify_legacy_mechanism

    stages = [
        LegacyStage(mechanism="role-dial", provider="zai"),
        LegacyStage(mechanism="repo-override", provider="zai"),
    ]
    decided = classify_legacy_mechanism(stages)
    assert decided is not None and decided.mechanism == "role-dial"
