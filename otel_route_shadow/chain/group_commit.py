"""``fsync`` durability shared between appenders: the group commit and its watermark file.

With ``durability="fsync"`` an append returns once its line is on stable storage. Appenders (threads
and processes alike) share syncs: one leader's ``fdatasync`` covers every line written before it
started. How far the chain is durable is kept in ``<chain>.sync``, three little-endian unsigned 64-bit
integers (device, inode, durable byte offset), under that file's own ``flock``; a torn-tail
truncation pulls it back (``docs/chain-format.md`` section 9).

Every wait is bounded by the writer's lock timeout: past it the record, already written, keeps
``flush`` durability (logged once, counted in ``sync_timeouts``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
from typing import Final

from otel_route_shadow.files import open_regular
from otel_route_shadow.locking import flock_bounded
from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = ["LOCK_POLL_S", "WATERMARK", "GroupCommit", "read_watermark"]

LOCK_POLL_S: Final = 0.002
"""How often a writer with a lock timeout retries a contended file lock."""

WATERMARK: Final = struct.Struct("<QQQ")
"""The ``.sync`` file: device, inode, durable byte offset."""

_MODE: Final = 0o640


class GroupCommit:
    """The group commit of one writer instance for the chain at ``chain_path``.

    ``track(identity)`` is called whenever the writer opens the chain file: what this instance knows
    to be durable belongs to that file (device, inode).
    """

    def __init__(self, chain_path: str, lock_timeout: float | None) -> None:
        self.path = chain_path + ".sync"
        self._timeout = lock_timeout
        self._lock = threading.Lock()
        self._fd = -1
        self._identity: tuple[int, int] = (0, 0)
        self._durable = 0
        self._lowerings_owed = 0
        """Watermark lowerings a torn-tail repair could not make within the lock timeout (counter)."""
        self._lowerings_settled = 0
        """The value of ``_lowerings_owed`` the last forced sync of this instance covered."""
        self.fsyncs = 0
        """Data syncs this instance performed (group commit makes it smaller than the appends)."""
        self.sync_timeouts = 0
        """Syncs given up at the lock timeout (the record written, not synced)."""

    def track(self, identity: tuple[int, int]) -> None:
        """The writer opened the chain file ``identity``: nothing of it is known durable yet."""
        self._identity = identity
        self._durable = 0

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = -1

    def forget(self) -> None:
        """In a forked child: drop the parent's descriptor and locks without touching them."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1
        self._lock = threading.Lock()
        self._durable = 0

    def commit(self, fd: int, identity: tuple[int, int], end: int) -> None:
        """Make ``[0, end)`` of the chain on ``fd`` durable, sharing one ``fdatasync`` among every
        appender that waits; bounded by the lock timeout like every wait of the chain."""
        dev, ino = identity
        if not self._lock.acquire(timeout=-1 if self._timeout is None else self._timeout):
            self._timed_out()
            return
        try:
            owed = self._lowerings_owed
            if owed != self._lowerings_settled:
                self._settle_lowering(fd, identity, owed)
                return
            if identity == self._identity and self._durable >= end:
                return
            sfd = self._descriptor()
            if not self._lock_file(sfd):
                self._timed_out()
                return
            try:
                shared = read_watermark(sfd)
                if shared[0] == dev and shared[1] == ino and shared[2] >= end:
                    if identity == self._identity:
                        self._durable = shared[2]
                    return
                self._sync_and_mark(fd, sfd, identity)
            finally:
                fcntl.flock(sfd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

    def lower(self, offset: int) -> None:
        """After a truncation the watermark may name bytes that no longer exist; pull it back.

        With a lock timeout, the waits for this instance's sync and for the ``.sync`` lock each last
        at most that long. When the bound passes, the lowering is owed: counted in ``sync_timeouts``
        and logged like a skipped sync, and this instance's next sync does not trust any watermark but
        syncs the file and rewrites the watermark from the file's size after the truncation.

        Why owing is safe, and what remains: a watermark above the truncation point does not make
        anything unreadable; it can only make an ``fsync`` append trust that bytes are synced which
        were written after the truncation. This instance never does (its own durable offset is pulled
        back at once, and its next sync ignores the shared value). Another instance or process that
        takes the ``.sync`` lock before this instance's next sync, with a record that ends at or
        below the stale offset (within the torn tail's former length), returns with ``flush``
        durability for that record, uncounted; the first sync of any writer past the stale offset,
        or this instance's next sync, makes it durable. That needs a torn tail, the ``.sync`` lock
        held past the timeout at that moment, and a power loss before the next sync to lose data.
        """
        if not self._lock.acquire(timeout=-1 if self._timeout is None else self._timeout):
            self._owe_lowering()
            return
        try:
            self._durable = min(self._durable, offset)
            if self._fd < 0 and not os.path.exists(self.path):
                return
            sfd = self._descriptor()
            if not self._lock_file(sfd):
                self._owe_lowering()
                return
            try:
                dev, ino, durable = read_watermark(sfd)
                if (dev, ino) == self._identity and durable > offset:
                    os.pwrite(sfd, WATERMARK.pack(dev, ino, offset), 0)
            finally:
                fcntl.flock(sfd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

    def _descriptor(self) -> int:
        if self._fd < 0:
            self._fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, _MODE)
        return self._fd

    def _timed_out(self) -> None:
        """Count a sync skipped at the lock timeout; log the first one (the record has ``flush``
        durability: written to the operating system, not yet known to be on stable storage)."""
        self.sync_timeouts += 1
        if self.sync_timeouts == 1:
            _LOG.warning(
                "route-shadow: %s: the sync lock stayed taken past %s s; records written without "
                "waiting for fsync (flush durability) when that happens",
                self.path,
                self._timeout,
            )

    def _owe_lowering(self) -> None:
        """Leave the watermark lowering to the next sync; this instance's durable offset goes to 0
        so that nothing of this instance trusts it meanwhile (set without the lock: its holder
        re-reads ``_lowerings_owed`` before it trusts anything)."""
        self._lowerings_owed += 1
        self._durable = 0
        self._timed_out()

    def _settle_lowering(self, fd: int, identity: tuple[int, int], owed: int) -> None:
        """Sync ``fd`` whatever the watermark says and write the watermark from the file's size now
        (after the truncation, so every byte it names is synced): a lowering owed is then made.
        Called with the lock held; bounded by the lock timeout like any sync."""
        sfd = self._descriptor()
        if not self._lock_file(sfd):
            self._timed_out()
            return
        try:
            self._sync_and_mark(fd, sfd, identity)
            self._lowerings_settled = owed
        finally:
            fcntl.flock(sfd, fcntl.LOCK_UN)

    def _lock_file(self, sfd: int) -> bool:
        """Take the ``.sync`` file's lock, waiting at most the lock timeout (False: not taken)."""
        return flock_bounded(sfd, fcntl.LOCK_EX, self._timeout, LOCK_POLL_S)

    def _sync_and_mark(self, fd: int, sfd: int, identity: tuple[int, int]) -> None:
        """``fdatasync`` the chain and record in the watermark how far it is durable: everything
        written before the ``fstat`` is covered by the sync that follows it. ``.sync`` lock held."""
        target = os.fstat(fd).st_size
        os.fdatasync(fd)
        self.fsyncs += 1
        os.pwrite(sfd, WATERMARK.pack(*identity, target), 0)
        if identity == self._identity:
            self._durable = target


def read_watermark(fd: int) -> tuple[int, int, int]:
    """The watermark in the ``.sync`` file on ``fd`` (zeros when it holds none yet)."""
    raw = os.pread(fd, WATERMARK.size, 0)
    if len(raw) < WATERMARK.size:
        return 0, 0, 0
    dev, ino, durable = WATERMARK.unpack(raw)
    return int(dev), int(ino), int(durable)
