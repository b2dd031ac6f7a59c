"""Hostile inputs never hang or crash the host or the command line (issue 25 item 3, as a checklist).

Every command below runs through the real entry point (``python -m otel_route_shadow.cli``) in its own
process, and every host is a real instrumented process, each under a generous hang guard: a hang fails
the test, speed never matters. Each refusal is one line on stderr naming the problem, exit 2, never a
traceback; where the documented outcome is another (the host keeps running, an input nobody reads is
not read), the test says which.

The checklist, in the order issue 25's "Why" lists it, and the test that covers each:

Hangs
 1. a FIFO as the signing key hung ``instrument()``: ``test_a_signing_key_that_is_not_a_regular_file_
    leaves_the_host_running_unsigned[fifo]``;
 2. a FIFO in ``<chain>.tlog/`` delayed the host's shutdown: ``test_fifos_in_the_log_directory_never_
    block_the_host`` (counts the blocking opens of a FIFO: none);
 3. ``prove --checkpoint FIFO``: ``test_a_fifo_named_on_the_command_line_is_refused[prove --checkpoint]``;
 4. a FIFO ``state``, tile or ``checkpoint``: ``test_a_fifo_state_is_never_read_by_a_reader``,
    ``test_a_fifo_tile_is_named_never_waited_on``, ``test_a_fifo_in_the_log_directory_is_refused[prove:
    checkpoint]``;
 5. ``verify-proof --checkpoint/--record FIFO``: ``test_a_fifo_named_on_the_command_line_is_refused
    [verify-proof --checkpoint]``, ``[verify-proof --record]``;
 6. ``verify --checkpoint FIFO``: ``test_a_fifo_named_on_the_command_line_is_refused[verify --checkpoint]``;
 7. ``verify --key`` with a FIFO ``checkpoints``: ``test_a_fifo_in_the_log_directory_is_refused[verify --key:
    checkpoints]``;
 8. ``audit --state FIFO``: ``test_audit_state_that_is_not_a_state_file_is_refused[fifo]``;
 9. ``audit`` of a chain whose ``.tlog/state`` is a FIFO (the audited party hung the auditor):
    ``test_the_audited_partys_fifos_never_hang_the_auditor``.

Tracebacks
10. a 50,000-deep JSON checkpoint file: ``test_json_nested_50000_deep_is_one_line[verify --checkpoint]``;
    a 50,000-deep audit state: ``test_audit_state_that_is_not_a_state_file_is_refused[deep-array]``,
    ``[deep-object]``;
11. ``audit --state /dev/zero``: ``test_audit_state_that_is_not_a_state_file_is_refused[dev-zero]``;
12. ``tile/`` being a file: ``test_a_tile_folder_that_is_a_file_is_named``;
13. ``key generate --name café``: ``test_key_names_follow_the_signed_note_rules[non-ascii]``;
14. a 100,000-character key name accepted: ``test_key_names_follow_the_signed_note_rules[too-long]``.

Beyond the list: a FIFO, a device or a directory given as ``--key``, ``--witness-policy`` or ``--proof``, a proof
nested 50,000 deep, a backend answering JSON nested 50,000 deep, ``report --html`` and ``prove
--record-out`` naming a FIFO (``test_*_beyond_the_list``).
Older in-process tests of the same readers: tests/test_files.py, test_chain_path.py,
test_store_host_safety.py, test_cli_main.py (every command's bad inputs), test_tlog_entries.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from backend_support import FakeBackend, Host, phoenix_on_loopback, publish
from tlog_support import ORIGIN, append, log_dir

from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import Signer, tile_path

HANG_GUARD_S = 120
"""Far beyond any run here: reaching it means a hang, never slowness."""

SIGNER = Signer.generate(ORIGIN)
KEY = str(SIGNER.verifier())
PLUGIN_TESTS = Path(__file__).parent / "plugin"


def cli(*argv: str) -> tuple[int, str, str]:
    """The command line in a process of its own: exit code, stdout, stderr."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "otel_route_shadow.cli", *argv],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: otel-route-shadow {' '.join(argv)[:200]}")
    return done.returncode, done.stdout, done.stderr


