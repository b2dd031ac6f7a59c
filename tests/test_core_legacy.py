"""Legacy mechanisms named, not laundered (D7); transport from the request face; the shadow comparison."""

from __future__ import annotations

import pytest
from core_strategies import legacy_routes
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.core import (
    CLAIMS,
    DIVERGENCE_CODES,
    FINDINGS,
    MECHANISM_CLASS,
    REQUIREMENT_DEFIED,
    LegacyMechanism,
    LegacyRoute,
    LegacyStage,
    MechanismClass,
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    Transport,
    build_legacy_route,
    classify_legacy_mechanism,
    compare_routes,
    derive_transport,
    explain,
    legacy_finding,
    mechanism_class,
    reconcile_legacy_route,
    shadow_decision,
)


def stage(
    mechanism: str,
    provider: str,
    *,
    model: str | None = None,
    gateway: bool = False,
    detail: str | None = None,
) -> LegacyStage:
    return LegacyStage(mechanism=mechanism, provider=provider, model=model, gateway=gateway, detail=detail)


def test_no_stages_names_nothing() -> None:
    assert classify_legacy_mechanism([]) is None
    assert build_legacy_route([], "agentic") is None


def test_the_dial_a_spawn_started_on_decides_when_nothing_moved_it() -> None:
    stages = [stage("role-dial", "zai"), stage("repo-override", "zai"), stage("credit-failover", "zai")]
    assert classify_legacy_mechanism(stages) == stages[0]


def test_the_last_stage_that_moved_the_route_decides() -> None:
    dial = stage("role-dial", "anthropic")
    override = stage("repo-override", "zai")
    restate = stage("fleet-ratchet", "zai")
    failover = stage("credit-failover", "zai")
    assert classify_legacy_mechanism([dial, override, restate, failover]) == override
    back = stage("credit-failover", "anthropic")
    assert classify_legacy_mechanism([dial, override, back]) == back


def test_the_fleet_ratchet_moves_a_route_onto_the_gateway() -> None:
    stages = [stage("role-dial", "anthropic"), stage("fleet-ratchet", "anthropic", gateway=True)]
    assert classify_legacy_mechanism(stages) == stages[1]
    route = build_legacy_route(stages, "agentic")
    assert route is not None and (route.mechanism, route.transport) == ("fleet-ratchet", "gateway")


@pytest.mark.parametrize(
    ("face", "gateway", "transport"),
    [
        ("agentic", False, Transport.HARNESS_DIRECT),
        ("one-shot", False, Transport.DIRECT_HTTP),
        ("agentic", True, Transport.GATEWAY),
        ("one-shot", True, Transport.GATEWAY),
    ],
)
def test_transport_follows_the_face_and_the_gateway_binding_not_the_provider(
    face: str, gateway: bool, transport: Transport
) -> None:
    assert derive_transport(face, gateway) is transport


def test_an_adr_review_loop_on_zai_via_its_role_dial() -> None:
    route = build_legacy_route(
        [stage("role-dial", "zai", model="glm-4.6")], "one-shot", account="zai-default"
    )
    assert route == LegacyRoute(
        provider="zai",
        model="glm-4.6",
        account="zai-default",
        transport="direct-http",
        mechanism="role-dial",
        mechanism_detail="provider=zai",
        stages=(stage("role-dial", "zai", model="glm-4.6"),),
    )


def test_the_model_is_the_last_one_a_stage_set() -> None:
    route = build_legacy_route(
        [
            stage("role-dial", "anthropic", model="claude-opus-4-1"),
            stage("credit-failover", "zai", model="glm-4.6"),
            stage("fleet-ratchet", "zai"),
        ],
        "agentic",
    )
    assert route is not None and (route.provider, route.model, route.mechanism) == (
        "zai",
        "glm-4.6",
        "credit-failover",
    )


def test_stage_gateway_flag_is_strict() -> None:
    with pytest.raises(ValueError):
        LegacyStage.model_validate({"mechanism": "role-dial", "provider": "zai", "gateway": "yes"})


