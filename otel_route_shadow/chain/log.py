"""``RoutingAuditLog``: the append side of the decision chain (ADR-0139 D6).

An append is: lock, check, write, release (``RoutingAuditLog._append``). The head a new record links
to is read from disk, under an exclusive ``flock`` on the chain file: a restarted process, a second
process and a second thread all continue one chain instead of forking private ones. Reading it is
cheap regardless of chain length: a descriptor that saw the file last (same inode, same size) reuses
the head it wrote; otherwise a bounded tail read finds the last line.

A writer with a ``lock_timeout`` never waits longer than that for the lock: what cannot be written in
time waits in a bounded backlog (``chain.backlog``) and is written first by the next append.

A record is one ``write(2)`` of one line on an ``O_APPEND`` descriptor. A process killed mid-write
leaves at most one torn final line; the next append moves those bytes to a quarantine file beside the
chain and records that move as a chain event before it appends its own record (the torn-tail policy,
``docs/chain-format.md``). Each step of that policy is idempotent and resumable, keyed by a small
marker file, so a crash *during* the quarantine is finished by whoever appends next.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal

import orjson

from otel_route_shadow.chain.backlog import BACKLOG_RECORDS, Backlog
from otel_route_shadow.chain.errors import (
    ChainCorruptError,
    ChainFormatError,
    ChainLockTimeout,
    ChainPayloadError,
)
from otel_route_shadow.chain.reader import iter_records, open_chain
from otel_route_shadow.chain.record import (
    GENESIS_HASH,
    LINE_OVERHEAD,
    MAX_LINE_BYTES,
    QUARANTINE_KIND,
    ChainHead,
    ChainRecord,
    EncodedPayload,
    encode_payload,
    encode_record,
    parse_record_line,
)
from otel_route_shadow.chain.sanitize import sanitize_payload
from otel_route_shadow.chain.verify import VerifyResult, verify_chain
from otel_route_shadow.locking import flock_within

__all__ = ["Durability", "RoutingAuditLog", "open_chain", "read_head"]

Durability = Literal["flush", "fsync"]

_TAIL_WINDOW: Final = 8 * 1024
_COPY_BLOCK: Final = 1 << 20
_MODE: Final = 0o640
_LOCK_POLL_S: Final = 0.002
"""How often a writer with a lock timeout retries a contended file lock."""
MARKER_RECHECK_NS: Final = 1_000_000_000
"""How long an append that finds the chain as it left it may go without looking for a pending
quarantine marker (see ``RoutingAuditLog._prepare``)."""
_WATERMARK: Final = struct.Struct("<QQQ")
"""Shared durable watermark in the ``.sync`` file: device, inode, durable byte offset."""

_LOG: Final = logging.getLogger("otel_route_shadow")

_INSTANCES: weakref.WeakSet[RoutingAuditLog] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for log in list(_INSTANCES):
        log._forget_descriptors()


os.register_at_fork(after_in_child=_reset_after_fork)


class RoutingAuditLog:
    """An append-only, hash-linked JSON-lines chain of sanitized decision records.

    ``durability``:

    * ``"flush"`` (default): ``append`` returns once the line is written to the operating system. The
      record survives the process being killed, not a power loss or a kernel crash.
    * ``"fsync"``: ``append`` returns once the data is on stable storage (``fdatasync``). Concurrent
      appenders, threads and processes alike, share fsyncs: one leader's sync covers every line written
      before it started (group commit), tracked by a small ``<chain>.sync`` watermark file.

    ``lock_timeout`` (seconds; None, the default: wait as long as it takes): the longest an append
    waits for the chain's file lock (and for another thread of this instance). :meth:`append` then
    raises :class:`ChainLockTimeout`; :meth:`submit` keeps the record in a bounded backlog of
    ``backlog`` records instead, written in order before the next record (or by :meth:`flush`).
    With ``"fsync"`` it bounds the wait for the ``.sync`` lock too: past it the record, already
    written, is left with ``flush`` durability (logged once; counted in ``sync_timeouts``).

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
    ) -> None:
        if durability not in ("flush", "fsync"):
            raise ValueError(f"durability must be 'flush' or 'fsync', not {durability!r}")
        if lock_timeout is not None and lock_timeout < 0:
            raise ValueError(f"lock_timeout must be >= 0 seconds, not {lock_timeout}")
        self._path = os.fspath(path)
        self._durability: Durability = durability
        self._lock_timeout = lock_timeout
        self._backlog = Backlog(backlog)
        self._dir = os.path.dirname(os.path.abspath(self._path))
        self._name = os.path.basename(self._path)
        self._marker = self._path + ".quarantine-pending"
        self._sync_path = self._path + ".sync"
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._fd = -1
        self._sync_fd = -1
        self._retired: list[int] = []
        self._identity: tuple[int, int] = (0, 0)
        self._known_size = -1
        self._head: ChainHead | None = None
        self._durable = 0
        self._lowerings_owed = 0
        """Watermark lowerings a torn-tail repair could not make within ``lock_timeout`` (counter)."""
        self._lowerings_settled = 0
        """The value of ``_lowerings_owed`` the last forced sync of this instance covered."""
        self._marker_checked = 0
        self.fsyncs = 0
        """Data syncs this instance performed (group commit makes it smaller than the appends)."""
        self.quarantines = 0
        """Torn tails this instance moved to quarantine."""
        self.sync_timeouts = 0
        """``fsync`` appends whose group commit gave up at ``lock_timeout`` (written, not synced)."""
        _INSTANCES.add(self)

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

    def append(self, payload: Mapping[str, Any]) -> ChainRecord:
        """Sanitize ``payload``, link it to the chain head on disk, and write it as one record.

        Credential-shaped substrings and lone surrogates are replaced first, and the record's
        ``redactions`` names the fields that changed, so the record hash is computed over what is
        actually stored. Raises :class:`ChainPayloadError` (nothing written) for values the format
        cannot carry, :class:`ChainCorruptError` when the chain's last complete line is not a record,
        :class:`ChainLockTimeout` when the lock did not come within ``lock_timeout``, and ``OSError``
        for the disk's own failures.
        """
        clean, marks = sanitize_payload(payload)
        encoded = encode_payload(clean, marks)
        _check_size(encoded)
        written = self._append(encoded, self._lock_timeout)
        if written is None:
            raise ChainLockTimeout(f"{self._path}: the chain stayed locked for {self._lock_timeout} s")
        head, prev = written
        return ChainRecord(head.seq, prev, clean, tuple(marks), head.record_hash)

    def submit(self, encoded: EncodedPayload) -> ChainHead | None:
        """Append an encoded payload (``encode_payload``, ``PayloadTemplate.encode``) as :meth:`append`
        does, but never wait longer than ``lock_timeout``: a record that does not get the lock in time
        is kept in the backlog (None is returned) and written before the next one. Raises as
        :meth:`append` does, except for the timeout."""
        _check_size(encoded)
        written = self._append(encoded, self._lock_timeout)
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

    # -- one append: lock, check, write, release ----------------------------------------------------
    def _append(self, encoded: EncodedPayload | None, timeout: float | None) -> tuple[ChainHead, str] | None:
        """Write the backlog and then ``encoded`` under one file lock; return the new head and the
        previous hash, or None (nothing written) when a lock did not come within ``timeout``."""
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return None
        try:
            locked = self._lock_file(timeout)
            if locked is None:
                return None
            fd, size = locked
            try:
                head, size = self._checked_head(fd, size)
                head, size = self._write_backlog(fd, head, size)
                prev = GENESIS_HASH if head is None else head.record_hash
                if encoded is not None:
                    head, size = self._write_record(fd, head, size, encoded)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            identity = self._identity
        finally:
            self._lock.release()
        if self._durability == "fsync":
            self._group_commit(fd, identity, size)
        return (head, prev) if head is not None else None

    def _checked_head(self, fd: int, size: int) -> tuple[ChainHead | None, int]:
        """The head to link to: the one this instance wrote, when the file is as it left it and the
        quarantine marker was looked for lately; otherwise whatever :meth:`_prepare` finds."""
        if (
            self._head is not None
            and size == self._known_size
            and time.monotonic_ns() - self._marker_checked < MARKER_RECHECK_NS
        ):
            return self._head, size
        return self._prepare(fd, size)

    def _write_backlog(self, fd: int, head: ChainHead | None, size: int) -> tuple[ChainHead | None, int]:
        entries = self._backlog.take() if len(self._backlog) else []
        for index, entry in enumerate(entries):
            try:
                head, size = self._write_record(fd, head, size, entry)
            except BaseException:
                self._backlog.restore(entries[index:])
                raise
        return head, size

    def _write_record(
        self, fd: int, head: ChainHead | None, size: int, encoded: EncodedPayload
    ) -> tuple[ChainHead, int]:
        seq = 0 if head is None else head.seq + 1
        prev = GENESIS_HASH if head is None else head.record_hash
        line, record_hash = encode_record(seq, prev, encoded.payload, encoded.marks)
        self._write(fd, line, size)
        self._known_size = size + len(line)
        self._head = ChainHead(seq, record_hash)
        return self._head, self._known_size

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
        with self._lock, self._sync_lock:
            for fd in (self._fd, self._sync_fd, *self._retired):
                if fd >= 0:
                    os.close(fd)
            self._fd = self._sync_fd = -1
            self._retired = []
            self._known_size = -1

    def __enter__(self) -> RoutingAuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RoutingAuditLog({self._path!r}, durability={self._durability!r})"

    # -- descriptors and the lock -------------------------------------------------------------------
    def _forget_descriptors(self) -> None:
        """In a forked child: the inherited descriptors share the parent's open file description, and
        with it the parent's flock, so they must not be used (or closed: the parent may hold them)."""
        for fd in (self._fd, self._sync_fd, *self._retired):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)  # closes the child's reference only; the parent's lock is unaffected
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._fd = self._sync_fd = -1
        self._retired = []
        self._known_size = -1
        self._head = None
        self._durable = 0
        self._backlog = Backlog(self._backlog.capacity)  # the parent's records, for the parent to write

    def _open(self) -> int:
        self._fd = open_chain(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        st = os.fstat(self._fd)
        self._identity = (st.st_dev, st.st_ino)
        self._known_size = -1
        self._head = None
        self._durable = 0
        return self._fd

    def _lock_file(self, timeout: float | None) -> tuple[int, int] | None:
        """Exclusive lock on the file currently at the path; returns the descriptor and its size, or
        None when the lock did not come within ``timeout`` seconds.

        A descriptor can outlive its path (the file replaced or removed); writing to it would put
        records where no reader looks, so the inode is re-checked under the lock.
        """
        fd = self._fd if self._fd >= 0 else self._open()
        for _ in range(8):
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            elif not flock_within(fd, fcntl.LOCK_EX, timeout, _LOCK_POLL_S):
                return None
            try:
                current = os.stat(self._path)
            except FileNotFoundError:
                current = None
            # The path's stat is the descriptor's too when it names the same inode: one syscall
            # answers both "is this still the chain?" and "how long is it?".
            if current is not None and (current.st_dev, current.st_ino) == self._identity:
                return fd, current.st_size
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._retired.append(fd)
            fd = self._open()
        raise OSError(f"{self._path}: the chain file keeps being replaced; not appending")

    def _write(self, fd: int, data: bytes, size: int) -> None:
        """Write ``data`` fully at the end; on failure remove the partial line if at all possible."""
        try:
            written = os.write(fd, data)
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(fd, view) :]
        except BaseException:
            with contextlib.suppress(OSError):  # else the next append quarantines the torn tail
                os.ftruncate(fd, size)
            self._known_size = -1
            raise

    # -- the head and the torn-tail policy ----------------------------------------------------------
    def _prepare(self, fd: int, size: int) -> tuple[ChainHead | None, int]:
        """Finish an interrupted quarantine, quarantine a torn tail, and return the head to link to.

        ``append`` skips this while the file is exactly as this instance left it and it looked for a
        quarantine marker less than ``MARKER_RECHECK_NS`` ago. The only marker it can miss that way
        belongs to a second appender that died between truncating a third one's torn tail and
        recording that: the bytes this instance links to are intact, so appending is safe, and the
        owed event is appended by the next look (``_resume_quarantine`` finds it missing after any
        number of records). Looking on every append would put a syscall on every seam call.
        """
        self._marker_checked = time.monotonic_ns()
        owed: list[dict[str, Any]] = []
        if os.path.exists(self._marker):
            owed, size = self._resume_quarantine(fd, size)
        if size == self._known_size:
            head = self._head
        else:
            head, complete = _tail(fd, size)
            if complete != size:
                head, size = self._quarantine(fd, head, complete, size, owed)
                owed = []
        if owed:
            for marker in owed:
                head, size = self._append_event(fd, head, size, marker)
            _unlink(self._marker, self._dir)
        self._known_size = size
        self._head = head
        return head, size

    def _quarantine(
        self, fd: int, head: ChainHead | None, start: int, size: int, owed: list[dict[str, Any]]
    ) -> tuple[ChainHead, int]:
        """Move the torn bytes ``[start, size)`` to a quarantine file and record that in the chain.

        ``owed`` are events of an earlier, interrupted quarantine that the chain does not have yet; the
        marker carries them so that a crash here cannot lose them.
        """
        digest = hashlib.sha256()
        tmp = os.path.join(self._dir, f".{self._name}.torn.tmp")
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, _MODE)
        try:
            pos = start
            while pos < size:
                block = os.pread(fd, min(_COPY_BLOCK, size - pos), pos)
                if not block:
                    break
                digest.update(block)
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view) :]
                pos += len(block)
            os.fsync(out)
        finally:
            os.close(out)
        sha = digest.hexdigest()
        name = f"{self._name}.torn-{start}-{sha[:16]}"
        os.replace(tmp, os.path.join(self._dir, name))
        marker = {"offset": start, "length": size - start, "sha256": sha, "file": name, "owed": owed}
        _atomic_write(self._marker, orjson.dumps(marker), self._dir)
        self.quarantines += 1
        return self._finish_quarantine(fd, head, marker)

    def _finish_quarantine(
        self, fd: int, head: ChainHead | None, marker: dict[str, Any]
    ) -> tuple[ChainHead, int]:
        start = int(marker["offset"])
        os.ftruncate(fd, start)
        os.fsync(fd)
        self._lower_watermark(start)
        size = start
        for event in (marker, *marker.get("owed", ())):
            head, size = self._append_event(fd, head, size, event)
        _unlink(self._marker, self._dir)
        assert head is not None
        return head, size

    def _append_event(
        self, fd: int, head: ChainHead | None, size: int, marker: Mapping[str, Any]
    ) -> tuple[ChainHead, int]:
        seq = 0 if head is None else head.seq + 1
        prev = GENESIS_HASH if head is None else head.record_hash
        line, record_hash = encode_record(seq, prev, *encode_payload(_quarantine_event(marker), []))
        self._write(fd, line, size)
        os.fsync(fd)
        return ChainHead(seq, record_hash), size + len(line)

    def _resume_quarantine(self, fd: int, size: int) -> tuple[list[dict[str, Any]], int]:
        """A previous appender died inside the quarantine procedure: finish it.

        Returns the quarantine events the chain still lacks and that the caller must append (after
        quarantining a torn tail, if there is one), and the current size.
        """
        try:
            with open(self._marker, "rb") as handle:
                marker = orjson.loads(handle.read(1 << 20))
            events = [marker, *marker.get("owed", [])]
            for event in events:
                _quarantine_event(event)
            start = int(marker["offset"])
        except FileNotFoundError:
            return [], size
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ChainCorruptError(f"{self._marker}: unreadable quarantine marker ({exc})") from None
        if size == start:
            # Crashed after the truncation, before the event.
            head, _ = _tail(fd, start)
            _, size = self._finish_quarantine(fd, head, marker)
            return [], size
        if size > start and _first_line(fd, start, size) is None:
            if _digest_range(fd, start, size) == marker["sha256"]:
                # Crashed before the truncation: the torn bytes are still in place.
                head, _ = _tail(fd, start)
                _, size = self._finish_quarantine(fd, head, marker)
                return [], size
            # Other bytes than the marker describes: an event write was itself torn by a second crash.
            # The caller quarantines those bytes and then appends every event still owed.
            return events, size
        present = _events_since(fd, start, size)
        owed = [event for event in events if event["sha256"] not in present]
        if not owed:
            _unlink(self._marker, self._dir)
        return owed, size

    # -- durability ---------------------------------------------------------------------------------
    def _sync_descriptor(self) -> int:
        if self._sync_fd < 0:
            self._sync_fd = os.open(self._sync_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, _MODE)
        return self._sync_fd

    def _group_commit(self, fd: int, identity: tuple[int, int], end: int) -> None:
        """Make ``[0, end)`` durable, sharing one ``fdatasync`` among every appender that waits.

        With a ``lock_timeout`` the wait for the ``.sync`` lock (and this instance's sync thread) is
        bounded by it too: past it the record, already written, keeps ``flush`` durability, and the
        first such time is logged (once per instance)."""
        dev, ino = identity
        timeout = self._lock_timeout
        if not self._sync_lock.acquire(timeout=-1 if timeout is None else timeout):
            self._sync_timed_out()
            return
        try:
            owed = self._lowerings_owed
            if owed != self._lowerings_settled:
                self._settle_lowering(fd, identity, owed)
                return
            if identity == self._identity and self._durable >= end:
                return
            sfd = self._sync_descriptor()
            if not self._lock_sync_file(sfd):
                self._sync_timed_out()
                return
            try:
                shared = _read_watermark(sfd)
                if shared[0] == dev and shared[1] == ino and shared[2] >= end:
                    if identity == self._identity:
                        self._durable = shared[2]
                    return
                self._sync_and_mark(fd, sfd, identity)
            finally:
                fcntl.flock(sfd, fcntl.LOCK_UN)
        finally:
            self._sync_lock.release()

    def _sync_timed_out(self) -> None:
        """Count a sync skipped at the lock timeout; log the first one (the record has ``flush``
        durability: written to the operating system, not yet known to be on stable storage)."""
        self.sync_timeouts += 1
        if self.sync_timeouts == 1:
            _LOG.warning(
                "route-shadow: %s: the sync lock stayed taken past %s s; records written without "
                "waiting for fsync (flush durability) when that happens",
                self._sync_path,
                self._lock_timeout,
            )

    def _lower_watermark(self, offset: int) -> None:
        """After a truncation the watermark may name bytes that no longer exist; pull it back.

        Bounded like every other wait of the chain: with a ``lock_timeout`` the wait for this
        instance's sync thread and for the ``.sync`` lock each last at most that long (it used to
        wait without bound, inside the append that found the torn tail). When the bound passes, the
        lowering is owed: counted in ``sync_timeouts`` and logged like a skipped sync, and this
        instance's next sync does not trust any watermark but syncs the file and rewrites the
        watermark from the file's size after the truncation (:meth:`_settle_lowering`).

        Why owing is safe, and what remains: a watermark above the truncation point does not make
        anything unreadable; it can only make an ``fsync`` append trust that bytes are synced which
        were written after the truncation. This instance never does (its own ``_durable`` is pulled
        back at once, and its next sync ignores the shared value). Another instance or process that
        takes the ``.sync`` lock before this instance's next sync, with a record that ends at or
        below the stale offset (within the torn tail's former length), returns with ``flush``
        durability for that record, uncounted; the first sync of any writer past the stale offset,
        or this instance's next sync, makes it durable. That needs a torn tail, the ``.sync`` lock
        held past the timeout at that moment, and a power loss before the next sync to lose data.
        """
        timeout = self._lock_timeout
        if not self._sync_lock.acquire(timeout=-1 if timeout is None else timeout):
            self._owe_lowering()
            return
        try:
            self._durable = min(self._durable, offset)
            if self._sync_fd < 0 and not os.path.exists(self._sync_path):
                return
            sfd = self._sync_descriptor()
            if not self._lock_sync_file(sfd):
                self._owe_lowering()
                return
            try:
                dev, ino, durable = _read_watermark(sfd)
                if (dev, ino) == self._identity and durable > offset:
                    os.pwrite(sfd, _WATERMARK.pack(dev, ino, offset), 0)
            finally:
                fcntl.flock(sfd, fcntl.LOCK_UN)
        finally:
            self._sync_lock.release()

    def _owe_lowering(self) -> None:
        """Leave the watermark lowering to the next sync; ``_durable`` of this instance goes to 0
        so that nothing of this instance trusts it meanwhile (set without ``_sync_lock``: its
        holder re-reads ``_lowerings_owed`` before it trusts anything)."""
        self._lowerings_owed += 1
        self._durable = 0
        self._sync_timed_out()

    def _settle_lowering(self, fd: int, identity: tuple[int, int], owed: int) -> None:
        """Sync ``fd`` whatever the watermark says and write the watermark from the file's size now
        (after the truncation, so every byte it names is synced): a lowering owed is then made.
        Called with ``_sync_lock`` held; bounded by ``lock_timeout`` like any sync."""
        sfd = self._sync_descriptor()
        if not self._lock_sync_file(sfd):
            self._sync_timed_out()
            return
        try:
            self._sync_and_mark(fd, sfd, identity)
            self._lowerings_settled = owed
        finally:
            fcntl.flock(sfd, fcntl.LOCK_UN)

    def _lock_sync_file(self, sfd: int) -> bool:
        """Take the ``.sync`` file's lock, waiting at most ``lock_timeout`` (False: not taken)."""
        if self._lock_timeout is None:
            fcntl.flock(sfd, fcntl.LOCK_EX)
            return True
        return flock_within(sfd, fcntl.LOCK_EX, self._lock_timeout, _LOCK_POLL_S)

    def _sync_and_mark(self, fd: int, sfd: int, identity: tuple[int, int]) -> None:
        """``fdatasync`` the chain and record in the watermark how far it is durable: everything
        written before the ``fstat`` is covered by the sync that follows it. ``.sync`` lock held."""
        target = os.fstat(fd).st_size
        os.fdatasync(fd)
        self.fsyncs += 1
        os.pwrite(sfd, _WATERMARK.pack(*identity, target), 0)
        if identity == self._identity:
            self._durable = target


