"""``explain``: every outcome, the literal-family guarantees (D4), precedence (D3), identity (D2),
legacy compatibility (D7), and the explanation a decision carries."""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from core_strategies import contexts, snapshots
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.core import (
    LEGACY_RUNG,
    Account,
    LegacyRoute,
    LegacyStage,
    ModelFamily,
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    build_legacy_route,
    compare_routes,
    explain,
    explain_batch,
    explain_policies,
    model_provider,
    parse_requirement,
    policy_set_hash,
)

ANTHROPIC = Account(id="anthropic-default", provider="anthropic")
ZAI = Account(id="zai-default", provider="zai")
DIAL = LegacyRoute(
    provider="anthropic",
    model="claude-sonnet-4-5",
    account="anthropic-default",
    transport="harness-direct",
    mechanism="role-dial",
    mechanism_detail="provider=anthropic",
)


def ctx(**overrides: Any) -> RouteContext:
    fields: dict[str, Any] = {
        "repo": "acme/project-x",
        "role": "implementer",
        "principal_id": "implementer",
        "request_face": "agentic",
        "requirement": None,
        "accounts": (ANTHROPIC, ZAI),
        "legacy_route": DIAL,
    }
    fields.update(overrides)
    return RouteContext(**fields)


def policy(pid: str, *, priority: int = 0, enabled: bool = True, **parts: Any) -> RoutingPolicy:
    match = {k: v for k, v in parts.items() if k in RoutingMatch.model_fields}
    action = {k: v for k, v in parts.items() if k in RoutingAction.model_fields}
    return RoutingPolicy(
        id=pid,
        priority=priority,
        enabled=enabled,
        match=RoutingMatch(**match),
        action=RoutingAction(**action),
    )


def snap(*policies: RoutingPolicy, revision: int = 3, available: bool = True) -> PolicySnapshot:
    return PolicySnapshot(
        policies=policies, revision=revision, content_hash=policy_set_hash(policies), available=available
    )


ZAI_X = policy(
    "project-x-uses-zai",
    repo_ids=["acme/project-x"],
    provider_lock="zai-harness",
    requirement_map={"high-reasoning": "glm-5.3"},
    forbid_direct_bypass=True,
)


def reasons(decision: RouteDecision) -> dict[str, str]:
    return {row.policy_id: row.reason for row in decision.considered}


def account_reasons(decision: RouteDecision) -> dict[str, str]:
    return {v.account_id: v.reason for v in decision.accounts}


# -- outcomes ------------------------------------------------------------------------------------------


def test_a_managed_policy_selects_and_explains() -> None:
    snapshot = snap(ZAI_X)
    d = explain(ctx(requirement="high-reasoning"), snapshot)
    assert (d.outcome, d.reason, d.policy_source) == ("selected", "policy-selected", "managed-policy")
    assert (d.policy_id, d.rung, d.provider, d.account, d.model) == (
        "project-x-uses-zai",
        4,
        "zai",
        "zai-default",
        "glm-5.3",
    )
    assert d.transport == "gateway" and d.forbid_direct_bypass is True
    assert reasons(d) == {"project-x-uses-zai": "matched"}
    assert account_reasons(d) == {"anthropic-default": "provider-locked-out", "zai-default": "eligible"}
    assert (d.snapshot_revision, d.snapshot_hash) == (3, snapshot.content_hash)
    assert (d.repo, d.repo_identity, d.role) == ("acme/project-x", "canonical", "implementer")


def test_a_literal_family_under_a_foreign_lock_is_unsatisfiable() -> None:
    d = explain(ctx(requirement="claude-opus"), snap(ZAI_X))
    assert (d.outcome, d.reason, d.policy_id) == (
        "rejected",
        "literal-family-unsatisfiable",
        "project-x-uses-zai",
    )
    assert d.provider is None and d.model is None and d.account is None
    # Not a quiet substitution (zai) and not an escape back to Anthropic past the lock.
    assert account_reasons(d) == {
        "anthropic-default": "provider-locked-out",
        "zai-default": "literal-family-incompatible",
    }