def refused(result: tuple[int, str, str], *needles: str) -> None:
    """Exit 2 with one line on stderr naming the problem, and nothing on stdout."""
    code, out, err = result
    assert code == 2, (out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("otel-route-shadow: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def fifo(path: Path) -> str:
    if path.is_dir():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)  # no writer: whoever opens it blocking waits for ever
    return str(path)


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """300 records, checkpointed and signed (its tiles, state and checkpoints beside it)."""
    path = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(path), ORIGIN, SIGNER)
    append(path, 300, writer, every=300)
    writer.checkpoint()
    return path


@pytest.fixture
def proof(chain: Path) -> Path:
    code, out, err = cli("prove", str(chain), "--seq", "1")
    assert code == 0, err
    path = chain.parent / "proof.json"
    path.write_text(out)
    return path


# -- the command line: files named on it -------------------------------------------------------------

NAMED = {
    "prove --checkpoint": lambda c, p, f: ["prove", c, "--seq", "1", "--checkpoint", f],
    "verify --checkpoint": lambda c, p, f: ["verify", c, "--key", KEY, "--checkpoint", f],
    "verify-proof --checkpoint": lambda c, p, f: [
        "verify-proof",
        "--proof",
        p,
        "--checkpoint",
        f,
        "--key",
        KEY,
    ],
    "verify-proof --record": lambda c, p, f: [
        "verify-proof",
        "--proof",
        p,
        "--checkpoint",
        c + ".tlog/checkpoint",
        "--key",
        KEY,
        "--record",
        f,
    ],
    "verify-proof --proof": lambda c, p, f: [
        "verify-proof",
        "--proof",
        f,
        "--checkpoint",
        c + ".tlog/checkpoint",
        "--key",
        KEY,
    ],
    "verify --key": lambda c, p, f: ["verify", c, "--key", f],
    "verify --witness-policy": lambda c, p, f: ["verify", c, "--witness-policy", f],
    "verify-proof --witness-policy": lambda c, p, f: [
        "verify-proof",
        "--proof",
        p,
        "--checkpoint",
        c + ".tlog/checkpoint",
        "--witness-policy",
        f,
    ],
    "report --key": lambda c, p, f: ["report", c, "--key", f],
}


@pytest.mark.parametrize("command", sorted(NAMED))
def test_a_fifo_named_on_the_command_line_is_refused(chain: Path, proof: Path, command: str) -> None:
    named = fifo(chain.parent / "named")
    refused(cli(*NAMED[command](str(chain), str(proof), named)), named, "is a FIFO")


@pytest.mark.parametrize(
    ("command", "kind"),
    [("verify --key", "device"), ("verify --witness-policy", "directory"), ("verify-proof --proof", "device")],
)
def test_a_device_or_a_directory_named_on_the_command_line_is_refused_beyond_the_list(
    chain: Path, proof: Path, command: str, kind: str
) -> None:
    named = "/dev/zero" if kind == "device" else str(chain.parent)
    refused(cli(*NAMED[command](str(chain), str(proof), named)), named)


# -- the command line: files in the log's directory ----------------------------------------------------

IN_LOG = {
    "prove: checkpoint": ("checkpoint", lambda c: ["prove", c, "--seq", "1"]),
    "prove --receipt: checkpoint": ("checkpoint", lambda c: ["prove", c, "--seq", "1", "--receipt"]),
    "verify --key: checkpoints": ("checkpoints", lambda c: ["verify", c, "--key", KEY]),
    "serve: checkpoint": ("checkpoint", lambda c: ["serve", c, "--listen", "127.0.0.1:0"]),
}


@pytest.mark.parametrize("case", sorted(IN_LOG))
def test_a_fifo_in_the_log_directory_is_refused(chain: Path, case: str) -> None:
    name, argv = IN_LOG[case]
    fifo(log_dir(chain) / name)
    refused(cli(*argv(str(chain))), f"{name}: is a FIFO")


