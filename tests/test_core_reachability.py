"""``unreachable-policy`` held to a brute-force oracle: every context of a small space, resolved.

The space: every repository, role, principal and face a generated policy can name, plus the values
no policy names (no repository, a lossy slug, an unnamed canonical repository, no role, a loop name
as role, an unknown principal, no principal, an unknown face). A policy *decides* a context when the
resolver's decision names it (``policy_id``). The check must report exactly the enabled policies
that decide no context of the space: always soundly (each reported one decides nothing), and
completely when the set has no equal-precedence conflict (a conflict makes the tied policies decide
nothing too; that is the conflict's own error, documented in docs/core.md).
"""

from __future__ import annotations

from itertools import product

from hypothesis import example, given, settings
from hypothesis import strategies as st

from otel_route_shadow.core import (
    LegacyRoute,
    PolicySnapshot,
    ReasonCode,
    RouteContext,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    explain_batch,
    policy_outcomes,
    rung_of_shape,
    validate_policies,
)

REPOS = ["acme/x", "acme/y"]
ROLES = ["planner", "reviewer"]
PRINCIPALS = ["p1", "p2"]
FACES = ["agentic", "one-shot"]
VOCABS = (REPOS, ROLES, PRINCIPALS, FACES)
ACTIONS = [
    RoutingAction(),
    RoutingAction(provider_lock="zai-harness"),
    RoutingAction(provider_lock="anthropic-harness"),
]

_LEGACY = LegacyRoute(provider="anthropic", transport="harness-direct", mechanism="role-dial")
CONTEXTS = [
    RouteContext(repo=repo, role=role, principal_id=principal, request_face=face, legacy_route=_LEGACY)
    for repo, role, principal, face in product(
        [None, *REPOS, "acme/z", "acme-x"],
        [None, *ROLES, "implementer", "adr_reviewer"],
        [None, *PRINCIPALS, "p3"],
        [*FACES, "batch"],
    )
]


