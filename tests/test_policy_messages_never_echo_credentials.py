"""A policy problem, a strict-JSON error and a schema problem never echo a credential-shaped value or key.

Each echoed a value or a key the user typed as it was: an unknown ``provider_lock``, a
``requirement_map`` key or model, a repository id, a role, a face, an unknown field's name (through
pydantic's error location), or a duplicate key in a JSON file. They are now scrubbed with the core's
``redact_text``; a value that is no credential is still shown as it was typed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from otel_route_shadow.core import REDACTED, parse_policies, validate_policies
from otel_route_shadow.strict_json import StrictJSONError, loads_strict, schema_problem

KEY = "sk-ant-api03-" + "S3CR3T" * 6
PAIR = "password=hunter2"

ITEMS: dict[str, dict[str, Any]] = {
    "unknown-provider-binding": {"id": "a", "action": {"provider_lock": KEY}},
    "unknown-requirement": {"id": "b", "action": {"requirement_map": {KEY: "claude-opus-4-1"}}},
    "unknown-model": {"id": "c", "action": {"requirement_map": {"high-reasoning": KEY}}},
    "literal-family-mapped-to-foreign-model": {
        "id": "d",
        "action": {"requirement_map": {"claude-opus": "claude-sonnet-" + KEY}},
    },
    "mapped-model-outside-lock": {
        "id": "e",
        "action": {"provider_lock": "zai-harness", "requirement_map": {"high-reasoning": "claude-" + KEY}},
    },
    "non-canonical-repo-id": {"id": "f", "match": {"repo_ids": [KEY]}},
    "unknown-role": {"id": "g", "match": {"roles": [KEY]}},
    "unknown-request-face": {"id": "h", "match": {"request_faces": [KEY]}},
    "malformed-policy (an unknown field)": {"id": "i", "action": {KEY: 1}},
    "malformed-policy (a bad map value)": {"id": "j", "action": {"requirement_map": {KEY: 5}}},
    "malformed-policy (a credential id)": {"id": PAIR, "action": {"bogus": 1}},
}


@pytest.mark.parametrize("secret", [KEY, PAIR])
@pytest.mark.parametrize("case", sorted(ITEMS))
def test_a_policy_problem_never_echoes_a_credential(case: str, secret: str) -> None:
    item = json.loads(json.dumps(ITEMS[case]).replace(KEY, secret))  # the same shape, either secret
    problems = validate_policies([item])
    assert problems, case
    code = case.split(" ")[0]
    assert code in [p.code.value for p in problems]
    secret_part = "S3CR3T" if secret == KEY else "hunter2"
    for problem in problems:
        assert secret_part not in problem.message, problem.message
        assert secret_part not in (problem.policy_id or "")
    assert any(REDACTED in p.message or REDACTED in (p.policy_id or "") for p in problems)


@pytest.mark.parametrize("case", sorted(case for case in ITEMS if case.startswith("malformed-policy")))
def test_parse_policies_never_echoes_a_credential_either(case: str) -> None:
    # Only validate_policies scrubbed its problems: the public parse_policies gave the malformed ones with
    # an unknown field's name, or the policy's id, as typed.
    _parsed, problems = parse_policies([ITEMS[case]])
    assert problems, case
    for problem in problems:
        assert "S3CR3T" not in problem.message and "hunter2" not in (problem.policy_id or "")


def test_a_policy_problem_still_names_a_plain_value() -> None:
    problems = validate_policies(
        [
            {"id": "a", "action": {"provider_lock": "no-such-binding"}},
            {"id": "b", "match": {"repo_ids": ["Owner/Repo"], "roles": ["wizard"]}},
            {"id": "c", "action": {"requirement_map": {"fast-ish": "gpt-4o"}, "extra_field": 1}},
            {"id": "d", "action": {"requirement_map": {"high-reasoning": "gpt-4o"}}},
        ]
    )
    messages = " | ".join(p.message for p in problems)
    for shown in (
        "'no-such-binding'",
        "'Owner/Repo'",
        "'wizard'",
        "action.extra_field",
        "high-reasoning -> gpt-4o",
    ):
        assert shown in messages


@pytest.mark.parametrize("key", [KEY, PAIR, "x" * 50 + "AKIAIOSFODNN7EXAMPLE"])
def test_a_duplicate_json_key_is_never_echoed(key: str) -> None:
    text = json.dumps({"a": 1}).replace('"a": 1', f'"{key}": 1, "{key}": 2')
    with pytest.raises(StrictJSONError) as caught:
        loads_strict(text)
    assert caught.value.kind == "duplicate-key"
    message = str(caught.value)
    assert "S3CR3T" not in message and "hunter2" not in message and "AKIAIOSF" not in message
    assert message.startswith("duplicate key ")


def test_a_duplicate_json_key_is_still_named() -> None:
    with pytest.raises(StrictJSONError, match="duplicate key 'revision'"):
        loads_strict('{"revision": 1, "revision": 2}')


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = ""


def test_a_schema_problem_never_echoes_a_credential_key() -> None:
    with pytest.raises(ValidationError) as caught:
        _Strict.model_validate({KEY: 1})
    problem = schema_problem(caught.value)
    assert "S3CR3T" not in problem
    assert problem == f"{REDACTED}: Extra inputs are not permitted"
