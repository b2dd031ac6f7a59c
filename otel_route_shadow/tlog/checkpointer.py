"""The writer side: catch the tree up with the chain, write tiles, sign and append checkpoints.

Several processes may append to one chain, so the tree does not live in one process's memory: it lives
in ``<chain>.tlog/`` (tiles plus a small ``state`` file: tree size, byte offset of the next line, start
and leaf hash of the last line hashed). A checkpoint takes ``<chain>.tlog/lock`` without waiting (when
another process is checkpointing, this one skips), re-reads the state and the right-edge tiles (at most
one partial tile per level), checks that the chain still holds the last hashed line where it left it,
hashes the lines appended since (at most ``max_leaves`` lines and ``max_bytes`` bytes per call; the
rest next time), writes the tiles and the state, then signs and appends the checkpoint.

The signer checks what it signs: before a line becomes a leaf, its record hash
(``SHA-256(line[:-82] + "}")`` against the 64 hex digits it ends with) and its link (its ``prev_hash`` is
the previous line's record hash; ``"0"*64`` for seq 0; for the first line after a resume, the line at
``state.last_start``) are checked with the one exact check of ``links``. This is what lets a verifier
skip those checks below an authenticated checkpoint (docs/chain-format.md section 13.7). What it costs:
one more SHA-256 per record, in the background thread; amortized cost per record: about three SHA-256.

If the chain is shorter than the state says, or its line at the remembered offset is not the leaf
last hashed, the chain was truncated, replaced or forked underneath: the Checkpointer refuses to sign
(ever again in this process), logs one warning, and appends one JSON line to ``<chain>.tlog/refusals``.
A line whose record hash or link does not hold is refused the same way (``broken-link``, with its seq),
after the lines before it are signed: no checkpoint ever covers it.
Everything is contained: ``after_append`` and ``checkpoint_now`` never raise into the host.

With ``background=True`` (the plugin's setting) a due checkpoint runs in one daemon thread of the
Checkpointer's instead of in the appending caller: ``after_append`` then only counts and, when due, sets
an event. What it buys: the catch-up (re-reading and hashing the lines since the last checkpoint,
writing tiles, signing; tens of milliseconds per 1000 records) leaves the spawn that happened to be
the 1000th, and about a tenth of bench row 1's per-spawn cost with it. ``checkpoint_now`` stays
synchronous (it waits at most ``SHUTDOWN_WAIT_S`` for a running background checkpoint), and
``close`` stops the thread. A forked child starts its own thread on its first due checkpoint.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from otel_route_shadow.chain import open_chain
from otel_route_shadow.tlog.checkpoint import Checkpoint, parse_checkpoint
from otel_route_shadow.tlog.leaves import iter_line_blocks
from otel_route_shadow.tlog.links import GENESIS, line_holds, record_hash_of
from otel_route_shadow.tlog.merkle import leaf_hash
from otel_route_shadow.tlog.note import Signer, parse_note, sign_note
from otel_route_shadow.tlog.tiles import TileStore, TreeBuilder, _write_atomic

__all__ = [
    "DEFAULT_EVERY_RECORDS",
    "DEFAULT_EVERY_SECONDS",
    "Checkpointer",
    "SignedCheckpoint",
    "default_origin",
    "read_checkpoint_file",
    "tlog_dir",
]

_LOG = logging.getLogger("otel_route_shadow")

DEFAULT_EVERY_RECORDS = 1000
"""A checkpoint at least every 1000 records ..."""
DEFAULT_EVERY_SECONDS = 10.0
"""... or 10 seconds after the last one when records came in since (checked on append)."""
DEFAULT_MAX_LEAVES = 65536
"""Most lines one ``after_append`` hashes; a larger backlog is caught up over the next calls."""
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""Most chain bytes one ``after_append`` reads and hashes (a few milliseconds; at least one line of the
4 MiB maximum fits): a large backlog, e.g. the first checkpoint of a big existing chain, is caught up a
few milliseconds per appended record instead of stalling one host call for seconds."""
_MIN_BYTES = 4 * 1024 * 1024 + 1
"""A call always reaches past one line of the chain format's 4 MiB maximum, so it always progresses."""
SHUTDOWN_WAIT_S = 5.0
"""Longest ``checkpoint_now`` waits for a checkpoint already running in the background thread."""
SHUTDOWN_MAX_LEAVES = 1 << 20
SHUTDOWN_MAX_BYTES = 4 * 1024 * 1024 * 1024

WORKER_NAME = "route-shadow-checkpointer"
"""The name of a Checkpointer's background thread (``background=True``)."""

