"""Hypothesis strategies for the core's tests: contexts and snapshots built from the vocabulary, its
near misses (wrong case, loop names, lossy slugs, foreign models) and arbitrary text."""

from __future__ import annotations

from hypothesis import strategies as st

from otel_route_shadow.core import (
    Account,
    LegacyRoute,
    LegacyStage,
    PolicySnapshot,
    RouteContext,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    policy_set_hash,
)

REPOS = [
    "acme/project-x",
    "acme/widgets",
    "octo/app.js",
    "Acme/Project-X",
    "acme-project-x",
    "a-b/c",
    "a/b-c",
]
ROLES = ["planner", "implementer", "reviewer", "triager", "summarizer", "Reviewer", "adr_reviewer", "PLANNER"]
PRINCIPALS = ["adr_reviewer", "implementer", "wiki_compilation", "planner", "pr_unstick"]
FACES = ["agentic", "one-shot", "batch"]
REQUIREMENTS = [
    None,
    "none",
    "",
    "claude-opus",
    "claude-sonnet",
    "claude-haiku",
    "high-reasoning",
    "fast",
    "long-context",
    "gpt-5",
    "Claude-Opus",
]
PROVIDERS = ["anthropic", "zai", "openai"]
STATES = ["available", "exhausted", "disabled", "unknown", "weird"]
MODELS = [
    "claude-opus-4-1",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "claude-opus",
    "glm-5.3",
    "glm-4.5-air",
    "gpt-4o",
    "claude-opusx",
]
LOCKS = [None, "zai-harness", "anthropic-harness", "openai-harness"]
ACCOUNT_IDS = ["anthropic-default", "zai-default", "a1", "z1"]
MECHANISMS = ["role-dial", "repo-override", "fleet-ratchet", "credit-failover", "mystery"]
POLICY_IDS = [f"p{i}" for i in range(12)]

# Any text (pydantic refuses lone surrogates in str fields, so they never reach the core).
garbage = st.text(st.characters(codec="utf-8"), max_size=12)
member_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)


def vocab(values: list[str], *, allow_none: bool = False) -> st.SearchStrategy[str | None]:
    options: list[st.SearchStrategy[str | None]] = [st.sampled_from(values), garbage]
    if allow_none:
        options.append(st.none())
    return st.one_of(*options)


def members(values: list[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.one_of(st.sampled_from(values), member_text), max_size=3)


accounts = st.builds(
    Account,
    id=vocab(ACCOUNT_IDS),
    provider=vocab(PROVIDERS),
    state=vocab(STATES),
)

stages = st.builds(
    LegacyStage,
    mechanism=vocab(MECHANISMS),
    provider=vocab(PROVIDERS),
    model=vocab(MODELS, allow_none=True),
    gateway=st.booleans(),
    detail=st.one_of(st.none(), garbage),
)

legacy_routes = st.builds(
    LegacyRoute,
    provider=vocab(PROVIDERS),
    model=vocab(MODELS, allow_none=True),
    account=vocab(ACCOUNT_IDS, allow_none=True),
    transport=vocab(["gateway", "harness-direct", "direct-http"]),
    mechanism=vocab(MECHANISMS),
    mechanism_detail=st.one_of(st.none(), garbage),
    stages=st.lists(stages, max_size=3).map(tuple),
)

contexts = st.builds(
    RouteContext,
    repo=vocab(REPOS, allow_none=True),
    repo_slug=vocab(["acme-project-x", "a-b-c"], allow_none=True),
    role=vocab(ROLES, allow_none=True),
    principal_id=vocab(PRINCIPALS, allow_none=True),
    request_face=vocab(FACES),
    requirement=vocab([r for r in REQUIREMENTS if r is not None], allow_none=True),
    accounts=st.lists(accounts, max_size=4).map(tuple),
    legacy_route=legacy_routes,
)

matches = st.builds(
    RoutingMatch,
    repo_ids=members(["acme/project-x", "acme/widgets", "octo/app.js", "Acme/Project-X"]),
    roles=members(ROLES),
    principal_ids=members(PRINCIPALS),
    request_faces=members(FACES),
)

actions = st.builds(
    RoutingAction,
    provider_lock=st.sampled_from(LOCKS),
    account_pool=st.lists(st.sampled_from(ACCOUNT_IDS), max_size=3).map(tuple),
    requirement_map=st.dictionaries(
        st.sampled_from([r for r in REQUIREMENTS if r]), st.sampled_from(MODELS), max_size=3
    ),
    forbid_direct_bypass=st.booleans(),
)


def policies(ids: list[str] = POLICY_IDS) -> st.SearchStrategy[RoutingPolicy]:
    return st.builds(
        RoutingPolicy,
        id=st.sampled_from(ids),
        enabled=st.sampled_from([True, True, False]),
        priority=st.integers(-2, 2) | st.integers(-(2**31), 2**31 - 1),
        match=matches,
        action=actions,
    )


def policy_lists(max_size: int = 8, *, unique_ids: bool = False) -> st.SearchStrategy[list[RoutingPolicy]]:
    if unique_ids:
        return st.lists(policies(), max_size=max_size, unique_by=lambda p: p.id)
    return st.lists(policies(), max_size=max_size)


@st.composite
def snapshots(draw: st.DrawFn, *, unique_ids: bool = False, max_policies: int = 8) -> PolicySnapshot:
    chosen = draw(policy_lists(max_policies, unique_ids=unique_ids))
    content_hash = draw(st.one_of(st.just(policy_set_hash(chosen)), garbage))
    available = draw(st.sampled_from([True, True, True, False]))
    return PolicySnapshot(
        policies=tuple(chosen),
        revision=draw(st.integers(0, 2**53 - 1)),
        content_hash=content_hash,
        available=available,
        loading=not available and draw(st.booleans()),
    )
