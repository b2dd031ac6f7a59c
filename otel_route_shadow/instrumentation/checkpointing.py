"""When the plugin checkpoints its chain (every N records or T seconds, in one background thread, and
at shutdown), with which key and origin, and to which witnesses it pushes the checkpoints.

``logstore.Checkpointer`` does the work (catch up, prove, sign, publish) synchronously, bounded, with no
thread and no clock. :class:`ScheduledCheckpointer` gives it the plugin's cadence. The chain's writer
tells it of every line this process writes, once per line (``line_written``, a ``DecisionChain``
listener): the line is counted and, when a checkpoint is due (``every_records`` lines, or the first line
``every_seconds`` after the last checkpoint, or a catch-up left lines for later), one daemon thread
(a ``Worker``) is woken to run it, so no checkpoint ever runs inside a spawn. The lines (the very bytes
written, and their record hashes) are kept until a checkpoint covers them, so the catch-up reads and
checks only the lines of other processes, and hashes this process's own in its thread, not in the
spawn. What is kept is bounded (twice ``every_records`` lines, ``KEPT_BYTES_MAX`` bytes): past it, or
once the checkpointer refused, the lines are dropped and read from the chain instead. The thread's
catch-up gives the interpreter back after every slice of lines (``PAUSE_S``), so a host thread waiting
for it waits for one slice at most. ``checkpoint_now`` (at uninstrument and
provider shutdown) runs one synchronously with the larger shutdown bounds (up to ``SHUTDOWN_STEPS``
checkpointer calls while the tree is behind: after a cut, the first only reaches the live file), waiting
at most ``SHUTDOWN_WAIT_S`` for a checkpoint the thread is running; ``close`` stops the thread for good
(a line written later is not kept and wakes nothing: a later checkpoint reads it from the chain). A
forked child starts its own thread on its first due checkpoint (the parent's does not exist there) and
does not wait for a lock the fork copied in a held state.

The same thread cuts the chain (``logstore.cut_signed``: its live file closed as a segment, the next
one started with an anchor carrying the checkpoint of the cut's size) after a checkpoint, once the
live file holds ``segment_bytes`` bytes or is ``segment_seconds`` old (:class:`SegmentSchedule`; with
a retention of K records and no ``segment_bytes`` set, once it holds K/16 records: :func:`segment_schedule`);
it waits at most ``CUT_LOCK_WAIT_S`` for the chain's lock, and a cut that fails is logged once and
tried again after the next checkpoint. A spawn never cuts. After a cut, with a retention
(``retention_records``), it prunes the chain to the newest records (``retention.HostRetention``),
outside the schedule's lock (a cut and a checkpoint hold it): a prune gzips whole segments for seconds,
and ``checkpoint_now`` and a witness's cosignature (``exclusive``) never wait for one.

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
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

from otel_route_shadow.chain import SEGMENTS_SUFFIX, ChainError, WrittenLine
from otel_route_shadow.core import redact_text
from otel_route_shadow.instrumentation.retention import HostRetention
from otel_route_shadow.logstore import (
    Checkpointer,
    KeyFileError,
    SignedCheckpoint,
    cut_signed,
    default_origin,
    empty_tree_note,
    read_signing_keys,
    read_witness_policy_file,
)
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.tlog import (
    HASH_SIZE,
    Checkpoint,
    CheckpointError,
    Signer,
    WitnessPolicy,
    WitnessPolicyError,
)
from otel_route_shadow.witness import DEFAULT_PUSHES_PER_DAY, CheckpointWitnessing, WitnessConfigError
from otel_route_shadow.worker import AFTER_FORK, Worker, WorkerName

__all__ = [
    "DEFAULT_EVERY_RECORDS",
    "DEFAULT_EVERY_SECONDS",
    "DEFAULT_PUSHES_PER_DAY",
    "DEFAULT_SEGMENT_BYTES",
    "DEFAULT_SEGMENT_SECONDS",
    "DISK_FACTOR_TARGET",
    "KEPT_BYTES_MAX",
    "PAUSE_S",
    "RETENTION_SEGMENTS",
    "SHUTDOWN_PUSH_S",
    "SHUTDOWN_STEPS",
    "SHUTDOWN_WAIT_S",
    "ScheduledCheckpointer",
    "SegmentSchedule",
    "scheduled_checkpointer",
    "segment_schedule",
]


DEFAULT_EVERY_RECORDS: Final = 1000
"""A checkpoint at least every 1000 records ..."""
DEFAULT_EVERY_SECONDS: Final = 10.0
"""... or on the first record 10 seconds after the last one."""
DEFAULT_SEGMENT_BYTES: Final = 256 * 1024 * 1024
"""The chain is cut once its live file holds 256 MiB (about 100,000 records) ..."""
DEFAULT_SEGMENT_SECONDS: Final = 7 * 86_400.0
"""... or is 7 days old."""
RETENTION_SEGMENTS: Final = 16
"""With a retention of K records and no segment size set, the chain is cut once its live file holds K/16
records: the retention keeps at most K records plus two segments (the one its boundary falls in, and the
live file), 1.125x of K plus the records a checkpoint's cadence adds to each."""
DISK_FACTOR_TARGET: Final = 1.2
"""A retention whose segments may keep more than this multiple of its records is one warning line at start."""
NOMINAL_RECORD_BYTES: Final = 2_500
"""A decision record's bytes (the demo's records), to count the records of a segment set in bytes."""
CUT_LOCK_WAIT_S: Final = 1.0
"""Longest the background thread waits for the chain's lock to cut (spawns waiting meanwhile keep their
records in their backlog past their own lock timeout)."""
SHUTDOWN_WAIT_S: Final = 5.0
"""Longest ``checkpoint_now`` waits for a checkpoint already running in the background thread."""
SHUTDOWN_MAX_LEAVES: Final = 1 << 20
"""Most lines each of ``checkpoint_now``'s calls adds to the tree (``SHUTDOWN_STEPS`` calls at most)."""
SHUTDOWN_STEPS: Final = 3
"""Most checkpointer calls ``checkpoint_now`` makes while the tree is behind the chain: one call crosses at
most one segment boundary, so the first after a cut only steps from the closed segment into the live file
(and signs nothing new)."""
SHUTDOWN_MAX_BYTES: Final = 4 * 1024 * 1024 * 1024
SHUTDOWN_PUSH_S: Final = 3.0
"""Longest ``checkpoint_now`` spends pushing the last checkpoint to the witnesses (all of them)."""
KEPT_BYTES_MAX: Final = 8 * 1024 * 1024
"""Most bytes of appended lines kept for the next checkpoint (and at most twice ``every_records`` lines)."""
PAUSE_S: Final = 0.0001
"""How long the background thread sleeps between two slices of a catch-up, the interpreter lock
given back: long enough that a host thread waiting for the lock takes it."""


