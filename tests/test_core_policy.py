"""Policies (D3): the precedence ladder, exact-set overlap, order-independent hashing, validation."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from core_strategies import policy_lists
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.core import (
    LEGACY_RUNG,
    PolicyIndex,
    PolicyProblem,
    ReasonCode,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    blocking,
    policy_set_hash,
    precedence_level,
    validate_policies,
)

EXAMPLES = Path(__file__).parent.parent / "examples"

# (repo, principal, role, face) -> rung: the ladder of docs/core.md, written out in full.
LADDER = {
    (True, True, False, False): 1,
    (True, True, True, False): 1,
    (True, True, False, True): 1,
    (True, True, True, True): 1,
    (True, False, True, False): 2,
    (True, False, True, True): 2,
    (True, False, False, True): 3,
    (True, False, False, False): 4,
    (False, True, False, False): 5,
    (False, True, True, False): 5,
    (False, True, False, True): 5,
    (False, True, True, True): 5,
    (False, False, True, False): 6,
    (False, False, True, True): 6,
    (False, False, False, True): 7,
    (False, False, False, False): 8,
}


@pytest.mark.parametrize(("shape", "rung"), sorted(LADDER.items()))
def test_precedence_ladder_follows_the_shape_of_the_match(shape: tuple[bool, ...], rung: int) -> None:
    repo, principal, role, face = shape
    match = RoutingMatch(
        repo_ids=["acme/project-x"] if repo else [],
        principal_ids=["adr_reviewer"] if principal else [],
        roles=["reviewer"] if role else [],
        request_faces=["agentic"] if face else [],
    )
    assert precedence_level(match) == rung
    assert rung < LEGACY_RUNG


def test_order_key_is_rung_then_priority_then_id() -> None:
    a = RoutingPolicy(id="b", priority=5, match=RoutingMatch(roles=["reviewer"]))
    b = RoutingPolicy(id="a", priority=5, match=RoutingMatch(roles=["reviewer"]))
    c = RoutingPolicy(id="z", priority=-100, match=RoutingMatch(repo_ids=["acme/x"], roles=["reviewer"]))
    d = RoutingPolicy(id="y", priority=9, match=RoutingMatch(roles=["reviewer"]))
    assert list(PolicyIndex([a, b, c, d]).ordered) == [c, d, b, a]


def test_exact_sets_are_stored_sorted_and_unique() -> None:
    match = RoutingMatch(roles=["reviewer", "planner", "reviewer"])
    assert match.roles == ("planner", "reviewer")


def _brute_overlap(a: RoutingMatch, b: RoutingMatch) -> bool:
    """Is there a context value on every dimension that both matches admit? Empty means any value."""
    for x, y in (
        (a.repo_ids, b.repo_ids),
        (a.roles, b.roles),
        (a.principal_ids, b.principal_ids),
        (a.request_faces, b.request_faces),
    ):
        universe = {*x, *y, "\x00fresh"}
        if not any((not x or v in x) and (not y or v in y) for v in universe):
            return False
    return True


@given(policy_lists(6))
def test_equal_precedence_conflicts_are_reported_exactly(policies: list[RoutingPolicy]) -> None:
    reported = {
        frozenset(p.related)
        for p in validate_policies(policies)
        if p.code is ReasonCode.EQUAL_PRECEDENCE_CONFLICT
    }
    expected = set()
    for i, a in enumerate(policies):
        for b in policies[i + 1 :]:
            if (
                a.enabled
                and b.enabled
                and precedence_level(a.match) == precedence_level(b.match)
                and a.priority == b.priority
                and a.action != b.action
                and _brute_overlap(a.match, b.match)
            ):
                expected.add(frozenset((a.id, b.id)))
    assert reported == expected


def test_conflict_names_both_policies_and_points_at_the_first_by_id() -> None:
    raw = [
        {
            "id": "zz",
            "priority": 1,
            "match": {"roles": ["reviewer"]},
            "action": {"provider_lock": "zai-harness"},
        },
        {"id": "ok", "priority": 2, "match": {"roles": ["reviewer"]}},
        {
            "id": "aa",
            "priority": 1,
            "match": {"roles": ["reviewer", "planner"]},
            "action": {"provider_lock": "anthropic-harness"},
        },
    ]
    problems = validate_policies(raw)
    (problem,) = blocking(problems)
    # zz (reviewer, priority 1) also never decides: ok (reviewer, priority 2) outranks it everywhere.
    assert [(p.code, p.policy_id) for p in problems if p.warning] == [(ReasonCode.UNREACHABLE_POLICY, "zz")]
    assert problem.code is ReasonCode.EQUAL_PRECEDENCE_CONFLICT
    assert problem.related == ("aa", "zz")
    assert (problem.policy_id, problem.index) == ("aa", 2)


def test_no_conflict_for_disjoint_sets_other_priorities_other_rungs_or_equal_actions() -> None:
    zai = {"provider_lock": "zai-harness"}
    anthropic = {"provider_lock": "anthropic-harness"}
    raw = [
        {"id": "a", "match": {"roles": ["reviewer"]}, "action": zai},
        {"id": "b", "match": {"roles": ["planner"]}, "action": anthropic},  # disjoint
        {"id": "c", "priority": 1, "match": {"roles": ["reviewer"]}, "action": anthropic},  # priority
        {"id": "d", "match": {"roles": ["reviewer"], "repo_ids": ["acme/x"]}, "action": anthropic},  # rung
        {"id": "e", "match": {"roles": ["reviewer", "triager"]}, "action": zai},  # same action
        {"id": "f", "enabled": False, "match": {"roles": ["reviewer"]}, "action": anthropic},  # disabled
    ]
    problems = validate_policies(raw)
    assert blocking(problems) == []
    # a is covered by c (same role, higher priority): a warning, not a conflict.
    assert [(p.code, p.policy_id, p.related) for p in problems] == [
        (ReasonCode.UNREACHABLE_POLICY, "a", ("c",))
    ]


@given(policy_lists(6), st.randoms(use_true_random=False))
def test_policy_set_hash_is_order_independent(policies: list[RoutingPolicy], rnd: Any) -> None:
    shuffled = list(policies)
    rnd.shuffle(shuffled)
    assert policy_set_hash(shuffled) == policy_set_hash(policies)


def test_policy_set_hash_changes_with_any_field() -> None:
    base = RoutingPolicy(id="p", match=RoutingMatch(roles=["reviewer"]))
    variants = [
        base.model_copy(update={"id": "q"}),
        base.model_copy(update={"enabled": False}),
        base.model_copy(update={"priority": 1}),
        base.model_copy(update={"match": RoutingMatch(roles=["planner"])}),
        base.model_copy(update={"action": RoutingAction(forbid_direct_bypass=True)}),
        base.model_copy(update={"action": RoutingAction(account_pool=("a", "b"))}),
        base.model_copy(update={"action": RoutingAction(account_pool=("b", "a"))}),
    ]
    hashes = {policy_set_hash([base]), *(policy_set_hash([v]) for v in variants)}
    assert len(hashes) == len(variants) + 1


def _codes(raw: Any) -> list[ReasonCode]:
    return [p.code for p in validate_policies(raw)]


def _one(**overrides: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {"id": "p", "match": {}, "action": {}}
    policy.update(overrides)
    return policy


@pytest.mark.parametrize(
    ("policy", "code"),
    [
        (_one(match={"repo_ids": ["acme-project-x"]}), ReasonCode.NON_CANONICAL_REPO_ID),
        (_one(match={"repo_ids": ["Acme/Project-X"]}), ReasonCode.NON_CANONICAL_REPO_ID),
        (_one(match={"repo_ids": ["acme/*"]}), ReasonCode.NON_CANONICAL_REPO_ID),
        (
            _one(action={"requirement_map": {"claude-opus": "glm-5.3"}}),
            ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL,
        ),
        (
            _one(action={"requirement_map": {"claude-opus": "claude-sonnet-4-5"}}),
            ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL,
        ),
        (_one(match={"roles": ["adr_reviewer"]}), ReasonCode.UNKNOWN_ROLE),
        (_one(match={"roles": ["Reviewer"]}), ReasonCode.UNKNOWN_ROLE),
        (_one(match={"request_faces": ["batch"]}), ReasonCode.UNKNOWN_REQUEST_FACE),
        (_one(action={"provider_lock": "openai-harness"}), ReasonCode.UNKNOWN_PROVIDER_BINDING),
        (_one(action={"requirement_map": {"smart": "glm-5.3"}}), ReasonCode.UNKNOWN_REQUIREMENT),
        (_one(action={"requirement_map": {"none": "glm-5.3"}}), ReasonCode.UNKNOWN_REQUIREMENT),
        (_one(action={"requirement_map": {"fast": "gpt-4o"}}), ReasonCode.UNKNOWN_MODEL),
        (
            _one(action={"provider_lock": "zai-harness", "requirement_map": {"fast": "claude-haiku-4-5"}}),
            ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK,
        ),
        (
            _one(
                action={"provider_lock": "zai-harness", "requirement_map": {"claude-opus": "claude-opus-4-1"}}
            ),
            ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK,
        ),
        (_one(action={"account_pool": ["a", "a"]}), ReasonCode.MALFORMED_POLICY),
        (_one(priority="high"), ReasonCode.MALFORMED_POLICY),
        (_one(priority=1.5), ReasonCode.MALFORMED_POLICY),
        (_one(priority=True), ReasonCode.MALFORMED_POLICY),
        (_one(enabled="yes"), ReasonCode.MALFORMED_POLICY),
        (_one(id=""), ReasonCode.MALFORMED_POLICY),
        (_one(id="has space"), ReasonCode.MALFORMED_POLICY),
        (_one(match={"repo_ids": "acme/x"}), ReasonCode.MALFORMED_POLICY),
        (_one(match={"repo_ids": [""]}), ReasonCode.MALFORMED_POLICY),
        (_one(match={"globs": ["acme/*"]}), ReasonCode.MALFORMED_POLICY),
        (_one(action={"selection": "random"}), ReasonCode.MALFORMED_POLICY),
        (_one(action={"forbid_direct_bypass": "true"}), ReasonCode.MALFORMED_POLICY),
        (_one(extra=1), ReasonCode.MALFORMED_POLICY),
        ("not an object", ReasonCode.MALFORMED_POLICY),
    ],
)
def test_each_validation_problem_has_its_code(policy: Any, code: ReasonCode) -> None:
    assert _codes([policy]) == [code]


def test_duplicate_ids() -> None:
    problems = blocking(validate_policies([_one(priority=1), _one(priority=2)]))
    assert [(p.code, p.index) for p in problems] == [(ReasonCode.DUPLICATE_POLICY_ID, 1)]


def test_a_literal_family_may_map_to_its_own_anthropic_model() -> None:
    assert (
        _codes(
            [
                _one(
                    action={
                        "provider_lock": "anthropic-harness",
                        "requirement_map": {"claude-opus": "claude-opus-4-1"},
                    }
                )
            ]
        )
        == []
    )
    assert (
        _codes(
            [_one(action={"provider_lock": "zai-harness", "requirement_map": {"high-reasoning": "glm-5.3"}})]
        )
        == []
    )


def test_every_problem_is_reported_not_just_the_first() -> None:
    raw = [
        _one(
            id="a",
            match={"repo_ids": ["A/B"], "roles": ["boss"], "request_faces": ["batch"]},
            action={"provider_lock": "x", "requirement_map": {"claude-opus": "glm-5.3", "smart": "glm-5.3"}},
        ),
        {"id": "b", "priority": "x"},
    ]
    assert sorted(c.value for c in _codes(raw)) == sorted(
        [
            "non-canonical-repo-id",
            "unknown-role",
            "unknown-request-face",
            "unknown-provider-binding",
            "literal-family-mapped-to-foreign-model",
            "unknown-requirement",
            "malformed-policy",
        ]
    )
    assert [p.index for p in validate_policies(raw)][-1] == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
policy_like = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(max_size=6), st.sampled_from(["p", "q"]), json_values),
        "enabled": json_values,
        "priority": st.one_of(st.integers(), json_values),
        "match": st.one_of(
            json_values, st.fixed_dictionaries({}, optional={"repo_ids": json_values, "roles": json_values})
        ),
        "action": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {}, optional={"provider_lock": json_values, "requirement_map": json_values}
            ),
        ),
    },
)


@given(st.one_of(json_values, st.lists(st.one_of(policy_like, json_values), max_size=5)))
def test_validate_policies_never_raises(raw: Any) -> None:
    problems = validate_policies(raw)
    assert all(isinstance(p, PolicyProblem) and isinstance(p.code, ReasonCode) for p in problems)
    assert all(p.code is not ReasonCode.MALFORMED_POLICY or p.message for p in problems)


def test_the_example_policy_set_is_valid() -> None:
    raw = json.loads((EXAMPLES / "policies.json").read_text())["policies"]
    assert validate_policies(raw) == []


def test_the_bad_example_has_one_of_each_problem() -> None:
    raw = json.loads((EXAMPLES / "bad-policies.json").read_text())["policies"]
    codes = {p.code for p in validate_policies(raw)}
    assert codes == {
        ReasonCode.NON_CANONICAL_REPO_ID,
        ReasonCode.EQUAL_PRECEDENCE_CONFLICT,
        ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL,
        ReasonCode.DUPLICATE_POLICY_ID,
        ReasonCode.CREDENTIAL_SHAPED_ID,
        ReasonCode.UNKNOWN_ROLE,
        ReasonCode.UNKNOWN_REQUEST_FACE,
        ReasonCode.UNKNOWN_PROVIDER_BINDING,
        ReasonCode.UNKNOWN_REQUIREMENT,
        ReasonCode.UNKNOWN_MODEL,
        ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK,
        ReasonCode.MALFORMED_POLICY,
        ReasonCode.UNREACHABLE_POLICY,
    }


def test_validation_messages_never_echo_malformed_values() -> None:
    secret = "sk-ant-api03-" + "x" * 40
    (problem,) = validate_policies([{"id": "p", "priority": secret}])
    assert secret not in problem.message


def test_a_credential_shaped_id_is_refused_and_never_printed() -> None:
    """Regression: a policy id of a credential's shape (``sk-ant-...`` fits the id pattern) was accepted,
    then redacted wherever a decision was recorded (the chain, span attributes) while problems printed it
    whole; it is an error now, and no problem carries it."""
    secret = "sk-ant-api03-" + "x" * 40
    policies = [
        {
            "id": secret,
            "priority": 1,
            "match": {"roles": ["reviewer"]},
            "action": {"provider_lock": "zai-harness"},
        },
        {
            "id": secret,
            "priority": 1,
            "match": {"roles": ["reviewer"]},
            "action": {"provider_lock": "zai-harness"},
        },
        {"id": "token:review-bot", "match": {"repo_ids": ["acme-slug"]}},
    ]
    problems = validate_policies(policies)
    assert {p.code for p in blocking(problems)} >= {
        ReasonCode.CREDENTIAL_SHAPED_ID,
        ReasonCode.DUPLICATE_POLICY_ID,
        ReasonCode.NON_CANONICAL_REPO_ID,
    }
    assert [p.index for p in problems if p.code == ReasonCode.CREDENTIAL_SHAPED_ID] == [0, 1, 2]
    shown = repr([p.model_dump() for p in problems])
    assert secret not in shown and "review-bot" not in shown and "x" * 20 not in shown
    assert validate_policies([{"id": "token-rotation", "match": {"roles": ["reviewer"]}}]) == []


def test_ladder_covers_every_shape() -> None:
    assert set(LADDER) == set(product((False, True), repeat=4))


@settings(max_examples=150, deadline=None)
@given(policy_lists(12))
def test_the_conflict_count_is_exact_when_the_listing_is_capped(policies: list[RoutingPolicy]) -> None:
    """Issue 16: the listing is capped per code, the count is not. Brute force over every pair."""
    expected = sum(
        1
        for i, a in enumerate(policies)
        for b in policies[i + 1 :]
        if a.enabled
        and b.enabled
        and precedence_level(a.match) == precedence_level(b.match)
        and a.priority == b.priority
        and a.action != b.action
        and _brute_overlap(a.match, b.match)
    )
    problems = validate_policies(policies, limit_per_code=1)
    conflicts = [p for p in problems if p.code is ReasonCode.EQUAL_PRECEDENCE_CONFLICT]
    assert len(conflicts) <= 2
    assert sum(p.count for p in conflicts) == expected


def test_a_conflict_search_past_its_budget_says_at_least() -> None:
    from otel_route_shadow.core.conflicts import find_conflicts

    policies = [
        RoutingPolicy.model_validate(
            {"id": f"r{i}", "match": {"roles": ["reviewer", role]}, "action": {"provider_lock": lock}}
        )
        for i, (role, lock) in enumerate(
            [("planner", "zai-harness"), ("triager", "anthropic-harness"), ("summarizer", "zai-harness")]
        )
    ]
    full = find_conflicts(list(enumerate(policies)), limit=20)
    assert (full.total, full.exact) == (2, True)
    cut = find_conflicts(list(enumerate(policies)), limit=20, budget=1)
    assert not cut.exact and cut.total < full.total
