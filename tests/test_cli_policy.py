"""``otel-route-shadow policy``: exit codes, one-line errors, and the issue's done-when scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.store import CURRENT_FILE, HISTORY_DIR, QUARANTINE_DIR, revision_file_name

GOOD = {
    "policies": [
        {"id": "reviewers", "match": {"roles": ["reviewer"]}, "action": {"provider_lock": "zai-harness"}},
        {
            "id": "web",
            "priority": 2,
            "match": {"repo_ids": ["acme/web"]},
            "action": {"requirement_map": {"high-reasoning": "claude-opus-4-1"}},
        },
    ]
}
CONFLICT = {
    "policies": [
        {"id": "a", "match": {"roles": ["reviewer"]}, "action": {"provider_lock": "zai-harness"}},
        {"id": "b", "match": {"roles": ["reviewer"]}, "action": {"provider_lock": "anthropic-harness"}},
        {"id": "c", "action": {"requirement_map": {"claude-opus": "glm-5.3"}}},
    ]
}


def _file(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path) -> str:
    return str(tmp_path / "store")


def test_check_reports_every_problem_with_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "bad.json", CONFLICT)
    code, out, _ = _run(capsys, "policy", "check", path)
    assert code == 1
    lines = out.splitlines()
    assert (
        f"{path}: [equal-precedence-conflict] policy a: a and b overlap at rung 6, priority 0, with different actions"
        in lines
    )
    assert any(
        line.startswith(f"{path}: [literal-family-mapped-to-foreign-model] policy c: ") for line in lines
    )


def test_check_of_a_clean_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, "good.json", GOOD)
    assert _run(capsys, "policy", "check", path) == (0, f"{path}: 2 policies, no problems\n", "")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"policies": [{"id": "a", "id": "b"}]}', "duplicate key 'id'"),
        ('{"policies": [', "invalid JSON at line 1 column 15"),
        ('[{"id": "a"}]', 'expected an object {"policies": [...]}'),
        (None, "no such file"),
    ],
)
def test_check_and_save_of_unusable_files_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str, content: str | None, message: str
) -> None:
    path = _file(tmp_path, "p.json", content) if content is not None else str(tmp_path / "missing.json")
    for argv in (("policy", "check", path), ("policy", "save", path, "--store", store)):
        code, out, err = _run(capsys, *argv)
        assert (code, out) == (2, "")
        assert err.count("\n") == 1
        assert err.startswith(f"otel-route-shadow: {path}: ") and message in err
    assert not Path(store).exists()


def test_save_refuses_an_invalid_set_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    path = _file(tmp_path, "bad.json", CONFLICT)
    code, out, err = _run(capsys, "policy", "save", path, "--store", store)
    assert (code, out) == (1, "")
    assert "[equal-precedence-conflict]" in err and "[literal-family-mapped-to-foreign-model]" in err
    assert err.splitlines()[-1] == f"{path}: refused, 2 problem(s); nothing written to {store}"
    assert not Path(store).exists()


def test_save_show_history_and_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str) -> None:
    first = _file(tmp_path, "v1.json", GOOD)
    code, out, _ = _run(capsys, "policy", "save", first, "--store", store)
    assert code == 0 and out.startswith(f"saved revision 1 to {store} (hash ")
    code, out, _ = _run(capsys, "policy", "save", first, "--store", store)
    assert code == 0 and out.startswith(f"unchanged: revision 1 in {store} already holds this policy set")

    changed = json.loads(json.dumps(GOOD))
    changed["policies"][0]["action"]["provider_lock"] = "anthropic-harness"
    changed["policies"].append({"id": "faces", "match": {"request_faces": ["one-shot"]}})
    code, out, _ = _run(
        capsys, "policy", "save", _file(tmp_path, "v2.json", changed), "--store", store, "--json"
    )
    saved = json.loads(out)
    assert (code, saved["revision"], saved["created"], saved["policy_count"]) == (0, 2, True, 3)

    code, out, _ = _run(capsys, "policy", "show", "--store", store)
    assert code == 0
    assert "state:    ok" in out and "revision: 2" in out and "policies: 3" in out
    assert f"hash:     {saved['content_hash']}" in out
    code, out, _ = _run(capsys, "policy", "show", "--store", store, "--json")
    shown = json.loads(out)
    assert (shown["state"], shown["revision"], shown["content_hash"]) == ("ok", 2, saved["content_hash"])

    code, out, _ = _run(capsys, "policy", "history", "--store", store)
    assert code == 0
    rows = out.splitlines()
    assert rows[0].split() == ["REVISION", "SAVED_AT", "HASH", "POLICIES", "STATE"]
    assert rows[1].split()[0] == "1" and rows[1].endswith("ok")
    assert rows[2].split()[0] == "2" and rows[2].endswith("ok  (current)")
    code, out, _ = _run(capsys, "policy", "history", "--store", store, "--json")
    assert [r["revision"] for r in json.loads(out)["revisions"]] == [1, 2]

    code, out, _ = _run(capsys, "policy", "diff", "1", "2", "--store", store)
    assert code == 0
    assert "+ added    faces" in out
    assert "~ changed  reviewers" in out
    assert '    action.provider_lock: "zai-harness" -> "anthropic-harness"' in out
    code, out, _ = _run(capsys, "policy", "diff", "1", "2", "--store", store, "--json")
    diff = json.loads(out)
    assert (diff["added"], diff["removed"]) == (["faces"], [])
    assert diff["changed"] == [
        {
            "policy_id": "reviewers",
            "fields": [
                {"path": "action.provider_lock", "before": "zai-harness", "after": "anthropic-harness"}
            ],
        }
    ]
    code, out, _ = _run(capsys, "policy", "diff", "2", "2", "--store", store)
    assert out.splitlines()[-1] == "identical policy sets"


def test_show_of_an_absent_store(capsys: pytest.CaptureFixture[str], store: str) -> None:
    code, out, _ = _run(capsys, "policy", "show", "--store", store)
    assert code == 0
    assert "state:    absent" in out and "revision: 0" in out and "no snapshot has been saved" in out
    code, out, _ = _run(capsys, "policy", "history", "--store", store)
    assert (code, out) == (0, f"{store}: no revisions\n")


def test_diff_of_missing_and_corrupt_revisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    _run(capsys, "policy", "save", _file(tmp_path, "v1.json", GOOD), "--store", store)
    code, out, err = _run(capsys, "policy", "diff", "1", "5", "--store", store)
    assert (code, out) == (2, "")
    assert err == f"otel-route-shadow: {store}: revision 5 is not in the history\n"
    (Path(store) / HISTORY_DIR / revision_file_name(1)).write_text("{}", "utf-8")
    code, _, err = _run(capsys, "policy", "diff", "0", "1", "--store", store)
    assert code == 1 and "revision 1 (history/0000000001.json) is corrupt: missing field(s)" in err
    code, out, _ = _run(capsys, "policy", "history", "--store", store)
    assert code == 1 and "corrupt" in out


def test_a_store_path_that_is_a_file_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "store", "x")
    good = _file(tmp_path, "good.json", GOOD)
    for argv in (
        ("policy", "show", "--store", path),
        ("policy", "history", "--store", path),
        ("policy", "save", good, "--store", path),
        ("policy", "repair", "--store", path),
    ):
        code, out, err = _run(capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert err.count("\n") == 1 and "not a directory" in err, argv
        assert err.count(path) == 1, argv


def test_hand_edit_makes_show_corrupt_and_save_refuse_until_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    """The issue's done-when, through the command line."""
    policy_file = _file(tmp_path, "p.json", GOOD)
    _run(capsys, "policy", "save", policy_file, "--store", store)
    current = Path(store) / CURRENT_FILE
    current.write_text(current.read_text("utf-8").replace('"zai-harness"', '"anthropic-harness"'), "utf-8")

    code, out, _ = _run(capsys, "policy", "show", "--store", store)
    assert code == 1
    assert "state:    corrupt" in out
    assert "problem:  current.json: content_hash does not match the policies" in out
    assert "revision: 0" in out and "claims:   revision 1 (not trusted)" in out
    assert "decisions hold with snapshot-unavailable" in out
    code, out, _ = _run(capsys, "policy", "show", "--store", store, "--json")
    shown = json.loads(out)
    assert (code, shown["state"], shown["revision"], shown["available"]) == (1, "corrupt", 0, False)
    assert shown["problem_kind"] == "hash-mismatch"

    other = _file(tmp_path, "other.json", {"policies": []})
    code, out, err = _run(capsys, "policy", "save", other, "--store", store)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "corrupt" in err and "policy repair --store" in err
    assert sorted(p.name for p in (Path(store) / HISTORY_DIR).iterdir()) == [revision_file_name(1)]

    code, out, _ = _run(capsys, "policy", "repair", "--store", store)
    assert code == 0
    assert f"moved current.json to {store}/{QUARANTINE_DIR}/" in out
    assert "the next save, which will be revision 2" in out
    assert f"otel-route-shadow policy export --store {store} --revision 1 > policies.json" in out

    code, out, _ = _run(capsys, "policy", "show", "--store", store)
    assert code == 0 and "state:    absent" in out and "repaired at" in out
    code, out, _ = _run(capsys, "policy", "save", other, "--store", store)
    assert code == 0 and out.startswith(f"saved revision 2 to {store}")
    code, out, _ = _run(capsys, "policy", "repair", "--store", store)
    assert (code, out) == (0, f"{store}: state ok; nothing to repair\n")