def _subset(values: list[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True)


@st.composite
def policy_sets(draw: st.DrawFn) -> list[RoutingPolicy]:
    count = draw(st.integers(1, 7))
    # Sets that name only a few dimensions put most policies on one rung, where coverage happens.
    named = draw(st.sets(st.integers(0, 3)))
    # Half the sets use one action throughout: no conflicts, so the completeness test applies.
    actions = draw(st.sampled_from([ACTIONS, ACTIONS[:1]]))
    # Sometimes every policy names every dimension of ``named``: one rung, many combinations.
    always = draw(st.booleans())
    policies = []
    for i in range(count):
        sets = [
            tuple(draw(_subset(vocab)))
            if dim in named and (always or draw(st.sampled_from([True, True, True, False])))
            else ()
            for dim, vocab in enumerate(VOCABS)
        ]
        match = RoutingMatch(repo_ids=sets[0], roles=sets[1], principal_ids=sets[2], request_faces=sets[3])
        policies.append(
            RoutingPolicy(
                id=f"p{i}",
                enabled=draw(st.sampled_from([True, True, True, False])),
                priority=draw(st.integers(0, 2)),
                match=match,
                action=draw(st.sampled_from(actions)),
            )
        )
    return policies


def _rp(policy_id: str, priority: int, **match: tuple[str, ...]) -> RoutingPolicy:
    return RoutingPolicy(id=policy_id, priority=priority, match=RoutingMatch(**match))


# Combinations are rare in random sets: two worked examples, one per kind of split.
COMBINATION = [
    _rp("a", 2, roles=("planner",)),
    _rp("b", 2, roles=("reviewer",)),
    _rp("c", 1, roles=("planner", "reviewer")),
]
GRID = [
    _rp("x", 3, repo_ids=("acme/x",), roles=("planner", "reviewer")),
    _rp("y-planner", 3, repo_ids=("acme/y",), roles=("planner",)),
    _rp("y-reviewer", 2, repo_ids=("acme/y",), roles=("reviewer",), request_faces=("agentic",)),
    _rp("y-reviewer-all", 2, repo_ids=("acme/y",), roles=("reviewer",)),
    _rp("grid", 1, repo_ids=("acme/x", "acme/y"), roles=("planner", "reviewer")),
    _rp("grid-agentic", 0, repo_ids=("acme/x", "acme/y"), roles=("reviewer",), request_faces=("agentic",)),
]


def _never_decide(policies: list[RoutingPolicy]) -> set[str]:
    decisions = explain_batch(CONTEXTS, PolicySnapshot(policies=tuple(policies)))
    decided = {policy_outcomes(d).decided for d in decisions}
    return {p.id for p in policies if p.enabled and p.id not in decided}


def _reported(policies: list[RoutingPolicy]) -> dict[str, tuple[str, ...]]:
    return {
        p.policy_id: p.related
        for p in validate_policies(policies)
        if p.code is ReasonCode.UNREACHABLE_POLICY and p.policy_id is not None
    }


@settings(max_examples=150, deadline=None)
@given(policy_sets())
@example(COMBINATION)
@example(GRID)
def test_every_reported_policy_decides_no_context(policies: list[RoutingPolicy]) -> None:
    reported = _reported(policies)
    assert set(reported) <= _never_decide(policies)


@settings(max_examples=150, deadline=None)
@given(policy_sets())
@example(COMBINATION)
@example(GRID)
def test_every_policy_that_decides_nothing_is_reported_when_there_is_no_conflict(
    policies: list[RoutingPolicy],
) -> None:
    problems = validate_policies(policies)
    if any(p.code is ReasonCode.EQUAL_PRECEDENCE_CONFLICT for p in problems):
        return
    assert _never_decide(policies) == set(_reported(policies))


@settings(max_examples=75, deadline=None)
@given(policy_sets())
@example(COMBINATION)
@example(GRID)
def test_the_named_policies_match_every_context_the_unreachable_one_matches(
    policies: list[RoutingPolicy],
) -> None:
    reported = _reported(policies)
    if not reported:
        return
    decisions = explain_batch(CONTEXTS, PolicySnapshot(policies=tuple(policies)))
    for decision in decisions:
        matched = set(policy_outcomes(decision).matched)
        for policy_id, coverers in reported.items():
            if policy_id in matched:
                assert matched.intersection(coverers), (policy_id, coverers, decision.considered)


def test_a_combination_covers_where_no_single_policy_does() -> None:
    policies = [
        RoutingPolicy(id="planners", priority=5, match=RoutingMatch(roles=("planner",))),
        RoutingPolicy(id="reviewers", priority=5, match=RoutingMatch(roles=("reviewer",))),
        RoutingPolicy(id="both", priority=1, match=RoutingMatch(roles=("planner", "reviewer"))),
    ]
    (problem,) = validate_policies(policies)
    assert (problem.code, problem.policy_id, problem.related) == (
        ReasonCode.UNREACHABLE_POLICY,
        "both",
        ("planners", "reviewers"),
    )
    assert problem.warning
    assert (
        problem.message
        == "can never decide: planners, reviewers together outrank it wherever it matches (rung 6)"
    )


def test_an_open_dimension_is_never_covered_by_named_values() -> None:
    # Every worker role named by higher-priority policies still leaves the contexts whose role is
    # not a worker role (a loop name, or none): the role-open policy decides those.
    roles = ("planner", "implementer", "reviewer", "triager", "summarizer")
    policies = [
        RoutingPolicy(id=f"r-{role}", priority=9, match=RoutingMatch(roles=(role,))) for role in roles
    ]
    policies.append(RoutingPolicy(id="any-role", match=RoutingMatch(request_faces=("agentic",))))
    policies.append(
        RoutingPolicy(id="faces", priority=3, match=RoutingMatch(roles=roles, request_faces=("agentic",)))
    )
    reported = _reported(policies)
    assert "any-role" not in reported
    assert reported["faces"] == tuple(sorted(f"r-{role}" for role in roles))


def test_a_smaller_shape_on_the_same_rung_covers() -> None:
    # Rung 1 names repository + principal; a rung-1 policy that also names roles is covered by one
    # that names none, with a higher priority.
    wide = RoutingPolicy(
        id="wide", priority=2, match=RoutingMatch(repo_ids=("acme/x",), principal_ids=("p1",))
    )
    narrow = RoutingPolicy(
        id="narrow", match=RoutingMatch(repo_ids=("acme/x",), principal_ids=("p1",), roles=("planner",))
    )
    assert _reported([wide, narrow]) == {"narrow": ("wide",)}


def test_an_equal_priority_policy_with_the_same_action_and_a_smaller_id_covers() -> None:
    a = RoutingPolicy(id="a", match=RoutingMatch(roles=("planner", "reviewer")))
    b = RoutingPolicy(id="b", match=RoutingMatch(roles=("planner",)))
    assert _reported([a, b]) == {"b": ("a",)}
    other = RoutingPolicy(id="b", match=RoutingMatch(roles=("planner",)), action=ACTIONS[1])
    assert _reported([a, other]) == {}  # a conflict instead (an error), not an unreachable policy


def test_fewer_dimensions_never_sit_on_a_lower_rung() -> None:
    """The fact the check's exactness rests on (see core/reachability.py)."""
    for bits in range(16):
        dims = [bool(bits >> i & 1) for i in range(4)]
        rung = rung_of_shape(repo=dims[0], role=dims[1], principal=dims[2], face=dims[3])
        for sub in range(16):
            if sub & ~bits:
                continue
            subdims = [bool(sub >> i & 1) for i in range(4)]
            assert (
                rung_of_shape(repo=subdims[0], role=subdims[1], principal=subdims[2], face=subdims[3]) >= rung
            )


def test_unreachable_policies_scale_with_the_index_not_pairs() -> None:
    # 4,000 role policies all covered by one catch-all-of-the-rung: one lookup per cell each.
    policies = [RoutingPolicy(id="top", priority=100, match=RoutingMatch(roles=("planner",)))]
    policies += [
        RoutingPolicy(id=f"p{i:05d}", priority=i % 50, match=RoutingMatch(roles=("planner",)))
        for i in range(4000)
    ]
    problems = validate_policies(policies)
    summary = problems[-1]
    assert summary.code is ReasonCode.UNREACHABLE_POLICY and summary.count == 4000 - 20
    assert sum(p.count for p in problems if p.code is ReasonCode.UNREACHABLE_POLICY) == 4000


def test_a_policy_over_the_cell_limit_still_covers_and_is_named_as_unchecked() -> None:
    repos = tuple(f"acme/r{i}" for i in range(70))
    principals = tuple(f"loop_{i}" for i in range(70))  # 4,900 cells: over CELL_LIMIT
    big = _rp("big", 5, repo_ids=repos, principal_ids=principals)
    small = _rp("small", 1, repo_ids=("acme/r3",), principal_ids=("loop_9", "loop_10"))
    problems = validate_policies([big, small])
    assert [(p.policy_id, p.related, p.count) for p in problems] == [
        (None, (), 0),
        ("small", ("big",), 1),
    ]
    assert problems[0].message.startswith("1 enabled policies not checked for reachability")


def test_policy_outcomes_say_decided_tied_outranked_and_refused() -> None:
    policies = (
        _rp("top", 9, roles=("reviewer",)),
        _rp("low", 1, roles=("reviewer",)),
        _rp("repo", 0, repo_ids=("acme/x",)),
        _rp("other", 0, principal_ids=("p1",)),
    )
    lossy = RouteContext(repo="acme-x", role="reviewer", request_face="agentic", legacy_route=_LEGACY)
    (decision,) = explain_batch([lossy], PolicySnapshot(policies=policies))
    outcomes = policy_outcomes(decision)
    assert (outcomes.decided, outcomes.tied, outcomes.outranked, outcomes.refused) == (
        "top",
        (),
        ("low",),
        ("repo",),
    )
    assert outcomes.matched == ("low", "top")
    tie = (
        _rp("a", 0, roles=("reviewer",)),
        RoutingPolicy(id="b", match=RoutingMatch(roles=("reviewer",)), action=ACTIONS[1]),
    )
    (conflict,) = explain_batch([lossy], PolicySnapshot(policies=tie))
    assert policy_outcomes(conflict) == type(outcomes)(
        decided=None, tied=("a", "b"), outranked=(), refused=()
    )
