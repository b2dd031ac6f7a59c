"""``otel-route-shadow explain``: policy files, stores, single contexts and JSON lines; every bad
input is one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.core import (
    EMPTY_SET_HASH,
    PolicySnapshot,
    RouteContext,
    RoutingPolicy,
    explain,
    explain_batch,
    policy_set_hash,
)
from otel_route_shadow.store import RoutingPolicyStore

EXAMPLES = Path(__file__).parent.parent / "examples"
POLICIES = str(EXAMPLES / "policies.json")
CONTEXTS = EXAMPLES / "contexts"
MANAGED = str(CONTEXTS / "selected-managed-policy.json")
SECRET = "sk-ant-api03-" + "Q" * 40


def run(
    capsys: pytest.CaptureFixture[str],
    *argv: str,
    stdin: bytes | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> tuple[int, str, str]:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def example_snapshot() -> PolicySnapshot:
    policies = [RoutingPolicy.model_validate(p) for p in json.loads(Path(POLICIES).read_text())["policies"]]
    return PolicySnapshot(policies=tuple(policies), revision=0, content_hash=policy_set_hash(policies))


def context_of(path: str | Path) -> RouteContext:
    return RouteContext.model_validate_json(Path(path).read_text())


def test_explain_prints_the_decision_as_indented_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", MANAGED)
    assert code == 0 and err == ""
    assert out.startswith('{\n  "outcome": "selected",')
    decision = json.loads(out)
    assert decision == explain(context_of(MANAGED), example_snapshot()).model_dump(mode="json")
    assert (decision["policy_id"], decision["provider"], decision["model"]) == (
        "project-x-uses-zai",
        "zai",
        "glm-5.3",
    )
    assert decision["snapshot_revision"] == 0 and decision["snapshot_hash"] == example_snapshot().content_hash
    assert {"considered", "accounts", "rung", "decision_id"} <= set(decision)


def test_json_lines_from_stdin_give_one_compact_decision_per_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (EXAMPLES / "contexts.jsonl").read_bytes()
    code, out, err = run(
        capsys, "explain", "--policies", POLICIES, "--context", "-", stdin=data, monkeypatch=monkeypatch
    )
    assert code == 0 and err == ""
    lines = out.splitlines()
    contexts = [RouteContext.model_validate_json(line) for line in data.decode().splitlines()]
    assert len(lines) == len(contexts) == 10
    assert all(": " not in line and "\n" not in line for line in lines)
    expected = [d.model_dump(mode="json") for d in explain_batch(contexts, example_snapshot())]
    assert [json.loads(line) for line in lines] == expected


def test_jsonl_flag_reads_a_file_as_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "explain", "--policies", POLICIES, "--context", str(EXAMPLES / "contexts.jsonl"), "--jsonl"
    )
    assert code == 0 and len(out.splitlines()) == 10


def test_a_bad_json_line_is_reported_and_the_others_still_printed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = Path(MANAGED).read_text().replace("\n", "")
    missing = json.loads(good)
    del missing["legacy_route"]
    wrong_type = json.loads(good)
    wrong_type["accounts"] = SECRET
    lines = [
        good,
        "{not json",
        "",
        json.dumps(missing),
        json.dumps(wrong_type),
        good,
        "[1, 2]",
    ]
    data = ("\n".join(lines) + "\n").encode() + b"\xff\xfe\n"
    code, out, err = run(
        capsys, "explain", "--policies", POLICIES, "--context", "-", stdin=data, monkeypatch=monkeypatch
    )
    assert code == 2
    assert len(out.splitlines()) == 2 and all(
        json.loads(line)["outcome"] == "selected" for line in out.splitlines()
    )
    errors = err.splitlines()
    assert errors[0].startswith("otel-route-shadow: <stdin>:2: invalid JSON")
    assert errors[1] == "otel-route-shadow: <stdin>:4: invalid context: legacy_route: Field required"
    assert errors[2].startswith("otel-route-shadow: <stdin>:5: invalid context: accounts:")
    assert errors[3].startswith("otel-route-shadow: <stdin>:7: invalid context: <context>:")
    assert errors[4] == "otel-route-shadow: <stdin>:8: not UTF-8 text (byte 0)"
    assert errors[5] == "otel-route-shadow: <stdin>: 5 malformed lines not explained"
    assert SECRET not in err and "Traceback" not in err


def test_an_empty_stream_explains_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(
        capsys, "explain", "--policies", POLICIES, "--context", "-", stdin=b"\n\n", monkeypatch=monkeypatch
    )[:2] == (0, "")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "invalid JSON at line 1"),
        ('{"request_face": "agentic", "request_face": "one-shot"}', "duplicate key 'request_face'"),
        ('{"request_face": "agentic"}', "invalid context: legacy_route: Field required"),
        ("[]", "invalid context: <context>: Input should be"),
        (
            json.dumps(
                {
                    "request_face": "agentic",
                    "legacy_route": {"provider": "zai", "transport": "t", "mechanism": "m"},
                    "repo": ["x"],
                    "nope": 1,
                }
            ),
            "repo: Input should be a valid string; nope: Extra inputs are not permitted",
        ),
        (
            '{"request_face": "\\ud800", "legacy_route": {"provider": "zai", "transport": "t", "mechanism": "m"}}',
            "invalid JSON: a lone surrogate escape",
        ),
        (
            json.dumps(
                {
                    "request_face": "agentic",
                    "legacy_route": {"provider": SECRET, "transport": 1, "mechanism": "m"},
                }
            ),
            "legacy_route.transport: Input should be a valid string",
        ),
        (
            json.dumps(
                {
                    "request_face": "agentic",
                    "legacy_route": {
                        "provider": "zai",
                        "transport": "t",
                        "mechanism": "m",
                        "stages": [{"mechanism": "m", "provider": "p", "gateway": "yes"}],
                    },
                }
            ),
            "legacy_route.stages.0.gateway: Input should be a valid boolean",
        ),
    ],
)
def test_a_malformed_context_is_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "context.json"
    path.write_text(content)
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", str(path))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(f"otel-route-shadow: {path}: ") and message in err, err
    assert SECRET not in err


def test_unreadable_context_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for target, message in ((tmp_path / "missing.json", "no such file"), (tmp_path, "is a directory")):
        code, out, err = run(capsys, "explain", "--context", str(target))
        assert code == 2 and out == "" and err.strip().endswith(message)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe")
    assert "not UTF-8" in run(capsys, "explain", "--context", str(binary))[2]


def test_an_invalid_policy_set_is_refused_with_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    bad = str(EXAMPLES / "bad-policies.json")
    code, out, err = run(capsys, "explain", "--policies", bad, "--context", MANAGED)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 14
    assert f"{bad}: [equal-precedence-conflict] policy reviewers-on-anthropic:" in err
    assert f"{bad}: [literal-family-mapped-to-foreign-model] policy opus-means-glm:" in err
    assert lines[-1] == (
        f"otel-route-shadow: {bad}: 13 problem(s); explain refuses an invalid policy set "
        f"(list them with 'otel-route-shadow policy check {bad}')"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "invalid JSON"),
        ("[]", 'expected an object {"policies": [...]}'),
        ('{"policies": [], "extra": 1}', 'expected an object {"policies": [...]}'),
    ],
)
def test_an_unreadable_policy_file_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "p.json"
    path.write_text(content)
    code, out, err = run(capsys, "explain", "--policies", str(path), "--context", MANAGED)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and message in err and str(path) in err
    code, _, err = run(capsys, "explain", "--policies", str(tmp_path / "none.json"), "--context", MANAGED)
    assert code == 2 and "no such file" in err


def test_without_policies_the_snapshot_is_empty_and_decisions_are_legacy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "explain", "--context", MANAGED)
    decision = json.loads(out)
    assert code == 0 and "empty snapshot" in err
    assert (decision["policy_source"], decision["rung"], decision["snapshot_hash"]) == (
        "legacy-compatibility",
        9,
        EMPTY_SET_HASH,
    )


def test_a_store_snapshot_is_explained_at_its_revision(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    saved = store.save(example_snapshot().policies)
    code, out, err = run(capsys, "explain", "--store", str(tmp_path / "store"), "--context", MANAGED)
    decision = json.loads(out)
    assert code == 0 and err == ""
    assert (
        (decision["snapshot_revision"], decision["snapshot_hash"])
        == (saved.revision, saved.content_hash)
        == (1, example_snapshot().content_hash)
    )
    assert decision["policy_id"] == "project-x-uses-zai"


def test_a_corrupt_store_holds_every_decision(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = tmp_path / "corrupt"
    shutil.copytree(EXAMPLES / "corrupt-store", store)
    assert RoutingPolicyStore(store).load().state == "corrupt"
    context = str(CONTEXTS / "held-snapshot-unavailable.json")
    code, out, err = run(capsys, "explain", "--store", str(store), "--context", context)
    decision = json.loads(out)
    assert code == 0
    assert (decision["outcome"], decision["reason"], decision["snapshot_revision"]) == (
        "held",
        "snapshot-unavailable",
        0,
    )
    assert "corrupt" in err and "snapshot-unavailable" in err


def test_the_shipped_corrupt_store_example_is_corrupt_and_not_unreadable() -> None:
    load = RoutingPolicyStore(EXAMPLES / "corrupt-store").load()
    assert (load.state, load.problem_kind) == ("corrupt", "hash-mismatch")


def test_an_absent_store_resolves_normally_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "explain", "--store", str(tmp_path / "never-written"), "--context", MANAGED)
    assert (
        code == 0
        and json.loads(out)["policy_source"] == "legacy-compatibility"
        and "no policy snapshot saved" in err
    )


def test_a_store_path_that_is_not_a_directory_is_unusable_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    code, out, err = run(capsys, "explain", "--store", str(path), "--context", MANAGED)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and str(path) in err


def test_policies_and_store_are_exclusive(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["explain", "--policies", POLICIES, "--store", str(tmp_path), "--context", MANAGED])
    assert exc.value.code == 2


def test_all_policies_adds_the_full_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", "--policies", POLICIES, "--context", MANAGED, "--all-policies")
    decision: dict[str, Any] = json.loads(out)
    rows = {row["policy_id"]: row["reason"] for row in decision["all_policies"]}
    assert code == 0 and rows == {
        "project-x-planners-stay-on-anthropic": "role-not-matched",
        "project-x-uses-zai": "matched",
        "reviewers-on-anthropic": "role-not-matched",
        "one-shot-triage-fast-on-zai": "role-not-matched",
        "retired-summarizer-experiment": "policy-disabled",
    }


def test_no_traceback_from_the_real_entry_point(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"request_face": 1}')
    cmd = [sys.executable, "-c", "import sys; from otel_route_shadow.cli import main; sys.exit(main())"]
    result = subprocess.run(
        [*cmd, "explain", "--policies", POLICIES, "--context", str(bad)], capture_output=True, text=True
    )
    assert (
        result.returncode == 2 and "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    )
    ok = subprocess.run(
        [*cmd, "explain", "--policies", POLICIES, "--context", "-"],
        input=(EXAMPLES / "contexts.jsonl").read_text(),
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 10


def test_contexts_are_sanitized_like_spans_so_nothing_secret_is_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from otel_route_shadow.shadow import sanitize_context

    poisoned = json.loads(Path(MANAGED).read_text())
    poisoned["legacy_route"]["account"] = SECRET
    poisoned["principal_id"] = f"token={SECRET}"
    path = tmp_path / "poisoned.json"
    path.write_text(json.dumps(poisoned))
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", str(path), "--all-policies")
    assert code == 0 and SECRET not in out and SECRET not in err
    assert "redacted credential-shaped values at" in err and "/legacy_route/account" in err
    sanitized, _ = sanitize_context(RouteContext.model_validate(poisoned))
    # The same id the span layer computes for the same spawn.
    assert json.loads(out)["decision_id"] == explain(sanitized, example_snapshot()).decision_id


# -- the bounds of one context: a 62 MB context of 1.15 M accounts took 29 s and 2.7 GB -------------


def _context_with(accounts: int, id_length: int = 8) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(Path(MANAGED).read_text())
    document["accounts"] = [
        {"id": f"a{n}-".ljust(id_length, "x"), "provider": "zai", "state": "available"}
        for n in range(accounts)
    ]
    return document


def test_a_context_file_over_the_record_limit_is_refused_at_its_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A context larger than one chain record is refused before it is parsed (the issue's 62 MB one
    was parsed into 2.7 GB); JSON-lines input already had this bound per line."""
    from otel_route_shadow.cli.common import MAX_LINE_BYTES

    big = tmp_path / "big.json"
    text = json.dumps(_context_with(1))
    big.write_text(text[:-1] + " " * (MAX_LINE_BYTES + 1 - len(text)) + "}")
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", str(big))
    assert (code, out) == (2, "") and f"larger than {MAX_LINE_BYTES} bytes" in err, err