def test_export_reinstates_a_revision_through_save(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    _run(capsys, "policy", "save", _file(tmp_path, "v1.json", GOOD), "--store", store)
    _run(capsys, "policy", "save", _file(tmp_path, "v2.json", {"policies": []}), "--store", store)
    code, out, _ = _run(capsys, "policy", "export", "--store", store, "--revision", "1")
    assert code == 0
    exported = _file(tmp_path, "exported.json", out)
    code, out, _ = _run(capsys, "policy", "save", exported, "--store", store, "--json")
    restored = json.loads(out)
    code, out, _ = _run(capsys, "policy", "history", "--store", store, "--json")
    revisions = json.loads(out)["revisions"]
    assert restored["revision"] == 3
    assert restored["content_hash"] == revisions[0]["content_hash"]
    code, out, err = _run(capsys, "policy", "export", "--store", store, "--revision", "9")
    assert code == 2 and "revision 9 is not in the history" in err


def test_repair_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str) -> None:
    _run(capsys, "policy", "save", _file(tmp_path, "v1.json", GOOD), "--store", store)
    (Path(store) / CURRENT_FILE).write_text("{", "utf-8")
    code, out, _ = _run(capsys, "policy", "repair", "--store", store, "--json")
    result = json.loads(out)
    assert (code, result["repaired"], result["problem_kind"], result["next_revision"]) == (
        0,
        True,
        "invalid-json",
        2,
    )
    assert result["moved"] == [CURRENT_FILE]