def test_a_fifo_state_is_never_read_by_a_reader(chain: Path) -> None:
    """``state`` is the writer's note to itself, never an input of a reader: the proof comes from tiles
    authenticated against the signed root, and ``verify`` checks them the same way."""
    fifo(log_dir(chain) / "state")
    code, out, err = cli("prove", str(chain), "--seq", "1")
    assert (code, err) == (0, "") and '"seq": 1' in out
    code, out, err = cli("verify", str(chain), "--key", KEY)
    assert (code, err) == (0, "") and "tiles: intact" in out


def test_a_fifo_tile_is_named_never_waited_on(chain: Path) -> None:
    planted = fifo(log_dir(chain) / tile_path(1, 0, 1))
    refused(cli("prove", str(chain), "--seq", "1"), planted, "is a FIFO")
    code, out, err = cli("verify", str(chain), "--key", KEY)  # the chain holds; its tile store does not
    assert (code, err) == (1, "") and "intact: 300 records" in out and "tile/1/000.p/1" in out


def test_a_tile_folder_that_is_a_file_is_named(chain: Path) -> None:
    shutil.rmtree(log_dir(chain) / "tile")
    (log_dir(chain) / "tile").write_text("not a directory")
    refused(cli("prove", str(chain), "--seq", "1"), "tile/", "not a directory")
    code, out, err = cli("verify", str(chain), "--key", KEY)
    assert (code, err) == (1, "") and "intact: 300 records" in out and "TILES" in out


DEEP = {
    "verify --checkpoint": lambda c, f: ["verify", c, "--key", KEY, "--checkpoint", f],
    "prove --checkpoint": lambda c, f: ["prove", c, "--seq", "1", "--checkpoint", f],
    "verify-proof --proof": lambda c, f: [
        "verify-proof",
        "--proof",
        f,
        "--checkpoint",
        c + ".tlog/checkpoint",
        "--key",
        KEY,
    ],
}


@pytest.mark.parametrize(
    ("command", "shape"),
    [("verify --checkpoint", "object"), ("prove --checkpoint", "array"), ("verify-proof --proof", "object")],
)
def test_json_nested_50000_deep_is_one_line(chain: Path, command: str, shape: str) -> None:
    deep = chain.parent / "deep.json"
    deep.write_text(
        "[" * 50_000 + "]" * 50_000 if shape == "array" else '{"a":' * 50_000 + "1" + "}" * 50_000
    )
    refused(cli(*DEEP[command](str(chain), str(deep))), str(deep))


@pytest.mark.parametrize(
    ("name", "needle"),
    [("café", "ASCII"), ("x" * 100_000, "at most 256")],
    ids=["non-ascii", "too-long"],
)
def test_key_names_follow_the_signed_note_rules(tmp_path: Path, name: str, needle: str) -> None:
    refused(cli("key", "generate", "--name", name, "--out", str(tmp_path / "k")), needle)
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize(
    "name", [".", "..", "-", "/", "-x/log", "example.com//log", "example.com/../log", "log/"]
)
def test_key_generate_refuses_a_name_that_is_not_an_origin(tmp_path: Path, name: str) -> None:
    """``key generate`` accepted ``.``, ``..`` and ``-``, and the host then signed under origin ``..``."""
    refused(cli("key", "generate", f"--name={name}", "--out", str(tmp_path / "k")), "schema-less URL")
    assert not (tmp_path / "k").exists()


def test_report_html_to_a_fifo_is_refused_never_waited_on_beyond_the_list(tmp_path: Path) -> None:
    """``report --html FIFO`` waited for a reader for ever (the page was written with a blocking open)."""
    code, _, err = cli("demo", "--spawns", "3", "--quiet", "--out", str(tmp_path / "demo"))
    assert code == 0, err
    page = fifo(tmp_path / "page.html")
    refused(cli("report", str(tmp_path / "demo" / "chain.jsonl"), "--html", page), page, "is a FIFO")


