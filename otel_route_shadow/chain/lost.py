"""Records neither the chain nor its spill file could take (a full disk at exit): counted in a file
reserved while there was room, and marked in the chain by the next writer that can append.

``<chain>.lost`` (``docs/chain-format.md`` section 9) is created after a writer's first record, empty:
``{}`` padded with spaces to 511 bytes and an LF. A writer that exits with records it can write nowhere
counts them into it **in place**, under the file's own ``flock``: one JSON object ``{"<reason>": [count,
first ns, last ns], ...}`` and an LF written over the bytes the file already holds (a full disk has no
block to give, and needs none), the file cut to that length, shorter than the empty file (what tells
the next writer, by a ``stat``, to read it). The next append of any writer, holding the chain's lock, writes one ``records-dropped``
event per reason (section 7) and then empties the file in place; a crash between the two writes the
events again (a gap counted twice, never one lost). The file is an input: anything that is not such an
object counts nothing and is emptied.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Final

import orjson

from otel_route_shadow.chain.backlog import REASON_WRITE_FAILED, dropped_event, dropped_event_of
from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.group_commit import LOCK_POLL_S
from otel_route_shadow.chain.quarantine import CHAIN_FILE_MODE
from otel_route_shadow.chain.record import EMPTY_MARKS, ChainHead, EncodedPayload, LineWriter
from otel_route_shadow.files import open_regular, write_all
from otel_route_shadow.locking import flock_bounded, release

__all__ = ["LOST_BYTES", "LostRecords", "padded"]

LOST_BYTES: Final = 512
"""The size of ``<chain>.lost``: room for every reason's count, fixed so it is rewritten in place."""

Counts = dict[str, list[int]]


def _encoded(counts: Counts) -> bytes:
    """The counts as the file holds them, unpadded (at most ``LOST_BYTES - 1`` bytes and an LF)."""
    data = orjson.dumps(counts, option=orjson.OPT_SORT_KEYS)
    if len(data) > LOST_BYTES - 1:  # more reasons than room (a hostile file's): one count of them all
        total = [sum(c[0] for c in counts.values()), min(c[1] for c in counts.values())]
        data = orjson.dumps({REASON_WRITE_FAILED: [*total, max(c[2] for c in counts.values())]})
    return data + b"\n"


_EMPTY: Final = b"{}".ljust(LOST_BYTES - 1) + b"\n"


def padded(counts: Counts) -> bytes:
    """The counts as the file holds them padded to its full size, which ``write_into`` reads as it
    reads a file ``mark`` wrote (a writer's own counts file, ``chain.waiting.WaitingFile``)."""
    return _encoded(counts)[:-1].ljust(LOST_BYTES - 1) + b"\n"


def _decoded(data: bytes) -> Counts:
    """The counts the file holds; none when it holds anything else."""
    try:
        value = orjson.loads(data.rstrip(b" \n"))
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    counts: Counts = {}
    for reason, numbers in value.items():
        if (
            isinstance(numbers, list)
            and len(numbers) == 3
            and all(type(n) is int and 0 <= n < 2**63 for n in numbers)
            and numbers[0] > 0
            and len(reason) <= 64
        ):
            counts[reason] = numbers
    return counts


class LostRecords:
    """The ``<chain>.lost`` file of the chain at ``chain_path`` (or the file at ``path`` in its format: the
    counts of a killed writer's backlog, ``chain.waiting.WaitingFile``)."""

    def __init__(self, chain_path: str, lock_timeout: float | None, path: str | None = None) -> None:
        self.path = chain_path + ".lost" if path is None else path
        self._timeout = lock_timeout

    def reserve(self) -> None:
        """Create the file, empty, when there is none: one small write, not synced (a reserve of room,
        not a record; one a crash left short is made whole by the next writer that looks at it)."""
        if os.path.lexists(self.path):
            return
        with contextlib.suppress(OSError):
            fd = open_regular(
                self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, CHAIN_FILE_MODE, follow_symlinks=False
            )
            try:
                write_all(fd, _EMPTY)
            finally:
                os.close(fd)

    def mark(self, entries: list[EncodedPayload], reason: str, now_ns: int) -> int:
        """Count ``entries`` (records, or ``records-dropped`` events standing for their count) in the file,
        in place, records under ``reason``; return how many records they stand for. ``OSError`` (no
        file reserved, its lock not had within the timeout) passes through: nothing was counted."""
        if not entries:
            return 0
        fd = self._open()
        try:
            counts = _decoded(os.pread(fd, LOST_BYTES, 0))
            total = 0
            for entry in entries:
                event = dropped_event_of(entry)
                why, count, first, last = event if event is not None else (reason, 1, now_ns, now_ns)
                known = counts.setdefault(why, [0, first, last])
                known[0] += count
                known[1], known[2] = min(known[1], first), max(known[2], last)
                total += count
            data = _encoded(counts)
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))  # shorter than the empty file: what tells a writer to look
            os.fsync(fd)
            return total
        finally:
            release(fd)

    def pending(self) -> bool:
        """Whether the file may hold counts: it is not the empty file's size (a ``stat``)."""
        try:
            return os.lstat(self.path).st_size != LOST_BYTES
        except OSError:
            return False

    def write_into(
        self, fd: int, head: ChainHead | None, size: int, write: LineWriter
    ) -> tuple[ChainHead | None, int]:
        """Append one ``records-dropped`` event per reason the file counts to the chain on ``fd`` (whose
        lock the caller holds) with ``write``, then empty the file; the new head and size. A file that
        cannot be used now is left for a later append; only the chain's own write errors are raised."""
        try:
            lfd = self._open()
        except OSError:
            return head, size
        try:
            counts = _decoded(os.pread(lfd, LOST_BYTES, 0))
            for reason, (count, first, last) in sorted(counts.items()):
                event = dropped_event(count, first, last, reason)
                head, size = write(fd, head, size, EncodedPayload(canonical_bytes(event), EMPTY_MARKS))
            with contextlib.suppress(OSError):
                os.pwrite(lfd, _EMPTY, 0)
                os.ftruncate(lfd, LOST_BYTES)
                os.fsync(lfd)
            return head, size
        finally:
            release(lfd)

    def _open(self) -> int:
        """The file, open and locked (``OSError`` when it is not there, not a regular file, or locked)."""
        fd = open_regular(self.path, os.O_RDWR, follow_symlinks=False)
        if not flock_bounded(fd, fcntl.LOCK_EX, self._timeout, LOCK_POLL_S):
            os.close(fd)
            raise TimeoutError(f"{self.path}: locked for longer than the writer waits")
        return fd