def test_a_context_of_more_accounts_than_the_bound_is_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from otel_route_shadow.core import MAX_ACCOUNTS

    many = tmp_path / "many.json"
    many.write_text(json.dumps(_context_with(MAX_ACCOUNTS + 1)))
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", str(many))
    assert (code, out) == (2, "") and f"at most {MAX_ACCOUNTS} items" in err and "accounts" in err, err
    lines = tmp_path / "many.jsonl"
    lines.write_text(many.read_text() + "\n" + json.dumps(_context_with(MAX_ACCOUNTS)) + "\n")
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", str(lines), "--jsonl")
    assert code == 2 and out.count("\n") == 1 and f"{lines}:1: " in err, err


def test_the_largest_context_the_bounds_admit_is_explained(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``MAX_ACCOUNTS`` accounts whose ids fill the 4 MiB: explained (row 2c times it)."""
    from benchmarks.bench_explain import largest_context
    from otel_route_shadow.cli.common import MAX_LINE_BYTES
    from otel_route_shadow.core import MAX_ACCOUNTS

    largest = tmp_path / "largest.json"
    largest.write_bytes(largest_context(MAX_LINE_BYTES, MAX_ACCOUNTS))
    assert MAX_LINE_BYTES - 8192 < largest.stat().st_size <= MAX_LINE_BYTES
    code, out, err = run(capsys, "explain", "--policies", POLICIES, "--context", str(largest))
    assert (code, err) == (0, "")
    assert len(json.loads(out)["accounts"]) == MAX_ACCOUNTS
