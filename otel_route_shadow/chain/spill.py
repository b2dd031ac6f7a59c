"""Records still waiting for the chain's lock when their process exits: kept in a spill file beside
the chain, and written into the chain by the next writer, before anything else.

``<chain>.spill`` (``docs/chain-format.md`` section 9) is a header line and then one line per kept
entry, ``{"payload":<canonical payload>,"redactions":<canonical marks>}``: a record without its place.
Exiting writers append to it under the file's own ``flock``. The next writer, holding the chain's lock,
takes them in order, so every spilled record reaches the chain once:

1. it records in the header where in the chain it starts (``claimed`` offset, and the time);
2. it appends the entries, each through the one door any payload takes (sanitized, cut to fit);
3. it empties the file back to its header, and the header says nothing is claimed.

A writer that finds a claim (the previous one died in step 2) appends only the entries the chain does
not hold after the claimed offset. Lines that are not entries (torn by a crash, foreign) are counted in
a ``records-dropped`` event (reason ``spill-unreadable``); entries that would take the file past
:data:`SPILL_MAX_BYTES` are counted the same way at exit (``spill-full``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable
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
    encode_payload,
    redactions_problem,
)
from otel_route_shadow.chain.sanitize import RedactionMark, sanitize_payload
from otel_route_shadow.files import fsync_directory, open_regular, write_all
from otel_route_shadow.locking import flock_bounded

__all__ = ["SPILL_MAX_BYTES", "Spill"]

SPILL_MAX_BYTES: Final = 64 * 1024 * 1024
"""Most bytes of entries a spill file holds (a full default backlog of the longest records fits)."""

_MAGIC: Final = "route-shadow-spill/1"
_UNCLAIMED: Final = -1
_EVENT_ROOM: Final = 512
"""Room kept for the ``spill-full`` event when entries do not all fit."""

_LOG: Final = logging.getLogger("otel_route_shadow")

LineWriter = Callable[[int, ChainHead | None, int, EncodedPayload], tuple[ChainHead, int]]
"""Appends one entry as a record at ``size`` after ``head`` on the chain's descriptor."""


def _header(claimed: int, claim_ns: int) -> bytes:
    """The spill file's first line: the chain offset a writer started taking entries at (-1: none),
    and when; fixed width, so it is rewritten in place."""
    return f"{_MAGIC} {claimed:>20} {claim_ns:>20}\n".encode("ascii")


HEADER_BYTES: Final = len(_header(_UNCLAIMED, 0))