def test_a_literal_family_never_uses_a_non_anthropic_account_even_without_a_lock() -> None:
    p = policy("any-implementer", roles=["implementer"])
    only_zai = explain(
        ctx(requirement="claude-sonnet", accounts=(ZAI, Account(id="z2", provider="zai"))), snap(p)
    )
    assert (only_zai.outcome, only_zai.reason) == ("held", "no-eligible-account")
    assert set(account_reasons(only_zai).values()) == {"literal-family-incompatible"}
    both = explain(ctx(requirement="claude-sonnet"), snap(p))
    assert (both.outcome, both.provider, both.account, both.model) == (
        "selected",
        "anthropic",
        "anthropic-default",
        "claude-sonnet",
    )
    # Even the pool cannot make a GLM account eligible, and the reason says why first.
    pooled = explain(
        ctx(requirement="claude-haiku"),
        snap(policy("pool", roles=["implementer"], account_pool=["zai-default"])),
    )
    assert account_reasons(pooled) == {
        "zai-default": "literal-family-incompatible",
        "anthropic-default": "account-not-in-pool",
    }
    assert pooled.outcome == "held"


def test_a_capability_without_a_mapping_is_held() -> None:
    d = explain(ctx(requirement="long-context"), snap(ZAI_X))
    assert (d.outcome, d.reason, d.policy_id, d.model) == (
        "held",
        "capability-unmapped",
        "project-x-uses-zai",
        None,
    )


def test_a_capability_mapped_outside_the_lock_or_to_an_unknown_model_is_rejected() -> None:
    outside = policy(
        "o", roles=["implementer"], provider_lock="anthropic-harness", requirement_map={"fast": "glm-4.5-air"}
    )
    unknown = policy("u", roles=["implementer"], requirement_map={"fast": "gpt-4o-mini"})
    assert explain(ctx(requirement="fast"), snap(outside)).reason == "mapped-model-outside-lock"
    assert explain(ctx(requirement="fast"), snap(unknown)).reason == "unknown-model"


def test_a_capability_mapping_chooses_the_provider_when_nothing_is_locked() -> None:
    p = policy("c", roles=["implementer"], requirement_map={"fast": "glm-4.5-air"})
    d = explain(ctx(requirement="fast"), snap(p))
    assert (d.outcome, d.provider, d.account, d.model) == ("selected", "zai", "zai-default", "glm-4.5-air")
    assert account_reasons(d)["anthropic-default"] == "provider-locked-out"


def test_an_unavailable_snapshot_holds_whatever_it_contains() -> None:
    d = explain(ctx(requirement="high-reasoning"), snap(ZAI_X, available=False))
    assert (d.outcome, d.reason, d.policy_source) == ("held", "snapshot-unavailable", "managed-policy")
    assert d.considered == () and d.accounts == () and d.rung is None
    assert explain_policies(ctx(), snap(ZAI_X, available=False))[0].reason == "snapshot-unavailable"


def test_a_snapshot_still_loading_holds_with_snapshot_loading_not_unavailable() -> None:
    loading = PolicySnapshot(available=False, loading=True)
    d = explain(ctx(requirement="high-reasoning"), loading)
    assert (d.outcome, d.reason, d.policy_source) == ("held", "snapshot-loading", "managed-policy")
    assert (d.snapshot_revision, d.considered) == (0, ())
    unavailable = explain(ctx(requirement="high-reasoning"), PolicySnapshot(available=False))
    assert d.decision_id != unavailable.decision_id
    assert explain_policies(ctx(), loading.model_copy(update={"policies": (ZAI_X,)}))[0].reason == (
        "snapshot-loading"
    )


def test_no_managed_policy_means_legacy_compatibility_reporting_the_route_unchanged() -> None:
    d = explain(ctx(repo="acme/widgets"), snap(ZAI_X))
    assert (d.outcome, d.reason, d.policy_source, d.rung) == (
        "selected",
        "no-managed-policy",
        "legacy-compatibility",
        LEGACY_RUNG,
    )
    assert (d.provider, d.model, d.account, d.transport) == (
        DIAL.provider,
        DIAL.model,
        DIAL.account,
        DIAL.transport,
    )
    assert d.policy_id is None and d.considered == () and d.policies_excluded == 1
    assert explain(ctx(), PolicySnapshot()).policy_source == "legacy-compatibility"