# ---------------------------------------------------------------------------------------------------
# Helpers shared with readers.


def _check_size(encoded: EncodedPayload) -> None:
    size = len(encoded.payload) + len(encoded.marks)
    if size + LINE_OVERHEAD > MAX_LINE_BYTES:
        raise ChainPayloadError(f"record would exceed {MAX_LINE_BYTES} bytes ({size} bytes of payload)")


def read_head(path: str | os.PathLike[str]) -> ChainHead | None:
    """The last complete record of the chain at ``path`` (None when missing or empty)."""
    try:
        fd = open_chain(os.fspath(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        head, _ = _tail(fd, os.fstat(fd).st_size)
        return head
    finally:
        os.close(fd)


def _tail(fd: int, size: int) -> tuple[ChainHead | None, int]:
    """The head of the complete prefix of ``[0, size)`` and where that prefix ends.

    Reads a small window at the end and widens it geometrically while the last line does not fit, up
    to the longest line a record can have; a longer last line is not a record.
    """
    if size == 0:
        return None, 0
    complete = _last_newline(fd, size) + 1
    if complete == 0:
        return None, 0
    window = _TAIL_WINDOW
    end = complete - 1  # the newline ending the last complete line
    while True:
        start = max(0, end - window)
        block = os.pread(fd, end - start, start)
        nl = block.rfind(b"\n")
        if nl >= 0 or start == 0:
            line = block[nl + 1 :]
            offset = start + nl + 1
            break
        if window > MAX_LINE_BYTES:
            raise ChainCorruptError(
                f"the last line (ending at byte {end}) is longer than {MAX_LINE_BYTES} bytes: not a record; "
                "run `otel-route-shadow verify`"
            )
        window *= 8
    try:
        record = parse_record_line(line)
    except ChainFormatError as exc:
        raise ChainCorruptError(
            f"the last complete line (byte {offset}) is not a record ({exc}); nothing was appended; "
            "run `otel-route-shadow verify`"
        ) from None
    return ChainHead(record.seq, record.record_hash), complete


def _last_newline(fd: int, end: int) -> int:
    """Offset of the last newline before ``end``, or -1; reads back in bounded blocks."""
    pos = end
    block_size = _TAIL_WINDOW
    while pos > 0:
        start = max(0, pos - block_size)
        block = os.pread(fd, pos - start, start)
        nl = block.rfind(b"\n")
        if nl >= 0:
            return start + nl
        pos = start
        block_size = min(block_size * 8, _COPY_BLOCK)
    return -1


def _first_line(fd: int, start: int, size: int) -> bytes | None:
    """The complete line starting at ``start``, or None when no newline follows within a record's size."""
    data = b""
    pos = start
    while pos < size and len(data) <= MAX_LINE_BYTES:
        block = os.pread(fd, min(_COPY_BLOCK, size - pos), pos)
        if not block:
            break
        nl = block.find(b"\n")
        if nl >= 0:
            return data + block[:nl]
        data += block
        pos += len(block)
    return None


def _digest_range(fd: int, start: int, end: int) -> str:
    digest = hashlib.sha256()
    pos = start
    while pos < end:
        block = os.pread(fd, min(_COPY_BLOCK, end - pos), pos)
        if not block:
            break
        digest.update(block)
        pos += len(block)
    return digest.hexdigest()


def _events_since(fd: int, start: int, size: int) -> set[str]:
    """``sha256`` of every quarantine event among the complete lines from ``start``: normally a few
    lines, since a marker lives only while a quarantine is in progress."""
    found: set[str] = set()
    pos = start
    carry = b""
    while pos < size:
        block = os.pread(fd, min(_COPY_BLOCK, size - pos), pos)
        if not block:
            break
        pos += len(block)
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        if len(carry) > MAX_LINE_BYTES:
            carry = b""  # not a record; its remainder fails to parse and is skipped
        for line in lines:
            if QUARANTINE_KIND.encode() not in line:
                continue
            try:
                record = parse_record_line(line)
            except ChainFormatError:
                continue
            sha = record.payload.get("sha256")
            if record.payload.get("kind") == QUARANTINE_KIND and isinstance(sha, str):
                found.add(sha)
    return found


def _quarantine_event(marker: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": QUARANTINE_KIND,
        "reason": "torn-tail",
        "offset": int(marker["offset"]),
        "length": int(marker["length"]),
        "sha256": str(marker["sha256"]),
        "file": str(marker["file"]),
    }


def _read_watermark(fd: int) -> tuple[int, int, int]:
    raw = os.pread(fd, _WATERMARK.size, 0)
    if len(raw) < _WATERMARK.size:
        return 0, 0, 0
    dev, ino, durable = _WATERMARK.unpack(raw)
    return int(dev), int(ino), int(durable)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: str, data: bytes, directory: str) -> None:
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, _MODE)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(directory)


def _unlink(path: str, directory: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    _fsync_dir(directory)
