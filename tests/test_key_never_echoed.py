"""A private signing key given where another file is expected is never echoed.

A key file passed as a witness policy was answered with ``line 1: unknown keyword 'PRIVATE+KEY+...'``
(the whole key on stderr), and ``OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY=KEYFILE`` wrote it into the
host's log. Here a real key (``key generate``) is handed to every file-taking option of every command
(enumerated from the argparse parsers: a new option is covered, and a new command must be given a
valid command line below) and to every file-taking setting (the ``Path`` fields of the settings
model), each in a process of its own; no byte of the key's secret reaches stdout, stderr or a log.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tlog_support import ORIGIN, append, key_file

from otel_route_shadow.cli import build_parser
from otel_route_shadow.instrumentation.config import RouteShadowConfig
from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import Signer

HANG_GUARD_S = 120
"""Far beyond any run here: reaching it means a hang, never slowness."""
SERVE_RUN_S = 5
"""``serve`` given a usable input serves until stopped: it is stopped after this long (its output so far
is what is checked; a refusal comes long before)."""
WINDOW = 12
"""Any 12 characters of the key line that reach into its secret part betray it."""
FILE_WORDS = ("FILE", "DIR", "PATH", "CHAIN", "KEY")
"""An option names a file when its metavar holds one of these (``VKEY``: a key string or a key file)
or its type is ``Path``."""

LOG_SIGNER = Signer.generate(ORIGIN)
LOG_KEY = str(LOG_SIGNER.verifier())
ROTATE_SIGNER = Signer.generate("example.com/route-shadow/rotate")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(argv: list[str], *, env: dict[str, str] | None = None, stop_after: float = HANG_GUARD_S) -> str:
    """stdout and stderr of ``argv`` in a process of its own (stopped after ``stop_after`` seconds)."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=stop_after, env=env)
    except subprocess.TimeoutExpired as exc:
        if stop_after == HANG_GUARD_S:
            pytest.fail(f"hung: {' '.join(argv)[:200]}")
        return (exc.stdout or b"").decode("utf-8", "replace") + (exc.stderr or b"").decode("utf-8", "replace")
    return done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")


def cli(*argv: str, stop_after: float = HANG_GUARD_S) -> str:
    return run([sys.executable, "-m", "otel_route_shadow.cli", *argv], stop_after=stop_after)


