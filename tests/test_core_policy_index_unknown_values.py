"""A value no policy names keeps nothing in the policy index.

``admit`` memoised a full-width mask (one bit per enabled policy) for every value it was asked about,
known or not, up to 4,096 per dimension: 60,000 policies and a new principal id per spawn kept 33 MB.
An unknown value admits the open policies only, so it gets the index's shared ``any`` mask itself."""

from __future__ import annotations

from otel_route_shadow.core import PolicyIndex, RoutingPolicy


def _index() -> PolicyIndex:
    policies = [
        RoutingPolicy.model_validate({"id": f"r{i}", "match": {"repo_ids": [f"o/r{i}"]}}) for i in range(300)
    ]
    policies += [
        RoutingPolicy.model_validate({"id": "named", "match": {"principal_ids": ["job-known"]}}),
        RoutingPolicy.model_validate({"id": "catch-all"}),
    ]
    return PolicyIndex(policies)


def _candidates(index: PolicyIndex, principal: str) -> int:
    return index.candidates("o/r1", repo_known=True, role=None, principal=principal, face="agentic")


def test_unknown_values_keep_no_mask_in_the_policy_index() -> None:
    index = _index()
    dimension = index._principals
    masks = {id(dimension.admit(f"job-{i}")) for i in range(1_000)}
    assert masks == {id(dimension.any)}  # one shared object, not a new int per value
    assert len(dimension._masks) == 0
    found = {_candidates(index, f"spawn-{i}") for i in range(1_000)}
    assert len(found) == 1 and len(dimension._masks) == 0


def test_an_unknown_value_admits_the_open_policies_and_a_known_one_its_own() -> None:
    index = _index()
    ids = lambda mask: {index.keys[p][2] for p in range(len(index.keys)) if mask >> p & 1}  # noqa: E731
    assert ids(_candidates(index, "job-unknown")) == {"r1", "catch-all"}
    assert ids(_candidates(index, "job-known")) == {"r1", "named", "catch-all"}
    assert len(index._principals._masks) == 1