def test_an_unrecognized_requirement_is_held_under_a_policy() -> None:
    d = explain(ctx(requirement="gpt-5"), snap(ZAI_X))
    assert (d.outcome, d.reason) == ("held", "requirement-unrecognized")


def test_an_unknown_binding_that_slipped_past_validation_is_rejected() -> None:
    d = explain(ctx(), snap(policy("x", roles=["implementer"], provider_lock="openai-harness")))
    assert (d.outcome, d.reason) == ("rejected", "unknown-provider-binding")


def test_accounts_follow_the_pool_order_then_id_and_skip_unavailable_ones() -> None:
    accounts = (
        Account(id="z9", provider="zai"),
        Account(id="z1", provider="zai", state="exhausted"),
        Account(id="z5", provider="zai"),
        Account(id="q", provider="openai"),
        ZAI,
    )
    p = policy(
        "pool",
        roles=["implementer"],
        provider_lock="zai-harness",
        account_pool=["z1", "z5", "z1", "zai-default"],
    )
    d = explain(ctx(accounts=accounts), snap(p))
    assert d.account == "z5"
    assert [v.account_id for v in d.accounts] == ["z1", "z5", "zai-default", "q", "z9"]
    assert account_reasons(d) == {
        "z1": "account-not-available",
        "z5": "eligible",
        "zai-default": "eligible",
        "q": "account-not-in-pool",
        "z9": "account-not-in-pool",
    }
    no_pool = explain(
        ctx(accounts=accounts), snap(policy("np", roles=["implementer"], provider_lock="zai-harness"))
    )
    assert no_pool.account == "z5"
    assert account_reasons(no_pool)["q"] == "provider-unknown"


# -- conflicts and ties (D3) -----------------------------------------------------------------------------


def test_a_conflict_at_explain_time_is_rejected_and_names_every_tied_policy() -> None:
    a = policy("a", roles=["implementer"], provider_lock="zai-harness")
    b = policy("b", roles=["implementer", "planner"], provider_lock="anthropic-harness")
    c = policy("c", roles=["implementer"], provider_lock="zai-harness")
    lower = policy("lower", priority=-1, roles=["implementer"])
    d = explain(ctx(), snap(a, b, c, lower))
    assert (d.outcome, d.reason, d.policy_source, d.rung) == (
        "rejected",
        "policy-conflict",
        "managed-policy",
        6,
    )
    assert d.tied_policies == ("a", "b", "c")
    assert reasons(d) == {"a": "tied", "b": "tied", "c": "tied", "lower": "outranked"}
    assert d.policy_id is None and d.provider is None


def test_identical_actions_at_equal_precedence_are_not_a_conflict() -> None:
    a = policy("a", roles=["implementer"], provider_lock="zai-harness")
    b = policy("b", principal_ids=[], roles=["implementer", "planner"], provider_lock="zai-harness")
    d = explain(ctx(), snap(b, a))
    assert (d.outcome, d.policy_id) == ("selected", "a")
    assert reasons(d) == {"a": "matched", "b": "outranked"}


