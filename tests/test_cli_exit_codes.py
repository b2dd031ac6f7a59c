"""The command line's exit codes are stated once (``cli/exit_codes.py``) and they are the truth.

Every command's ``--help`` ends with its lines of the table, the table in docs/auditing.md is the table, and each
command is driven into each code the table lists for it (and the table lists no code no scenario here
reaches). Scenarios run through ``cli.main`` in this process; ``serve``, which exits only when told to,
runs in a process of its own.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from backend_support import FakeBackend, Host, phoenix_on_loopback, truncate
from prune_support import KEY as SEGMENTS_KEY
from prune_support import segmented_chain
from segment_support import segmented_chain as segments_chain
from segment_support import segments_folder
from test_chain_support import edited
from tlog_support import ORIGIN, append, key_file, lines, log_dir
from witness_support import Cosigner

from otel_route_shadow.backend import Problem
from otel_route_shadow.cli import audit as audit_cli
from otel_route_shadow.cli import build_parser, main
from otel_route_shadow.cli.exit_codes import (
    COMMANDS,
    EXIT_CODES,
    EXIT_INTERRUPTED,
    epilog,
)
from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import Signer, sign_note

ROOT = Path(__file__).resolve().parent.parent
POLICIES = str(ROOT / "examples" / "policies.json")
BAD_POLICIES = str(ROOT / "examples" / "bad-policies.json")
CONTEXT = str(ROOT / "examples" / "contexts" / "selected-managed-policy.json")
SIGNER = Signer.generate(ORIGIN)
KEY = str(SIGNER.verifier())
WITNESS = Cosigner("witness.example/w0")
SEGMENTS_ORIGIN = "example.com/route-shadow/segments"


# -- the table as docs/auditing.md shows it, and as --help shows it ------------------------------------------


def readme_table() -> str:
    """The exit-code tables of docs/auditing.md, rendered from ``cli/exit_codes.py``."""
    rows = ["| exit | name | meaning |", "| --- | --- | --- |"]
    rows += [f"| {c.number} | {c.name} | {c.meaning} |" for c in EXIT_CODES]
    rows += ["", "| command | exit | what it means there |", "| --- | --- | --- |"]
    for command, codes in COMMANDS.items():
        rows += [
            f"| {f'`{command}`' if i == 0 else ''} | {number} | {meaning} |"
            for i, (number, meaning) in enumerate(codes.items())
        ]
    return "\n".join(rows)


def test_the_readme_table_is_the_table() -> None:
    text = (ROOT / "docs" / "auditing.md").read_text(encoding="utf-8")
    assert readme_table() in text, (
        "docs/auditing.md's exit-code tables are stale; they should read:\n" + readme_table()
    )


def _commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command that runs (``policy`` and ``key`` by action) and its parser."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield prefix.strip(), parser
        return
    for name, child in subparsers[0].choices.items():
        yield from _commands(child, f"{prefix}{name} ")


def test_every_command_has_its_lines_of_the_table_in_its_help() -> None:
    found = dict(_commands(build_parser()))
    assert sorted(found) == sorted(COMMANDS)
    for command, parser in found.items():
        assert parser.epilog == epilog(command), command
        assert "Exit 0" not in (parser.description or ""), f"{command} states its exit codes a second time"


# -- every command into every code it lists ------------------------------------------------------------


def _chain(tmp_path: Path, records: int = 30) -> Path:
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, records, writer, every=records)
    return chain


def _refused(tmp_path: Path, how: str) -> Path:
    """A chain whose writer refused: its newest checkpoint edited (acknowledgeable), or the chain cut."""
    chain = _chain(tmp_path)
    directory = Path(str(chain) + ".tlog")
    if how == "unverified":
        (directory / "checkpoint").unlink()
        (directory / "checkpoints").write_text(
            (directory / "checkpoints").read_text().replace("\\u2014 ", "\\u2014 x")
        )
    else:
        chain.write_bytes(chain.read_bytes().split(b"\n", 1)[0] + b"\n")
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is None
    return chain


def _torn(chain: Path) -> str:
    with chain.open("ab") as handle:
        handle.write(b'{"payload":')
    return str(chain)


def _rotate_while_locked(c: Ctx) -> list[str]:
    """Another holder of the chain's lock (a second open file description: flock is per description)."""
    chain = _chain(c.tmp)
    holder = os.open(chain, os.O_RDONLY)
    c.stack.callback(os.close, holder)
    fcntl.flock(holder, fcntl.LOCK_EX)
    return ["rotate", str(chain), "--key", key_file(c.tmp / "log.key", SIGNER), "--timeout", "0.05"]


