"""``otel-route-shadow verify``: exit codes, human and JSON output, jobs, progress."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from test_chain_support import build_chain, forge_chain, plugin_payload, write_lines

from otel_route_shadow.chain import parallel as chain_parallel
from otel_route_shadow.cli import main
from otel_route_shadow.cli import verify as cli_verify


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_intact_chain_exits_zero_with_count_and_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 4)
    code, out, err = _run(capsys, str(path))
    assert code == 0 and err == ""
    head = json.loads(path.read_bytes().splitlines()[-1])["record_hash"]
    assert "intact: 4 records" in out and head in out


def test_broken_chain_exits_one_naming_seq_reason_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, 5)
    write_lines(path, lines[:2] + lines[3:])
    code, out, _ = _run(capsys, str(path))
    assert code == 1
    assert "BROKEN at seq 2 (line 3" in out and "record-removed" in out
    assert "verified before it: 2 records" in out


def test_torn_tail_exits_one_and_says_what_happens_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"pay')
    code, out, _ = _run(capsys, str(path))
    assert code == 1
    assert "TORN TAIL at seq 2 (line 3" in out and "quarantine" in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, 3)
    code, out, _ = _run(capsys, str(path), "--json")
    document = json.loads(out)
    assert code == 0 and document["intact"] is True and document["records"] == 3
    assert document["head_hash"] == json.loads(lines[-1])["record_hash"]
    write_lines(path, [lines[0], lines[2], lines[1]])
    code, out, _ = _run(capsys, str(path), "--json")
    document = json.loads(out)
    assert code == 1
    assert {k: document[k] for k in ("verdict", "reason", "first_bad_seq", "line")} == {
        "verdict": "broken",
        "reason": "reordered-or-duplicated",
        "first_bad_seq": 1,
        "line": 2,
    }


def test_empty_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "chain.jsonl"
    path.touch()
    code, out, _ = _run(capsys, str(path))
    assert code == 0 and "0 records" in out


@pytest.mark.parametrize("target", ["missing.jsonl", "."])
def test_unreadable_input_exits_two_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    code, out, err = _run(capsys, str(tmp_path / target))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "otel-route-shadow:" in err and "Traceback" not in err


def test_jobs_and_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chain_parallel, "PARALLEL_MIN_BYTES", 0)
    path = tmp_path / "chain.jsonl"
    forge_chain(path, [plugin_payload(i) for i in range(200)])
    assert _run(capsys, str(path), "--jobs", "2")[0] == 0
    assert _run(capsys, str(path), "--jobs", "0", "--strict")[0] == 0
    forge_chain(path, [plugin_payload(0), {"x": 0.5}])
    assert _run(capsys, str(path))[0] == 0
    code, out, _ = _run(capsys, str(path), "--strict")
    assert code == 1 and "malformed-record" in out
    with pytest.raises(SystemExit):
        main(["verify", str(path), "--jobs", "-1"])


def test_progress_bar_draws_and_clears() -> None:
    stream = io.StringIO()
    bar = cli_verify._ProgressBar(stream)
    bar.update(50, 100)
    bar.update(60, 100)  # throttled
    bar.close()
    text = stream.getvalue()
    assert "verifying [" in text and "50.0%" in text and "60.0%" not in text
    assert text.endswith("\r\033[K")


def test_progress_only_on_a_terminal_for_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chain.jsonl"
    path.write_bytes(b"x")

    class Args:
        no_progress = False

    monkeypatch.setattr(cli_verify.sys.stderr, "isatty", lambda: True, raising=False)
    assert not cli_verify._wants_progress(Args(), str(path))  # too small to bother
    monkeypatch.setattr(cli_verify, "_PROGRESS_MIN_BYTES", 0)
    assert cli_verify._wants_progress(Args(), str(path))
    Args.no_progress = True
    assert not cli_verify._wants_progress(Args(), str(path))