def test_duplicate_ids_that_slipped_past_validation_still_resolve_deterministically() -> None:
    a = policy("dup", roles=["implementer"], provider_lock="zai-harness")
    b = policy("dup", roles=["implementer"], provider_lock="anthropic-harness")
    other = policy("dup", repo_ids=["acme/project-x"], roles=["implementer"], provider_lock="zai-harness")
    d1, d2 = explain(ctx(), snap(a, b)), explain(ctx(), snap(b, a))
    assert d1 == d2 and d1.reason == "policy-conflict" and d1.tied_policies == ("dup", "dup")
    # A same-id policy on a better rung wins outright; the tied pair below is merely outranked.
    d3 = explain(ctx(), snap(a, other, b))
    assert (d3.outcome, d3.rung) == ("selected", 2)
    assert [row.reason for row in d3.considered] == ["matched", "outranked", "outranked"]


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from(["zai-harness", "anthropic-harness", None]),
)
def test_a_repo_and_role_policy_beats_a_role_only_policy_whatever_their_priorities(
    repo_role_priority: int, role_priority: int, lock: str | None
) -> None:
    specific = policy(
        "specific",
        priority=repo_role_priority,
        repo_ids=["acme/project-x"],
        roles=["implementer"],
        provider_lock=lock,
    )
    broad = policy("broad", priority=role_priority, roles=["implementer"], provider_lock="zai-harness")
    d = explain(ctx(), snap(broad, specific))
    assert (d.policy_id, d.rung) == ("specific", 2)
    assert reasons(d) == {"specific": "matched", "broad": "outranked"}


def test_within_a_rung_priority_decides_then_id() -> None:
    low = policy("a-low", priority=1, roles=["implementer"], provider_lock="zai-harness")
    high = policy("z-high", priority=2, roles=["implementer"], provider_lock="anthropic-harness")
    assert explain(ctx(), snap(low, high)).policy_id == "z-high"


def test_a_disabled_policy_never_decides() -> None:
    d = explain(ctx(), snap(policy("off", enabled=False, roles=["implementer"], provider_lock="zai-harness")))
    assert d.policy_source == "legacy-compatibility" and d.policies_excluded == 1


# -- repository identity (D2) ----------------------------------------------------------------------------


def test_a_lossy_slug_never_joins_a_repo_scoped_policy() -> None:
    role_policy = policy("reviewers", roles=["reviewer"], provider_lock="anthropic-harness")
    lossy = ctx(repo=None, repo_slug="acme-project-x", requirement="high-reasoning")
    d = explain(lossy, snap(ZAI_X, role_policy))
    assert (d.outcome, d.policy_source, d.repo, d.repo_identity) == (
        "selected",
        "legacy-compatibility",
        "acme-project-x",
        "legacy-lossy",
    )
    assert reasons(d) == {"project-x-uses-zai": "repo-identity-not-canonical"}
    assert d.considered[0].matched is False
    # The join is refused, not the route: a policy that names no repository still applies.
    reviewer = explain(
        lossy.model_copy(update={"role": "reviewer", "requirement": None}), snap(ZAI_X, role_policy)
    )
    assert (reviewer.policy_id, reviewer.provider) == ("reviewers", "anthropic")
    assert reasons(reviewer) == {"project-x-uses-zai": "repo-identity-not-canonical", "reviewers": "matched"}


@pytest.mark.parametrize("repo", ["Acme/Project-X", "ACME/project-x"])
def test_a_canonical_repo_joins_whatever_its_case(repo: str) -> None:
    assert explain(ctx(repo=repo), snap(ZAI_X)).policy_id == "project-x-uses-zai"


@pytest.mark.parametrize(
    "repo", ["https://github.com/acme/project-x", "acme/project-x/", "acme/project-x.git"]
)
def test_a_non_canonical_repo_is_lossy_and_never_guessed(repo: str) -> None:
    d = explain(ctx(repo=repo), snap(ZAI_X))
    assert d.policy_source == "legacy-compatibility"


def test_without_a_repository_repo_scoped_policies_do_not_match() -> None:
    d = explain(ctx(repo=None), snap(ZAI_X))
    assert d.policy_source == "legacy-compatibility" and d.considered == () and d.repo is None


# -- the role join and principals (D8) -------------------------------------------------------------------


def test_policies_address_loops_through_principal_ids_not_roles() -> None:
    loop = policy(
        "adr-review-on-anthropic", principal_ids=["adr_reviewer"], provider_lock="anthropic-harness"
    )
    d = explain(ctx(role="adr_reviewer", principal_id="adr_reviewer"), snap(loop, ZAI_X))
    assert d.role is None
    assert (d.policy_id, d.rung) == ("project-x-uses-zai", 4)  # repo (rung 4) beats principal (rung 5)
    d2 = explain(
        ctx(repo="acme/widgets", role="adr_reviewer", principal_id="adr_reviewer"), snap(loop, ZAI_X)
    )
    assert (d2.policy_id, d2.rung, d2.provider) == ("adr-review-on-anthropic", 5, "anthropic")