# -- the shadow comparison -----------------------------------------------------------------------------

LEGACY = LegacyRoute(
    provider="anthropic",
    model="claude-opus-4-1",
    account="a",
    transport="harness-direct",
    mechanism="role-dial",
)


def decision(**fields: object) -> RouteDecision:
    base: dict[str, object] = {
        "outcome": "selected",
        "reason": "policy-selected",
        "policy_source": "managed-policy",
    }
    base.update(fields)
    return RouteDecision(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (decision(outcome="held", reason="snapshot-unavailable"), (False, "policy-held")),
        (decision(outcome="rejected", reason="policy-conflict"), (False, "policy-rejected")),
        (decision(policy_source="legacy-compatibility", provider="zai"), (True, None)),
        (decision(provider="zai", model="glm-5.3", account="z"), (False, "provider-differs")),
        (decision(provider="anthropic", model="claude-sonnet-4-5", account="a"), (False, "model-differs")),
        (decision(provider="anthropic", model="claude-opus-4-1", account="b"), (False, "account-differs")),
        (decision(provider="anthropic", model=None, account="a"), (True, None)),
    ],
)
def test_compare_routes_names_the_first_difference(
    d: RouteDecision, expected: tuple[bool, str | None]
) -> None:
    assert compare_routes(d, LEGACY) == expected


def test_a_legacy_decision_agrees_with_its_own_route_by_construction() -> None:
    from otel_route_shadow.core import RouteContext

    context = RouteContext(request_face="agentic", legacy_route=LEGACY)
    shadow = shadow_decision(explain(context, PolicySnapshot()), LEGACY)
    assert (
        shadow.agreed
        and shadow.divergence is None
        and shadow.decision.policy_source == "legacy-compatibility"
    )


# -- mechanism classes (the operator's first question) ---------------------------------------------


def test_dials_and_overrides_are_policy_gaps_failover_and_ratchet_are_transient() -> None:
    assert mechanism_class("role-dial") is MechanismClass.POLICY_GAP
    assert mechanism_class("repo-override") is MechanismClass.POLICY_GAP
    assert mechanism_class("fleet-ratchet") is MechanismClass.TRANSIENT
    assert mechanism_class("credit-failover") is MechanismClass.TRANSIENT


def test_every_legacy_mechanism_has_exactly_one_class() -> None:
    assert set(MECHANISM_CLASS) == {m.value for m in LegacyMechanism}


@pytest.mark.parametrize("value", [None, "", "Role-Dial", "host-special", 3])
def test_an_unknown_mechanism_has_no_class_rather_than_a_guessed_one(value: object) -> None:
    assert mechanism_class(value) is None


# -- claims checked against the stages (D7; issue 15's bad input) -----------------------------------


def _claimed(stages: list[LegacyStage], *, transport: str, mechanism: str) -> LegacyRoute:
    return LegacyRoute(
        provider=stages[-1].provider,
        transport=transport,
        mechanism=mechanism,
        mechanism_detail="claimed",
        stages=tuple(stages),
    )


def test_a_one_shot_route_claiming_harness_direct_and_fleet_ratchet_is_derived_and_flagged() -> None:
    """The issue's example: one role-dial stage that moved nothing, at a one-shot seam."""
    route = _claimed([stage("role-dial", "zai")], transport="harness-direct", mechanism="fleet-ratchet")
    derived, mismatched = reconcile_legacy_route(route, "one-shot")
    assert mismatched == ("mechanism", "transport")
    assert (derived.transport, derived.mechanism, derived.mechanism_detail) == (
        "direct-http",
        "role-dial",
        "provider=zai",
    )
    assert (derived.provider, derived.stages) == (route.provider, route.stages)


def test_claims_that_agree_with_the_stages_are_kept_unflagged() -> None:
    route = build_legacy_route([stage("role-dial", "zai", detail="adr_review_provider=zai")], "agentic")
    assert route is not None
    assert reconcile_legacy_route(route, "agentic") == (route, ())


