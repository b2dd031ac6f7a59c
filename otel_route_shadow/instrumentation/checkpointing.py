"""When the plugin checkpoints its chain (every N records or T seconds, in one background thread, and
at shutdown), with which key and origin, and to which witnesses it pushes the checkpoints.

``logstore.Checkpointer`` does the work (catch up, prove, sign, publish) synchronously, bounded, with no
thread and no clock. :class:`ScheduledCheckpointer` gives it the plugin's cadence: ``after_append``
counts records and, when a checkpoint is due (``every_records`` records, or the first record
``every_seconds`` after the last checkpoint, or a catch-up left lines for later), wakes one daemon
thread that runs it, so no checkpoint ever runs inside a spawn. The chain's writer tells it of every
line this process writes (``line_written``, a ``RoutingAuditLog`` listener): the lines (the very bytes
written, and their record hashes) are kept until a checkpoint covers them, so the catch-up reads and
checks only the lines of other processes, and hashes this process's own in its thread, not in the
spawn. What is kept is bounded (twice ``every_records`` lines, ``KEPT_BYTES_MAX`` bytes): past it, or
once the checkpointer refused, the lines are dropped and read from the chain instead. The thread's
catch-up gives the interpreter back after every slice of lines (``PAUSE_S``), so a host thread waiting
for it waits for one slice at most. ``checkpoint_now`` (at uninstrument and
provider shutdown) runs one synchronously with the larger shutdown bounds, waiting at most
``SHUTDOWN_WAIT_S`` for a checkpoint the thread is running; ``close`` stops the thread. A forked child
starts its own thread on its first due checkpoint (the parent's does not exist there) and does not wait
for a lock the fork copied in a held state.

:func:`scheduled_checkpointer` builds it from the settings. The log's origin is the signing key's name
(C2SP tlog-checkpoint: the key is named after the log), unless another origin is configured: then
the key is refused at start with one log line and the checkpoints are written unsigned (the host runs
on, shadowed). With a witness policy (a C2SP tlog-policy file), every signed checkpoint is pushed to
the policy's witnesses (``witness.CheckpointWitnessing``, its own thread: no spawn waits for a
witness), at most ``pushes_per_day`` times a day each; at start each witness is asked the size it
holds for this log, and nothing is signed until it answered (or failed, each request bounded); at shutdown the last checkpoint is pushed to
every witness within ``SHUTDOWN_PUSH_S``. A policy that cannot be read is logged (one line) and
nothing is pushed.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Final

from otel_route_shadow.chain import WrittenLine
from otel_route_shadow.logstore import (
    Checkpointer,
    KeyFileError,
    SignedCheckpoint,
    default_origin,
    empty_tree_note,
    read_policy_file,
    read_signer_file,
)
from otel_route_shadow.tlog import PolicyError, Signer
from otel_route_shadow.witness import DEFAULT_PUSHES_PER_DAY, CheckpointWitnessing, WitnessConfigError

__all__ = [
    "DEFAULT_EVERY_RECORDS",
    "DEFAULT_EVERY_SECONDS",
    "DEFAULT_PUSHES_PER_DAY",
    "KEPT_BYTES_MAX",
    "PAUSE_S",
    "SHUTDOWN_PUSH_S",
    "SHUTDOWN_WAIT_S",
    "WORKER_NAME",
    "ScheduledCheckpointer",
    "scheduled_checkpointer",
]

_LOG = logging.getLogger("otel_route_shadow")

DEFAULT_EVERY_RECORDS: Final = 1000
"""A checkpoint at least every 1000 records ..."""
DEFAULT_EVERY_SECONDS: Final = 10.0
"""... or on the first record 10 seconds after the last one."""
SHUTDOWN_WAIT_S: Final = 5.0
"""Longest ``checkpoint_now`` waits for a checkpoint already running in the background thread."""
SHUTDOWN_MAX_LEAVES: Final = 1 << 20
SHUTDOWN_MAX_BYTES: Final = 4 * 1024 * 1024 * 1024
WORKER_NAME: Final = "route-shadow-checkpointer"
"""The name of the background thread."""
SHUTDOWN_PUSH_S: Final = 3.0
"""Longest ``checkpoint_now`` spends pushing the last checkpoint to the witnesses (all of them)."""
KEPT_BYTES_MAX: Final = 8 * 1024 * 1024
"""Most bytes of appended lines kept for the next checkpoint (and at most twice ``every_records`` lines)."""
PAUSE_S: Final = 0.0001
"""How long the background thread sleeps between two slices of a catch-up, the interpreter lock
given back: long enough that a host thread waiting for the lock takes it."""


class ScheduledCheckpointer:
    """A ``logstore.Checkpointer`` on the plugin's schedule: see the module docstring. Never raises."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        every_records: int = DEFAULT_EVERY_RECORDS,
        every_seconds: float = DEFAULT_EVERY_SECONDS,
        *,
        background: bool = True,
    ) -> None:
        self.checkpointer = checkpointer
        self.every_records = max(1, every_records)
        self.every_seconds = every_seconds
        self.background = background
        self._pending = 0
        self._due_at = time.monotonic() + every_seconds
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._kept: list[WrittenLine] = []
        self._kept_bytes = 0
        self._kept_end = 0
        """The offset after the last line kept: a line before it means the chain was replaced or cut."""
        self._kept_max = 2 * self.every_records
        self._keeping = True
        """False once the checkpointer refused (it never uses a line again)."""
        self._kept_lock = threading.Lock()
        self.witnesses: CheckpointWitnessing | None = None
        weak = weakref.WeakMethod(self._after_fork)
        os.register_at_fork(after_in_child=lambda: (method := weak()) is not None and method())

    @property
    def origin(self) -> str:
        return self.checkpointer.origin

    @property
    def last(self) -> SignedCheckpoint | None:
        return self.checkpointer.last

    @property
    def refused(self) -> str | None:
        return self.checkpointer.refused

    def add_listener(self, listener: Callable[[SignedCheckpoint], None]) -> None:
        """Call ``listener`` after each checkpoint is durably published (its exceptions are logged once)."""
        self.checkpointer.add_listener(listener)

    def witness_with(self, witnesses: CheckpointWitnessing) -> None:
        """Hand every checkpoint published from now on to ``witnesses`` (pushed in their own thread)."""
        self.witnesses = witnesses
        self.add_listener(witnesses.submit)

    @contextlib.contextmanager
    def exclusive(self, timeout: float) -> Iterator[bool]:
        """Hold the schedule's lock (no checkpoint runs meanwhile), waiting at most ``timeout`` seconds;
        yields False when it was not had. A witness's cosignature is stored under it, so a checkpoint
        never skips its turn for one (``checkpoint_now`` waits for it instead)."""
        mutex = self._mutex
        held = mutex.acquire(timeout=timeout) if timeout > 0 else mutex.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                mutex.release()

    @property
    def kept(self) -> int:
        """Lines this process appended that are kept for the next checkpoint."""
        return len(self._kept)

    def line_written(self, line: WrittenLine) -> None:
        """A line this process appended (the chain writer's listener): kept until a checkpoint covers
        it. A line that does not follow the last one kept (the chain file replaced or cut), or one more
        than the bounds allow, drops what is kept: those lines are read from the chain instead."""
        size = len(line.line)
        with self._kept_lock:
            kept = self._kept
            if (
                line.offset < self._kept_end
                or self._kept_bytes + size > KEPT_BYTES_MAX
                or len(kept) >= self._kept_max
            ):
                kept.clear()
                self._kept_bytes = 0
            if self._keeping:
                kept.append(line)
                self._kept_bytes += size
                self._kept_end = line.offset + size

    def after_append(self) -> None:
        """Count one appended record; checkpoint when due. Cheap unless due; never raises."""
        self._pending += 1
        due = (
            self._pending >= self.every_records
            or self.checkpointer.behind
            or time.monotonic() >= self._due_at
        )
        if not due or self.checkpointer.refused is not None:
            return
        if self.background:
            self._wake_worker()
        else:
            self._run(wait=0.0)

    def checkpoint_now(self) -> SignedCheckpoint | None:
        """Catch up (with the shutdown bounds) and checkpoint now; the latest checkpoint this process made
        when nothing was appended since (None if none). Never raises."""
        if self.witnesses is not None:
            self.witnesses.wait_learned()  # bounded: nothing is signed before their sizes are known
        made = self._run(wait=SHUTDOWN_WAIT_S, max_leaves=SHUTDOWN_MAX_LEAVES, max_bytes=SHUTDOWN_MAX_BYTES)
        if self.witnesses is not None:
            self.witnesses.flush(SHUTDOWN_PUSH_S)
        return made or self.checkpointer.last

    def close(self) -> None:
        """Stop the background thread (waiting at most ``SHUTDOWN_WAIT_S``); a later due checkpoint
        starts it again."""
        worker, self._closed = self._worker, True
        self._wake.set()
        if worker is not None and worker is not threading.current_thread():
            worker.join(SHUTDOWN_WAIT_S)
        self._worker, self._closed = None, False
        self._wake = threading.Event()
        if self.witnesses is not None:
            self.witnesses.close()

    def _wake_worker(self) -> None:
        worker = self._worker
        if worker is None or not worker.is_alive():
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
            self._run(wait=0.0, pause=_give_way)

    def _run(
        self,
        wait: float,
        max_leaves: int | None = None,
        max_bytes: int | None = None,
        pause: Callable[[], None] | None = None,
    ) -> SignedCheckpoint | None:
        if not self._mutex.acquire(timeout=wait if wait > 0 else 0):
            return None
        try:
            self._pending = 0
            self._due_at = time.monotonic() + self.every_seconds
            with self._kept_lock:
                appended = list(self._kept)
            made = self.checkpointer.checkpoint(
                max_leaves=max_leaves, max_bytes=max_bytes, appended=appended, pause=pause
            )
            self._forget_covered()
            return made
        finally:
            self._mutex.release()

    def _forget_covered(self) -> None:
        """Drop the kept lines the checkpointer's tree now covers (all of them once it refused)."""
        covered = self.checkpointer.offset
        with self._kept_lock:
            kept = self._kept
            if self.checkpointer.refused is not None:
                self._keeping = False
                kept.clear()
            else:
                del kept[: bisect.bisect_left(kept, covered, key=lambda line: line.offset)]
            self._kept_bytes = sum(len(line.line) for line in kept)

    def _after_fork(self) -> None:
        """In a forked child: the parent's thread does not exist here, and a lock it held was copied held."""
        self._kept_lock = threading.Lock()
        self._kept, self._kept_bytes, self._kept_end = [], 0, 0
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._worker = None
        self._closed = False


