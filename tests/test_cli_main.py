"""The command line's own surface: version, help, unknown commands."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest

from otel_route_shadow import __version__
from otel_route_shadow.cli import main


def test_version_matches_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"otel-route-shadow {__version__}"
    assert version("otel-route-shadow") == __version__


def test_every_command_has_help() -> None:
    for command in ("explain", "policy", "verify", "demo", "audit", "report", "whatif", "matrix"):
        done = subprocess.run(
            [sys.executable, "-m", "otel_route_shadow.cli", command, "--help"], capture_output=True, text=True
        )
        assert done.returncode == 0, command
        assert "usage:" in done.stdout


def test_python_dash_m_otel_route_shadow_runs_the_command() -> None:
    # "No module named otel_route_shadow.__main__": only ``-m otel_route_shadow.cli`` and the script ran it.
    for argv in (["--version"], ["verify", "--help"]):
        done = subprocess.run(
            [sys.executable, "-m", "otel_route_shadow", *argv], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: otel-route-shadow verify")


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["frobnicate"])
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


# -- bad input: every command, one line on stderr, exit 2 (issue 16 part 8) ---------------------------

POLICIES = str(Path(__file__).resolve().parent.parent / "examples" / "policies.json")
OVERSIZE = 4 * 1024 * 1024 + 16


def _oversize(path: Path) -> str:
    path.write_bytes(b'{"seq":0,"payload":{"x":"' + b"a" * OVERSIZE + b'"}}\n')
    return str(path)


def _invalid_utf8(path: Path) -> str:
    path.write_bytes(b'{"seq":0,"payload":{"kind":"route-shadow","x":"\xff\xfe"}}\n')
    return str(path)


def _lone_surrogate(path: Path) -> str:
    # A policy file whose id holds a lone surrogate escape: valid UTF-8, not valid Unicode text.
    document = (
        '{"policies":[{"id":"a\\ud800b","priority":1,"match":{},"action":{"provider_lock":"zai-harness"}}]}'
    )
    path.write_text(document + "\n", encoding="ascii")
    return str(path)


def _dev_zero(path: Path) -> str:
    return "/dev/zero"


def _fifo(path: Path) -> str:
    os.mkfifo(path)  # no writer: a reader that opens it blocking would hang
    return str(path)


BAD_INPUTS: dict[str, Callable[[Path], str]] = {
    "oversize-line": _oversize,
    "invalid-utf8": _invalid_utf8,
    "lone-surrogate": _lone_surrogate,
    "dev-zero": _dev_zero,
    "fifo": _fifo,
}

COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "explain-jsonl": lambda f, d: ["explain", "--policies", POLICIES, "--context", f, "--jsonl"],
    "explain-document": lambda f, d: ["explain", "--policies", POLICIES, "--context", f],
    "explain-policies": lambda f, d: ["explain", "--policies", f, "--context", "-"],
    "policy-check": lambda f, d: ["policy", "check", f],
    "policy-save": lambda f, d: ["policy", "save", f, "--store", str(d / "store")],
    "verify": lambda f, d: ["verify", f],
    "report": lambda f, d: ["report", f],
    "whatif": lambda f, d: ["whatif", f, "--policies", POLICIES],
    "whatif-policies": lambda f, d: ["whatif", POLICIES, "--policies", f],
    "matrix-chain": lambda f, d: ["matrix", "--chain", f, "--policies", POLICIES],
    "matrix-policies": lambda f, d: ["matrix", "--repo", "acme/x", "--policies", f],
    "audit": lambda f, d: ["audit", f, "--backend", "http://127.0.0.1:9", "--timeout", "0.5"],
    "demo": lambda f, d: ["demo", "--policies", f, "--out", str(d / "demo"), "--quiet"],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bad", sorted(BAD_INPUTS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_refuses_bad_input_with_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    bad: str,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    target = BAD_INPUTS[bad](tmp_path / "input.jsonl")
    code = main(COMMANDS[command](target, tmp_path))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("otel-route-shadow: "), err
    assert "Traceback" not in err


def test_explain_reading_endless_stdin_stops_at_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `explain --context - < /dev/zero` grew to 24 GB: it now buffers at most one line of 4 MiB.
    with open("/dev/zero", "rb") as zero:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(zero))  # type: ignore[arg-type]
        code = main(["explain", "--policies", POLICIES, "--context", "-"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "otel-route-shadow: <stdin>:1: line longer than 4194304 bytes; refusing the rest"


def test_jobs_are_capped_to_the_machine_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `verify --jobs 100000` started 3,600 processes.
    from otel_route_shadow.chain import DecisionChain

    chain = tmp_path / "chain.jsonl"
    DecisionChain(chain).append({"kind": "note"})
    assert main(["verify", str(chain), "--jobs", "100000"]) == 0
    err = capsys.readouterr().err
    assert f"--jobs 100000 capped to {os.cpu_count() or 1}" in err


def test_jobs_0_is_one_per_cpu_in_every_command_not_an_error_in_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `report --jobs 0` (whatif's, audit's too) was a usage error, exit 2, while `verify --jobs 0` meant
    # one job per CPU: the same option took other values in other commands.
    from test_analysis_fleet import make_log
    from test_analysis_support import build_chain

    from otel_route_shadow.cli import build_parser

    parser = build_parser()
    for command in (["verify"], ["report"], ["whatif", "--policies", POLICIES], ["audit"]):
        assert parser.parse_args([*command, "CHAIN", "--jobs", "0"]).jobs == 0, command
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    assert main(["report", "--no-progress", "--jobs", "0", str(chain)]) == 0
    assert "route-shadow divergence report" in capsys.readouterr().out
    fleet = tmp_path / "fleet"
    make_log(fleet, "alpha", "alpha.example/route-shadow")
    make_log(fleet, "beta", "beta.example/route-shadow")
    assert main(["report", "--no-progress", "--jobs", "0", str(fleet)]) == 0
    assert "2 logs" in capsys.readouterr().out


def test_demo_with_the_kill_switch_set_runs_the_spawns_bare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # It exited 2 with "No such file or directory" (no chain was written to verify).
    monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_DISABLED", "true")
    assert main(["demo", "--spawns", "3", "--out", str(tmp_path / "demo"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "ran 3 spawns bare" in out and "OTEL_PYTHON_ROUTE_SHADOW_DISABLED" in out
    assert not (tmp_path / "demo" / "chain.jsonl").exists()


def test_demo_of_a_chain_its_retention_pruned_says_intact_as_verify_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The demo checked its chain from seq 0 whatever was pruned: "segment-missing at seq 0", exit 1, for
    # a chain `verify --key` (its own "auditor's check") found intact.
    out = tmp_path / "demo"
    demo = ["demo", "--spawns", "4", "--out", str(out), "--quiet"]
    assert main(demo) == 0
    assert main(["rotate", str(out / "chain.jsonl"), "--key", str(out / "log.key")]) == 0
    assert main(demo) == 0
    vkey = (out / "log.vkey").read_text().strip()
    assert main(["prune", str(out / "chain.jsonl"), "--min-index", "4", "--key", vkey]) == 0
    capsys.readouterr()
    assert main([*demo, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["chain"]["intact"] is True and summary["chain"]["problem"] is None
    assert main(["verify", str(out / "chain.jsonl"), "--key", vkey]) == 0


def test_a_lone_surrogate_read_from_a_file_is_printed_escaped() -> None:
    # `policy check` printed a problem naming an id with a lone surrogate: UnicodeEncodeError, a traceback.
    script = (
        "import sys; from otel_route_shadow.cli.common import harden_streams; "
        "harden = sys.argv[1] == 'yes'; harden and harden_streams(); print('id a\\ud800b')"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    plain = subprocess.run([sys.executable, "-c", script, "no"], capture_output=True, env=env)
    assert b"UnicodeEncodeError" in plain.stderr  # what happened before
    hardened = subprocess.run([sys.executable, "-c", script, "yes"], capture_output=True, env=env)
    assert hardened.returncode == 0 and hardened.stdout == b"id a\\ud800b\n"


def test_an_option_written_in_part_is_refused_not_taken_for_a_longer_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `prove --key VKEY` was read as `--keys VKEY` (argparse's abbreviations) and failed parsing a key file
    # the user never named.
    chain = tmp_path / "chain.jsonl"
    chain.write_bytes(b"")
    with pytest.raises(SystemExit) as stopped:
        main(["prove", str(chain), "--seq", "1", "--key", "example.com/log+01234567+AAAA"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --key" in capsys.readouterr().err


def test_prove_of_a_directory_says_it_is_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It said "<dir>.tlog/checkpoint: no such checkpoint file".
    assert main(["prove", str(tmp_path), "--seq", "3"]) == 2
    assert f"{tmp_path}: is a directory, not a chain file" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["checkpoints.000001.jsonl.gz", "checkpoints.000002.jsonl"])
def test_verify_of_old_checkpoint_entries_says_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # It was checked as a segment's archive: "no proof file beside the archive".
    retired = tmp_path / "chain.jsonl.archive" / name
    retired.parent.mkdir()
    retired.write_bytes(b"")
    assert main(["verify", str(retired), "--key", "example.com/log+01234567+AAAA"]) == 2
    err = capsys.readouterr().err
    assert "old entries of the log's checkpoints file that prune moved out" in err and "proof" not in err


def test_demo_whose_log_refused_to_sign_says_not_checked_and_where_the_reason_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A log whose writer refused to sign (here: its chain cut below what was signed) left no checkpoint
    # file, and the demo said "BROKEN: [Errno 2] No such file or directory: 'checkpoint'", head None.
    out = tmp_path / "demo"
    demo = ["demo", "--spawns", "4", "--out", str(out), "--quiet"]
    assert main(demo) == 0
    chain = out / "chain.jsonl"
    chain.write_bytes(b"".join(chain.read_bytes().splitlines(keepends=True)[:2]))
    (out / "chain.jsonl.tlog" / "checkpoint").unlink()
    capsys.readouterr()
    assert main([*demo[:-1]]) == 1
    text = capsys.readouterr().out
    assert "NOT CHECKED: no checkpoint was signed: the writer refused to sign" in text
    assert "chain.jsonl.tlog/refusals" in text and "BROKEN" not in text and "head None" not in text


@pytest.mark.parametrize("line", [b'{"a":NaN}\n', b"[" * 100_000 + b"\n", b'{"a":1,"a":2}\n'])
def test_demo_into_a_folder_whose_chain_ends_in_a_line_not_a_record_is_one_line_exit_2(
    tmp_path: Path, line: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    # A traceback ending in ChainCorruptError, exit 1, and the spawns' spans already printed.
    out = tmp_path / "demo"
    assert main(["demo", "--spawns", "3", "--out", str(out), "--quiet"]) == 0
    (out / "chain.jsonl").write_bytes(line)
    capsys.readouterr()
    assert main(["demo", "--spawns", "3", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(out / "chain.jsonl") in err and "is not a record" in err, err
