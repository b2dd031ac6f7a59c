"""Legacy mechanisms named, not laundered (D7); transport from the request face; the shadow comparison."""

from __future__ import annotations

import pytest

from otel_route_shadow.core import (
    MECHANISM_CLASS,
    LegacyMechanism,
    LegacyRoute,
    LegacyStage,
    MechanismClass,
    PolicySnapshot,
    RouteDecision,
    Transport,
    build_legacy_route,
    classify_legacy_mechanism,
    compare_routes,
    derive_transport,
    explain,
    mechanism_class,
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
