"""``DecisionChain``: the append side of the decision chain (ADR-0139 D6).

An append is: lock, check, write, release (``DecisionChain._append``). The head a new record links
to is read from disk, under an exclusive ``flock`` on the chain file: a restarted process, a second
process and a second thread all continue one chain instead of forking private ones. A descriptor that
saw the file last (same inode, same size) reuses the head it wrote; otherwise a bounded tail read finds
the last line (``chain.head``).

A record is one ``write(2)`` of one line on an ``O_APPEND`` descriptor. What else an append may do
first lives beside this module: finishing a torn tail (``chain.quarantine``), writing records an
exiting process left in the spill file, or a killed one in its waiting file (``chain.spill``), and the
records that waited in this writer's backlog (``chain.backlog``); with ``fsync`` durability, the
shared sync after it (``chain.group_commit``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal, NoReturn

from otel_route_shadow.chain.backlog import (
    BACKLOG_RECORDS,
    DROPPED_REASON,
    REASON_CHAIN_CORRUPT,
    REASON_WRITE_FAILED,
    Backlog,
    write_failure_reason,
)
from otel_route_shadow.chain.cut import cut_pending, resume_cut
from otel_route_shadow.chain.errors import ChainCorruptError, ChainLockTimeout, ChainPayloadError
from otel_route_shadow.chain.group_commit import LOCK_POLL_S, GroupCommit
from otel_route_shadow.chain.head import read_head, tail_head
from otel_route_shadow.chain.lost import LostRecords
from otel_route_shadow.chain.quarantine import TailQuarantine
from otel_route_shadow.chain.reader import iter_records, open_chain
from otel_route_shadow.chain.record import (
    GENESIS_HASH,
    MAX_ENTRY_BYTES,
    PAYLOAD_BUDGET,
    ChainHead,
    ChainRecord,
    EncodedPayload,
    encode_payload,
    encode_record,
    fit_payload,
)
from otel_route_shadow.chain.sanitize import sanitize_payload
from otel_route_shadow.chain.spill import Spill
from otel_route_shadow.chain.verify import VerifyResult, verify_chain
from otel_route_shadow.chain.waiting import WaitingFile
from otel_route_shadow.chain.written import LineListener, WrittenLine
from otel_route_shadow.files import remove_temporaries, write_all
from otel_route_shadow.locking import flock_bounded
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.worker import AFTER_FORK

__all__ = ["DecisionChain", "Durability"]

Durability = Literal["flush", "fsync"]

MARKER_RECHECK_NS: Final = 1_000_000_000
"""How long a writer goes without looking at the disk for what other processes change (a pending
quarantine marker, a spill or lost file, a cut left unfinished): see ``DecisionChain._look_due``."""


class DecisionChain:
    """An append-only, hash-linked JSON-lines chain of sanitized decision records.

    ``durability``:

    * ``"flush"`` (default): ``append`` returns once the line is written to the operating system. The
      record survives the process being killed, not a power loss or a kernel crash.
    * ``"fsync"``: ``append`` returns once the data is on stable storage (``fdatasync``). Concurrent
      appenders, threads and processes alike, share fsyncs (``chain.group_commit``).

    ``lock_timeout`` (seconds; None, the default: wait as long as it takes): the longest an append
    waits for another thread of this instance and the chain's file lock, in all. :meth:`append` then
    raises :class:`ChainLockTimeout`; :meth:`submit` keeps the record in a bounded backlog of
    ``backlog`` records instead, written in order before the next record (or by :meth:`flush`; at exit
    :meth:`spill` keeps what is left in the spill file for the next writer). The backlog's records
    are in this writer's waiting file too (``chain.waiting.WaitingFile``) until written: a process
    killed before it writes them leaves them there, for the next writer's look. With ``"fsync"`` it
    bounds the wait for the ``.sync`` lock too: past it the record, already written, is left with ``flush``
    durability (logged once; counted in ``sync_timeouts``).

    ``listener`` (also settable as the attribute): told of every line this instance writes, so a
    caller that needs the lines (the checkpointer) never reads them back. It is called once per line,
    with a :class:`WrittenLine` (the line's bytes and record hash, known where the line is built), for
    every kind of line: the caller's records, records from the backlog and the spill file,
    ``records-dropped`` and ``chain-quarantine`` events. The listener costs the append no hashing:
    whoever needs a leaf hash computes it (:meth:`WrittenLine.leaf_hash`), in its own thread.
    Contract:

    * calls come in file order for this instance, after the chain's file lock is released and before
      the append returns, under this instance's thread lock (so calls never overlap);
    * lines of other instances and processes are not reported: a line whose ``offset`` is not the
      previous line's ``offset + length`` follows bytes someone else wrote (or a torn tail this
      instance moved to quarantine);
    * a reported line is never truncated: only bytes after the last LF are ever cut;
    * the listener must be quick, must not call back into this log, and should not raise: an exception
      is logged once and the append goes on (its line is written);
    * with ``"fsync"``, the line may not be synced yet when it is reported.

    Instances are thread-safe and may be shared; separate instances and separate processes on one path
    coordinate through the file lock. After ``fork`` the child reopens its descriptors lazily, and
    leaves the parent's backlog to the parent.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
        backlog: int = BACKLOG_RECORDS,
        listener: LineListener | None = None,
    ) -> None:
        if durability not in ("flush", "fsync"):
            raise ValueError(f"durability must be 'flush' or 'fsync', not {durability!r}")
        if lock_timeout is not None and lock_timeout < 0:
            raise ValueError(f"lock_timeout must be >= 0 seconds, not {lock_timeout}")
        self._path = os.fspath(path)
        self._durability: Durability = durability
        self._lock_timeout = lock_timeout
        self._waiting = WaitingFile(self._path)
        self._backlog = Backlog(backlog, self._waiting)
        self._dir = os.path.dirname(os.path.abspath(self._path))
        self._lock = threading.Lock()
        self._fd = -1
        self._fds_lock = threading.Lock()
        """Guards ``_syncing`` and ``_retired``: held for their bookkeeping and ``os.close`` only."""
        self._syncing: dict[int, int] = {}
        """Group commits in flight per descriptor (``fsync``: they run after ``_lock`` is released)."""
        self._retired: set[int] = set()
        """Descriptors no longer the chain's that a commit in flight still syncs; the last one closes."""
        self._identity: tuple[int, int] = (0, 0)
        self._known_size = -1
        self._head: ChainHead | None = None
        self._looked: int | None = None
        """When this instance last looked at the disk for what other processes change (monotonic ns;
        None: never)."""
        self._spill_due = True
        """Look for a spill file at the next append (the first one, after :meth:`spill`, and while a
        spill file still holds entries: each append takes one batch)."""
        self._started = False
        """Whether the temporaries a killed writer left beside the chain were removed."""
        self._commit = GroupCommit(self._path, lock_timeout)
        self._torn = TailQuarantine(self._path, self._write_event, self._commit.lower)
        self._spill = Spill(self._path, lock_timeout)
        self._lost = LostRecords(self._path, lock_timeout)
        self._reserved = False
        self.listener = listener
        self._written: list[WrittenLine] = []
        self._listener_failed = False
        AFTER_FORK.add(self)

    # -- public -------------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    @property
    def durability(self) -> Durability:
        return self._durability

    @property
    def backlog(self) -> int:
        """Records (and drop events) waiting to be written."""
        return len(self._backlog)

    @property
    def spill_path(self) -> str:
        """Where :meth:`spill` keeps records for the next writer."""
        return self._spill.path

    @property
    def fsyncs(self) -> int:
        """Data syncs this instance performed (group commit makes it smaller than the appends)."""
        return self._commit.fsyncs

    @property
    def sync_timeouts(self) -> int:
        """``fsync`` appends whose group commit gave up at ``lock_timeout`` (written, not synced)."""
        return self._commit.sync_timeouts

    @property
    def quarantines(self) -> int:
        """Torn tails this instance moved to quarantine."""
        return self._torn.quarantines

    def append(self, payload: Mapping[str, Any]) -> ChainRecord:
        """Sanitize ``payload``, link it to the chain head on disk, and write it as one record.

        Credential-shaped substrings and lone surrogates are replaced first, strings too long for one
        tlog-tiles entry are cut, and the record's ``redactions`` names the fields that changed, so
        the record hash is computed over what is actually stored (the returned record holds it).
        Raises :class:`ChainPayloadError` (nothing written) for values the format cannot carry,
        :class:`ChainCorruptError` when the chain's last complete line is not a record,
        :class:`ChainLockTimeout` when the lock did not come within ``lock_timeout``, and ``OSError``
        for the disk's own failures.
        """
        clean, marks = sanitize_payload(payload)
        clean, marks, encoded = fit_payload(clean, marks)
        written = self._append(encoded, self._lock_timeout)
        if written is None:
            raise ChainLockTimeout(f"{self._path}: the chain stayed locked for {self._lock_timeout} s")
        head, prev = written
        return ChainRecord(head.seq, prev, clean, tuple(marks), head.record_hash)

    def submit(self, encoded: EncodedPayload) -> ChainHead | None:
        """Append an encoded payload (``encode_payload``, ``PayloadTemplate.encode``) as :meth:`append`
        does, but never wait longer than ``lock_timeout``: a record that does not get the lock in time
        is kept in the backlog (None is returned) and written before the next one. A record the disk
        refuses (no space, a file-size limit, any ``OSError`` before it is written), or that finds the
        chain's last line not a record (:class:`ChainCorruptError`), is counted, and the chain gets a
        ``records-dropped`` event for it once writing works again (or the next writer does, through the
        spill file); the error is raised. Raises as :meth:`append` does, except for the timeout."""
        if len(encoded.payload) + len(encoded.marks) > PAYLOAD_BUDGET:
            _refuse_size(encoded)
        written = self._append(encoded, self._lock_timeout, count_failure=True)
        if written is None:
            self._backlog.keep(encoded, time.time_ns())
            return None
        return written[0]

    def flush(self, timeout: float | None) -> int:
        """Write the backlog, waiting at most ``timeout`` seconds for the lock (None: as long as it
        takes); return how many entries are still waiting (0 when all were written)."""
        if len(self._backlog):
            self._append(None, timeout)
        return len(self._backlog)

    def spill(self, timeout: float | None) -> int:
        """Move what still waits in the backlog to the spill file beside the chain, which the next
        append of any writer writes into the chain first (for a process about to exit); wait at
        most ``timeout`` seconds for the spill file's lock. Returns how many entries were moved;
        raises ``OSError`` (the entries stay in the backlog) when the file cannot take them."""
        entries, taken = self._backlog.take(None)
        if not entries:
            return 0
        try:
            self._spill.keep(entries, timeout)
        except BaseException:
            self._backlog.restore(entries, taken)
            raise
        self._backlog.settled(taken)
        with self._lock:  # this instance's next append takes them back first, like any writer's
            self._spill_due, self._known_size = True, -1
        return len(entries)

    def mark_lost(self, cause: BaseException) -> int:
        """Count what still waits in the backlog (records, and the counts of dropped ones) in
        ``<chain>.lost``, in place, for the next writer to mark in the chain (for a process about to
        exit when neither the chain nor the spill file can take them, for ``cause``); return how many
        records. Raises ``OSError`` when that file cannot take them either: they are gone then, out of
        the backlog too, so the caller reports that loss once (a later flush does not find them again)."""
        reason = DROPPED_REASON if isinstance(cause, ChainLockTimeout) else REASON_WRITE_FAILED
        if isinstance(cause, OSError) and reason == REASON_WRITE_FAILED:
            reason = write_failure_reason(cause)
        entries, taken = self._backlog.take(None)
        try:
            return self._lost.mark(entries, reason, time.time_ns())
        finally:
            self._backlog.settled(taken)

    def count_unrecorded(self, reason: str) -> None:
        """Count one record that never came to :meth:`submit`, for ``reason``: the chain gets a
        ``records-dropped`` event for it with the next write, as for the disk's refusals."""
        self._backlog.count_dropped(reason, time.time_ns())

    @property
    def backlog_records(self) -> tuple[int, int]:
        """How many records the backlog stands for: those it keeps, and those it only counts as dropped
        (a ``records-dropped`` event, not the records)."""
        return self._backlog.records()

    def head(self) -> ChainHead | None:
        """The last complete record on disk, or None for a missing or empty chain.

        Read-only: a torn tail is ignored, not repaired (the next append does that). Raises
        :class:`ChainCorruptError` when the last complete line is not a record.
        """
        return read_head(self._path)

    def verify(
        self, *, jobs: int = 1, progress: Callable[[int], None] | None = None, strict: bool = False
    ) -> VerifyResult:
        """Walk the chain and report the first seq whose links do not hold (see ``VerifyResult``).

        ``jobs > 1`` verifies large chains in that many processes. ``progress`` is called now and then
        with the number of records verified so far. ``strict`` also rejects payload values that no
        conforming writer emits but that the hash alone cannot flag (floats, non-ASCII keys). Raises
        ``OSError`` only when the file cannot be opened (``FileNotFoundError`` when nothing was ever
        appended); every problem inside the file is a verdict.
        """
        return verify_chain(self._path, jobs=jobs, progress=progress, strict=strict)

    def iter_records(self) -> Iterator[ChainRecord]:
        """Every complete record in file order, streaming; see :func:`iter_records`."""
        return iter_records(self._path)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                self._retire(self._fd)
            self._fd, self._known_size = -1, -1
        self._commit.close()
        self._backlog.close_mirror()

    def __enter__(self) -> DecisionChain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DecisionChain({self._path!r}, durability={self._durability!r})"

    # -- one append: lock, check, write, release ----------------------------------------------------
    def _append(
        self, encoded: EncodedPayload | None, timeout: float | None, *, count_failure: bool = False
    ) -> tuple[ChainHead, str] | None:
        """Write the backlog and then ``encoded`` under one file lock; return the new head and the
        previous hash, or None (nothing written) when the locks did not come within ``timeout`` (one
        deadline for this instance's lock and the file's, reopened or not). With ``count_failure``, an
        ``OSError`` or a :class:`ChainCorruptError` that keeps ``encoded`` off the chain counts it as
        dropped."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return None
        written = False
        try:
            locked = self._lock_file(deadline)
            if locked is None:
                return None
            fd, size, look = locked
            try:
                head, size = self._checked_head(fd, size, look)
                if len(self._backlog):
                    head, size = self._write_backlog(fd, head, size)
                prev = GENESIS_HASH if head is None else head.record_hash
                if encoded is not None:
                    head, size = self._write_line(fd, head, size, encoded)
                    written = True
                    if not self._reserved:  # once the disk took a record: room for a full one later
                        self._reserved = True
                        self._lost.reserve()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                if self._written:
                    self._tell_listener()
            identity = self._identity
            if self._durability == "fsync":  # counted before the lock goes: no one closes fd meanwhile
                with self._fds_lock:
                    self._syncing[fd] = self._syncing.get(fd, 0) + 1
        except (OSError, ChainCorruptError) as exc:  # corrupt: no head to link to, the record refused
            if count_failure and not written:
                reason = write_failure_reason(exc) if isinstance(exc, OSError) else REASON_CHAIN_CORRUPT
                self._backlog.count_dropped(reason, time.time_ns())
            raise
        finally:
            self._lock.release()
        if self._durability == "fsync":
            self._commit_on(fd, identity, size)
        return (head, prev) if head is not None else None

    def _commit_on(self, fd: int, identity: tuple[int, int], size: int) -> None:
        """The group commit of an append, outside the chain's lock; the last commit in flight on a
        retired descriptor closes it."""
        try:
            self._commit.commit(fd, identity, size)
        finally:
            with self._fds_lock:
                self._syncing[fd] -= 1
                if not self._syncing[fd]:
                    del self._syncing[fd]
                    if fd in self._retired:
                        self._retired.remove(fd)
                        _close(fd)

    def _look_due(self) -> bool:
        """Whether this append looks at the disk for what other processes change: a pending quarantine
        marker, a spill or lost file, a cut left unfinished (on the first append, then at most once per
        ``MARKER_RECHECK_NS``; one moment for all of them, so a look costs one clock read and its
        ``stat`` calls). Stamps the look when it is due; called under the chain's lock."""
        now = time.monotonic_ns()
        if self._looked is not None and now - self._looked < MARKER_RECHECK_NS:
            return False
        self._looked = now
        return True

    def _checked_head(self, fd: int, size: int, look: bool) -> tuple[ChainHead | None, int]:
        """The head to link to: the one this instance wrote, when the file is as it left it and no look
        is due (``look``: :meth:`_look_due`); otherwise whatever :meth:`_prepare` finds.

        The only marker a skipped look can miss belongs to a second appender that died between
        truncating a third one's torn tail and recording that: the bytes this instance links to are
        intact, so appending is safe, and the owed event is appended by the next look (the quarantine
        finds it missing after any number of records). Looking on every append would put a ``stat``
        on every seam call.
        """
        if self._head is not None and size == self._known_size and not self._spill_due and not look:
            return self._head, size
        return self._prepare(fd, size, look)

    def _prepare(self, fd: int, size: int, look: bool) -> tuple[ChainHead | None, int]:
        """Finish an interrupted quarantine, quarantine a torn tail, write what a spill file holds (when
        ``look`` or this instance spilled), and return the head to link to."""
        owed: list[dict[str, Any]] = []
        if self._torn.pending():
            owed, size = self._torn.resume(fd, size)
        if size == self._known_size:
            head = self._head
        else:
            head, complete = tail_head(fd, size)
            if complete != size:
                head, size = self._torn.quarantine(fd, head, complete, size, owed)
                owed = []
        if owed:
            head, size = self._torn.record_owed(fd, head, size, owed)
        self._known_size, self._head = size, head
        if not self._started:
            remove_temporaries(self._dir)
            self._started = True
        if self._spill_due or look:
            self._spill_due = False
            if self._spill.pending():
                head, size, self._spill_due = self._spill.write_into(fd, head, size, self._write_line)
            else:  # a batch per append: a dead writer's waiting records when the spill has none
                head, size, self._spill_due = self._waiting.reap(fd, head, size, self._write_line)
            if self._lost.pending():
                head, size = self._lost.write_into(fd, head, size, self._write_line)
        return head, size

    def _write_backlog(self, fd: int, head: ChainHead | None, size: int) -> tuple[ChainHead | None, int]:
        entries, taken = self._backlog.take(size)
        for index, entry in enumerate(entries):
            try:
                head, size = self._write_line(fd, head, size, entry)
            except BaseException:
                self._backlog.restore(entries[index:], taken)
                raise
        self._backlog.settled(taken)
        return head, size

    def _write_line(
        self, fd: int, head: ChainHead | None, size: int, encoded: EncodedPayload
    ) -> tuple[ChainHead, int]:
        """Write ``encoded`` as the record after ``head`` at ``size``, the one way every line is
        written; the listener hears of it after the lock is released."""
        seq = 0 if head is None else head.seq + 1
        prev = GENESIS_HASH if head is None else head.record_hash
        line, record_hash = encode_record(seq, prev, encoded.payload, encoded.marks)
        self._write(fd, line, size)
        if self.listener is not None:
            self._written.append(WrittenLine(size, line, record_hash, prev))
        self._known_size = size + len(line)
        self._head = ChainHead(seq, record_hash)
        return self._head, self._known_size

    def _write_event(
        self, fd: int, head: ChainHead | None, size: int, payload: Mapping[str, Any]
    ) -> tuple[ChainHead, int]:
        """Append a chain event (written by the chain itself, not sanitized) and sync it."""
        head, size = self._write_line(fd, head, size, encode_payload(dict(payload), []))
        os.fsync(fd)
        return head, size

    def _write(self, fd: int, data: bytes, size: int) -> None:
        """Write ``data`` fully at the end (one ``write`` unless it is cut short); on failure remove the
        partial line if at all possible."""
        try:
            written = os.write(fd, data)
            if written < len(data):
                write_all(fd, memoryview(data)[written:])
        except BaseException:
            with contextlib.suppress(OSError):  # else the next append quarantines the torn tail
                os.ftruncate(fd, size)
            self._known_size = -1
            raise

    def _tell_listener(self) -> None:
        """Hand the lines written under the lock just released to the listener, in order."""
        lines, self._written = self._written, []
        listener = self.listener
        if listener is None:
            return
        for line in lines:
            try:
                listener(line)
            except Exception as exc:  # the line is written; the listener's failure is its own
                if not self._listener_failed:
                    self._listener_failed = True
                    _LOG.warning("route shadow: the chain's line listener raised %s", type(exc).__name__)

    # -- descriptors and the lock -------------------------------------------------------------------
    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): the inherited descriptors share the
        parent's open file description, and with it the parent's flock, so they must not be used (or
        closed: the parent may hold them)."""
        for fd in (self._fd, *self._retired):  # the parent's commits in flight are not the child's
            if fd >= 0:
                _close(fd)  # closes the child's reference only; the parent's lock is unaffected
        self._lock = threading.Lock()
        self._fd = -1
        self._fds_lock = threading.Lock()
        self._syncing, self._retired = {}, set()
        self._known_size, self._head, self._written = -1, None, []
        self._commit.forget()
        self._waiting.forget()  # the parent's records (and their file) are the parent's
        self._backlog = Backlog(self._backlog.capacity, self._waiting)

    def _open(self) -> int:
        self._fd = open_chain(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        st = os.fstat(self._fd)
        self._identity = (st.st_dev, st.st_ino)
        self._known_size, self._head = -1, None
        self._commit.track(self._identity)
        return self._fd

    def _lock_file(self, deadline: float | None) -> tuple[int, int, bool] | None:
        """Exclusive lock on the file currently at the path; returns the descriptor, its size and
        whether this append looks at the disk (:meth:`_look_due`, decided once the lock is first
        held), or None when the lock did not come by ``deadline`` (``time.monotonic``; None: none).

        A descriptor can outlive its path (the file replaced or removed, or closed as a segment by a
        cut: ``chain.cut``); writing to it would put records where no reader looks, so the inode is
        re-checked under the lock, and the descriptor reopened when the path names another file.
        """
        fd = self._fd if self._fd >= 0 else self._open()
        look: bool | None = None
        cut_due = False
        for _ in range(8):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not flock_bounded(fd, fcntl.LOCK_EX, left, LOCK_POLL_S):
                return None
            if look is None:
                look = cut_due = self._look_due()
            try:
                current = os.stat(self._path)
            except FileNotFoundError:
                current = None
            # The path's stat is the descriptor's too when it names the same inode: one syscall
            # answers both "is this still the chain?" and "how long is it?".
            if current is not None and (current.st_dev, current.st_ino) == self._identity:
                if not (cut_due and self._finished_cut(fd, current.st_size)):
                    return fd, current.st_size, look
                cut_due = False
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._fd = -1  # before it may close: its number must not name a descriptor of the host's
            self._retire(fd)
            fd = self._open()
        raise OSError(f"{self._path}: the chain file keeps being replaced; not appending")

    def _retire(self, fd: int) -> None:
        """``fd`` is no longer the chain's descriptor (the path names another file, or :meth:`close`):
        close it now, or leave that to the last group commit in flight on it (:meth:`_commit_on`)."""
        with self._fds_lock:
            if self._syncing.get(fd):
                self._retired.add(fd)
            else:
                _close(fd)

    def _finished_cut(self, fd: int, size: int) -> bool:
        """Under the lock, when a look is due: finish or undo a cut a killed process left
        (``chain.cut``); True when it was finished, so the path names the new live file."""
        try:
            return cut_pending(self._path) and resume_cut(self._path, fd, size)
        except BaseException:  # never left holding the lock: every other writer would wait on it
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise


def _close(fd: int) -> None:
    """Close a descriptor this writer is done with; it is gone whatever ``close`` reports (Linux), and
    every line written through it was reported written already."""
    with contextlib.suppress(OSError):
        os.close(fd)


def _refuse_size(encoded: EncodedPayload) -> NoReturn:
    size = len(encoded.payload) + len(encoded.marks)
    raise ChainPayloadError(
        f"record would exceed {MAX_ENTRY_BYTES} bytes ({size} bytes of payload and marks); "
        "encode it with encode_payload, which cuts it to fit"
    )
