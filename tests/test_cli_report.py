"""``report``, ``whatif`` and ``matrix`` on the command line: exit codes, messages and outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_analysis_support import (
    PROJECT_X_ZAI,
    RECORDED_POLICIES,
    SCENARIO,
    append_observations,
    build_chain,
    rewrite_chain,
    snapshot_of,
)

from otel_route_shadow.cli import build_parser, main
from otel_route_shadow.core import PolicySnapshot


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_policies(path: Path, policies: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"policies": policies}), encoding="utf-8")
    return path


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    build_chain(path, extra_payloads=[{"kind": "chain-quarantine", "note": "test"}])
    return path


def test_three_subcommands_are_registered() -> None:
    parser = build_parser()
    for command in ("report", "whatif", "matrix"):
        args = parser.parse_args([command, "x.jsonl"] if command != "matrix" else [command])
        assert callable(args.handler)


def test_report_text_and_json(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    code, out, err = run(capsys, "report", str(chain), "--no-progress")
    assert code == 0, err
    assert "spawns 17: agreed 12 (70.6%), diverged 5 (29.4%; above the noise 17.6%)" in out
    assert "bypass traffic" in out and "5 of 17 spawns (29.4%)" in out
    assert "per-mechanism readiness" in out
    code, out, _ = run(capsys, "report", str(chain), "--json", "--by", "repo,outcome", "--by", "repo+role")
    assert code == 0
    data = json.loads(out)
    assert data["totals"]["spawns"] == 17 and data["totals"]["agreed"] == 12
    assert data["by"] == ["repo", "outcome", "repo+role"]
    assert data["records"]["skipped_kinds"] == {"chain-quarantine": 1}
    assert data["held_reasons"] == {"capability-unmapped": 1}
    assert data["rejected_reasons"] == {"literal-family-unsatisfiable": 2}
    assert data["chain"]["verified"] is True and data["flagged"] is False


def test_report_html(capsys: pytest.CaptureFixture[str], chain: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    code, _, err = run(capsys, "report", str(chain), "--html", str(target))
    assert code == 0
    html = target.read_text(encoding="utf-8")
    assert "<svg" in html and "<script" not in html
    assert "http://" not in html and "https://" not in html
    assert "wrote" in err


def test_report_window_options(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    code, out, _ = run(capsys, "report", str(chain), "--json", "--since", "2026-09-01T10:00Z")
    assert code == 0 and json.loads(out)["totals"]["spawns"] == 7
    code, _, err = run(capsys, "report", str(chain), "--since", "yesterday")
    assert code == 2 and "--since/--until" in err and "ISO-8601" in err
    code, _, err = run(capsys, "report", str(chain), "--since", "2026-09-02", "--until", "2026-09-01")
    assert code == 2 and "empty time window" in err
    code, _, err = run(capsys, "report", str(chain), "--by", "colour")
    assert code == 2 and "unknown --by dimension" in err


def test_missing_and_empty_chain(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    for command in (
        ["report", str(missing)],
        ["whatif", str(missing), "--store", str(tmp_path), "--revision", "0"],
    ):
        code, out, err = run(capsys, *command)
        assert code == 2 and out == ""
        assert "no such chain file" in err and "Traceback" not in err
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    code, _, err = run(capsys, "report", str(empty))
    assert code == 2 and "the chain is empty (0 records)" in err


def test_unverifiable_chain_is_refused_then_flagged(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    text = chain.read_text(encoding="utf-8")
    chain.write_text(text.replace("acme/other", "acme/0ther", 1), encoding="utf-8")
    code, out, err = run(capsys, "report", str(chain))
    assert code == 1 and out == ""
    assert "refusing to analyse an unverifiable chain" in err and "--allow-unverified" in err
    code, out, _ = run(capsys, "report", str(chain), "--allow-unverified")
    assert code == 1
    assert out.startswith("!!! UNVERIFIED CHAIN")
    code, out, _ = run(capsys, "report", str(chain), "--allow-unverified", "--json")
    assert code == 1 and json.loads(out)["flagged"] is True


def test_whatif_cited_candidate_and_project_x(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, snapshot=PolicySnapshot())
    empty = write_policies(tmp_path / "empty.json", [])
    code, out, err = run(capsys, "whatif", str(chain), "--policies", str(empty), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["totals"]["changed"] == 0 and data["integrity"]["failed"] == 0
    assert data["integrity"]["checked"] == 17

    px = write_policies(tmp_path / "px.json", PROJECT_X_ZAI)
    code, out, _ = run(capsys, "whatif", str(chain), "--policies", str(px), "--by", "repo")
    assert code == 0
    assert "changed 11" in out and "provider anthropic->zai" in out
    code, out, _ = run(capsys, "whatif", str(chain), "--policies", str(px), "--json", "--by", "repo")
    rows = {row["key"]["repo"]: row for row in json.loads(out)["groups"]["repo"]}
    assert rows["acme/project-x"]["changed"] == 11 and rows["acme/other"]["changed"] == 0
    code, _, _ = run(capsys, "whatif", str(chain), "--policies", str(px), "--fail-on-change")
    assert code == 1


def test_whatif_integrity_finding_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    forged = tmp_path / "forged.jsonl"

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("attributes", {}).get("route_shadow.role") == "triager":
            attributes = {**payload["attributes"], "route_shadow.decision_id": "f" * 64}
            return {**payload, "attributes": attributes}
        return payload

    rewrite_chain(chain, forged, edit)
    policies = write_policies(tmp_path / "recorded.json", RECORDED_POLICIES)
    code, out, _ = run(capsys, "whatif", str(forged), "--policies", str(policies))
    assert code == 1
    assert "INTEGRITY: 2 record(s)" in out and "decision-id-mismatch" in out
    assert "changed 0" in out


def test_whatif_invalid_policy_file_lists_problems(
    capsys: pytest.CaptureFixture[str], chain: Path, tmp_path: Path
) -> None:
    bad = write_policies(
        tmp_path / "bad.json",
        [
            {"id": "a", "match": {"roles": ["reviewer"]}, "action": {"provider_lock": "zai-harness"}},
            {"id": "b", "match": {"roles": ["reviewer"]}, "action": {"provider_lock": "anthropic-harness"}},
            {"id": "c", "match": {"repo_ids": ["Not A Repo"]}},
        ],
    )
    code, out, err = run(capsys, "whatif", str(chain), "--policies", str(bad))
    assert code == 2 and out == ""
    assert "fails validation" in err
    assert "equal-precedence-conflict" in err and "non-canonical-repo-id" in err
    code, _, err = run(capsys, "whatif", str(chain), "--policies", str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in err
    code, _, err = run(capsys, "whatif", str(chain))
    assert code == 2 and "needs a candidate" in err
    code, _, err = run(capsys, "whatif", str(chain), "--revision", "1")
    assert code == 2 and "--revision needs --store" in err


def test_whatif_store_revision(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from otel_route_shadow.core import RoutingPolicy
    from otel_route_shadow.store import RoutingPolicyStore

    store_dir = tmp_path / "store"
    store = RoutingPolicyStore(store_dir)
    store.save([RoutingPolicy.model_validate(p) for p in RECORDED_POLICIES])
    store.save([RoutingPolicy.model_validate(p) for p in PROJECT_X_ZAI])
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, snapshot=store.revision(1))
    code, out, err = run(capsys, "whatif", str(chain), "--store", str(store_dir), "--revision", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["totals"]["changed"] == 0 and data["integrity"]["checked"] == 17
    code, out, _ = run(capsys, "whatif", str(chain), "--store", str(store_dir), "--revision", "2", "--json")
    data = json.loads(out)
    assert code == 0 and data["totals"]["changed"] > 0 and data["integrity"]["checked"] == 17
    code, _, err = run(capsys, "whatif", str(chain), "--store", str(store_dir), "--revision", "7")
    assert code == 2 and "revision 7" in err


def test_matrix_command(capsys: pytest.CaptureFixture[str], chain: Path, tmp_path: Path) -> None:
    px = write_policies(tmp_path / "px.json", PROJECT_X_ZAI)
    code, out, err = run(
        capsys, "matrix", "--policies", str(px), "--repo", "acme/project-x,acme/other", "--role", "planner",
        "--format", "csv",
    )  # fmt: skip
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("repo,role,principal,face,requirement,outcome")
    assert len(lines) == 1 + 4
    code, out, _ = run(capsys, "matrix", "--policies", str(px), "--chain", str(chain), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["axes"]["repos"] == ["acme/other", "acme/project-x"]
    assert len(data["rows"]) == 2 * 3 * 1 * 2 * 3
    code, out, _ = run(capsys, "matrix", "--policies", str(px), "--repo", "acme/project-x")
    assert code == 0 and "effective-route matrix" in out
    code, _, err = run(capsys, "matrix", "--policies", str(px))
    assert code == 2 and "--repo" in err
    code, _, err = run(capsys, "matrix", "--repo", "a/b")
    assert code == 2 and "needs a snapshot" in err
    code, _, err = run(capsys, "matrix", "--policies", str(px), "--repo", "a/b", "--max-rows", "2")
    assert code == 2 and "limit 2" in err


def test_progress_line_only_on_a_terminal() -> None:
    import io

    from otel_route_shadow.cli.progress import TerminalProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    progress = TerminalProgress("verifying", stream=tty, interval=0.0)
    progress(10, 0)
    progress.phase("reading")(50, 100)
    progress.finish()
    text = tty.getvalue()
    assert "verifying: 10 records" in text and "reading: 50/100 (50%)" in text
    assert text.endswith("\r")
    piped = io.StringIO()
    quiet = TerminalProgress("verifying", stream=piped, interval=0.0)
    quiet(10, 0)
    quiet.finish()
    assert piped.getvalue() == ""


def test_a_matrix_role_that_is_no_worker_role_is_said_and_still_resolved(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    px = write_policies(tmp_path / "px.json", PROJECT_X_ZAI)
    args = ["matrix", "--policies", str(px), "--repo", "acme/project-x", "--format", "csv"]
    code, out, err = run(capsys, *args, "--role", "reviwer,Reviewer,none", "--face", "agentic")
    assert code == 0 and len(out.strip().splitlines()) == 1 + 3
    assert err.splitlines() == [
        "matrix: --role 'reviwer' is not a worker role (planner, implementer, reviewer, triager, summarizer): "
        "its cells are resolved as for a role no policy names"
    ]
    code, out, err = run(capsys, *args, "--role", "planner")
    assert code == 0 and err == ""
    secret = "sk-ant-api03-" + "Qk9" * 14 + "AA"  # a credential pasted as a role is not echoed
    code, out, err = run(capsys, *args, "--role", secret)
    assert code == 0 and "is not a worker role" in err and "Qk9Qk9Qk9" not in err


def test_matrix_axis_value_too_long_for_a_route_context_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A face (or repo, role, ...) over the context's 4096-character limit, given or read from a chain,
    # was a pydantic traceback.
    px = write_policies(tmp_path / "px.json", PROJECT_X_ZAI)
    code, out, err = run(capsys, "matrix", "--policies", str(px), "--repo", "a/b", "--face", "x" * 5000)
    assert code == 2 and out == ""
    assert "request_face" in err and "4096" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_control_characters_from_the_chain_are_escaped_in_report_whatif_and_matrix_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A chain value holding an escape sequence or a newline reached the terminal raw: it could recolour
    # or clear the screen, or forge a report line.
    hostile = {"route_shadow.repo": "evil\x1b[2J\nchain: verified", "route_shadow.role": "r\u202eole"}
    chain = tmp_path / "chain.jsonl"
    append_observations(chain, [(SCENARIO[0].context, hostile), (SCENARIO[1].context, {})])
    px = write_policies(tmp_path / "px.json", PROJECT_X_ZAI)
    for argv in (
        ("report", str(chain), "--by", "repo,role"),
        ("whatif", str(chain), "--policies", str(px), "--by", "repo,role"),
        ("matrix", "--policies", str(px), "--chain", str(chain)),
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert "evil\\x1b[2J\\nchain: verified" in out and "r\\u202eole" in out
        assert "\x1b" not in out and "\u202e" not in out
        assert not any(line.startswith("chain: verified") for line in out.splitlines())


def test_report_with_a_store_that_cannot_replay_says_why_in_text_and_html(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Text told an operator who had passed --store to "pass --store DIR"; the HTML said nothing of the
    # spawns not replayed at all.
    from otel_route_shadow.core import RoutingPolicy
    from otel_route_shadow.store import RoutingPolicyStore

    store_dir = tmp_path / "store"
    RoutingPolicyStore(store_dir).save([RoutingPolicy.model_validate(p) for p in PROJECT_X_ZAI])
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, snapshot=snapshot_of(RECORDED_POLICIES, revision=1))
    html = tmp_path / "report.html"
    code, out, err = run(capsys, "report", str(chain), "--store", str(store_dir), "--html", str(html))
    assert code == 0, err
    assert "not replayed: 17 spawn(s): store revision 1 does not have the cited hash" in out
    assert "pass --store DIR" not in out
    page = html.read_text(encoding="utf-8")
    assert "not replayed: 17 spawn(s): store revision 1 does not have the cited hash" in page
    assert "pass --store DIR" not in page
    code, out, _ = run(capsys, "report", str(chain))
    assert code == 0 and "pass --store DIR" in out