@dataclasses.dataclass(frozen=True)
class Secret:
    """A private key's line (``PRIVATE+KEY+<name>+<id>+<base64>``) and its decoded key bytes."""

    line: str
    seed: bytes


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signed, checkpointed chain, a proof and a receipt of it, a policy store, a context: what the
    commands need besides the file under test."""
    root = tmp_path_factory.mktemp("workspace")
    chain = root / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, LOG_SIGNER)
    append(chain, 20, writer, every=20)
    writer.checkpoint()
    (root / "proof.json").write_text(cli("prove", str(chain), "--seq", "1"))
    out = cli("prove", str(chain), "--seq", "1", "--receipt", "--record-out", str(root / "record.line"))
    (root / "receipt.txt").write_text(out)
    assert (root / "record.line").exists(), out
    cli("policy", "save", str(EXAMPLES / "policies.json"), "--store", str(root / "store"))
    assert (root / "store" / "current.json").exists()
    (root / "witness.policy").write_text(f"log {LOG_KEY}\nquorum none\n")
    (root / "log.keys").write_text(f"{LOG_KEY} 0\n")
    rotated = root / "rotate.jsonl"  # its own chain: the other commands read the workspace's unchanged
    append(rotated, 3, Checkpointer(str(rotated), ROTATE_SIGNER.name, ROTATE_SIGNER), every=3)
    key_file(root / "rotate.key", ROTATE_SIGNER)
    cli("demo", "--spawns", "3", "--quiet", "--out", str(root / "demo"))
    assert (root / "demo" / "chain.jsonl").exists()
    return root


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Secret:
    path = tmp_path_factory.mktemp("key") / "signing.key"
    cli("key", "generate", "--name", "example.com/route-shadow/leak", "--out", str(path))
    line = path.read_text().strip()
    assert line.startswith("PRIVATE+KEY+"), line
    return Secret(line=line, seed=base64.b64decode(line.split("+", 4)[4]))


def leaks(text: str, secret: Secret) -> list[str]:
    """The pieces of the key's secret found in ``text``: a window of the key line that reaches into
    its base64 part, or the seed in base64 or hex."""
    text = text.replace(str(Signer.parse(secret.line).verifier()), "")  # public: ``key verifier`` prints it
    start = len(secret.line) - len(secret.line.split("+", 4)[4])
    pieces = [
        secret.line[i : i + WINDOW] for i in range(max(0, start - WINDOW + 1), len(secret.line) - WINDOW + 1)
    ]
    pieces += [base64.b64encode(secret.seed).decode(), secret.seed.hex(), secret.seed[1:].hex()]
    return [piece for piece in pieces if piece in text]


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif any(word in str(action.metavar or "") for word in FILE_WORDS) or action.type is Path:
            yield path, action.option_strings[0] if action.option_strings else action.dest


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
    for action in subs:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


FILE_OPTIONS = sorted(set(_options(build_parser(), ())))


def test_the_file_options_are_found() -> None:
    found = set(FILE_OPTIONS)
    assert {
        (("verify",), "--witness-policy"),
        (("report",), "--witness-policy"),
        (("explain",), "--context"),
    } <= found
    assert {(("policy", "save"), "file"), (("audit",), "--state"), (("serve",), "chains")} <= found
    assert len(found) >= 45


def valid_lines(command: tuple[str, ...], w: Path) -> list[list[str]]:
    """Command lines of ``command`` that succeed, each reading the files it names (``audit`` reads them
    all, then finds no backend: exit 4; ``serve`` serves until stopped)."""
    chain, store, policies = str(w / "chain.jsonl"), str(w / "store"), str(EXAMPLES / "policies.json")
    checkpoint, policy = chain + ".tlog/checkpoint", str(w / "witness.policy")
    context = str(EXAMPLES / "contexts" / "selected-managed-policy.json")
    receipt, record, proof = str(w / "receipt.txt"), str(w / "record.line"), str(w / "proof.json")
    key_set = str(w / "log.keys")
    lines = {
        ("explain",): [
            ["--store", store, "--context", context],
            ["--policies", policies, "--context", context],
        ],
        ("policy", "check"): [["file", policies]],
        ("policy", "save"): [["file", policies, "--store", str(w / "store2")]],
        ("policy", "show"): [["--store", store]],
        ("policy", "history"): [["--store", store]],
        ("policy", "diff"): [["1", "1", "--store", store]],
        ("policy", "repair"): [["--store", store]],
        ("policy", "export"): [["--store", store]],
        ("verify",): [
            ["chain", chain, "--checkpoint", checkpoint, "--key", LOG_KEY],
            ["chain", chain, "--witness-policy", policy],
            ["chain", chain, "--keys", key_set],
        ],
        ("demo",): [["--spawns", "2", "--quiet", "--policies", policies, "--out", str(w / "demo-out")]],
        ("audit",): [
            [
                "chains",
                chain,
                "--backend",
                "http://127.0.0.1:9",
                "--project",
                "p",
                "--key",
                LOG_KEY,
                "--keys",
                key_set,
                "--state",
                str(w / "audit-state"),
                "--timeout",
                "1",
            ],
            [
                "chains",
                chain,
                "--backend",
                "http://127.0.0.1:9",
                "--project",
                "p",
                "--witness-policy",
                policy,
                "--timeout",
                "1",
            ],
        ],
        ("report",): [
            ["chain", chain, "--store", store, "--key", LOG_KEY, "--html", str(w / "report.html")],
            ["chain", chain, "--keys", key_set],
            ["chain", chain, "--witness-policy", policy],
            ["chain", chain, "--state", str(w / "report-state")],
        ],
        ("whatif",): [
            ["chain", chain, "--store", store, "--revision", "1"],
            ["chain", chain, "--policies", policies],
            ["chain", chain, "--policies", policies, "--key", LOG_KEY, "--keys", key_set],
            ["chain", chain, "--policies", policies, "--witness-policy", policy],
        ],
        ("matrix",): [
            ["--store", store, "--chain", str(w / "demo" / "chain.jsonl")],
            ["--policies", policies, "--repo", "acme/widgets"],
        ],
        ("key", "generate"): [["--name", "example.com/x", "--out", str(w / "other.key")]],
        ("key", "verifier"): [["file", str(w / "rotate.key")]],
        ("prove",): [
            ["chain", chain, "--seq", "1", "--checkpoint", checkpoint],
            [
                "chain",
                chain,
                "--seq",
                "1",
                "--witness-policy",
                policy,
                "--keys",
                key_set,
                "--receipt",
                "--record-out",
                str(w / "out.line"),
            ],
        ],
        ("verify-proof",): [
            ["--receipt", receipt, "--key", LOG_KEY, "--record", record],
            ["--receipt", receipt, "--keys", key_set, "--record", record],
            ["--proof", proof, "--checkpoint", checkpoint, "--witness-policy", policy, "--record", record],
        ],
        ("serve",): [
            ["chains", chain, "--listen", "127.0.0.1:0", "--key", LOG_KEY, "--witness-policy", policy]
        ],
        ("acknowledge",): [["chain", chain]],
        ("rotate",): [["chain", str(w / "rotate.jsonl"), "--key", str(w / "rotate.key")]],
        ("prune",): [
            ["chain", chain, "--key", LOG_KEY, "--keep-records", "1000000"],
            ["chain", chain, "--witness-policy", policy, "--keep-records", "1000000"],
            ["chain", chain, "--keys", key_set, "--keep-records", "1000000"],
        ],
    }
    return lines[command]


POSITIONALS = {"file", "chain", "chains"}


def argv_of(
    command: tuple[str, ...], line: list[str], option: str | None = None, value: str = ""
) -> list[str]:
    """``command`` with ``line`` (a positional marked by its dest before it), ``option``'s value ``value``."""
    out, items = list(command), iter(line)
    for item in items:
        given = next(items) if item in POSITIONALS or item == option else None
        if item not in POSITIONALS:
            out.append(item)
        if given is not None:
            out.append(value if item == option else given)
    return out