def _broken(chain: Path) -> Path:
    chain.write_bytes(b"".join(edited([line + b"\n" for line in lines(chain)], 3)))
    return chain


def _policy(tmp_path: Path) -> str:
    path = tmp_path / "witnesses.policy"
    path.write_text(f"log {KEY}\nwitness w0 {WITNESS.verifier}\nquorum w0\n")
    return str(path)


def _proof(tmp_path: Path, chain: Path) -> str:
    assert (
        main(["prove", str(chain), "--seq", "1", "--receipt", "--record-out", str(tmp_path / "r.line")]) == 0
    )
    return str(tmp_path / "r.line")


def _saved_store(tmp_path: Path) -> str:
    store = tmp_path / "store"
    assert main(["policy", "save", POLICIES, "--store", str(store)]) == 0
    return str(store)


def _corrupt_store(tmp_path: Path) -> str:
    store = _saved_store(tmp_path)
    (Path(store) / "current.json").write_text("{not json")
    return store


def _a_file(tmp_path: Path) -> str:
    path = tmp_path / "not-a-store"
    path.write_text("a file where the store's folder should be")
    return str(path)


def _demo_chain(tmp_path: Path) -> str:
    assert main(["demo", "--spawns", "6", "--quiet", "--out", str(tmp_path / "demo")]) == 0
    return str(tmp_path / "demo" / "chain.jsonl")


def _inclusion_proof(tmp_path: Path) -> tuple[Path, str]:
    chain = _chain(tmp_path)
    done = subprocess_free_output(["prove", str(chain), "--seq", "1"])
    (tmp_path / "proof.json").write_text(done)
    return chain, str(tmp_path / "proof.json")


def subprocess_free_output(argv: list[str]) -> str:
    """``main(argv)``'s stdout (it must exit 0)."""
    out = io.StringIO()
    stdout, sys.stdout = sys.stdout, out
    try:
        assert main(argv) == 0
    finally:
        sys.stdout = stdout
    return out.getvalue()


def _audit(c: Ctx, host: Host, *extra: str) -> list[str]:
    c.monkeypatch.setattr(audit_cli, "build_backend", lambda *_: host.witness)
    return ["audit", str(host.chain), "--backend", "http://fake", *extra]


@dataclass
class Ctx:
    """What a scenario may use: a folder, the monkeypatch, and a stack closed after the command ran."""

    tmp: Path
    monkeypatch: pytest.MonkeyPatch
    stack: contextlib.ExitStack


Scenario = Callable[[Ctx], list[str]]


def _host(tmp_path: Path, spans: bool = True) -> Host:
    host = Host(tmp_path / "host", ORIGIN, FakeBackend(), SIGNER).run(20, every=10)
    if not spans:
        host.witness.spans.clear()
    return host


def _truncated_host(tmp_path: Path) -> Host:
    host = _host(tmp_path)
    truncate(host.chain, 12)
    return host


def _not_a_backend(c: Ctx) -> list[str]:
    phoenix, url = c.stack.enter_context(phoenix_on_loopback())
    phoenix.not_phoenix = True  # answers as a collector's OTLP port does
    return ["audit", str(_chain(c.tmp)), "--backend", url]


def _receipt_line_changed(c: Ctx) -> list[str]:
    chain = _chain(c.tmp)
    _broken(chain)  # line 3 is no longer the leaf the checkpoint signed
    return ["prove", str(chain), "--seq", "3", "--receipt"]


def _verify_proof(c: Ctx, *keys: str) -> list[str]:
    chain, proof = _inclusion_proof(c.tmp)
    return ["verify-proof", "--proof", proof, "--checkpoint", str(log_dir(chain) / "checkpoint"), *keys]


def _record_that_is_not_the_leaf(c: Ctx) -> list[str]:
    chain, proof = _inclusion_proof(c.tmp)
    other = c.tmp / "other.line"
    other.write_bytes(lines(chain)[2] + b"\n")
    return [
        "verify-proof",
        "--proof",
        proof,
        "--checkpoint",
        str(log_dir(chain) / "checkpoint"),
        "--key",
        KEY,
        "--record",
        str(other),
    ]


