"""docs/policy-store.md is normative: its recipe, example and problem-kind table must stay true."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from otel_route_shadow.core import EMPTY_SET_HASH, RoutingPolicy, canonical_json, policy_set_hash
from otel_route_shadow.store import CURRENT_FILE, PROBLEM_KINDS, RoutingPolicyStore, parse_policy_document

DOC = Path(__file__).resolve().parents[1] / "docs" / "policy-store.md"


def _doc() -> str:
    return DOC.read_text("utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _doc(), flags=re.S)


def _saved_store(tmp_path: Path) -> RoutingPolicyStore:
    store = RoutingPolicyStore(tmp_path / "store")
    store.save(
        [
            RoutingPolicy.model_validate(
                {"id": "a", "match": {"roles": ["reviewer", "planner"]}, "priority": -3}
            ),
            RoutingPolicy.model_validate(
                {"id": "b", "match": {"principal_ids": ["überprüfer", "adr_reviewer", '\u2603 "q" \\ \t']}}
            ),
        ]
    )
    return store


def test_the_documented_recipe_recomputes_a_saved_hash(tmp_path: Path) -> None:
    (script,) = _blocks("python")
    store = _saved_store(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script, str(store.root / CURRENT_FILE)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert done.stdout.strip() == store.load().content_hash


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq not installed")
def test_the_documented_jq_line_matches_for_ascii_policies(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    store.save([RoutingPolicy.model_validate({"id": "a", "match": {"roles": ["reviewer"]}})])
    jq = subprocess.run(
        ["jq", "-jcS", ".policies", str(store.root / CURRENT_FILE)],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert hashlib.sha256(jq.stdout).hexdigest() == store.load().content_hash


def test_the_worked_example_hash_and_the_canonical_policy_line() -> None:
    doc = _doc()
    example = next(block for block in _blocks("json") if block.lstrip().startswith('{"policies"'))
    policies = parse_policy_document(json.loads(example), "doc").policies
    stated = re.search(r"have the content hash `([0-9a-f]{64})`", doc)
    assert stated is not None
    assert policy_set_hash(policies) == stated.group(1)
    canonical_line = next(block for block in _blocks("json") if block.startswith('{"action"'))
    assert canonical_json(policies[0].model_dump(mode="json")).decode() == canonical_line.strip()
    assert EMPTY_SET_HASH in doc


def test_every_problem_kind_is_documented() -> None:
    table = _doc().split("### Problem kinds", 1)[1].split("\n## ", 1)[0]
    first_column = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    names = set(re.findall(r"`([a-z0-9-]+)`", " ".join(first_column)))
    assert names == PROBLEM_KINDS