OLD_NAMES = {"--policy": "--witness-policy"}
"""Options kept under an old name: swept with the lines of the new name."""


def argv_with(command: tuple[str, ...], option: str, value: str, w: Path) -> list[str]:
    """The first valid line of ``command`` that names ``option`` (or the option it is the old name
    of), with ``value`` for it under ``option``."""
    new = OLD_NAMES.get(option, option)
    for line in valid_lines(command, w):
        if new in line:
            return argv_of(command, [option if item == new else item for item in line], option, value)
    raise AssertionError(f"no valid command line of {' '.join(command)} names {option}: add one")


def outcome(argv: list[str]) -> tuple[int | None, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "otel_route_shadow.cli", *argv],
            capture_output=True,
            text=True,
            timeout=SERVE_RUN_S,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stderr


@pytest.mark.parametrize("command", sorted(_commands(build_parser())), ids=" ".join)
def test_every_command_line_the_key_replaces_a_file_of_succeeds(
    workspace: Path, command: tuple[str, ...]
) -> None:
    """Each command line below works as it stands: the key takes the place of a file that is read."""
    for line in valid_lines(command, workspace):
        code, err = outcome(argv_of(command, line))
        expected = {("audit",): 4, ("serve",): None, ("acknowledge",): 1}.get(command, 0)  # 1: no refusal
        assert code == expected, (line, err)


@pytest.mark.parametrize(
    ("command", "option"), FILE_OPTIONS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v
)
def test_a_signing_key_given_to_any_file_option_is_never_echoed(
    workspace: Path, secret: Secret, tmp_path: Path, command: tuple[str, ...], option: str
) -> None:
    key = tmp_path / "given.key"
    key.write_text(secret.line + "\n")
    key.chmod(0o600)
    argv = argv_with(command, option, str(key), workspace)
    out = cli(*argv, stop_after=SERVE_RUN_S if command == ("serve",) else HANG_GUARD_S)
    print("OUT", argv, out[:300])
    assert leaks(out, secret) == [], out


# -- the host: every setting that names a file -------------------------------------------------------