def _give_way() -> None:
    """Between two slices of the background catch-up: sleep, the interpreter lock given back."""
    time.sleep(PAUSE_S)


def scheduled_checkpointer(
    chain_path: str,
    *,
    origin: str | None = None,
    signing_key: str | None = None,
    every_records: int = DEFAULT_EVERY_RECORDS,
    every_seconds: float = DEFAULT_EVERY_SECONDS,
    witness_policy: str | None = None,
    pushes_per_day: float = DEFAULT_PUSHES_PER_DAY,
) -> ScheduledCheckpointer:
    """The plugin's checkpointer (see the module docstring). Never raises for a key or a policy: what
    cannot be used is logged (one line, never a key's content) and left out."""
    signer, unsigned = _signer(signing_key, origin)
    log_origin = origin or (signer.name if signer is not None else default_origin(chain_path))
    scheduled = ScheduledCheckpointer(
        Checkpointer(chain_path, log_origin, signer),
        every_records,
        every_seconds,
        background=True,  # a due checkpoint never runs inside a spawn
    )
    if witness_policy is not None and signer is None:
        unsigned = (unsigned or "no signing key") + f"; not pushed to the witnesses of {witness_policy}"
    elif witness_policy is not None:
        _witness(scheduled, witness_policy, pushes_per_day)
    if unsigned is not None:
        _LOG.warning("route-shadow: checkpoints unsigned: %s", unsigned)
    return scheduled


