"""Records still waiting for the chain's lock when their process exits: kept in a spill file beside
the chain, and written into the chain by the next writer, before anything else.

``<chain>.spill`` (``docs/chain-format.md`` section 9) is a header line and then one line per kept
entry, ``{"payload":<canonical payload>,"redactions":<canonical marks>}``: a record without its place.
Exiting writers append to it under the file's own ``flock``. Later appends, holding the chain's lock,
take them in order, at most a batch per append (:data:`SPILL_BATCH_RECORDS` entries,
:data:`SPILL_BATCH_BYTES` bytes), so no append is given more than a batch's work however full the file
is, and every spilled record reaches the chain once:

1. the header records where in the chain the batch starts (``claimed`` offset, and the time);
2. the batch's entries are appended, each through the one door any payload takes (sanitized, cut to
   fit);
3. the header records where the next batch starts in the file (``next``) and that nothing is claimed;
   after the last batch the file is emptied back to its header.

A writer that finds a claim (the previous one died in step 2) appends only the batch's entries the
chain does not hold after the claimed offset. Lines that are not entries (torn by a crash, foreign) are
counted in a ``records-dropped`` event (reason ``spill-unreadable``) at the end of their batch; entries
that would take the file past :data:`SPILL_MAX_BYTES` are counted the same way at exit
(``spill-full``). A header of version 1 (written before batches: no ``next``) is read as one whose
entries all wait.

A process killed with records in its backlog runs no exit code: ``chain.waiting.WaitingFile`` keeps
them, as they wait, in a file of the same format that is the process's own, which a later writer takes
once the process is dead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import time
from typing import Final

import orjson

from otel_route_shadow.chain.backlog import REASON_SPILL_FULL, REASON_SPILL_UNREADABLE, dropped_event
from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.errors import ChainLockTimeout, ChainPayloadError
from otel_route_shadow.chain.group_commit import LOCK_POLL_S
from otel_route_shadow.chain.quarantine import CHAIN_FILE_MODE, complete_lines
from otel_route_shadow.chain.record import (
    DROPPED_KIND,
    EMPTY_MARKS,
    MAX_ENTRY_BYTES,
    ChainHead,
    EncodedPayload,
    LineWriter,
    encode_payload,
    redactions_problem,
)
from otel_route_shadow.chain.sanitize import RedactionMark, sanitize_payload
from otel_route_shadow.files import (
    fsync_directory,
    open_regular,
    write_all,
)
from otel_route_shadow.locking import flock_bounded, release
from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = ["HEADER_BYTES", "SPILL_BATCH_BYTES", "SPILL_BATCH_RECORDS", "SPILL_MAX_BYTES", "Spill"]

SPILL_MAX_BYTES: Final = 64 * 1024 * 1024
"""Most bytes of entries a spill file holds (a full default backlog of the longest records fits)."""
SPILL_BATCH_RECORDS: Final = 16
"""Most spilled entries one append writes into the chain (the rest go with the next appends)."""
SPILL_BATCH_BYTES: Final = 64 * 1024
"""Most bytes of spilled entries one append reads (at least one entry, whatever its size)."""

_MAGIC: Final = "route-shadow-spill/2"
_MAGIC_V1: Final = b"route-shadow-spill/1"
_UNCLAIMED: Final = -1
_EVENT_ROOM: Final = 512
"""Room kept for the ``spill-full`` event when entries do not all fit."""


def _header(claimed: int, claim_ns: int, following: int) -> bytes:
    """The spill file's first line: the chain offset a writer started taking a batch at (-1: none),
    when (written in milliseconds), and the file offset of the first entry not taken yet; fixed
    width (as long as version 1's), so it is rewritten in place."""
    return f"{_MAGIC} {claimed:>16} {claim_ns // 1_000_000:>15} {following:>8}\n".encode("ascii")


HEADER_BYTES: Final = len(_header(_UNCLAIMED, 0, 0))
_EMPTY: Final = _header(_UNCLAIMED, 0, HEADER_BYTES)


class Spill:
    """The spill file of the chain at ``chain_path`` (or the file at ``path`` in the same format: a
    ``chain.waiting.WaitingFile`` whose writer died)."""

    def __init__(self, chain_path: str, lock_timeout: float | None, path: str | None = None) -> None:
        self.path = chain_path + ".spill" if path is None else path
        self._dir = os.path.dirname(os.path.abspath(chain_path))
        self._timeout = lock_timeout
        self._refusal_logged = False

    def pending(self) -> bool:
        """Whether the file holds entries (a ``stat``; nothing is opened)."""
        try:
            return os.stat(self.path).st_size > HEADER_BYTES
        except OSError:
            return False

    # -- at exit ------------------------------------------------------------------------------------
    def keep(self, entries: list[EncodedPayload], timeout: float | None) -> None:
        """Append ``entries`` to the spill file durably, waiting at most ``timeout`` seconds for its
        lock. Raises ``OSError`` (``ChainLockTimeout`` for the lock) when nothing could be kept."""
        created = not os.path.lexists(self.path)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, CHAIN_FILE_MODE)
        try:
            if not flock_bounded(fd, fcntl.LOCK_EX, timeout, LOCK_POLL_S):
                raise ChainLockTimeout(f"{self.path}: the spill file stayed locked for {timeout} s")
            self._append(fd, entries)
        finally:
            release(fd)
        if created:
            fsync_directory(self._dir)

    def _append(self, fd: int, entries: list[EncodedPayload]) -> None:
        size = os.fstat(fd).st_size
        start, prefix = size, b""
        if size < HEADER_BYTES:  # new, or a header torn by a crash (entries only follow a header)
            start, prefix = 0, _EMPTY
        elif size == HEADER_BYTES and os.pread(fd, HEADER_BYTES, 0) != _EMPTY:
            os.pwrite(fd, _EMPTY, 0)  # a claim whose entries are all written
        elif os.pread(fd, 1, size - 1) != b"\n":
            prefix = b"\n"  # a line torn by a crash stays one unreadable line, not part of ours
        room = HEADER_BYTES + SPILL_MAX_BYTES - start - len(prefix)
        data = prefix + b"".join(_fitting(entries, room))
        try:
            os.lseek(fd, start, os.SEEK_SET)
            write_all(fd, data)
            os.ftruncate(fd, start + len(data))
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise

    # -- at the next appends ------------------------------------------------------------------------
    def write_into(
        self, fd: int, head: ChainHead | None, size: int, write: LineWriter
    ) -> tuple[ChainHead | None, int, bool]:
        """Append the next batch of spilled entries to the chain on ``fd`` (whose lock the caller
        holds; ``size`` is where its complete lines end) with ``write``; return the new head and size,
        and whether entries are left for the next append.

        A spill file that cannot be used (not a regular file, its lock taken past the timeout, a
        failing disk) is left for a later append, logged once; only the chain's own write errors are
        raised.
        """
        try:
            sfd = open_regular(self.path, os.O_RDWR)
        except FileNotFoundError:
            return head, size, False
        except OSError as exc:
            self._cannot(exc)
            return head, size, False
        try:
            if not flock_bounded(sfd, fcntl.LOCK_EX, self._timeout, LOCK_POLL_S):
                return head, size, False
            return self._write_batch(sfd, fd, head, size, write)
        finally:
            release(sfd)

    def _write_batch(
        self, sfd: int, fd: int, head: ChainHead | None, size: int, write: LineWriter
    ) -> tuple[ChainHead | None, int, bool]:
        try:
            end = os.fstat(sfd).st_size
            if end <= HEADER_BYTES:
                return head, size, False
            claimed, claim_ns, start = _read_header(sfd, end)
            if claimed == _UNCLAIMED:
                claim_ns = time.time_ns() // 1_000_000 * 1_000_000  # as the header keeps it
            batch = _read_batch(sfd, start, end, claim_ns)
            if claimed == _UNCLAIMED:
                claimed, skip, found_end = size, 0, -1
                os.pwrite(sfd, _header(claimed, claim_ns, start), 0)
                os.fsync(sfd)
            else:
                skip, found_end = _already_written(fd, claimed, size, batch.entries)
        except OSError as exc:
            self._cannot(exc)
            return head, size, False
        for entry in batch.entries[skip:]:
            head, size = write(fd, head, size, entry)
        try:
            if batch.last:
                os.ftruncate(sfd, HEADER_BYTES)
                os.pwrite(sfd, _EMPTY, 0)
                os.fsync(sfd)
            elif batch.entries and skip == len(batch.entries):
                # A writer before this one had written the whole batch: what follows may be in the
                # chain too, after the batch's last line.
                os.pwrite(sfd, _header(found_end, claim_ns, batch.following), 0)
            else:
                os.pwrite(sfd, _header(_UNCLAIMED, 0, batch.following), 0)
        except OSError as exc:  # the claim stays: the next look finds the batch written
            self._cannot(exc)
        return head, size, not batch.last

    def _cannot(self, exc: OSError) -> None:
        if not self._refusal_logged:
            self._refusal_logged = True
            _LOG.warning("route shadow: the spill file %s cannot be used now: %s", self.path, exc)


