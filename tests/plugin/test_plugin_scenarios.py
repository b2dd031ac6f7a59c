"""The attributes a user relies on, per legacy scenario, and one event seen twice."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.trace import SpanKind

from otel_route_shadow.core import (
    Account,
    LegacyRoute,
    LegacyStage,
    PolicySnapshot,
    RouteContext,
    RoutingPolicy,
)
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import shadow_spawn
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import observe
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


# -- issue 15: the ADR's own examples through the instrumented demo ---------------------------------

_ZAI_LOOP_TRANSPORT = {"agentic": "harness-direct", "subprocess": "harness-direct", "one-shot": "direct-http"}


def test_the_six_zai_pinned_loops_are_recorded_as_role_dials_bypassing_the_gateway(harness: Harness) -> None:
    for number, name in enumerate(factory.ZAI_PINNED_LOOPS):
        factory.dispatch(_job(name, "acme/widgets", number=number))
    spans = {s.attributes[attr.PRINCIPAL]: dict(s.attributes) for s in harness.spans()}
    assert sorted(spans) == sorted(factory.ZAI_PINNED_LOOPS)
    for name, a in spans.items():
        loop = _loop(name)
        assert (a[attr.LEGACY_MECHANISM], a[attr.LEGACY_DETAIL]) == ("role-dial", "provider=zai"), name
        assert (a[attr.POLICY_SOURCE], a[attr.LEGACY_PROVIDER]) == ("legacy-compatibility", "zai"), name
        assert a[attr.TRANSPORT] == _ZAI_LOOP_TRANSPORT[loop.seam], name
        assert attr.CLAIM_MISMATCH not in a, name
        assert a[attr.HOST_ROLE] == loop.role
    # The role join: loop-named roles stay null, real roles are canonical.
    assert {name: spans[name].get(attr.ROLE) for name in spans} == {
        "wiki_compilation": "summarizer",
        "adr_review": None,
        "transcript_summary": "summarizer",
        "triage_honeypot": "triager",
        "term_proposer": None,
        "pr_unstick": "implementer",
    }
    # pr_unstick asks for claude-opus and its dial serves GLM: the dial defies the requirement.
    assert {name for name, a in spans.items() if a.get(attr.FINDING)} == {"pr_unstick"}


def test_the_adr_reviewer_dial_is_a_principal_not_a_role(harness: Harness) -> None:
    """D8: the loop name stays null on both sides; policies reach it through principal_ids."""
    policies = parse_policy_document(
        {
            "policies": [
                {"id": "reviewers-on-anthropic", "match": {"roles": ["reviewer"]}, "action": {}},
                {
                    "id": "adr-review-on-zai",
                    "match": {"principal_ids": ["adr_review"]},
                    "action": {"provider_lock": "zai-harness"},
                },
            ]
        },
        "test",
    )
    RoutingPolicyStore(harness.store).save(list(policies.policies))
    factory.dispatch(_job("adr_review", "acme/widgets"))
    a = _only_span(harness)
    assert attr.ROLE not in a
    assert (a[attr.HOST_ROLE], a[attr.PRINCIPAL]) == ("adr_reviewer", "adr_review")
    assert (a[attr.POLICY_ID], a[attr.RUNG], a[attr.PROVIDER]) == ("adr-review-on-zai", 5, "zai")
    assert a[attr.AGREED] is True
    record = harness.records()[0]["attributes"]
    assert attr.ROLE not in record and record[attr.HOST_ROLE] == "adr_reviewer"


def test_claims_that_contradict_the_stages_are_recorded_derived_and_flagged(harness: Harness) -> None:
    """Issue 15, bad input: never rejected, never a host error."""
    stages = (LegacyStage(mechanism="role-dial", provider="zai", model="glm-5.1"),)
    context = RouteContext(
        role="summarizer",
        principal_id="wiki_compilation",
        request_face="one-shot",
        legacy_route=LegacyRoute(
            provider="zai",
            model="glm-5.1",
            transport="harness-direct",
            mechanism="fleet-ratchet",
            stages=stages,
        ),
    )
    with shadow_spawn(context, seam="lying_extractor") as record:
        ran = "host ran"
    assert ran == "host ran" and record is not None
    a = _only_span(harness)
    assert (a[attr.TRANSPORT], a[attr.LEGACY_MECHANISM], a[attr.LEGACY_DETAIL]) == (
        "direct-http",
        "role-dial",
        "provider=zai",
    )
    assert a[attr.CLAIM_MISMATCH] == "mechanism,transport"
    assert a[attr.DECISION_TRANSPORT] == "direct-http"
    replayed = RouteContext.model_validate_json(a[attr.CONTEXT])
    assert (replayed.legacy_route.transport, replayed.legacy_route.mechanism) == ("direct-http", "role-dial")
    assert harness.records()[0]["attributes"] == {
        k: v for k, v in a.items() if k.startswith(("route_shadow.", "gen_ai."))
    }


def test_a_managed_decision_is_recorded_whole(harness: Harness) -> None:
    policies = parse_policy_document(
        {
            "policies": [
                {
                    "id": "project-x-uses-zai",
                    "match": {"repo_ids": ["acme/project-x"]},
                    "action": {
                        "provider_lock": "zai-harness",
                        "requirement_map": {"fast": "glm-4.5-air"},
                        "forbid_direct_bypass": True,
                    },
                }
            ]
        },
        "test",
    )
    RoutingPolicyStore(harness.store).save(list(policies.policies))
    factory.dispatch(_job("triage", "acme/project-x"))
    a = _only_span(harness)
    assert (a[attr.POLICY_ID], a[attr.OUTCOME]) == ("project-x-uses-zai", "selected")
    assert a[attr.FORBID_DIRECT_BYPASS] is True
    assert a[attr.DECISION_TRANSPORT] == "gateway"
    assert a[attr.TRANSPORT] == "direct-http"  # the route that ran bypassed the gateway
    assert a[attr.REPO_IDENTITY_VERSION] == "canonical"
    assert json.loads(a[attr.ACCOUNTS]) == [
        {
            "account_id": "anthropic-legacy",
            "eligible": False,
            "provider": "anthropic",
            "reason": "provider-locked-out",
        },
        {"account_id": "zai-legacy", "eligible": True, "provider": "zai", "reason": "eligible"},
    ]
    assert attr.ACCOUNTS_OMITTED not in a and attr.TIED_POLICIES not in a
    assert (a[attr.SNAPSHOT_REVISION], a[attr.SNAPSHOT_HASH]) == (
        1,
        RoutingPolicyStore(harness.store).load().snapshot.content_hash,
    )


def test_a_legacy_decision_records_forbid_direct_bypass_false_and_a_lossy_identity(harness: Harness) -> None:
    factory.dispatch(_job("wiki_compilation", "acme-legacy-tools"))
    a = _only_span(harness)
    assert a[attr.FORBID_DIRECT_BYPASS] is False
    assert a[attr.REPO_IDENTITY_VERSION] == "legacy-lossy"
    assert attr.ACCOUNTS not in a  # no policy judged any account


def test_account_verdicts_are_bounded(harness: Harness) -> None:
    job = _job("wiki_compilation", "acme/project-x")
    accounts = tuple(Account(id=f"zai-{i:02d}", provider="zai") for i in range(attr.ACCOUNTS_RECORDED + 3))
    context = factory.context_for(job, "one-shot").model_copy(update={"accounts": accounts})
    RoutingPolicyStore(harness.store).save(
        list(
            parse_policy_document(
                {"policies": [{"id": "all-zai", "action": {"provider_lock": "zai-harness"}}]}, "t"
            ).policies
        )
    )
    with shadow_spawn(context, seam="many_accounts"):
        pass
    a = _only_span(harness)
    verdicts = json.loads(a[attr.ACCOUNTS])
    assert [v["account_id"] for v in verdicts] == [f"zai-{i:02d}" for i in range(attr.ACCOUNTS_RECORDED)]
    assert a[attr.ACCOUNTS_OMITTED] == 3
    assert a[attr.ACCOUNT] == "zai-00"


def test_tied_policies_are_recorded_when_a_conflict_reaches_the_resolver() -> None:
    conflict = [
        RoutingPolicy.model_validate({"id": "a", "action": {"provider_lock": "zai-harness"}}),
        RoutingPolicy.model_validate({"id": "b", "action": {"provider_lock": "anthropic-harness"}}),
    ]
    job = _job("triage", "acme/widgets")
    record = observe(
        "seam", factory.context_for(job, "one-shot"), PolicySnapshot(policies=tuple(conflict), revision=3)
    )
    assert record.attributes[attr.REASON] == "policy-conflict"
    assert record.attributes[attr.TIED_POLICIES] == "a,b"


def test_the_conversation_id_goes_on_the_span_redacted_and_not_into_the_decision(harness: Harness) -> None:
    job = _job("triage", "acme/widgets")
    context = factory.context_for(job, "one-shot")
    with shadow_spawn(context, seam="chat", conversation_id="conv-42"):
        pass
    with shadow_spawn(context, seam="chat", conversation_id="conv-Bearer canaryBearerTokenValue123"):
        pass
    with shadow_spawn(context, seam="chat"):
        pass
    spans = harness.spans()
    assert [s.kind for s in spans] == [SpanKind.CLIENT] * 3
    assert spans[0].attributes[attr.GEN_AI_CONVERSATION] == "conv-42"
    assert "canaryBearerTokenValue123" not in spans[1].attributes[attr.GEN_AI_CONVERSATION]
    assert attr.GEN_AI_CONVERSATION not in spans[2].attributes
    assert len({s.attributes[attr.DECISION_ID] for s in spans}) == 1
    assert all(attr.GEN_AI_CONVERSATION not in r["attributes"] for r in harness.records())