class Spill:
    """The spill file of the chain at ``chain_path``."""

    def __init__(self, chain_path: str, lock_timeout: float | None) -> None:
        self.path = chain_path + ".spill"
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
            try:
                self._append(fd, entries)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        if created:
            fsync_directory(self._dir)

    def _append(self, fd: int, entries: list[EncodedPayload]) -> None:
        size = os.fstat(fd).st_size
        start, prefix = size, b""
        if size < HEADER_BYTES:  # new, or a header torn by a crash (entries only follow a header)
            start, prefix = 0, _header(_UNCLAIMED, 0)
        elif size == HEADER_BYTES and _read_header(fd) != (_UNCLAIMED, 0):
            os.pwrite(fd, _header(_UNCLAIMED, 0), 0)  # a claim whose entries are all written
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

    # -- at the next append -------------------------------------------------------------------------
    def write_into(
        self, fd: int, head: ChainHead | None, size: int, write: LineWriter
    ) -> tuple[ChainHead | None, int]:
        """Append the spilled entries to the chain on ``fd`` (whose lock the caller holds; ``size`` is
        where its complete lines end) with ``write``; return the new head and size.

        A spill file that cannot be used (not a regular file, its lock taken past the timeout, a
        failing disk) is left for a later append, logged once; only the chain's own write errors are
        raised.
        """
        try:
            sfd = open_regular(self.path, os.O_RDWR)
        except FileNotFoundError:
            return head, size
        except OSError as exc:
            self._cannot(exc)
            return head, size
        try:
            if not flock_bounded(sfd, fcntl.LOCK_EX, self._timeout, LOCK_POLL_S):
                return head, size
            try:
                return self._write_into(sfd, fd, head, size, write)
            finally:
                fcntl.flock(sfd, fcntl.LOCK_UN)
        finally:
            os.close(sfd)

    def _write_into(
        self, sfd: int, fd: int, head: ChainHead | None, size: int, write: LineWriter
    ) -> tuple[ChainHead | None, int]:
        try:
            end = os.fstat(sfd).st_size
            if end <= HEADER_BYTES:
                return head, size
            claimed, claim_ns = _read_header(sfd)
            if claimed == _UNCLAIMED:
                claim_ns = time.time_ns()
            entries = _read_entries(sfd, end, claim_ns)
            if claimed == _UNCLAIMED:
                claimed, skip = size, 0
                os.pwrite(sfd, _header(claimed, claim_ns), 0)
                os.fsync(sfd)
            else:
                skip = _already_written(fd, claimed, size, entries)
        except OSError as exc:
            self._cannot(exc)
            return head, size
        for entry in entries[skip:]:
            head, size = write(fd, head, size, entry)
        try:
            os.ftruncate(sfd, HEADER_BYTES)
            os.pwrite(sfd, _header(_UNCLAIMED, 0), 0)
            os.fsync(sfd)
        except OSError as exc:  # the claim stays: the next look finds every entry written
            self._cannot(exc)
        return head, size

    def _cannot(self, exc: OSError) -> None:
        if not self._refusal_logged:
            self._refusal_logged = True
            _LOG.warning("route shadow: the spill file %s cannot be used now: %s", self.path, exc)


def _read_header(fd: int) -> tuple[int, int]:
    """``(claimed offset, claim time)``; an unreadable header counts as unclaimed (then an entry a
    crashed writer had already written can be written twice, never lost)."""
    fields = os.pread(fd, HEADER_BYTES, 0).split()
    if len(fields) == 3 and fields[0] == _MAGIC.encode():
        with contextlib.suppress(ValueError):
            claimed, claim_ns = int(fields[1]), int(fields[2])
            if claimed >= _UNCLAIMED and claim_ns >= 0:
                return claimed, claim_ns
    return _UNCLAIMED, 0


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


def _read_entries(sfd: int, end: int, claim_ns: int) -> list[EncodedPayload]:
    """The entries of the spill file, then a ``spill-unreadable`` event for the lines that are not
    entries (a line torn by a crash, bytes beyond the size bound, anything foreign)."""
    limit = min(end, HEADER_BYTES + SPILL_MAX_BYTES)
    entries: list[EncodedPayload] = []
    unreadable = 0
    for line in complete_lines(sfd, HEADER_BYTES, limit):
        entry = _entry(line)
        if entry is None:
            unreadable += 1
        else:
            entries.append(entry)
    if end > limit or os.pread(sfd, 1, limit - 1) != b"\n":
        unreadable += 1  # a torn last line, or whatever lies beyond the bound
    if unreadable:
        event = dropped_event(unreadable, claim_ns, claim_ns, REASON_SPILL_UNREADABLE)
        entries.append(EncodedPayload(canonical_bytes(event), EMPTY_MARKS))
    return entries


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


def _already_written(fd: int, start: int, end: int, entries: list[EncodedPayload]) -> int:
    """How many of ``entries``, in order, the chain's complete lines in ``[start, end)`` already hold
    (other lines in between, such as a quarantine event, are passed over)."""
    found = 0
    for line in complete_lines(fd, start, end):
        if found < len(entries) and _holds(line, entries[found]):
            found += 1
    return found


def _holds(line: bytes, entry: EncodedPayload) -> bool:
    """Whether the record ``line`` carries exactly ``entry``'s payload and marks."""
    opening = b'{"payload":' + entry.payload + b',"prev_hash":"'
    if not line.startswith(opening):
        return False
    return line.startswith(b'","redactions":' + entry.marks + b',"seq":', len(opening) + 64)
