"""The examples answer the design record's question: what would a project-X-uses-z.ai policy have changed?"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_route_shadow.core import (
    PolicySnapshot,
    RouteContext,
    RoutingPolicy,
    build_legacy_route,
    explain,
    explain_batch,
    policy_set_hash,
)

EXAMPLES = Path(__file__).parent.parent / "examples"

# context file -> (outcome, reason, policy_source, policy_id)
EXPECTED = {
    "selected-managed-policy": ("selected", "policy-selected", "managed-policy", "project-x-uses-zai"),
    "selected-precedence-repo-role": (
        "selected",
        "policy-selected",
        "managed-policy",
        "project-x-planners-stay-on-anthropic",
    ),
    "selected-account-pool": ("selected", "policy-selected", "managed-policy", "one-shot-triage-fast-on-zai"),
    "rejected-literal-family-unsatisfiable": (
        "rejected",
        "literal-family-unsatisfiable",
        "managed-policy",
        "project-x-uses-zai",
    ),
    "held-capability-unmapped": ("held", "capability-unmapped", "managed-policy", "project-x-uses-zai"),
    "held-no-eligible-account": ("held", "no-eligible-account", "managed-policy", "reviewers-on-anthropic"),
    "held-requirement-unrecognized": (
        "held",
        "requirement-unrecognized",
        "managed-policy",
        "reviewers-on-anthropic",
    ),
    "selected-legacy-adr-review-role-dial": ("selected", "no-managed-policy", "legacy-compatibility", None),
    "selected-legacy-credit-failover-defies-requirement": (
        "selected",
        "no-managed-policy",
        "legacy-compatibility",
        None,
    ),
    "selected-legacy-lossy-repo-slug": ("selected", "no-managed-policy", "legacy-compatibility", None),
    # Run against examples/corrupt-store (see test_cli_explain); against the file it is a plain selection.
    "held-snapshot-unavailable": ("selected", "policy-selected", "managed-policy", "project-x-uses-zai"),
}


def load_policies(name: str = "policies.json") -> list[RoutingPolicy]:
    return [RoutingPolicy.model_validate(p) for p in json.loads((EXAMPLES / name).read_text())["policies"]]


def snapshot(policies: list[RoutingPolicy]) -> PolicySnapshot:
    return PolicySnapshot(policies=tuple(policies), revision=0, content_hash=policy_set_hash(policies))


def load_context(name: str) -> RouteContext:
    return RouteContext.model_validate_json((EXAMPLES / "contexts" / f"{name}.json").read_text())


def test_there_is_one_context_file_per_expected_outcome() -> None:
    assert {p.stem for p in (EXAMPLES / "contexts").glob("*.json")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_example_context_reaches_its_outcome(name: str) -> None:
    d = explain(load_context(name), snapshot(load_policies()))
    assert (d.outcome, d.reason, d.policy_source, d.policy_id) == EXPECTED[name]
    assert d.reason != "resolver-fault"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_legacy_routes_are_what_the_classifier_derives_from_their_stages(name: str) -> None:
    context = load_context(name)
    legacy = context.legacy_route
    assert build_legacy_route(legacy.stages, context.request_face, legacy.account) == legacy


def test_the_adr_review_loop_is_on_zai_through_its_role_dial() -> None:
    legacy = load_context("selected-legacy-adr-review-role-dial").legacy_route
    assert (legacy.provider, legacy.mechanism, legacy.mechanism_detail, legacy.transport) == (
        "zai",
        "role-dial",
        "provider=zai",
        "direct-http",
    )


def test_contexts_jsonl_holds_the_same_contexts() -> None:
    lines = [
        RouteContext.model_validate_json(line)
        for line in (EXAMPLES / "contexts.jsonl").read_text().splitlines()
        if line
    ]
    files = [load_context(n) for n in EXPECTED if n != "held-snapshot-unavailable"]
    assert sorted(c.model_dump_json() for c in lines) == sorted(c.model_dump_json() for c in files)


def test_what_would_a_project_x_uses_zai_policy_have_changed() -> None:
    """The design record's question, answered by diffing decisions with and without the policy."""
    contexts = [load_context(n) for n in sorted(EXPECTED)]
    everything = load_policies()
    without = [p for p in everything if p.id != "project-x-uses-zai"]
    before = explain_batch(contexts, snapshot(without))
    after = explain_batch(contexts, snapshot(everything))
    changed = {
        name
        for name, b, a in zip(sorted(EXPECTED), before, after, strict=True)
        if (b.outcome, b.provider, b.model, b.policy_id) != (a.outcome, a.provider, a.model, a.policy_id)
    }
    # Every canonical project-x spawn except the planner (a repo+role policy outranks the repo
    # policy), and nothing else: not the lossy slug, which can never join.
    assert changed == {
        "selected-managed-policy",
        "rejected-literal-family-unsatisfiable",
        "held-capability-unmapped",
        "held-snapshot-unavailable",
    }
    moved = after[sorted(EXPECTED).index("selected-managed-policy")]
    assert (moved.provider, moved.model, moved.transport) == ("zai", "glm-5.3", "gateway")


DOCS = Path(__file__).parent.parent / "docs" / "core.md"


def _blocks(language: str) -> list[str]:
    import re

    return re.findall(rf"```{language}\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)


def test_the_documented_python_runs() -> None:
    (block,) = _blocks("python")
    exec(compile(block, str(DOCS), "exec"), {})  # our own documentation


def test_the_documented_policy_file_and_context_are_valid() -> None:
    from otel_route_shadow.core import validate_policies

    policy_doc, context_doc = (json.loads(block) for block in _blocks("json"))
    assert validate_policies(policy_doc["policies"]) == []
    context = RouteContext.model_validate(context_doc)
    assert explain(context, snapshot(load_policies())).policy_source == "legacy-compatibility"