def _serve_without_a_checkpoint(c: Ctx) -> list[str]:
    chain = c.tmp / "chain.jsonl"
    append(chain, 3)
    return ["serve", str(chain)]  # no checkpoint


def _corrupt_revision(c: Ctx) -> list[str]:
    store = _saved_store(c.tmp)
    empty = c.tmp / "empty.json"
    empty.write_text('{"policies": []}')
    assert main(["policy", "save", str(empty), "--store", store]) == 0  # revision 2 is current
    (Path(store) / "history" / "0000000001.json").write_text("{not json")
    return ["policy", "diff", "0", "1", "--store", store]


def _demo_broken(c: Ctx) -> list[str]:
    out = Path(_demo_chain(c.tmp)).parent  # a demo folder, with the demo's signing key
    shutil.rmtree(out / "chain.jsonl.tlog")
    (out / "chain.jsonl").unlink()
    _broken(_chain(out))  # the demo appends to a chain that no longer verifies
    return ["demo", "--spawns", "2", "--quiet", "--out", str(out)]


def _prune(c: Ctx, *extra: str, edit: bool = False) -> list[str]:
    log = segmented_chain(c.tmp / "segmented", (12, 10))
    if edit:
        first = log.segment(0)
        first.write_bytes(first.read_bytes().replace(b'"n":3', b'"n":4', 1))
    return ["prune", str(log.chain), "--key", str(SEGMENTS_KEY), "--min-index", "12", *extra]


def _prune_locked(c: Ctx) -> list[str]:
    argv = _prune(c, "--wait", "0")
    held = c.stack.enter_context(open(argv[1], "rb"))  # noqa: SIM115 (closed with the stack)
    fcntl.flock(held, fcntl.LOCK_EX)
    return argv


def _prune_unwitnessed(c: Ctx) -> list[str]:
    argv = _prune(c)
    policy = c.tmp / "witnesses.policy"
    policy.write_text(f"log {SEGMENTS_KEY}\nwitness w0 {WITNESS.verifier}\nquorum w0\n")
    return [*argv[:2], "--witness-policy", str(policy), *argv[4:]]