def _read_header(fd: int, end: int) -> tuple[int, int, int]:
    """``(claimed offset, claim time in ns, offset of the next entry)`` of a file of ``end`` bytes. A
    header of version 1 has its entries right after it; an unreadable header counts as unclaimed with
    every entry waiting (then an entry a crashed writer had already written can be written twice,
    never lost)."""
    data = os.pread(fd, HEADER_BYTES, 0)
    fields = data.split()
    if data.endswith(b"\n") and fields[:1] in ([_MAGIC.encode()], [_MAGIC_V1]):
        with contextlib.suppress(ValueError):
            numbers = [int(field) for field in fields[1:]]
            if fields[0] == _MAGIC_V1 and len(numbers) == 2:
                numbers = [numbers[0], numbers[1] // 1_000_000, HEADER_BYTES]
            if len(numbers) == 3:
                claimed, claim_ms, following = numbers
                if claimed >= _UNCLAIMED and claim_ms >= 0 and HEADER_BYTES <= following <= end:
                    return claimed, claim_ms * 1_000_000, following
    return _UNCLAIMED, 0, HEADER_BYTES


def _line(entry: EncodedPayload) -> bytes:
    return b'{"payload":' + entry.payload + b',"redactions":' + entry.marks + b"}\n"


def _fitting(entries: list[EncodedPayload], room: int) -> list[bytes]:
    """The lines of ``entries`` that fit in ``room`` bytes, in order, and for the rest a
    ``records-dropped`` event (``spill-full``) counting the records they held."""
    lines: list[bytes] = []
    used = 0
    for index, entry in enumerate(entries):
        line = _line(entry)
        if used + len(line) > room - _EVENT_ROOM:
            now = time.time_ns()
            event = dropped_event(_records_in(entries[index:]), now, now, REASON_SPILL_FULL)
            lines.append(_line(EncodedPayload(canonical_bytes(event), EMPTY_MARKS)))
            break
        lines.append(line)
        used += len(line)
    return lines


def _records_in(entries: list[EncodedPayload]) -> int:
    """Records the entries stand for: one each, or the ``count`` of a ``records-dropped`` event."""
    total = 0
    for entry in entries:
        count = 1
        if entry.payload.startswith(b'{"count":'):
            with contextlib.suppress(orjson.JSONDecodeError):
                event = orjson.loads(entry.payload)
                if event.get("kind") == DROPPED_KIND and type(event.get("count")) is int:
                    count = event["count"]
        total += count
    return total


@dataclasses.dataclass(frozen=True, slots=True)
class _Batch:
    """The entries one append takes, the file offset after their lines, and whether they are the last."""

    entries: list[EncodedPayload]
    following: int
    last: bool


def _read_batch(sfd: int, start: int, end: int, claim_ns: int) -> _Batch:
    """The next batch of entries from file offset ``start`` (one read of a bounded window): at most
    :data:`SPILL_BATCH_RECORDS` lines and :data:`SPILL_BATCH_BYTES` bytes (one line at least), then a
    ``spill-unreadable`` event for its lines that are not entries (a line torn by a crash, anything
    foreign, a line longer than any entry: skipped a window at a time, counted once) and, in the last
    batch, for bytes beyond the size bound."""
    limit = min(end, HEADER_BYTES + SPILL_MAX_BYTES)
    data = os.pread(sfd, min(limit - start, SPILL_BATCH_BYTES + MAX_ENTRY_BYTES + 1), start)
    at, unreadable, lines, torn = 0, 0, 0, False
    entries: list[EncodedPayload] = []
    if start > HEADER_BYTES and os.pread(sfd, 1, start - 1) != b"\n":
        cut = data.find(b"\n")  # the rest of a long line, counted in the batch where it began
        at = len(data) if cut < 0 else cut + 1
    while at < len(data) and lines < SPILL_BATCH_RECORDS:
        cut = data.find(b"\n", at)
        if cut < 0:
            torn = start + len(data) == limit  # a torn last line (or one the bound cuts)
            if torn or (lines == 0 and len(data) - at > MAX_ENTRY_BYTES):
                unreadable, at = unreadable + 1, len(data)
            break
        if lines and cut >= SPILL_BATCH_BYTES:
            break  # the batch is full: its next line is for the next append
        entry = _entry(data[at:cut])
        if entry is None:
            unreadable += 1
        else:
            entries.append(entry)
        lines, at = lines + 1, cut + 1
    following = start + at
    last = following >= limit
    if last and end > limit and not torn:
        unreadable += 1  # whatever lies beyond the bound
    if unreadable:
        event = dropped_event(unreadable, claim_ns, claim_ns, REASON_SPILL_UNREADABLE)
        entries.append(EncodedPayload(canonical_bytes(event), EMPTY_MARKS))
    return _Batch(entries, following, last)


def _entry(line: bytes) -> EncodedPayload | None:
    """The entry a spill line holds, through the door every payload takes; None for anything else."""
    if len(line) > MAX_ENTRY_BYTES:
        return None
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if obj.__class__ is not dict or obj.keys() != {"payload", "redactions"}:
        return None
    payload, marks = obj["payload"], obj["redactions"]
    if payload.__class__ is not dict or redactions_problem(marks) is not None:
        return None
    try:
        clean, more = sanitize_payload(payload)
    except ChainPayloadError:
        return None
    given = [RedactionMark(mark["path"], mark["rule"]) for mark in marks]
    return encode_payload(clean, sorted({*given, *more}, key=lambda mark: (mark.path, mark.rule)))


def _already_written(fd: int, start: int, end: int, entries: list[EncodedPayload]) -> tuple[int, int]:
    """How many of ``entries``, in order, the chain's complete lines in ``[start, end)`` already hold
    (other lines in between, such as a quarantine event, are passed over), and the offset after the
    last one found (-1 when none was)."""
    found, after = 0, -1
    for offset, line in complete_lines(fd, start, end):
        if found < len(entries) and _holds(line, entries[found]):
            found, after = found + 1, offset + len(line) + 1
            if found == len(entries):
                break
    return found, after


def _holds(line: bytes, entry: EncodedPayload) -> bool:
    """Whether the record ``line`` carries exactly ``entry``'s payload and marks."""
    opening = b'{"payload":' + entry.payload + b',"prev_hash":"'
    if not line.startswith(opening):
        return False
    return line.startswith(b'","redactions":' + entry.marks + b',"seq":', len(opening) + 64)