CHECKPOINTS_FILE = "checkpoints"
LATEST_FILE = "checkpoint"
STATE_FILE = "state"
LOCK_FILE = "lock"
REFUSALS_FILE = "refusals"

_REFUSAL_TEXT = {
    "truncated": "the chain was truncated underneath the log",
    "rewritten": "the chain was rewritten (replaced or forked) underneath the log",
    "broken-link": "a line's record hash or link does not hold (its seq is in the refusal)",
}
"""What each refusal reason means, for the one warning logged."""


@dataclasses.dataclass(frozen=True, slots=True)
class SignedCheckpoint:
    """A checkpoint as appended to the checkpoint file: ``note`` is the whole signed-note text
    (for an unsigned checkpoint, the checkpoint text alone)."""

    origin: str
    size: int
    root: bytes
    note: str
    signed: bool
    key_name: str | None


def tlog_dir(chain_path: str) -> str:
    """``<chain>.tlog``: the directory beside the chain holding checkpoints, tiles and state."""
    return os.fspath(chain_path) + ".tlog"


def default_origin(chain_path: str) -> str:
    """``<host>/route-shadow/<16 hex of SHA-256(absolute chain path)>``: stable across restarts."""
    host = re.sub(r"[^a-z0-9.-]", "-", socket.gethostname().lower()) or "localhost"
    digest = hashlib.sha256(os.path.abspath(chain_path).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{host}/route-shadow/{digest[:16]}"


def signed_checkpoint_from_note(note: str) -> SignedCheckpoint:
    """Rebuild a ``SignedCheckpoint`` from a note (signatures are not checked here)."""
    opened = parse_note(note)
    checkpoint = parse_checkpoint(opened.text)
    key = opened.signatures[0].name if opened.signatures else None
    return SignedCheckpoint(
        checkpoint.origin, checkpoint.size, checkpoint.root, note, bool(opened.signatures), key
    )


def read_checkpoint_file(path: str, max_bytes: int = 64 * 1024 * 1024) -> list[str]:
    """The notes of a checkpoint file: a chain's ``checkpoints`` file (one JSON object ``{"note": ...}``
    per line; a torn last line is skipped) or a file holding one note (the ``checkpoint`` file).
    ``ValueError`` names the path and the problem."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path}: larger than {max_bytes} bytes")
    if not data.startswith(b"{"):
        try:
            return [data.decode("utf-8")]
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not UTF-8") from None
    notes: list[str] = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            note = json.loads(line)["note"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{path}: line {number} is not a checkpoint entry") from None
        if not isinstance(note, str):
            raise ValueError(f"{path}: line {number} is not a checkpoint entry")
        notes.append(note)
    return notes


@dataclasses.dataclass(slots=True)
class _State:
    size: int = 0
    offset: int = 0
    last_start: int = 0
    last_leaf: str = ""
    checkpointed: int = 0

    @classmethod
    def load(cls, path: str) -> _State:
        try:
            with open(path, encoding="utf-8") as handle:
                raw: dict[str, Any] = json.load(handle)
        except FileNotFoundError:
            return cls()
        return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls)})

    def save(self, path: str) -> None:
        _write_atomic(path, json.dumps(dataclasses.asdict(self), sort_keys=True).encode("utf-8"))


class _Refused(Exception):
    """The chain no longer holds what this log last hashed, or a line to hash is broken; ``made`` is a
    checkpoint signed before the refusal (up to the line before a broken one), if any."""

    def __init__(self, reason: str, detail: dict[str, int], made: SignedCheckpoint | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.made = made


@dataclasses.dataclass(frozen=True, slots=True)
class _Extension:
    """One catch-up: ``more`` when lines were left for the next call; ``broken`` the seq of the first
    line whose record hash or link fails (neither it nor any line after it was hashed)."""

    more: bool = False
    broken: int | None = None


class Checkpointer:
    """Keeps a chain's tree and checkpoints: see the module docstring."""

    def __init__(
        self,
        chain_path: str,
        origin: str | None = None,
        signer: Signer | None = None,
        every_records: int = DEFAULT_EVERY_RECORDS,
        every_seconds: float = DEFAULT_EVERY_SECONDS,
        *,
        max_leaves: int = DEFAULT_MAX_LEAVES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        background: bool = False,
    ) -> None:
        self.chain_path = os.fspath(chain_path)
        self.origin = origin or default_origin(self.chain_path)
        self.signer = signer
        self.every_records = max(1, every_records)
        self.every_seconds = every_seconds
        self.max_leaves = max(1, max_leaves)
        self.max_bytes = max(_MIN_BYTES, max_bytes)
        self.dir = tlog_dir(self.chain_path)
        self.refused: str | None = None
        self.last: SignedCheckpoint | None = None
        self._pending = 0
        self._due_at = time.monotonic() + every_seconds
        self._behind = False
        self._listeners: list[Callable[[SignedCheckpoint], None]] = []
        self._failed_listeners: set[int] = set()
        self._logged: set[str] = set()
        self._mutex = threading.Lock()
        self.background = background
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._worker_pid = 0
        self._closed = False

    def add_listener(self, listener: Callable[[SignedCheckpoint], None]) -> None:
        """Call ``listener`` after each checkpoint is durably appended (its exceptions are logged once)."""
        self._listeners.append(listener)

    def after_append(self) -> None:
        """Count one appended record; checkpoint when due. Cheap unless due; never raises."""
        self._pending += 1
        if self._pending < self.every_records and not self._behind and time.monotonic() < self._due_at:
            return
        if self.refused is not None:
            return
        if self.background:
            self._wake_worker()
        else:
            self._run(self.max_leaves, self.max_bytes)

    def checkpoint_now(self) -> SignedCheckpoint | None:
        """Catch up (bounded) and checkpoint now, e.g. at shutdown; the latest checkpoint this process
        made when nothing was appended since (None if none). Never raises."""
        limits = (max(SHUTDOWN_MAX_LEAVES, self.max_leaves), SHUTDOWN_MAX_BYTES)
        return self._run(*limits, wait=SHUTDOWN_WAIT_S) or self.last

    def close(self) -> None:
        """Stop the background thread (waiting at most ``SHUTDOWN_WAIT_S``); a later due checkpoint
        starts it again."""
        worker, self._closed = self._worker, True
        self._wake.set()
        if worker is not None and worker is not threading.current_thread():
            worker.join(SHUTDOWN_WAIT_S)
        self._worker, self._closed = None, False
        self._wake = threading.Event()

    def _wake_worker(self) -> None:
        worker = self._worker
        if worker is None or self._worker_pid != os.getpid() or not worker.is_alive():
            self._worker_pid = os.getpid()
            self._wake = threading.Event()
            worker = threading.Thread(target=self._work, args=(self._wake,), name=WORKER_NAME, daemon=True)
            self._worker = worker
            worker.start()
        self._wake.set()

    def _work(self, wake: threading.Event) -> None:
        while True:
            wake.wait()
            wake.clear()
            if self._closed or wake is not self._wake:
                return
            self._run(self.max_leaves, self.max_bytes)

    def _run(self, max_leaves: int, max_bytes: int, wait: float = 0.0) -> SignedCheckpoint | None:
        if self.refused is not None or not self._mutex.acquire(timeout=wait if wait > 0 else 0):
            return None
        try:
            self._pending = 0
            self._due_at = time.monotonic() + self.every_seconds
            made = self._locked_checkpoint(max_leaves, max_bytes)
        except _Refused as refusal:
            self._refuse(refusal)
            made = refusal.made
        except Exception as exc:  # contained: the host is never disturbed
            self._log_once(type(exc).__name__, "checkpoint failed (%s); will retry", type(exc).__name__)
            return None
        finally:
            self._mutex.release()
        if made is not None:
            self.last = made
            self._notify(made)
        return made

    def _locked_checkpoint(self, max_leaves: int, max_bytes: int) -> SignedCheckpoint | None:
        if not os.path.exists(self.dir):
            if not os.path.exists(self.chain_path):
                return None  # no chain yet: nothing to checkpoint
            os.makedirs(self.dir, exist_ok=True)
        fd = os.open(os.path.join(self.dir, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # another process is checkpointing this chain right now
            return self._catch_up_and_sign(max_leaves, max_bytes)
        finally:
            os.close(fd)

    def _catch_up_and_sign(self, max_leaves: int, max_bytes: int) -> SignedCheckpoint | None:
        state_path = os.path.join(self.dir, STATE_FILE)
        state = _State.load(state_path)
        builder = TreeBuilder.resume(TileStore(self.dir, state.size)) if state.size else TreeBuilder()
        try:
            # open_chain refuses a FIFO or a device without blocking on it (O_NONBLOCK, then fstat)
            chain = os.fdopen(open_chain(self.chain_path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            _check_still_holds(None, state, 0)  # a removed chain is a chain cut to nothing
            return None
        with chain:
            end = os.fstat(chain.fileno()).st_size
            prev = _check_still_holds(chain, state, end)
            window = min(end, state.offset + max_bytes)
            extension = self._extend(chain, state, builder, window, max_leaves, prev)
            self._behind = extension.more or window < end
        made = self._sign_new_leaves(state, state_path, builder)
        if extension.broken is not None:
            detail = {
                "seq": extension.broken,
                "tree_size": builder.size,
                "expected_offset": state.offset,
                "chain_bytes": end,
            }
            raise _Refused("broken-link", detail, made)
        return made

    def _sign_new_leaves(
        self, state: _State, state_path: str, builder: TreeBuilder
    ) -> SignedCheckpoint | None:
        """Write the tiles and the state, then sign and append a checkpoint when the tree grew."""
        if builder.size in (state.checkpointed, 0):
            state.save(state_path)
            return None
        builder.write(self.dir)
        made = self._sign(Checkpoint(self.origin, builder.size, builder.root()))
        state.checkpointed = builder.size
        state.save(state_path)
        self._append_note(made)
        return made

    @staticmethod
    def _extend(
        chain: Any, state: _State, builder: TreeBuilder, end: int, max_leaves: int, prev: bytes
    ) -> _Extension:
        """Hash the lines after ``state.offset``, at most ``max_leaves``, each after its record hash and
        its link to ``prev`` (then to the line before it) are checked; stop before a line that fails."""
        budget = max_leaves
        for _after, lines in iter_line_blocks(chain, state.offset, end, block_bytes=1 << 20):
            taken = lines[:budget]
            holding = taken[: _holding(taken, prev)]
            if holding:
                digests = [leaf_hash(line) for line in holding]
                builder.extend(digests)
                state.offset += sum(map(len, holding)) + len(holding)
                state.last_start = state.offset - len(holding[-1]) - 1
                state.last_leaf = digests[-1].hex()
                state.size = builder.size
                prev = record_hash_of(holding[-1])
            if len(holding) < len(taken):
                return _Extension(broken=builder.size)
            budget -= len(taken)
            if len(taken) < len(lines) or budget == 0:
                return _Extension(more=state.offset < end)
        return _Extension()

    def _sign(self, checkpoint: Checkpoint) -> SignedCheckpoint:
        text = checkpoint.text()
        note = sign_note(text, [self.signer] if self.signer else [])
        name = self.signer.name if self.signer else None
        return SignedCheckpoint(
            checkpoint.origin, checkpoint.size, checkpoint.root, note, self.signer is not None, name
        )

    def _append_note(self, made: SignedCheckpoint) -> None:
        line = (json.dumps({"note": made.note}, ensure_ascii=True) + "\n").encode("ascii")
        fd = os.open(
            os.path.join(self.dir, CHECKPOINTS_FILE),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
            0o644,
        )
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        _write_atomic(os.path.join(self.dir, LATEST_FILE), made.note.encode("utf-8"))

    def _refuse(self, refusal: _Refused) -> None:
        self.refused = refusal.reason
        _LOG.warning(
            "route-shadow: not signing checkpoints for %s any more: %s (recorded in %s)",
            self.chain_path,
            _REFUSAL_TEXT.get(refusal.reason, refusal.reason),
            os.path.join(self.dir, REFUSALS_FILE),
        )
        entry = {"reason": refusal.reason, "origin": self.origin, **refusal.detail}
        try:
            with open(os.path.join(self.dir, REFUSALS_FILE), "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry, sort_keys=True) + "\n")
        except OSError:
            pass

    def _notify(self, made: SignedCheckpoint) -> None:
        for listener in self._listeners:
            try:
                listener(made)
            except Exception as exc:
                if id(listener) not in self._failed_listeners:
                    self._failed_listeners.add(id(listener))
                    _LOG.warning("route-shadow: a checkpoint listener failed (%s)", type(exc).__name__)

    def _log_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._logged:
            self._logged.add(key)
            _LOG.warning("route-shadow: " + message, *args)


def _holding(lines: list[bytes], prev: bytes) -> int:
    """How many of ``lines``, in order, hold their own record hash and link (the first to ``prev``)."""
    for count, line in enumerate(lines):
        if not line_holds(line, prev):
            return count
        prev = record_hash_of(line)
    return len(lines)


def _check_still_holds(chain: Any, state: _State, end: int) -> bytes:
    """Raise ``_Refused`` unless the chain still holds the last hashed line where the state says.

    Returns that line's record hash (``GENESIS`` for an empty tree): the link the next line must carry."""
    if state.size == 0:
        return GENESIS
    detail = {"tree_size": state.size, "expected_offset": state.offset, "chain_bytes": end}
    if end < state.offset:
        raise _Refused("truncated", detail)
    chain.seek(state.last_start)
    line = chain.read(state.offset - state.last_start)
    if not line.endswith(b"\n") or leaf_hash(line[:-1]).hex() != state.last_leaf:
        raise _Refused("rewritten", detail)
    return record_hash_of(line[:-1])