def test_an_output_that_is_not_a_regular_file_is_never_replaced_beyond_the_list(chain: Path) -> None:
    """``prove --record-out`` renamed its file over whatever had the name (a FIFO here; a device for a
    root user): an output that is not a regular file is refused and left as it is."""
    out = fifo(chain.parent / "record.line")
    refused(cli("prove", str(chain), "--seq", "1", "--receipt", "--record-out", out), out, "is a FIFO")
    assert Path(out).is_fifo()


# -- audit: the auditor's own state, and what the audited party holds ----------------------------------


@pytest.fixture
def audited(tmp_path: Path) -> tuple[Host, str]:
    """A host whose spans and signed checkpoints a Phoenix stand-in on loopback holds; its URL."""
    witness = FakeBackend()
    host = Host(tmp_path / "host", ORIGIN, witness, SIGNER).run(30, every=10)
    with phoenix_on_loopback() as (phoenix, url):
        publish(witness, phoenix, "proj")
        yield host, url


def audit(host: Host, url: str, *extra: str) -> tuple[int, str, str]:
    return cli("audit", str(host.chain), "--backend", url, "--project", "proj", "--key", KEY, *extra)


STATES = {
    "fifo": lambda p: fifo(p),
    "dev-zero": lambda p: "/dev/zero",
    "directory": lambda p: (p.mkdir(), str(p))[1],
    "deep-array": lambda p: (p.write_text("[" * 50_000 + "]" * 50_000), str(p))[1],
    "deep-object": lambda p: (p.write_text('{"a":' * 50_000 + "1" + "}" * 50_000), str(p))[1],
}


@pytest.mark.parametrize("kind", sorted(STATES))
def test_audit_state_that_is_not_a_state_file_is_refused(
    audited: tuple[Host, str], tmp_path: Path, kind: str
) -> None:
    host, url = audited
    state = STATES[kind](tmp_path / "auditor-state")
    refused(audit(host, url, "--state", state), state, "not an audit state file")


@pytest.mark.parametrize("kind", ["deep-array", "directory"])
def test_audit_state_is_checked_before_the_backend_is_contacted(
    chain: Path, tmp_path: Path, kind: str
) -> None:
    """``audit --state X`` contacted the backend first: with none reachable, a bad X was exit 4, not 2."""
    state = STATES[kind](tmp_path / "auditor-state")
    refused(
        cli(
            "audit",
            str(chain),
            "--backend",
            "http://127.0.0.1:9",
            "--project",
            "p",
            "--key",
            KEY,
            "--state",
            state,
        ),
        state,
        "not an audit state file",
    )


@pytest.mark.parametrize("name", ["state", "checkpoint", "checkpoints", "tile"])
def test_the_audited_partys_fifos_never_hang_the_auditor(audited: tuple[Host, str], name: str) -> None:
    """The auditor reads the chain and the backend's checkpoints; whatever the audited party put in
    its own log directory is never waited on (with --state, whose incremental path reads the tiles,
    a tile it cannot use is a fall back to the full check)."""
    host, url = audited
    code, out, err = audit(host, url, "--state", str(host.directory.parent / "auditor-state"))
    assert code == 0, (out, err)
    planted = log_dir(host.chain) / (tile_path(0, 0, 30) if name == "tile" else name)
    fifo(planted)
    host.run(10, first=30, final_checkpoint=False)  # newer records: the state's incremental path runs
    code, out, err = audit(host, url, "--state", str(host.directory.parent / "auditor-state"))
    assert (code, err) == (0, ""), out
    assert "verdict: AGREE" in out


def test_a_backend_answering_json_nested_50000_deep_is_not_a_backend_beyond_the_list(
    audited: tuple[Host, str],
) -> None:
    host, _ = audited
    with phoenix_on_loopback() as (phoenix, url):
        phoenix.raw_body = b"[" * 50_000 + b"]" * 50_000
        code, out, err = audit(host, url)
    assert code == 5 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err


# -- the host -----------------------------------------------------------------------------------------