SCENARIOS: dict[tuple[str, int], Scenario] = {
    ("explain", 0): lambda c: ["explain", "--policies", POLICIES, "--context", CONTEXT],
    ("explain", 2): lambda c: ["explain", "--policies", POLICIES, "--context", str(c.tmp / "absent.json")],
    ("policy check", 0): lambda c: ["policy", "check", POLICIES],
    ("policy check", 1): lambda c: ["policy", "check", BAD_POLICIES],
    ("policy check", 2): lambda c: ["policy", "check", str(c.tmp / "absent.json")],
    ("policy save", 0): lambda c: ["policy", "save", POLICIES, "--store", str(c.tmp / "store")],
    ("policy save", 1): lambda c: ["policy", "save", BAD_POLICIES, "--store", str(c.tmp / "store")],
    ("policy save", 2): lambda c: [
        "policy",
        "save",
        str(c.tmp / "absent.json"),
        "--store",
        str(c.tmp / "store"),
    ],
    ("policy show", 0): lambda c: ["policy", "show", "--store", _saved_store(c.tmp)],
    ("policy show", 1): lambda c: ["policy", "show", "--store", _corrupt_store(c.tmp)],
    ("policy show", 2): lambda c: ["policy", "show", "--store", _a_file(c.tmp)],
    ("policy history", 0): lambda c: ["policy", "history", "--store", _saved_store(c.tmp)],
    ("policy history", 1): lambda c: ["policy", "history", "--store", _corrupt_store(c.tmp)],
    ("policy history", 2): lambda c: ["policy", "history", "--store", _a_file(c.tmp)],
    ("policy diff", 0): lambda c: ["policy", "diff", "0", "1", "--store", _saved_store(c.tmp)],
    ("policy diff", 1): _corrupt_revision,
    ("policy diff", 2): lambda c: ["policy", "diff", "0", "7", "--store", _saved_store(c.tmp)],
    ("policy export", 0): lambda c: ["policy", "export", "--store", _saved_store(c.tmp)],
    ("policy export", 1): lambda c: ["policy", "export", "--store", _corrupt_store(c.tmp)],
    ("policy export", 2): lambda c: ["policy", "export", "--revision", "7", "--store", _saved_store(c.tmp)],
    ("policy repair", 0): lambda c: ["policy", "repair", "--store", _corrupt_store(c.tmp)],
    ("policy repair", 2): lambda c: ["policy", "repair", "--store", _a_file(c.tmp)],
    ("verify", 0): lambda c: ["verify", str(_chain(c.tmp)), "--key", KEY],
    ("verify", 1): lambda c: ["verify", str(_broken(_chain(c.tmp)))],
    ("verify", 2): lambda c: ["verify", str(c.tmp / "absent.jsonl")],
    ("verify", 3): lambda c: ["verify", str(_chain(c.tmp)), "--witness-policy", _policy(c.tmp)],
    ("prove", 0): lambda c: ["prove", str(_chain(c.tmp)), "--seq", "1"],
    ("prove", 1): _receipt_line_changed,
    ("prove", 2): lambda c: ["prove", str(_chain(c.tmp)), "--seq", "30"],
    ("prove", 3): lambda c: [
        "prove",
        str(_chain(c.tmp)),
        "--seq",
        "1",
        "--receipt",
        "--witness-policy",
        _policy(c.tmp),
    ],
    ("verify-proof", 0): lambda c: _verify_proof(c, "--key", KEY),
    ("verify-proof", 1): _record_that_is_not_the_leaf,
    ("verify-proof", 2): lambda c: [
        "verify-proof",
        "--proof",
        str(c.tmp / "absent.json"),
        "--checkpoint",
        "x",
        "--key",
        KEY,
    ],
    ("verify-proof", 3): lambda c: _verify_proof(c, "--witness-policy", _policy(c.tmp)),
    ("audit", 0): lambda c: _audit(c, _host(c.tmp), "--key", KEY),
    ("audit", 1): lambda c: _audit(c, _truncated_host(c.tmp), "--key", KEY),
    ("audit", 2): lambda c: ["audit", str(c.tmp / "absent.jsonl"), "--backend", "http://127.0.0.1:9"],
    ("audit", 3): lambda c: _audit(c, _host(c.tmp, spans=False)),
    ("audit", 4): lambda c: [
        "audit",
        str(_chain(c.tmp)),
        "--backend",
        "http://127.0.0.1:9",
        "--timeout",
        "2",
    ],
    ("audit", 5): _not_a_backend,
    ("audit", 6): lambda c: _audit(c, _host(c.tmp), "--key", str(Signer.generate(ORIGIN).verifier())),
    ("report", 0): lambda c: ["report", _demo_chain(c.tmp)],
    ("report", 1): lambda c: ["report", str(_broken(_chain(c.tmp)))],
    ("report", 2): lambda c: ["report", str(c.tmp / "absent.jsonl")],
    ("whatif", 0): lambda c: ["whatif", _demo_chain(c.tmp), "--policies", POLICIES],
    ("whatif", 1): lambda c: ["whatif", str(_broken(_chain(c.tmp))), "--policies", POLICIES],
    ("whatif", 2): lambda c: ["whatif", _demo_chain(c.tmp), "--policies", BAD_POLICIES],
    ("matrix", 0): lambda c: ["matrix", "--repo", "acme/x", "--policies", POLICIES],
    ("matrix", 2): lambda c: ["matrix", "--repo", "acme/x", "--policies", str(c.tmp / "absent.json")],
    ("key generate", 0): lambda c: [
        "key",
        "generate",
        "--name",
        "example.com/log",
        "--out",
        str(c.tmp / "k"),
    ],
    ("key generate", 2): lambda c: ["key", "generate", "--name", "café", "--out", str(c.tmp / "k")],
    ("key verifier", 0): lambda c: ["key", "verifier", key_file(c.tmp / "log.key", SIGNER)],
    ("key verifier", 2): lambda c: ["key", "verifier", str(c.tmp / "absent.key")],
    ("serve", 2): _serve_without_a_checkpoint,
    ("prune", 0): _prune,
    ("prune", 1): lambda c: _prune(c, edit=True),
    ("prune", 2): lambda c: [*_prune(c)[:2], "--min-index", "12"],
    ("prune", 3): _prune_unwitnessed,
    ("prune", 7): _prune_locked,
    ("acknowledge", 0): lambda c: ["acknowledge", str(_refused(c.tmp, "unverified"))],
    ("acknowledge", 1): lambda c: ["acknowledge", str(_chain(c.tmp))],
    ("acknowledge", 2): lambda c: ["acknowledge", str(_refused(c.tmp, "truncated"))],
    ("rotate", 0): lambda c: ["rotate", str(_chain(c.tmp)), "--key", key_file(c.tmp / "log.key", SIGNER)],
    ("rotate", 1): lambda c: ["rotate", _torn(_chain(c.tmp)), "--key", key_file(c.tmp / "log.key", SIGNER)],
    ("rotate", 2): lambda c: ["rotate", str(_chain(c.tmp))],  # a signed log and no key
    ("rotate", 7): _rotate_while_locked,
    ("demo", 0): lambda c: ["demo", "--spawns", "2", "--quiet", "--out", str(c.tmp / "demo")],
    ("demo", 1): _demo_broken,
    ("demo", 2): lambda c: [
        "demo",
        "--policies",
        str(c.tmp / "absent.json"),
        "--quiet",
        "--out",
        str(c.tmp / "demo"),
    ],
}
IN_ITS_OWN_PROCESS = {("serve", 0)}


