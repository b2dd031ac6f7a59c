"""Synthetic but valid policy sets and route contexts for the resolver rows (deterministic seeds).

The policies spread over every rung of the ladder, name real roles, faces, bindings and models, and
carry account pools and requirement maps, so a winning policy runs the full action and account logic.
The contexts mix canonical repositories, path-safe (lossy) slugs and none; principals and repos the
policies know and ones they do not (those fall through to legacy compatibility); every requirement
kind; and two to four accounts in various states.
"""

from __future__ import annotations

import random

from otel_route_shadow.core import (
    Account,
    LegacyStage,
    PolicySnapshot,
    RouteContext,
    RoutingPolicy,
    build_legacy_route,
    policy_set_hash,
)

ROLES = ("planner", "implementer", "reviewer", "triager", "summarizer")
FACES = ("agentic", "one-shot")
REQUIREMENTS = (
    None,
    "claude-opus",
    "claude-sonnet",
    "claude-haiku",
    "high-reasoning",
    "fast",
    "long-context",
    "gpt-9",
)
ACCOUNTS = (
    ("anthropic-a", "anthropic"),
    ("anthropic-b", "anthropic"),
    ("anthropic-c", "anthropic"),
    ("zai-a", "zai"),
    ("zai-b", "zai"),
)
STATES = ("available", "available", "available", "exhausted", "disabled", "unknown")
_MAPS = {
    "anthropic-harness": {
        "claude-opus": "claude-opus-4-5",
        "high-reasoning": "claude-opus-4-5",
        "fast": "claude-haiku-4-5",
    },
    "zai-harness": {"high-reasoning": "glm-5.1", "fast": "glm-4.5-air", "long-context": "glm-5.1"},
    None: {"claude-sonnet": "claude-sonnet-4-5", "fast": "glm-4.5-air"},
}
# Rung shapes: (repo, principal, role, face); weights favour the specific rungs, as a real set would.
_SHAPES = (
    ((True, True, False, False), 15),
    ((True, False, True, False), 20),
    ((True, False, False, True), 10),
    ((True, False, False, False), 25),
    ((False, True, False, False), 15),
    ((False, False, True, False), 6),
    ((False, False, False, True), 4),
    ((False, False, False, False), 1),
)


def _universe(n_policies: int) -> tuple[list[str], list[str]]:
    repos = [f"org{i % 37}/repo-{i}" for i in range(max(20, n_policies // 3))]
    principals = [f"loop_{i}" for i in range(max(10, n_policies // 6))]
    return repos, principals


def make_policies(n: int, seed: int = 8) -> list[RoutingPolicy]:
    rng = random.Random(seed)
    repos, principals = _universe(n)
    shapes = [shape for shape, _ in _SHAPES]
    weights = [weight for _, weight in _SHAPES]
    policies = []
    for i in range(n):
        repo, principal, role, face = rng.choices(shapes, weights)[0]
        match = {
            "repo_ids": rng.sample(repos, rng.randint(1, 3)) if repo else [],
            "principal_ids": rng.sample(principals, rng.randint(1, 2)) if principal else [],
            "roles": rng.sample(ROLES, rng.randint(1, 2)) if role else [],
            "request_faces": [rng.choice(FACES)] if face else [],
        }
        lock = rng.choice(("anthropic-harness", "zai-harness", None))
        pool_ids = [a for a, provider in ACCOUNTS if lock is None or provider == lock.split("-")[0]]
        pool = rng.sample(pool_ids, rng.randint(0, len(pool_ids)))
        policies.append(
            RoutingPolicy.model_validate(
                {
                    "id": f"p{i:05d}",
                    "enabled": rng.random() > 0.03,
                    "priority": rng.randint(0, 10_000),
                    "match": match,
                    "action": {
                        "provider_lock": lock,
                        "account_pool": pool,
                        "requirement_map": dict(_MAPS[lock]),
                        "forbid_direct_bypass": rng.random() < 0.2,
                    },
                }
            )
        )
    return policies


def make_snapshot(policies: list[RoutingPolicy], revision: int = 1) -> PolicySnapshot:
    return PolicySnapshot(policies=tuple(policies), revision=revision, content_hash=policy_set_hash(policies))


def make_contexts(n: int, n_policies: int, seed: int = 9) -> list[RouteContext]:
    rng = random.Random(seed)
    repos, principals = _universe(n_policies)
    contexts = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.75:
            repo, slug = rng.choice(repos), None
        elif roll < 0.85:
            repo, slug = None, rng.choice(repos).replace("/", "-")
        elif roll < 0.95:
            repo, slug = f"unknown{rng.randint(0, 99)}/r{rng.randint(0, 999)}", None
        else:
            repo, slug = None, None
        face = rng.choice(FACES)
        accounts = tuple(
            Account(id=account_id, provider=provider, state=rng.choice(STATES))
            for account_id, provider in rng.sample(ACCOUNTS, rng.randint(2, 4))
        )
        provider = rng.choice(("anthropic", "zai"))
        stages = [
            LegacyStage(
                mechanism="role-dial",
                provider=provider,
                model="glm-5.1" if provider == "zai" else "claude-sonnet-4-5",
                detail=f"provider={provider}",
            )
        ]
        if rng.random() < 0.3:
            stages.append(
                LegacyStage(
                    mechanism="fleet-ratchet",
                    provider=provider,
                    gateway=True,
                    detail="gateway_fleet_ratchet_enabled",
                )
            )
        legacy = build_legacy_route(stages, face, accounts[0].id)
        assert legacy is not None
        contexts.append(
            RouteContext(
                repo=repo,
                repo_slug=slug,
                role=rng.choice((*ROLES, "Reviewer", "adr_reviewer", None)),
                principal_id=rng.choice(principals) if rng.random() < 0.8 else f"other_{rng.randint(0, 99)}",
                request_face=face,
                requirement=rng.choice(REQUIREMENTS),
                accounts=accounts,
                legacy_route=legacy,
            )
        )
    return contexts