# -- D4: the invariant, swept over the input matrix ------------------------------------------------------

_LOCKS = [None, "anthropic-harness", "zai-harness", "openai-harness"]
_MAPS: list[dict[str, str]] = [
    {},
    {"F": "F-9"},
    {"F": "glm-5.3"},
    {"F": "claude-haiku-4-5"},
    {"F": "gpt-4o"},
    {"high-reasoning": "glm-5.3"},
]
_POOLS: list[list[str]] = [
    [],
    ["zai-default"],
    ["anthropic-default"],
    ["zai-default", "anthropic-default"],
    ["ghost"],
]
_ACCOUNT_SETS: list[tuple[Account, ...]] = [
    (ANTHROPIC, ZAI),
    (Account(id="anthropic-default", provider="anthropic", state="exhausted"), ZAI),
    (ZAI,),
    (ANTHROPIC,),
    (Account(id="zai-default", provider="anthropic-ish"), Account(id="x", provider="zai")),
    (),
]
_SHAPES: list[dict[str, list[str]]] = [
    {"repo_ids": ["acme/project-x"]},
    {"roles": ["implementer"]},
    {"principal_ids": ["implementer"]},
    {},
]
_LEGACY = [
    DIAL,
    LegacyRoute(
        provider="zai",
        model="glm-4.6",
        account="zai-default",
        transport="harness-direct",
        mechanism="credit-failover",
    ),
]


def test_no_managed_policy_ever_routes_a_literal_family_off_anthropic() -> None:
    checked = selected = 0
    for family, lock, mapping, pool, accounts, shape, legacy in product(
        list(ModelFamily), _LOCKS, _MAPS, _POOLS, _ACCOUNT_SETS, _SHAPES, _LEGACY
    ):
        requirement_map = {
            k.replace("F", family.value): v.replace("F", family.value) for k, v in mapping.items()
        }
        p = RoutingPolicy(
            id="p",
            match=RoutingMatch(**shape),
            action=RoutingAction(
                provider_lock=lock, requirement_map=requirement_map, account_pool=tuple(pool)
            ),
        )
        context = ctx(requirement=family.value, accounts=accounts, legacy_route=legacy)
        (d,) = explain_batch([context], snap(p))
        assert d.policy_source == "managed-policy"
        checked += 1
        for verdict in d.accounts:
            if verdict.provider != "anthropic":
                assert (verdict.eligible, verdict.reason) == (False, "literal-family-incompatible")
        if d.outcome == "selected":
            selected += 1
            assert d.provider == "anthropic" and d.account is not None
            assert next(a for a in accounts if a.id == d.account).provider == "anthropic"
            assert d.model is not None and model_provider(d.model) is not None
            assert parse_requirement(family.value).satisfied_by(d.model)
        if lock == "zai-harness":
            assert (d.outcome, d.reason) == ("rejected", "literal-family-unsatisfiable") or d.reason in {
                "literal-family-mapped-to-foreign-model",
            }
    assert checked == 3 * 4 * 6 * 5 * 6 * 4 * 2 and selected > 0


@given(contexts, snapshots())
def test_no_managed_policy_ever_routes_a_literal_family_off_anthropic_over_arbitrary_sets(
    context: RouteContext, snapshot: PolicySnapshot
) -> None:
    for family in ModelFamily:
        d = explain(context.model_copy(update={"requirement": family.value}), snapshot)
        if d.policy_source == "managed-policy" and d.outcome == "selected":
            assert d.provider == "anthropic" and d.model is not None
            assert parse_requirement(family.value).satisfied_by(d.model)
        for verdict in d.accounts:
            if verdict.provider != "anthropic":
                assert verdict.reason == "literal-family-incompatible"