HOST = textwrap.dedent(
    """
    import logging, os, stat, sys
    blocking = []

    def watch(event, args):  # every open of a FIFO that could block: none may happen
        if event != "open" or not isinstance(args[0], str) or not os.path.isabs(args[0]):
            return
        flags = args[2] if isinstance(args[2], int) else 0
        if flags & (os.O_NONBLOCK | os.O_DIRECTORY):
            return
        try:
            if stat.S_ISFIFO(os.stat(args[0]).st_mode):
                blocking.append(args[0])
        except OSError:
            pass

    sys.addaudithook(watch)
    logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
    from opentelemetry.sdk.trace import TracerProvider
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor
    import readme_host as host

    chain, key = sys.argv[1], sys.argv[2]
    settings = dict(tracer_provider=TracerProvider(), seams=host.SEAMS, chain_path=chain, checkpoint_records=5)
    if key != "-":
        settings["signing_key"] = key
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(**settings)
    runner = host.Runner()
    results = [runner.execute(host.Job(n)) for n in range(12)]
    instrumentor.uninstrument()
    assert results == [host.Runner().execute(host.Job(n)) for n in range(12)]
    print("blocking opens of a FIFO:", len(blocking), blocking)
    """
)


def run_host(tmp_path: Path, chain: Path, key: str = "-") -> tuple[str, str]:
    """An instrumented host in a process of its own: 12 spawns, then uninstrument; stdout, stderr."""
    script = tmp_path / "host.py"
    script.write_text(HOST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN_TESTS), os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(chain), key],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            env=env,
            cwd=tmp_path,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the host hung")
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def records(chain: Path) -> int:
    return chain.read_bytes().count(b"\n")


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_signing_key_that_is_not_a_regular_file_leaves_the_host_running_unsigned(
    tmp_path: Path, kind: str
) -> None:
    key = {
        "fifo": lambda: fifo(tmp_path / "key"),
        "device": lambda: "/dev/zero",
        "directory": lambda: str(tmp_path),
    }[kind]()
    chain = tmp_path / "chain.jsonl"
    out, err = run_host(tmp_path, chain, key)
    assert "blocking opens of a FIFO: 0" in out
    assert records(chain) == 12  # the host ran, shadowed
    unsigned = [line for line in err.splitlines() if "checkpoints unsigned" in line]
    assert len(unsigned) == 1 and key in unsigned[0], err
    assert "Traceback" not in err
    assert "\n\n" not in (log_dir(chain) / "checkpoint").read_text()  # no signature: unsigned


LOG_FILES = ["state", "checkpoint", "checkpoints", "refusals", "lock", "entries-index", "tile"]


def test_fifos_in_the_log_directory_never_block_the_host(tmp_path: Path) -> None:
    """Every file of ``<chain>.tlog/`` replaced by a FIFO after a first run: the next host's spawns and
    its shutdown (the last checkpoint) open none of them blocking, and every spawn is recorded."""
    chain = tmp_path / "chain.jsonl"
    run_host(tmp_path, chain)
    directory = log_dir(chain)
    for name in LOG_FILES:
        if name == "tile":
            for path in [p for p in directory.joinpath("tile").rglob("*") if p.is_file()]:
                fifo(path)
        else:
            fifo(directory / name)
    out, err = run_host(tmp_path, chain)
    assert "blocking opens of a FIFO: 0" in out, out
    assert records(chain) == 24
    assert "Traceback" not in err
    assert all(line.startswith("LOG ") for line in err.splitlines()), err  # each problem one log line


def test_a_checkpoint_file_with_no_checkpoint_in_its_last_bytes_is_one_line(chain: Path, tmp_path: Path) -> None:
    # A --checkpoint file of more than MAX_NOTE_FILE bytes holding no checkpoint said so in two lines: a
    # note that its first bytes were not read, then "holds no checkpoint".
    from otel_route_shadow.logstore import MAX_NOTE_FILE

    huge = tmp_path / "huge.checkpoint"
    with huge.open("wb") as out:
        out.truncate(MAX_NOTE_FILE + 4096)  # zeros: no checkpoint anywhere
    refused(cli("verify", str(chain), "--checkpoint", str(huge), "--key", KEY), "holds no checkpoint in its last")