HOST = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(level=logging.DEBUG, format="LOG %(name)s %(message)s")
    from opentelemetry.sdk.trace import TracerProvider
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor
    import readme_host as host

    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), checkpoint_records=2)
    runner = host.Runner()
    for n in range(5):
        runner.execute(host.Job(n))
    instrumentor.uninstrument()
    print("host done")
    """
)
PLUGIN_TESTS = Path(__file__).parent / "plugin"
FILE_SETTINGS = sorted(
    name
    for name, field in RouteShadowConfig.model_fields.items()
    if Path in (field.annotation, *getattr(field.annotation, "__args__", ()))
)


def test_the_file_settings_are_found() -> None:
    assert {"chain_path", "store", "signing_key", "witness_policy"} <= set(FILE_SETTINGS)


@pytest.mark.parametrize("setting", FILE_SETTINGS)
def test_a_signing_key_given_to_any_file_setting_is_never_echoed(
    tmp_path: Path, secret: Secret, setting: str
) -> None:
    """The host (logging everything, DEBUG up) runs with the key as the setting's file; its output,
    and every file it wrote, hold no byte of the key (the key file itself aside)."""
    key = tmp_path / "given.key"
    key.write_text(secret.line + "\n")
    key.chmod(0o600)
    (tmp_path / "host.py").write_text(HOST)
    log_key = tmp_path / "log.key"  # the log signs: a witness policy is then read
    key_file(log_key, LOG_SIGNER)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PLUGIN_TESTS), os.environ.get("PYTHONPATH", "")]),
        "OTEL_PYTHON_ROUTE_SHADOW_SEAMS": "readme_host:Runner.execute,agentic,readme_host:extract_execute",
        "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": str(tmp_path / "chain.jsonl"),
        "OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY": str(log_key),
        f"OTEL_PYTHON_ROUTE_SHADOW_{setting.upper()}": str(key),
    }
    out = run([sys.executable, str(tmp_path / "host.py")], env=env)
    assert "host done" in out, out
    assert leaks(out, secret) == [], out
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in (key, log_key)]
    assert written, "the host wrote nothing"
    for path in written:
        assert leaks(path.read_bytes().decode("utf-8", "replace"), secret) == [], path


def test_a_signing_key_pasted_into_any_setting_is_never_echoed(secret: Secret) -> None:
    """A setting that cannot be understood is named, never quoted: its value may be a pasted key."""
    from otel_route_shadow.instrumentation import environment_variables

    names = [name for name in vars(environment_variables) if name.startswith("OTEL_PYTHON_ROUTE_SHADOW_")]
    assert len(names) >= 10
    for name in names:
        try:
            RouteShadowConfig.resolve({name: secret.line})
        except Exception as exc:  # any refusal: its message is what is checked
            assert leaks(str(exc), secret) == [], name


def _refusals(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[list[str]]:
    """A command line per option or argument whose value argparse itself judges (a type, choices),
    giving it the placeholder ``SECRET``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _refusals(sub, (*path, name))
        elif action.type is not None or action.choices is not None:
            if action.option_strings:
                yield [*path, action.option_strings[0], "SECRET"]
            else:
                yield [*path, "SECRET"]


def test_no_value_argparse_refuses_is_echoed(secret: Secret, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse quotes what it refuses: ``invalid int value: '...'`` (``report --top``, ``prove --seq``),
    ``invalid choice: '...'``, ``unrecognized arguments: ...``; ``report --min-spawns`` and ``policy
    diff`` quoted it in their own words. A key pasted there was printed. Each is tried in process."""
    lines = [*_refusals(build_parser(), ()), ["SECRET"], ["verify", "chain.jsonl", "SECRET"]]
    assert len(lines) >= 40
    for line in lines:
        argv = [secret.line if word == "SECRET" else word for word in line]
        with contextlib.suppress(SystemExit):  # a type that takes any text (a path) refuses nothing
            build_parser().parse_args(argv)
        err = capsys.readouterr().err
        assert not leaks(err, secret), (line, err)


def test_a_setting_refused_by_its_schema_is_named_not_quoted() -> None:
    """The durability setting, lowercased, reached the settings' schema, whose refusal quoted the
    input: a pasted key whose material ends in lowercase letters and digits (by chance, about one
    generated key in some) then leaked past the redactor, which knows the key by its capital
    ``PRIVATE+KEY+``. The schema's refusal is now named, never quoted."""
    material = "abcdefghijklmnopqrstuvwxyz0123456789abcdefgh"
    with pytest.raises(ValueError, match="durability: Input should be 'flush' or 'fsync'") as caught:
        RouteShadowConfig.resolve(
            {"OTEL_PYTHON_ROUTE_SHADOW_DURABILITY": f"PRIVATE+KEY+x+aadb4377+{material}"}
        )
    assert material[-12:] not in str(caught.value) and "private+key" not in str(caught.value)