def test_a_legacy_route_that_defies_the_requirement_is_reported_not_suppressed() -> None:
    """D4, last paragraph: credit failover really does put a claude-opus request on GLM. A legacy
    decision reports that route as it happened, so the divergence is visible; only a managed
    policy is bound by the literal-family rule."""
    stages = [
        LegacyStage(
            mechanism="role-dial", provider="anthropic", model="claude-opus-4-1", detail="provider=anthropic"
        ),
        LegacyStage(
            mechanism="credit-failover", provider="zai", model="glm-4.6", detail="anthropic-credit=exhausted"
        ),
    ]
    legacy = build_legacy_route(stages, "agentic", account="zai-default")
    assert legacy is not None and legacy.mechanism == "credit-failover"
    context = ctx(repo="acme/widgets", requirement="claude-opus", legacy_route=legacy)
    for snapshot in (PolicySnapshot(), snap(ZAI_X), snap(policy("reviewers", roles=["reviewer"]))):
        d = explain(context, snapshot)
        assert (d.outcome, d.reason, d.policy_source, d.rung) == (
            "selected",
            "no-managed-policy",
            "legacy-compatibility",
            9,
        )
        # Reported unchanged: not held, not rewritten to an Anthropic model.
        assert (d.provider, d.model, d.account, d.transport) == (
            "zai",
            "glm-4.6",
            "zai-default",
            "harness-direct",
        )
        assert not parse_requirement("claude-opus").satisfied_by(d.model)
        assert compare_routes(d, legacy) == (True, None)
    # The same context under a managed policy is bound by the rule.
    managed = explain(
        context, snap(policy("widgets", repo_ids=["acme/widgets"], provider_lock="zai-harness"))
    )
    assert (managed.outcome, managed.reason) == ("rejected", "literal-family-unsatisfiable")
    assert compare_routes(managed, legacy) == (False, "policy-rejected")


# -- explain_policies ------------------------------------------------------------------------------------


def test_explain_policies_says_why_each_policy_did_or_did_not_apply() -> None:
    policies = (
        ZAI_X,
        policy("other-repo", repo_ids=["acme/widgets"]),
        policy("reviewers", roles=["reviewer"]),
        policy("loop", principal_ids=["adr_reviewer"]),
        policy("one-shot", request_faces=["one-shot"]),
        policy("implementers", roles=["implementer"], priority=-5),
        policy("off", enabled=False),
    )
    rows = explain_policies(ctx(), snap(*policies))
    assert [(r.policy_id, r.reason) for r in rows] == [
        ("other-repo", "repo-not-matched"),
        ("project-x-uses-zai", "matched"),
        ("loop", "principal-not-matched"),
        ("reviewers", "role-not-matched"),
        ("implementers", "outranked"),
        ("one-shot", "face-not-matched"),
        ("off", "policy-disabled"),
    ]
    d = explain(ctx(), snap(*policies))
    assert set(d.considered) <= set(rows) and d.policies_excluded == len(rows) - len(d.considered)
    lossy = explain_policies(ctx(repo=None, repo_slug="acme-project-x"), snap(*policies))
    assert dict((r.policy_id, r.reason) for r in lossy)["other-repo"] == "repo-identity-not-canonical"


# -- totality on inputs outside the types -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "snapshot"),
    [
        (None, None),
        ({"repo": "acme/x"}, PolicySnapshot()),
        (RouteContext.model_construct(request_face=None, legacy_route=None, accounts=None), PolicySnapshot()),
        (
            ctx(),
            PolicySnapshot.model_construct(
                policies=[object()], revision="x", content_hash=None, available=True
            ),
        ),
    ],
)
def test_explain_is_total_even_outside_its_types(context: Any, snapshot: Any) -> None:
    d = explain(context, snapshot)
    assert isinstance(d, RouteDecision) and d.outcome == "held" and d.reason == "resolver-fault"
    assert explain_policies(context, snapshot) == ()
    assert [x.reason for x in explain_batch([context], snapshot)] == ["resolver-fault"]
