"""Witnesses for the tests: torchwood's real ``litewitness`` on loopback, a fake one for bad answers, a fake
one that follows the protocol (``ProvingWitness``), a test-only cosigner, and a log that grows and
checkpoints.

``witness_pool(directory, count, log)`` starts an ``ssh-agent`` of its own (socket in a short temporary
directory), makes one Ed25519 key per witness with ``ssh-keygen`` and ``ssh-add``s it, runs ``count``
litewitness processes on free loopback ports, each with its own SQLite database, registers the log
(origin and verifier key) with ``witnessctl add-log``/``add-key``, and waits until each answers. It stops
every process it started when the ``with`` block ends, whatever happened inside (a failing test
included); each child also dies with the test process (PR_SET_PDEATHSIG) and leads its own process group.

The binaries are the ones `make witness` builds (``make test`` builds them and sets
``ROUTE_SHADOW_LITEWITNESS`` and ``ROUTE_SHADOW_WITNESSCTL``). Without those variables and without a
build in ``.witness/bin/``, the tests that need them are skipped, saying so; with the variables set, a
missing binary fails.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import http.server
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_ssh_public_key

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import (
    Checkpointer,
    LogStore,
    read_note_file,
    signed_checkpoint_from_note,
    tlog_dir,
)
from otel_route_shadow.tlog import (
    AuthenticationError,
    CosignatureVerifier,
    ProofError,
    Signer,
    TileReader,
    Verifier,
    authenticate,
    consistency_proof,
    parse_checkpoint,
    verify_consistency,
)
from otel_route_shadow.tlog.cosignature import CosignatureAlgorithm, cosignature_message, subtree_message

REPO = Path(__file__).resolve().parent.parent
LITEWITNESS_ENV = "ROUTE_SHADOW_LITEWITNESS"
WITNESSCTL_ENV = "ROUTE_SHADOW_WITNESSCTL"
_READY_POLLS = 400
_READY_POLL_S = 0.025
_PORT_TRIES = 3
_PR_SET_PDEATHSIG = 1


# --- the binaries --------------------------------------------------------------------------------------


def witness_binaries() -> tuple[Path, Path]:
    """``(litewitness, witnessctl)``; skips the test when neither is configured nor built."""
    found = []
    for variable, name in ((LITEWITNESS_ENV, "litewitness"), (WITNESSCTL_ENV, "witnessctl")):
        configured = os.environ.get(variable, "")
        binary = Path(configured) if configured else REPO / ".witness" / "bin" / name
        if not os.access(binary, os.X_OK):
            if configured:
                pytest.fail(f"{variable}={configured}: no {name} there (run `make witness`)")
            pytest.skip(f"no {name} built: run `make witness` (`make test` builds it and sets {variable})")
        found.append(binary)
    for tool in ("ssh-agent", "ssh-keygen", "ssh-add"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: the witness tests keep litewitness's keys in an ssh-agent")
    return found[0], found[1]


# --- processes -----------------------------------------------------------------------------------------


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _spawn(argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def _came_up(ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> bool:
    """True once ``ready()`` holds with ``proc`` still running; False when ``proc`` exits or the polls
    run out."""
    event = threading.Event()
    for _ in range(_READY_POLLS):
        if proc.poll() is not None:
            return False
        if ready():
            return proc.poll() is None
        event.wait(_READY_POLL_S)
    return False


def _tail(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else ""


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    if not _came_up(ready, proc):
        pytest.fail(f"{what} did not come up (exit {proc.poll()}):\n{_tail(log)}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# --- litewitness -----------------------------------------------------------------------------------------


@dataclass
class Litewitness:
    """One running litewitness: its name, key, URL and database."""

    name: str
    verifier: CosignatureVerifier
    fingerprint: str
    port: int
    db: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc, signal.SIGINT)  # litewitness shuts down cleanly on SIGINT

    def logged_vkey(self) -> str:
        """The verifier key litewitness printed at start (``vkey=...``)."""
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            if "verifier key" in line and "vkey=" in line:
                return line.split("vkey=", 1)[1].split()[0].strip('"')
        return ""


@dataclass
class WitnessPool:
    litewitness: Path
    witnessctl: Path
    agent_socket: str
    directory: Path
    agent: subprocess.Popen[bytes] | None = None
    witnesses: list[Litewitness] = field(default_factory=list)

    def register(self, witness: Litewitness, origin: str, log_key: Verifier) -> None:
        """``witnessctl add-log`` and ``add-key``: the witness knows our log from now on."""
        for argv in (
            ["add-log", "-db", str(witness.db), "-origin", origin],
            ["add-key", "-db", str(witness.db), "-origin", origin, "-key", str(log_key)],
        ):
            done = subprocess.run(
                [str(self.witnessctl), *argv], capture_output=True, text=True, timeout=60, check=False
            )
            assert done.returncode == 0, done.stdout + done.stderr

    def start(self, witness: Litewitness) -> None:
        """Start ``witness`` on its port; on a fresh one when another process took the port between
        :func:`free_port` choosing it and litewitness binding it (up to :data:`_PORT_TRIES` times)."""
        for _ in range(_PORT_TRIES):
            while _answers(witness.port):  # another server listens there: never wait on its answers
                witness.port = free_port()
            argv = [
                str(self.litewitness),
                "-db",
                str(witness.db),
                "-name",
                witness.name,
                "-key",
                witness.fingerprint,
                "-ssh-agent",
                self.agent_socket,
                "-listen",
                f"127.0.0.1:{witness.port}",
            ]
            witness.proc = _spawn(argv, witness.log)
            if _came_up(lambda: _answers(witness.port), witness.proc):
                return
            if "address already in use" not in _tail(witness.log):
                break
            _stop(witness.proc, signal.SIGINT)
            witness.port = free_port()
        pytest.fail(f"litewitness {witness.name} did not come up (exit {witness.proc.poll()}):\n{_tail(witness.log)}")


@contextlib.contextmanager
def witness_pool(directory: Path, count: int, origin: str, log_key: Verifier) -> Iterator[WitnessPool]:
    """``count`` running litewitnesses that know the log ``origin`` with key ``log_key`` (see the module)."""
    litewitness, witnessctl = witness_binaries()
    socket_dir = tempfile.mkdtemp(prefix="rsw-")  # short: a unix socket path has at most 107 bytes
    agent_socket = os.path.join(socket_dir, "agent")
    agent_log = directory / "ssh-agent.log"
    agent = _spawn(["ssh-agent", "-D", "-a", agent_socket], agent_log)
    pool = WitnessPool(litewitness, witnessctl, agent_socket, directory, agent)
    try:
        _wait_until(lambda: os.path.exists(agent_socket), agent, "ssh-agent", agent_log)
        for n in range(count):
            witness = _new_witness(directory, agent_socket, f"witness{n}.example.org/test")
            pool.register(witness, origin, log_key)
            pool.start(witness)
            pool.witnesses.append(witness)
        yield pool
    finally:
        for witness in pool.witnesses:
            witness.stop()
        _stop(agent)
        shutil.rmtree(socket_dir, ignore_errors=True)


def _new_witness(directory: Path, agent_socket: str, name: str) -> Litewitness:
    key = directory / (name.split(".")[0] + ".key")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    env = {**os.environ, "SSH_AUTH_SOCK": agent_socket}
    subprocess.run(["ssh-add", "-q", str(key)], check=True, capture_output=True, env=env, timeout=60)
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(key) + ".pub"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    fingerprint = listed.stdout.split()[1]
    public = load_ssh_public_key(Path(str(key) + ".pub").read_bytes())
    assert isinstance(public, Ed25519PublicKey)
    raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    verifier = CosignatureVerifier.from_public_key(name, raw)
    stem = name.split(".")[0]
    return Litewitness(
        name, verifier, fingerprint, free_port(), directory / f"{stem}.db", directory / f"{stem}.log"
    )


# --- a test-only cosigner ----------------------------------------------------------------------------------


class Cosigner:
    """Makes cosignature lines as a witness would (tests only: the log never cosigns): ``cosignature/v1``
    with an Ed25519 key, ``subtree/v1`` with an ML-DSA-44 key."""

    def __init__(self, name: str, key: Ed25519PrivateKey | MLDSA44PrivateKey | None = None) -> None:
        self._key = key or Ed25519PrivateKey.generate()
        if isinstance(self._key, MLDSA44PrivateKey):
            public, algorithm = self._key.public_key().public_bytes_raw(), CosignatureAlgorithm.ML_DSA_44
        else:
            public = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            algorithm = CosignatureAlgorithm.ED25519
        self.verifier = CosignatureVerifier.from_public_key(name, public, algorithm)

    def line(self, text: str, timestamp: int, *, key_id: int | None = None, name: str | None = None) -> str:
        """The signature line on the note text ``text`` at ``timestamp``."""
        if isinstance(self._key, MLDSA44PrivateKey):
            checkpoint = parse_checkpoint(text)
            return self.subtree_line(
                checkpoint.origin, 0, checkpoint.size, checkpoint.root, timestamp, key_id=key_id, name=name
            )
        return self._line(self._key.sign(cosignature_message(timestamp, text)), timestamp, key_id, name)

    def subtree_line(
        self,
        origin: str,
        start: int,
        end: int,
        root: bytes,
        timestamp: int = 0,
        *,
        key_id: int | None = None,
        name: str | None = None,
        signed_name: str | None = None,
    ) -> str:
        """An ML-DSA-44 signature line on the range ``[start, end)`` of ``origin`` (``signed_name``: the
        cosigner name the message carries, when it is not the key's)."""
        assert isinstance(self._key, MLDSA44PrivateKey)
        message = subtree_message(signed_name or self.verifier.name, timestamp, origin, start, end, root)
        return self._line(self._key.sign(message), timestamp, key_id, name)

    def _line(self, signature: bytes, timestamp: int, key_id: int | None, name: str | None) -> str:
        blob = (key_id if key_id is not None else self.verifier.key_id).to_bytes(4, "big")
        blob += timestamp.to_bytes(8, "big") + signature
        return f"\u2014 {name or self.verifier.name} {base64.b64encode(blob).decode('ascii')}\n"


# --- a log that grows ----------------------------------------------------------------------------------------


class GrowingLog:
    """A chain with the real writer and Checkpointer; checkpoint notes and consistency proofs on demand."""

    def __init__(self, chain: Path, signer: Signer) -> None:
        self.chain = chain
        self.signer = signer
        self._appended = sum(1 for _ in chain.open("rb")) if chain.exists() else 0

    def grow(self, count: int, tag: str = "main") -> str:
        """Append ``count`` records, checkpoint, and return the newest signed note."""
        with DecisionChain(self.chain) as log:
            for n in range(self._appended, self._appended + count):
                log.append({"kind": "route-shadow", "n": n, "tag": tag})
        self._appended += count
        made = Checkpointer(str(self.chain), self.signer.name, self.signer).checkpoint()
        assert made is not None and made.size == self._appended
        return made.note

    def notes(self) -> list[str]:
        return read_note_file(os.path.join(tlog_dir(str(self.chain)), "checkpoints")).notes

    def prove(self, old: int, new: int) -> list[bytes]:
        """The proof from ``old`` to the checkpoint of size ``new``, from its authenticated tiles."""
        root = next(signed_checkpoint_from_note(n).root for n in reversed(self.notes()) if size_of(n) == new)
        return consistency_proof(old, new, TileReader(LogStore(str(self.chain)), new, root))

    def lines(self) -> list[bytes]:
        return self.chain.read_bytes().split(b"\n")[:-1]

    def fork(self, chain: Path, keep: int) -> GrowingLog:
        """A copy of the first ``keep`` records in a new chain (the attacker's cut), same signing key."""
        chain.write_bytes(b"".join(line + b"\n" for line in self.lines()[:keep]))
        return GrowingLog(chain, self.signer)


def size_of(note: str) -> int:
    return signed_checkpoint_from_note(note).size


# --- a fake witness for bad answers ---------------------------------------------------------------------------

Respond = Callable[[bytes, "FakeWitness"], tuple[int, dict[str, str], bytes]]


class FakeWitness:
    """An HTTP server on loopback whose ``respond(request body, self)`` gives (status, headers, body).

    ``bodies`` holds every request body received; ``release`` is set at the end so that a handler
    holding a request open (a slow witness) returns.
    """

    def __init__(self, respond: Respond, *, keep_alive: bool = False) -> None:
        self.respond = respond
        self.connections = 0
        """TCP connections accepted; with ``keep_alive`` (HTTP/1.1) one serves many requests, and
        ``close_idle`` makes the server close each connection after its answer without saying so (as it
        stands when the request arrives: a change made once the answer is on its way is the next one's)."""
        self.close_idle = False
        self.bodies: list[bytes] = []
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                fake.connections += 1
                super().setup()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                close = fake.close_idle
                fake.bodies.append(body)
                fake.arrived.release()
                status, headers, data = fake.respond(body, fake)
                with contextlib.suppress(OSError):
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    if "Content-Length" not in headers:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                if close:
                    self.close_connection = True

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def fake_witness(respond: Respond, *, keep_alive: bool = False) -> Iterator[FakeWitness]:
    fake = FakeWitness(respond, keep_alive=keep_alive)
    try:
        yield fake
    finally:
        fake.close()


class ProvingWitness:
    """A fake witness that follows ``tlog-witness`` for one log (the ``respond`` of a :class:`FakeWitness`):
    403 unless the log's key signed the note, 409 with its size when ``old`` is not it, 400 when ``old``
    exceeds the note's size, 422 when the consistency proof does not verify, else it keeps the new size and
    root and answers its cosignature (timestamped ``clock()``). ``gate`` holds every answer while cleared;
    ``answers`` counts them by status."""

    def __init__(self, cosigner: Cosigner, log_key: Verifier, clock: Callable[[], float] = time.time) -> None:
        self.cosigner = cosigner
        self.log_key = log_key
        self.clock = clock
        self.size = 0
        self.root: bytes | None = None
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()
        self.answers: dict[int, int] = {}

    def __call__(self, body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        self.gate.wait(120)
        status, headers, data = self._answer(body)
        with self.lock:
            self.answers[status] = self.answers.get(status, 0) + 1
        return status, headers, data

    def _answer(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        head, note = body.decode().split("\n\n", 1)
        first, *proof_lines = head.split("\n")
        old = int(first.removeprefix("old "))
        try:
            checkpoint = authenticate(note, [self.log_key]).checkpoint
        except AuthenticationError:
            return 403, {}, b"unknown log or key\n"
        with self.lock:
            if old != self.size:
                return 409, {"Content-Type": "text/x.tlog.size"}, f"{self.size}\n".encode()
            if old > checkpoint.size:
                return 400, {}, b"old > new\n"
            if old == checkpoint.size and checkpoint.root != self.root:
                return 409, {"Content-Type": "text/x.tlog.size"}, f"{self.size}\n".encode()
            if 0 < old < checkpoint.size:
                assert self.root is not None
                proof = [base64.b64decode(line) for line in proof_lines]
                try:
                    verify_consistency(old, checkpoint.size, self.root, checkpoint.root, proof)
                except ProofError:
                    return 422, {}, b"bad proof\n"
            self.size, self.root = checkpoint.size, checkpoint.root
        text = note.split("\n\n", 1)[0] + "\n"
        return 200, {}, self.cosigner.line(text, int(self.clock())).encode()