def test_the_installed_command_never_prints_a_traceback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(70 * 1024 * 1024)
    dup = _file(tmp_path, "dup.json", '{"policies": [], "policies": []}')
    script = (
        "import sys\n"
        "from otel_route_shadow.cli import main\n"
        "codes = []\n"
        f"codes.append(main(['policy', 'save', {str(big)!r}, '--store', {str(store)!r}]))\n"
        f"codes.append(main(['policy', 'save', {dup!r}, '--store', {str(store)!r}]))\n"
        f"codes.append(main(['policy', 'diff', '1', '2', '--store', {str(store)!r}]))\n"
        "print(codes)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2, 2, 2]"
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"otel-route-shadow: {big}: larger than 67108864 bytes",
        f"otel-route-shadow: {dup}: duplicate key 'policies'",
        f"otel-route-shadow: {store}: revision 1 is not in the history",
    ]


COVERED = {
    "policies": [
        {"id": "wide", "priority": 5, "match": {"roles": ["reviewer", "planner"]}},
        {
            "id": "narrow",
            "priority": 1,
            "match": {"roles": ["reviewer"]},
            "action": {"provider_lock": "zai-harness"},
        },
    ]
}


def test_check_lists_an_unreachable_policy_as_a_warning_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "covered.json", COVERED)
    code, out, _ = _run(capsys, "policy", "check", path)
    assert code == 0
    assert out.splitlines() == [
        f"{path}: warning: [unreachable-policy] policy narrow: can never decide: wide outranks it "
        "wherever it matches (rung 6)",
        f"{path}: 2 policies, no errors, 1 warning(s)",
    ]
    code, _, err = _run(capsys, "policy", "check", "--strict", path)
    assert code == 1
    assert err.splitlines()[-1].endswith(f"{path}: 0 error(s), 1 warning(s)")


def test_save_accepts_a_warning_unless_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    path = _file(tmp_path, "covered.json", COVERED)
    code, out, err = _run(capsys, "policy", "save", "--strict", path, "--store", store)
    assert code == 1 and out == ""
    assert "[unreachable-policy] policy narrow" in err and "nothing written" in err
    assert not Path(store).exists()
    code, out, err = _run(capsys, "policy", "save", path, "--store", store)
    assert code == 0 and out.startswith("saved revision 1")
    assert err.startswith(f"{path}: warning: [unreachable-policy] policy narrow")


def test_check_output_is_capped_per_code_with_a_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 16: 8,000 conflicting policies printed 16 million lines. Now at most 20 per code."""
    policies = [
        {"id": f"c{i:04d}", "action": {"provider_lock": "zai-harness" if i % 2 else "anthropic-harness"}}
        for i in range(400)
    ]
    path = _file(tmp_path, "many.json", {"policies": policies})
    code, out, _ = _run(capsys, "policy", "check", path)
    assert code == 1
    conflicts = [line for line in out.splitlines() if "[equal-precedence-conflict]" in line]
    assert len(conflicts) == 21
    # 400 catch-alls, 200 per action: 400*399/2 - 2 * 200*199/2 pairs differ in action.
    assert (
        conflicts[-1]
        == f"{path}: [equal-precedence-conflict] ... and {40_000 - 20:,} more equal-precedence-conflict"
    )


def test_policy_check_never_prints_a_malformed_ids_control_characters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A malformed policy was named by its own id, raw: an escape sequence or a newline in it reached
    # the terminal (policy check, save, whatif, explain). It is named by its index instead.
    bad = {"policies": [{"id": "evil\x1b[2J\nfake: no problems", "match": {"roles": ["reviewer"]}}]}
    path = _file(tmp_path, "bad.json", bad)
    code, out, err = _run(capsys, "policy", "check", path)
    assert code == 1
    assert "\x1b" not in out + err and "fake: no problems" not in out + err
    assert f"{path}: [malformed-policy] policy at index 0: id:" in out