def _signer(signing_key: str | None, origin: str | None) -> tuple[Signer | None, str | None]:
    """The signing key, or None and why it is not used."""
    if signing_key is None:
        return None, None
    try:
        signer = read_signer_file(signing_key)
    except KeyFileError as exc:
        return None, str(exc)
    if origin is not None and origin != signer.name:
        return None, (
            f"the signing key is named {signer.name!r} but the origin is set to {origin!r}, and a log's key "
            "is named after its origin (C2SP tlog-checkpoint): unset the origin to use the key's name, or "
            f"generate a key with --name {origin}"
        )
    return signer, None


def _witness(scheduled: ScheduledCheckpointer, path: str, pushes_per_day: float) -> None:
    """Push the checkpoints to the witnesses of the policy at ``path``; a policy that cannot be used is
    logged, one line, and nothing is pushed."""
    checkpointer = scheduled.checkpointer
    try:
        policy = read_policy_file(path)
        witnesses = CheckpointWitnessing(
            checkpointer.directory,
            checkpointer.origin,
            policy,
            pushes_per_day=pushes_per_day,
            exclusive=scheduled.exclusive,
        )
    except (PolicyError, WitnessConfigError) as exc:
        _LOG.warning("route-shadow: checkpoints not pushed to witnesses: %s: %s", path, exc)
        return
    if not witnesses.endpoints:
        _LOG.warning("route-shadow: checkpoints not pushed to witnesses: %s names no witness URL", path)
        return
    assert checkpointer.signer is not None
    mine = str(checkpointer.signer.verifier())
    if policy.logs and mine not in {str(log.verifier) for log in policy.logs}:
        _LOG.warning(
            "route-shadow: the witness policy %s has no `log` line with this log's key %s: "
            "verifiers using it will not accept these checkpoints",
            path,
            mine,
        )
    scheduled.witness_with(witnesses)
    witnesses.learn_sizes(empty_tree_note(checkpointer.origin, checkpointer.signer))
    checkpointer.witness_floor = witnesses.floor
