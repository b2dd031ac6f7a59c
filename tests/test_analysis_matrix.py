"""The effective-route matrix: one snapshot, every combination, legacy cells honest about what they are."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from test_analysis_support import PROJECT_X_ZAI, RECORDED_POLICIES, build_chain, snapshot_of

from otel_route_shadow.analysis.matrix import (
    MatrixAxes,
    MatrixError,
    axes_from_chain,
    build_matrix,
    parse_account,
    parse_axis,
)
from otel_route_shadow.cli.matrix_text import render_csv, render_json, render_table
from otel_route_shadow.core import PolicySnapshot, explain


def test_every_combination_is_resolved_against_one_snapshot() -> None:
    snapshot = snapshot_of(PROJECT_X_ZAI + RECORDED_POLICIES)
    axes = MatrixAxes(
        repos=("acme/project-x", "acme/other"),
        roles=("reviewer", "implementer"),
        faces=("agentic", "one-shot"),
        requirements=(None, "claude-opus"),
    )
    matrix = build_matrix(snapshot, axes)
    assert len(matrix.rows) == axes.size == 16
    assert {row.decision.snapshot_hash for row in matrix.rows} == {snapshot.content_hash}
    cells = {(r.repo, r.role, r.face, r.requirement): r.as_dict() for r in matrix.rows}
    # project-x beats the role-wide reviewers policy (rung 4 < rung 6).
    assert cells[("acme/project-x", "reviewer", "agentic", None)]["policy_id"] == "project-x-uses-zai"
    assert cells[("acme/project-x", "reviewer", "agentic", None)]["provider"] == "zai"
    # A literal Opus request can never be answered with z.ai.
    opus = cells[("acme/project-x", "implementer", "agentic", "claude-opus")]
    assert opus["outcome"] == "rejected" and opus["reason"] == "literal-family-unsatisfiable"
    assert cells[("acme/other", "reviewer", "one-shot", None)]["provider"] == "anthropic"
    # Nobody claims other/implementer: legacy compatibility, with no invented provider.
    legacy = cells[("acme/other", "implementer", "agentic", None)]
    assert legacy["policy_source"] == "legacy-compatibility" and legacy["rung"] == 9
    assert legacy["provider"] is None and legacy["account"] is None


def test_matrix_rows_agree_with_explain_one_by_one() -> None:
    from otel_route_shadow.analysis.matrix import matrix_contexts

    snapshot = snapshot_of(PROJECT_X_ZAI + RECORDED_POLICIES)
    axes = MatrixAxes(repos=("acme/project-x", "acme/other"))
    matrix = build_matrix(snapshot, axes)
    for row, (_, ctx) in zip(matrix.rows, matrix_contexts(axes), strict=True):
        assert row.decision == explain(ctx, snapshot)


def test_renderings() -> None:
    matrix = build_matrix(
        snapshot_of(PROJECT_X_ZAI), MatrixAxes(repos=("acme/project-x", "acme/other"), roles=("planner",))
    )
    rows = list(csv.DictReader(io.StringIO(render_csv(matrix))))
    assert len(rows) == 4
    assert rows[0]["repo"] == "acme/project-x" and rows[0]["provider"] == "zai"
    assert rows[2]["policy_source"] == "legacy-compatibility" and rows[2]["provider"] == ""
    data = json.loads(render_json(matrix))
    assert data["kind"] == "route-shadow-matrix"
    assert data["snapshot"]["content_hash"] == matrix.snapshot["content_hash"]
    assert len(data["rows"]) == 4
    table = render_table(matrix)
    assert "(legacy dials)" in table and "project-x-uses-zai" in table


def test_limits_and_parsing() -> None:
    with pytest.raises(MatrixError, match="limit"):
        build_matrix(PolicySnapshot(), MatrixAxes(repos=("a/b",)), max_rows=3)
    assert parse_axis(["a/b,c/d", "none", "a/b"]) == ("a/b", "c/d", None)
    assert parse_axis(None) is None
    with pytest.raises(MatrixError):
        parse_axis(["none"], allow_none=False)
    account = parse_account("zai-legacy=zai:exhausted")
    assert (account.id, account.provider, account.state) == ("zai-legacy", "zai", "exhausted")
    with pytest.raises(MatrixError):
        parse_account("nonsense")


def test_matrix_account_state_outside_the_vocabulary_is_refused() -> None:
    # A typo ('Available', 'exhasuted') was taken as a state no account is eligible in: every cell the
    # account could serve was shown held (no-eligible-account) without a word.
    with pytest.raises(MatrixError, match="unknown state 'Available'"):
        parse_account("zai-legacy=zai:Available")
    assert parse_account("zai-legacy=zai:unknown").state == "unknown"
    assert parse_account("zai-legacy=zai").state == "available"


def test_axes_from_a_chain(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    axes = axes_from_chain(chain)
    assert axes["repos"] == ("acme/other", "acme/project-x")
    assert axes["roles"] == ("implementer", "reviewer", "triager")
    assert axes["faces"] == ("agentic", "one-shot")
    assert axes["requirements"] == (None, "claude-opus", "high-reasoning")
    assert axes["principals"] == (None,)
