"""The conflict search's budget counts the work done, not only the pairs it finds.

It counted deduplicated candidate pairs only: a set whose boxes each name hundreds of values that every
other box names too read hundreds of index entries per pair found (1,200 such policies took 30 s with
the budget far from spent), and a candidate's overlap check compared whole sets on the dimensions not
searched. Both are charged now (``PAIR_STEPS`` per pair, one step per entry read or member compared),
so such a set runs past the budget and says "at least" instead of running for minutes."""

from __future__ import annotations

import functools

import pytest

from otel_route_shadow.core import RoutingPolicy, blocking, validate_policies
from otel_route_shadow.core.conflicts import find_conflicts


def _policies(
    count: int, shared: int, own: int, dims: tuple[str, ...], lock: str = "zai-harness"
) -> list[RoutingPolicy]:
    """``count`` policies whose sets in each of ``dims`` hold ``shared`` values common to all and ``own``
    of their own: every pair overlaps; with one lock, none conflicts."""
    return [
        RoutingPolicy.model_validate(
            {
                "id": f"p{i}",
                "match": {
                    dim: [f"o/{dim[0]}{j}" for j in range(shared)]
                    + [f"u/{dim[0]}{i}-{j}" for j in range(own)]
                    for dim in dims
                },
                "action": {"provider_lock": lock},
            }
        )
        for i in range(count)
    ]


def test_the_conflict_budget_counts_the_index_entries_read() -> None:
    # 40 boxes naming the same 100 repositories: 780 candidate pairs, but 160,000 index entries read.
    policies = _policies(40, shared=100, own=1, dims=("repo_ids",))
    scan = find_conflicts(list(enumerate(policies)), limit=20, budget=1_000)
    assert not scan.exact
    assert find_conflicts(list(enumerate(policies)), limit=20).exact


def test_the_conflict_budget_counts_the_set_members_compared() -> None:
    # Found through the repositories, each of the 780 pairs compares principal sets of 151 members.
    policies = _policies(40, shared=1, own=150, dims=("repo_ids", "principal_ids"))
    scan = find_conflicts(list(enumerate(policies)), limit=20, budget=2_000)
    assert not scan.exact
    assert find_conflicts(list(enumerate(policies)), limit=20).exact


def test_a_conflict_search_past_its_work_bound_still_lists_and_says_at_least() -> None:
    # Two actions: half the pairs conflict. Past the bound, the listed conflicts stay and the count
    # that closes them says "at least".
    policies = _policies(30, shared=100, own=1, dims=("repo_ids",))
    policies += _policies(30, shared=100, own=1, dims=("repo_ids",), lock="anthropic-harness")
    policies = [p.model_copy(update={"id": f"q{i}"}) for i, p in enumerate(policies)]
    full = find_conflicts(list(enumerate(policies)), limit=3)
    assert full.exact and full.total == 30 * 30
    cut = find_conflicts(list(enumerate(policies)), limit=3, budget=2_000)
    assert not cut.exact and len(cut.listed) == 3 and cut.total < full.total


def test_a_search_that_stopped_before_finding_a_conflict_still_refuses_the_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A search past its bound that had found no conflict said nothing: the set was saved as conflict-free.
    from otel_route_shadow.core import validation

    monkeypatch.setattr(validation, "find_conflicts", functools.partial(find_conflicts, budget=1_000))
    policies = _policies(40, shared=100, own=1, dims=("repo_ids",))
    problems = blocking(validate_policies([p.model_dump(mode="json") for p in policies]))
    assert [(p.code.value, p.count) for p in problems] == [("equal-precedence-conflict", 0)]
    assert "not shown free of them" in problems[0].message
    monkeypatch.undo()
    assert blocking(validate_policies([p.model_dump(mode="json") for p in policies])) == []