def test_only_the_claim_that_differs_is_flagged_and_a_kept_mechanism_keeps_its_detail() -> None:
    route = _claimed([stage("role-dial", "zai")], transport="gateway", mechanism="role-dial")
    derived, mismatched = reconcile_legacy_route(route, "agentic")
    assert mismatched == ("transport",)
    assert (derived.transport, derived.mechanism_detail) == ("harness-direct", "claimed")


def test_a_route_without_stages_cannot_be_checked_so_its_claims_stand() -> None:
    route = LegacyRoute(provider="zai", transport="gateway", mechanism="credit-failover")
    assert reconcile_legacy_route(route, "one-shot") == (route, ())


@given(legacy_routes, st.sampled_from(["agentic", "one-shot", "", "Agentic"]))
def test_reconciling_is_total_and_leaves_nothing_to_flag_a_second_time(route: LegacyRoute, face: str) -> None:
    derived, mismatched = reconcile_legacy_route(route, face)
    assert list(mismatched) == sorted(mismatched) and set(mismatched) <= set(CLAIMS)
    assert reconcile_legacy_route(derived, face) == (derived, ())
    decided = classify_legacy_mechanism(route.stages)
    if decided is not None:
        assert derived.mechanism == decided.mechanism
        assert derived.transport == derive_transport(face, route.stages[-1].gateway).value


# -- the requirement-defied finding (D4, last paragraph) --------------------------------------------


def _failover(model: str | None = "glm-5.1") -> LegacyRoute:
    route = build_legacy_route(
        [
            stage("role-dial", "anthropic", model="claude-opus-4-5"),
            stage("credit-failover", "zai", model=model),
        ],
        "agentic",
    )
    assert route is not None
    if model is None:
        return route.model_copy(update={"model": None})
    return route


@pytest.mark.parametrize(
    ("requirement", "model", "finding"),
    [
        ("claude-opus", "glm-5.1", "requirement-defied"),
        ("claude-opus", "claude-sonnet-4-5", "requirement-defied"),
        ("claude-opus", "claude-opus-4-5", None),
        ("claude-opus", None, None),
        ("high-reasoning", "glm-5.1", None),
        ("no-such-requirement", "glm-5.1", None),
        (None, "glm-5.1", None),
    ],
)
def test_only_a_literal_family_the_route_that_ran_does_not_satisfy_is_defied(
    requirement: str | None, model: str | None, finding: str | None
) -> None:
    assert legacy_finding(requirement, _failover(model)) == finding


def test_a_legacy_route_that_defies_the_requirement_is_reported_not_suppressed() -> None:
    legacy = _failover()
    decision = explain(
        RouteContext(
            role="implementer", request_face="agentic", requirement="claude-opus", legacy_route=legacy
        ),
        PolicySnapshot(),
    )
    assert decision.policy_source == "legacy-compatibility"
    assert (decision.provider, decision.model) == ("zai", "glm-5.1")  # reported as it ran, not rewritten
    shadow = shadow_decision(decision, legacy, "claude-opus")
    assert (shadow.agreed, shadow.divergence, shadow.finding) == (
        False,
        REQUIREMENT_DEFIED,
        REQUIREMENT_DEFIED,
    )
    assert REQUIREMENT_DEFIED in FINDINGS and REQUIREMENT_DEFIED in DIVERGENCE_CODES


def test_a_finding_beside_another_divergence_keeps_both() -> None:
    legacy = _failover()
    managed = RouteDecision(
        outcome="selected",
        reason="policy-selected",
        policy_source="managed-policy",
        provider="anthropic",
        model="claude-opus-4-5",
    )
    shadow = shadow_decision(managed, legacy, "claude-opus")
    assert (shadow.agreed, shadow.divergence, shadow.finding) == (
        False,
        "provider-differs",
        REQUIREMENT_DEFIED,
    )