def test_every_code_the_table_lists_has_a_scenario_and_no_other() -> None:
    listed = {(command, number) for command, codes in COMMANDS.items() for number in codes}
    assert set(SCENARIOS) | IN_ITS_OWN_PROCESS == listed


@pytest.fixture(autouse=True)
def _no_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))


@pytest.mark.parametrize(("command", "code"), sorted(SCENARIOS), ids=lambda v: str(v))
def test_each_command_returns_each_code_it_lists(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    code: int,
) -> None:
    with contextlib.ExitStack() as stack:
        argv = SCENARIOS[(command, code)](Ctx(tmp_path, monkeypatch, stack))
        capsys.readouterr()
        got = main(argv)
        out, err = capsys.readouterr()
    assert got == code, (argv, out[-2000:], err[-2000:])
    assert "Traceback" not in err
    if code == 2:
        assert err.count("\n") >= 1 and err.startswith("otel-route-shadow: "), err


@pytest.mark.timeout(120)
def test_serve_returns_0_when_told_to_stop_as_soon_as_it_says_it_serves(tmp_path: Path) -> None:
    """It said "serving" before it handled SIGTERM: a supervisor stopping it then got -15, not 0."""
    chain = _chain(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "otel_route_shadow.cli", "serve", str(chain), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith("serving ")  # listening
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_an_interrupted_command_returns_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(_args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("otel_route_shadow.cli.key._generate", interrupted)
    parser = build_parser()
    monkeypatch.setattr("otel_route_shadow.cli.build_parser", lambda: parser)
    for command, child in _commands(parser):
        if command == "key generate":
            child.set_defaults(handler=interrupted)
    assert main(["key", "generate", "--name", "a"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "otel-route-shadow: interrupted\n"


def test_audits_problems_are_named_as_the_table_names_their_codes() -> None:
    """``audit --json`` names a chain it could not audit by its problem: the table's name for its code
    (``no-spans`` is the one kind of insufficient evidence that is a problem, not a verdict)."""
    names = {c.number: c.name for c in EXIT_CODES}
    for problem in Problem:
        if problem is not Problem.NO_SPANS:
            assert problem.value == names[audit_cli._EXIT_OF[problem]]


# -- a segmented chain's bad input: one clear line, exit 1, nothing changed ----------------------------------

SEGMENT_SIGNER = Signer.generate(SEGMENTS_ORIGIN)


def _segment(chain: Path, first: int) -> Path:
    return segments_folder(chain) / f"{first:016d}.jsonl"


def _rewritten(path: Path, data: bytes) -> None:
    path.unlink()  # a closed segment may be a hard link of the live file a cut closed: edit this name only
    path.write_bytes(data)


def _swap(chain: Path) -> None:
    first, second = _segment(chain, 0), _segment(chain, 5)
    first.rename(chain.parent / "swap")
    second.rename(first)
    (chain.parent / "swap").rename(second)


SEGMENT_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing": (lambda chain: _segment(chain, 5).unlink(), "segment-missing"),
    "reordered": (_swap, "segment-misplaced"),
    "duplicated": (
        lambda chain: shutil.copyfile(_segment(chain, 0), _segment(chain, 2)),
        "segment-misplaced",
    ),
    "record-edited": (
        lambda chain: _rewritten(
            _segment(chain, 5), _segment(chain, 5).read_bytes().replace(b"agent-", b"AGENT-", 1)
        ),
        "hash-mismatch",
    ),
    "ending-mid-line": (
        lambda chain: _rewritten(_segment(chain, 5), _segment(chain, 5).read_bytes() + b'{"v":1,"seq":9'),
        "segment-edited",
    ),
}
WRONG_ANCHOR: dict[str, tuple[str, object, str]] = {
    "wrong-hash": ("sha256", "00" * 32, "segment-edited"),
    "wrong-file": ("segment", "0000000000000001.jsonl", "anchor-mismatch"),
    "wrong-link": ("last_record_hash", "ab" * 32, "anchor-mismatch"),
}


def _folder_bytes(chain: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(chain.parent.rglob("*")) if p.is_file()}


def _verify_segmented(chain: Path, capsys: pytest.CaptureFixture[str], reason: str) -> None:
    before = _folder_bytes(chain)
    capsys.readouterr()
    assert main(["verify", str(chain), "--key", str(SEGMENT_SIGNER.verifier())]) == 1
    out = capsys.readouterr().out
    broken = [line for line in out.splitlines() if "BROKEN at seq" in line]
    assert len(broken) == 1 and broken[0].endswith(f": {reason}"), out
    assert _folder_bytes(chain) == before  # nothing lost: the auditor changes nothing


@pytest.mark.parametrize("damage", sorted(SEGMENT_DAMAGE))
def test_a_segment_missing_reordered_duplicated_or_edited_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    chain = tmp_path / "c.jsonl"
    segments_chain(chain, [5, 4, 6], signer=SEGMENT_SIGNER, origin=SEGMENTS_ORIGIN)
    harm, reason = SEGMENT_DAMAGE[damage]
    harm(chain)
    _verify_segmented(chain, capsys, reason)


@pytest.mark.parametrize("wrong", sorted(WRONG_ANCHOR))
def test_an_anchor_naming_a_wrong_hash_or_file_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wrong: str
) -> None:
    field, value, reason = WRONG_ANCHOR[wrong]
    chain = tmp_path / "c.jsonl"

    def tamper(anchor: dict[str, object]) -> dict[str, object]:
        return {**anchor, field: value} if anchor["first_seq"] == 5 else anchor

    segments_chain(chain, [5, 4, 6], signer=SEGMENT_SIGNER, origin=SEGMENTS_ORIGIN, tamper=tamper)
    _verify_segmented(chain, capsys, reason)


def test_a_segmented_chain_broken_in_a_later_file_names_its_seq_in_the_checkpoint_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report said "broken-chain at seq 4" for seq 9, line 5 of the segment it is in."""
    chain = tmp_path / "c.jsonl"
    segments_chain(chain, [5, 4, 6], signer=SEGMENT_SIGNER, origin=SEGMENTS_ORIGIN)
    SEGMENT_DAMAGE["ending-mid-line"][0](chain)
    _segment(chain, 5).write_bytes(_segment(chain, 5).read_bytes().replace(b'{"v":1,"seq":9', b"\n"))
    assert main(["verify", str(chain), "--key", str(SEGMENT_SIGNER.verifier())]) == 1
    assert "CHECKPOINTS BROKEN: broken-chain at seq 9" in capsys.readouterr().out


def test_an_anchor_whose_signed_root_is_not_the_trees_is_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An anchor carrying a note the log key signed, of the anchor's size, on another tree: the anchor
    check alone (signature and size) passes; its root held against the tree does not."""
    chain = tmp_path / "c.jsonl"

    def other_tree(anchor: dict[str, object]) -> dict[str, object]:
        if anchor["first_seq"] != 5:
            return anchor
        size = int(str(anchor["last_seq"])) + 1
        text = f"{SEGMENTS_ORIGIN}\n{size}\n{base64.b64encode(bytes([7]) * 32).decode()}\n"
        return {**anchor, "checkpoint": sign_note(text, [SEGMENT_SIGNER])}

    segments_chain(chain, [5, 4, 6], signer=SEGMENT_SIGNER, origin=SEGMENTS_ORIGIN, tamper=other_tree)
    assert main(["verify", str(chain), "--key", str(SEGMENT_SIGNER.verifier()), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)["checkpoints"]
    assert [v["size"] for v in report["verdicts"] if v["reason"] in {"fork", "record-changed"}] == [9]