class SegmentSchedule:
    """When the chain at ``chain_path`` is due a cut: its live file holds ``max_bytes`` bytes or
    ``max_records`` records, or is ``max_seconds`` old (0: never by that measure). The age runs from
    the last cut (the change time of the newest closed segment, a file nothing writes after its cut),
    or, for a chain never cut, from when this object first saw the live file."""

    def __init__(self, chain_path: str, max_bytes: int, max_seconds: float, max_records: int = 0) -> None:
        self.chain_path = chain_path
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.max_records = max_records
        self._live: tuple[int, int] | None = None
        self._since = 0.0
        self.judged: tuple[int, int] | None = None
        """The (device, inode) of the live file the last ``due`` looked at: the cut is of that file only."""

    def due(self, tree_records: int = 0, tree_bytes: int = 0) -> bool:
        """Whether a cut is due now: one ``stat``, a folder listing when the live file changed. The live
        file's records are its size over the mean record size of the ``tree_records`` records in
        ``tree_bytes`` bytes that the tree holds of the file it ends in (``Checkpointer.live_records`` and
        ``offset``): a tree behind the chain delays no cut. Without them, never due by records."""
        try:
            st = os.stat(self.chain_path)
        except OSError:
            return False
        self.judged = (st.st_dev, st.st_ino)
        if self.max_bytes and st.st_size >= self.max_bytes:
            return True
        if self.max_records and tree_records and st.st_size * tree_records >= self.max_records * tree_bytes:
            return True
        if not self.max_seconds:
            return False
        if self._live != (st.st_dev, st.st_ino):
            self._live, self._since = (st.st_dev, st.st_ino), self._started()
        return time.time() - self._since >= self.max_seconds

    def disk_factor(self, keep: int, every_records: int) -> float:
        """The most records a retention of ``keep`` leaves on disk, as a multiple of ``keep``: ``keep``
        plus two segments (the one its boundary falls in, and the live file), each cut at the first
        checkpoint (every ``every_records``) after it is due; a segment of ``max_bytes`` holds records
        of ``NOMINAL_RECORD_BYTES``. Infinite when only the age cuts."""
        per = self.max_records or -(-self.max_bytes // NOMINAL_RECORD_BYTES)
        return 1 + 2 * (per + every_records) / keep if per and keep > 0 else math.inf

    def _started(self) -> float:
        folder = self.chain_path + SEGMENTS_SUFFIX
        try:
            newest = max(os.listdir(folder), default=None)
            return time.time() if newest is None else os.lstat(os.path.join(folder, newest)).st_ctime
        except OSError:
            return time.time()


class ScheduledCheckpointer:
    """A ``logstore.Checkpointer`` on the plugin's schedule: see the module docstring. Never raises."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        every_records: int = DEFAULT_EVERY_RECORDS,
        every_seconds: float = DEFAULT_EVERY_SECONDS,
        *,
        background: bool = True,
        segments: SegmentSchedule | None = None,
        retention: HostRetention | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.background = background
        """False: a due checkpoint, cut and prune run in the thread that wrote the line, not in the worker."""
        self.segments = segments
        """When the background thread cuts the chain (None: never)."""
        self.retention = retention
        """What the background thread prunes after a cut (None: nothing)."""
        self._cut_failed: set[str] = set()
        self.every_records = max(1, every_records)
        self.every_seconds = every_seconds
        self._pending = 0
        self._due_at = time.monotonic() + every_seconds
        self._mutex = threading.Lock()
        self._pruning = threading.Lock()
        self._worker = Worker(WorkerName.CHECKPOINTER, self._background)
        self._kept: list[WrittenLine] = []
        self._kept_bytes = 0
        self._kept_end = 0
        """The offset after the last line kept: a line before it means the chain was replaced or cut."""
        self._kept_max = 2 * self.every_records
        self._keeping = True
        """False once the checkpointer refused (it never uses a line again)."""
        self._kept_lock = threading.Lock()
        self._closed = False
        """Set by ``close``, for good: lines written after it are not kept, and no thread starts again."""
        self._closing = threading.Lock()
        """Orders a wake against ``close``: none starts the thread once ``close`` has begun."""
        self.witnesses: CheckpointWitnessing | None = None
        AFTER_FORK.add(self)

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
        """A line this process appended (the chain writer's listener, called once per line): kept until a
        checkpoint covers it, and counted (a due checkpoint runs; see the module docstring). A line that
        does not follow the last one kept (the chain file replaced or cut), or one more than the bounds
        allow, drops what is kept: those lines are read from the chain instead. After ``close`` a line is
        ignored (a later checkpoint reads it from the chain). Never raises."""
        if self._closed:
            return
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
        self._pending += 1
        due = (
            self._pending >= self.every_records
            or self.checkpointer.behind
            or time.monotonic() >= self._due_at
        )
        if not due or self.checkpointer.refused is not None:
            return
        if self.background:
            with self._closing:
                if not self._closed:
                    self._worker.wake()
        else:
            self._step(None)

    def checkpoint_now(self) -> SignedCheckpoint | None:
        """Catch up (with the shutdown bounds) and checkpoint now; the latest checkpoint this process made
        when nothing was appended since (None if none). Never raises."""
        if self.witnesses is not None:
            self.witnesses.wait_learned()  # bounded: nothing is signed before their sizes are known
        made = self._run(
            wait=SHUTDOWN_WAIT_S,
            max_leaves=SHUTDOWN_MAX_LEAVES,
            max_bytes=SHUTDOWN_MAX_BYTES,
            steps=SHUTDOWN_STEPS,
        )
        if self.witnesses is not None:
            self.witnesses.flush(SHUTDOWN_PUSH_S)
        return made or self.checkpointer.last

    def close(self) -> None:
        """Stop the background thread (waiting at most ``SHUTDOWN_WAIT_S``) and the witness pusher's, for
        good: a line written later starts neither again (``checkpoint_now`` still runs in the caller)."""
        with self._closing:
            self._closed = True
        self._worker.stop(SHUTDOWN_WAIT_S)
        if self.witnesses is not None:
            self.witnesses.close()

    def _background(self) -> None:
        """The worker's step, giving the interpreter back between slices of the catch-up."""
        self._step(_give_way)

    def _step(self, pause: Callable[[], None] | None) -> None:
        """A due checkpoint, then a cut when the live file is due, then the retention's prune when due.
        The prune runs outside the schedule's lock (it may take seconds: it gzips whole segments), so
        ``checkpoint_now`` and ``exclusive`` never wait for it: its own lock keeps other prunes out, the
        chain's (its two short steps, and its check at commit that nothing it read changed) keeps it safe
        beside cuts and appends, and a checkpoint meanwhile goes on past a segment it removes
        (``logstore.Checkpointer``). ``_pruning``: one prune at a time in this process (without the worker,
        another thread's step skips it)."""
        self._run(wait=0.0, pause=pause)
        self._cut_when_due()
        if self.retention is not None and self.retention.due and self._pruning.acquire(blocking=False):
            try:
                self.retention.apply()
            finally:
                self._pruning.release()

    def _cut_when_due(self) -> None:
        """After a background checkpoint: cut the chain when its live file is due (under the schedule's
        lock, so no checkpoint runs meanwhile). A failure is logged once per kind; never raises."""
        if (
            self.segments is None
            or self.checkpointer.refused is not None
            or not self.segments.due(self.checkpointer.live_records, self.checkpointer.offset)
        ):
            return
        if not self._mutex.acquire(blocking=False):
            return
        try:
            cut = cut_signed(self.checkpointer, CUT_LOCK_WAIT_S, pause=_give_way, live=self.segments.judged)
            if cut is not None and self.retention is not None:
                self.retention.due = True
        except (ChainError, OSError) as exc:
            kind = type(exc).__name__
            if kind not in self._cut_failed:
                self._cut_failed.add(kind)
                _LOG.warning("route-shadow: the chain was not cut (%s: %s); tried again later", kind, exc)
        finally:
            self._mutex.release()

    def _run(
        self,
        wait: float,
        max_leaves: int | None = None,
        max_bytes: int | None = None,
        pause: Callable[[], None] | None = None,
        steps: int = 1,
    ) -> SignedCheckpoint | None:
        """Checkpoint under the schedule's lock (waiting at most ``wait``): up to ``steps`` checkpointer
        calls while the tree is behind the chain, each within ``max_leaves`` and ``max_bytes``; the last
        checkpoint made."""
        if not self._mutex.acquire(timeout=wait if wait > 0 else 0):
            return None
        try:
            self._pending = 0
            self._due_at = time.monotonic() + self.every_seconds
            with self._kept_lock:
                appended = list(self._kept)
            made = None
            for _ in range(steps):
                made = (
                    self.checkpointer.checkpoint(
                        max_leaves=max_leaves, max_bytes=max_bytes, appended=appended, pause=pause
                    )
                    or made
                )
                if not self.checkpointer.behind:
                    break
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

    def after_fork(self) -> None:
        """In a forked child (called by ``AFTER_FORK``): a lock the parent's thread held was copied held."""
        self._kept_lock = threading.Lock()
        self._closing = threading.Lock()
        self._kept, self._kept_bytes, self._kept_end = [], 0, 0
        self._mutex = threading.Lock()
        self._pruning = threading.Lock()


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
    segment_bytes: int | None = None,
    segment_seconds: float = DEFAULT_SEGMENT_SECONDS,
    witness_policy: str | None = None,
    pushes_per_day: float = DEFAULT_PUSHES_PER_DAY,
    retention_records: int = 0,
    retention_delete: bool = False,
) -> ScheduledCheckpointer:
    """The plugin's checkpointer (see the module docstring). Never raises for a key or a policy: what
    cannot be used is logged (one line, never a key's content) and left out; a retention that cannot be
    applied as configured (no signing key, a policy that cannot be read) is off, one line saying why."""
    signers, unsigned = _signers(signing_key, origin)
    refused = _refused_origin(origin) if origin else None
    if refused is not None:
        origin, signers, unsigned = None, (), f"{refused}: the default origin is used"
    log_origin = origin or (signers[0].name if signers else default_origin(chain_path))
    retention = (
        _retention(chain_path, signers, witness_policy, retention_records, retention_delete)
        if retention_records > 0
        else None
    )
    keep = 0 if retention is None else retention_records
    scheduled = ScheduledCheckpointer(
        Checkpointer(chain_path, log_origin, signers),
        every_records,
        every_seconds,
        background=True,  # a due checkpoint (or cut) never runs inside a spawn
        segments=segment_schedule(chain_path, segment_bytes, segment_seconds, keep, every_records),
        retention=retention,
    )
    if witness_policy is not None and not signers:
        unsigned = (unsigned or "no signing key") + f"; not pushed to the witnesses of {witness_policy}"
    elif witness_policy is not None:
        _witness(scheduled, witness_policy, pushes_per_day)
    if unsigned is not None:
        _LOG.warning("route-shadow: checkpoints unsigned: %s", unsigned)
    return scheduled


def segment_schedule(
    chain_path: str,
    segment_bytes: int | None,
    segment_seconds: float,
    keep: int = 0,
    every_records: int = DEFAULT_EVERY_RECORDS,
) -> SegmentSchedule:
    """When the writer cuts: once the live file holds ``segment_bytes`` bytes when it is set; unset, with a
    retention of ``keep`` records, once it holds ``keep // RETENTION_SEGMENTS`` records; else
    ``DEFAULT_SEGMENT_BYTES``. With a retention whose segments and checkpoint cadence (``every_records``)
    may keep over ``DISK_FACTOR_TARGET`` times its records (``SegmentSchedule.disk_factor``): one warning
    line naming the factor."""
    if segment_bytes is None and keep > 0:
        schedule = SegmentSchedule(chain_path, 0, segment_seconds, max(1, keep // RETENTION_SEGMENTS))
    else:
        size = DEFAULT_SEGMENT_BYTES if segment_bytes is None else segment_bytes
        schedule = SegmentSchedule(chain_path, size, segment_seconds)
    factor = schedule.disk_factor(keep, every_records) if keep > 0 else 1.0
    if factor > DISK_FACTOR_TARGET:
        cut = (
            f"segments of {schedule.max_records} records"
            if schedule.max_records
            else f"segments of {schedule.max_bytes} bytes (records of {NOMINAL_RECORD_BYTES} bytes)"
            if schedule.max_bytes
            else "segments cut by age only"
        )
        _LOG.warning(
            "route-shadow: a retention of %d records, with %s and a checkpoint every %d records, may keep "
            "%s its records on disk (target %.1fx): leave the segment size unset (a cut every %d records) "
            "and checkpoint at least that often",
            keep,
            cut,
            every_records,
            "an unbounded multiple of" if math.isinf(factor) else f"{factor:.2f}x",
            DISK_FACTOR_TARGET,
            max(1, keep // RETENTION_SEGMENTS),
        )
    return schedule


def _retention(
    chain_path: str, signers: tuple[Signer, ...], policy_path: str | None, keep: int, delete: bool
) -> HostRetention | None:
    """The retention of the newest ``keep`` records, with the writer's keys and witness policy; None
    (logged, one line) when it cannot be applied as configured."""
    why = None
    policy: WitnessPolicy | None = None
    if not signers:
        why = "no signing key: no checkpoint says which records are covered"
    elif policy_path is not None:
        try:
            policy = read_witness_policy_file(policy_path)
        except WitnessPolicyError as exc:
            why = f"the witness policy {policy_path} cannot be used: {exc}"
    if why is not None:
        _LOG.warning("route-shadow: retention off, nothing is pruned: %s", why)
        return None
    verifiers = [signer.verifier() for signer in signers]
    return HostRetention(chain_path, keep, verifiers, policy, delete=delete)


def _refused_origin(origin: str) -> str | None:
    """Why a configured origin cannot name the log, or None."""
    try:
        Checkpoint(origin, 0, bytes(HASH_SIZE)).text()  # else every checkpoint would fail
    except CheckpointError as exc:
        return f"the origin set cannot be a checkpoint's ({exc})"
    if redact_text(origin)[1]:  # redacted on spans and records, published in full by every checkpoint
        return "the origin set looks like a credential (every checkpoint would publish it in full)"
    return None


def _signers(signing_key: str | None, origin: str | None) -> tuple[tuple[Signer, ...], str | None]:
    """The signing keys (the key file's, all of one name), or none and why they are not used."""
    if signing_key is None:
        return (), None
    try:
        signers = read_signing_keys(signing_key)
    except KeyFileError as exc:
        return (), str(exc)
    if origin is not None and origin != signers[0].name:
        return (), (
            f"the signing key is named {signers[0].name!r} but the origin is set to {origin!r}, and a log's key "
            "is named after its origin (C2SP tlog-checkpoint): unset the origin to use the key's name, or "
            f"generate a key with --name {origin}"
        )
    return signers, None


def _witness(scheduled: ScheduledCheckpointer, path: str, pushes_per_day: float) -> None:
    """Push the checkpoints to the witnesses of the policy at ``path``; a policy that cannot be used is
    logged, one line, and nothing is pushed."""
    checkpointer = scheduled.checkpointer
    try:
        policy = read_witness_policy_file(path)
        witnesses = CheckpointWitnessing(
            checkpointer.directory,
            checkpointer.origin,
            policy,
            pushes_per_day=pushes_per_day,
            exclusive=scheduled.exclusive,
        )
    except (WitnessPolicyError, WitnessConfigError) as exc:
        _LOG.warning("route-shadow: checkpoints not pushed to witnesses: %s: %s", path, exc)
        return
    if not witnesses.endpoints:
        _LOG.warning("route-shadow: checkpoints not pushed to witnesses: %s names no witness URL", path)
        return
    mine = [str(signer.verifier()) for signer in checkpointer.signers]
    if policy.logs and not set(mine) & {str(log.verifier) for log in policy.logs}:
        _LOG.warning(
            "route-shadow: the witness policy %s has no `log` line with this log's key %s: "
            "verifiers using it will not accept these checkpoints",
            path,
            " or ".join(mine),
        )
    scheduled.witness_with(witnesses)
    witnesses.learn_sizes(empty_tree_note(checkpointer.origin, checkpointer.signers))
    checkpointer.witness_floor = witnesses.floor
