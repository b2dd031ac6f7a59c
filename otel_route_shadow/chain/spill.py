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

A process killed with records in its backlog runs no exit code: :class:`WaitingFile` keeps them, as
they wait, in a file of the same format that is the process's own, which a later writer takes once
the process is dead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import itertools
import os
import re
import secrets
import stat
import time
from typing import Final

import orjson

from otel_route_shadow.chain.backlog import REASON_SPILL_FULL, REASON_SPILL_UNREADABLE, dropped_event
from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.errors import ChainLockTimeout, ChainPayloadError
from otel_route_shadow.chain.group_commit import LOCK_POLL_S
from otel_route_shadow.chain.lost import LostRecords, padded
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
    check_regular,
    fsync_directory,
    open_folder_beneath,
    open_regular,
    write_all,
)
from otel_route_shadow.locking import flock_bounded, release
from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = [
    "SPILL_BATCH_BYTES",
    "SPILL_BATCH_RECORDS",
    "SPILL_MAX_BYTES",
    "WAITING_FILES_LOOKED",
    "Spill",
    "WaitingFile",
    "left_beside",
]

SPILL_MAX_BYTES: Final = 64 * 1024 * 1024
"""Most bytes of entries a spill file holds (a full default backlog of the longest records fits)."""
SPILL_BATCH_RECORDS: Final = 16
"""Most spilled entries one append writes into the chain (the rest go with the next appends)."""
SPILL_BATCH_BYTES: Final = 64 * 1024
"""Most bytes of spilled entries one append reads (at least one entry, whatever its size)."""
DROPPED_SUFFIX: Final = ".dropped"
"""A waiting file's companion, its writer's counts of dropped records (:meth:`WaitingFile.counted`)."""
WAITING_FILES_LOOKED: Final = 256
"""Most names of ``<chain>.waiting/`` one look reads, a bound on its work in a folder that may be hostile
(more live writers' files than that can hide a dead one's until they are gone)."""

_WAITING_NAME: Final = re.compile(r"[0-9]{1,10}-[0-9a-f]{8}")
"""How :meth:`WaitingFile._create` names a waiting file; a look takes no other file."""
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
    :class:`WaitingFile` whose writer died)."""

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


class WaitingFile:
    """One writer's backlog records, mirrored in ``<chain>.waiting/<pid>-<token>`` (spill format) while
    they wait, so they are not lost unmarked when the process dies before it writes or spills them.

    The writer creates the file at its first record that has to wait and holds its ``flock`` for life
    (the kernel gives it back when the process dies, by any signal), or until :meth:`close` removes
    it. :meth:`keep` appends a kept
    record's line (one ``pwrite``, no ``fsync``: the page cache outlives a killed process, and a record
    in memory never had power-loss durability). :meth:`take` claims the lines of the records taken, at
    the chain offset the writer starts writing them (the spill file's claim), and :meth:`settled`
    gives them up once written, spilled or counted. A later writer's look (:meth:`reap`) takes a file
    whose lock it can get, a batch per append, as it takes the spill file. Every method but
    :meth:`reap` is called under the backlog's lock, so the file's lines are the backlog's, in order.
    A failure to write the file leaves the record in memory only (as before the file existed), logged
    once.
    """

    def __init__(self, chain_path: str) -> None:
        self.dir = chain_path + ".waiting"
        self._chain = chain_path
        self._name = ""
        self._fd = -1
        self._cfd = -1
        """The companion file of the backlog's drop counts (:meth:`counted`), once there were any."""
        self._start = self._end = HEADER_BYTES
        """The lines not taken yet: ``[start, end)``; the file ends at ``end``."""
        self._claimed = False
        self._refusal_logged = False

    def keep(self, entry: EncodedPayload) -> None:
        """Append ``entry``'s line after the others."""
        line = _line(entry)
        if self._end + len(line) > HEADER_BYTES + SPILL_MAX_BYTES or (self._fd < 0 and not self._create()):
            return
        try:
            if os.pwrite(self._fd, line, self._end) != len(line):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._end)
            self._cannot(exc)
            return
        self._end += len(line)

    def take(self, claim_at: int | None) -> tuple[int, int]:
        """The lines of the records the backlog hands out now, ``(start, end)``; with ``claim_at`` (the
        chain offset where the writer, holding the chain's lock, starts writing them) claimed there
        first, unless an earlier take that failed half-way still holds a claim (it covers these too)."""
        taken = (self._start, self._end)
        if claim_at is not None and self._fd >= 0 and not self._claimed and self._end > self._start:
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, _header(claim_at, time.time_ns(), self._start), 0)
                self._claimed = True
        self._start = self._end
        return taken

    def restore(self, taken: tuple[int, int]) -> None:
        """The records of ``taken`` went back into the backlog (some may be written: the claim covers
        them): their lines wait again, in front."""
        if self._start == taken[1]:
            self._start = taken[0]

    def settled(self, taken: tuple[int, int]) -> None:
        """The records of ``taken`` are written, spilled or counted: their lines are given up."""
        if self._fd < 0 or self._start != taken[1]:
            return
        try:
            if self._end == taken[1]:  # nothing kept since: the file is emptied, cut first (a header
                os.ftruncate(self._fd, HEADER_BYTES)  # whose next entry lies past the end reads as
                os.pwrite(self._fd, _EMPTY, 0)  # unclaimed, with nothing to take)
                self._start = self._end = HEADER_BYTES
            else:
                os.pwrite(self._fd, _header(_UNCLAIMED, 0, taken[1]), 0)
                tail = self._end - taken[1]
                if tail < taken[1] - HEADER_BYTES:  # moved down, the same way
                    os.pwrite(self._fd, os.pread(self._fd, tail, taken[1]), HEADER_BYTES)
                    os.ftruncate(self._fd, HEADER_BYTES + tail)
                    os.pwrite(self._fd, _EMPTY, 0)
                    self._start, self._end = HEADER_BYTES, HEADER_BYTES + tail
            self._claimed = False
        except OSError as exc:  # the claim stays: a reaper finds the written lines in the chain
            self._cannot(exc)

    def counted(self, counts: dict[str, list[int]], *, create: bool = False) -> None:
        """The backlog's counts of dropped records now (by reason: count, first and last time), in the
        file's companion ``<name>.dropped`` (``<chain>.lost``'s format, rewritten in place; made when
        ``create``, a record dropped for the lock): the next writer's look writes them after the
        file's records when the writer dies first."""
        if self._cfd < 0:
            if not create or (self._fd < 0 and not self._create()):
                return
            try:
                self._cfd = self._open(self._name + DROPPED_SUFFIX, os.O_RDWR | os.O_CREAT)
            except OSError as exc:
                self._cannot(exc)
                return
        with contextlib.suppress(OSError):
            os.pwrite(self._cfd, padded(counts), 0)

    def close(self) -> None:
        """Nothing waits (the writer is closed with an empty backlog): the file and its companion are
        removed and closed, so a writer's instances leave neither descriptors nor files (a record that
        waits later makes new ones)."""
        if self._fd >= 0 and self._end == HEADER_BYTES:
            for name in (self._name + DROPPED_SUFFIX, self._name):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.dir, name))
            self.forget()

    def forget(self) -> None:
        """In a forked child: the parent's files are the parent's (closed here, the lock left to it)."""
        for fd in (self._fd, self._cfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd, self._cfd, self._name, self._claimed = -1, -1, "", False
        self._start = self._end = HEADER_BYTES

    def _create(self) -> bool:
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.dir, 0o750)
            for tries_left in (1, 0):  # a look that took the new file for a dead writer's: another name
                name = f"{os.getpid()}-{secrets.token_hex(4)}"
                path = os.path.join(self.dir, name)
                fd = self._open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if os.stat(path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
                        raise FileNotFoundError(errno.ENOENT, "taken by a writer's look", path)  # see reap
                    write_all(fd, _EMPTY)
                    break
                except (BlockingIOError, FileNotFoundError):
                    os.close(fd)
                    if not tries_left:
                        raise
                except BaseException:
                    os.close(fd)
                    raise
        except OSError as exc:
            self._cannot(exc)
            return False
        self._fd, self._name = fd, name
        return True

    def _open(self, name: str, flags: int) -> int:
        """The regular file ``name`` of ``<chain>.waiting``, opened with ``flags`` and following no
        symbolic link, at the folder's name or the file's (a look passes a folder that is a link over:
        what was kept through one would never be taken)."""
        folder = open_folder_beneath(os.path.dirname(self.dir) or ".", os.path.basename(self.dir))
        try:
            extra = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(name, flags | extra, CHAIN_FILE_MODE, dir_fd=folder)
        finally:
            os.close(folder)
        return check_regular(fd, os.path.join(self.dir, name))

    def _cannot(self, exc: OSError) -> None:
        if not self._refusal_logged:
            self._refusal_logged = True
            _LOG.warning("route shadow: waiting records cannot be kept in %s: %s", self.dir, exc)

    # -- at the next appends, of any writer ---------------------------------------------------------
    def reap(
        self, fd: int, head: ChainHead | None, size: int, write: LineWriter
    ) -> tuple[ChainHead | None, int, bool]:
        """Append the next batch of a dead writer's file to the chain on ``fd`` (whose lock the caller
        holds), as :meth:`Spill.write_into` does, removing the file once it is empty; return the new
        head and size, and whether to look again at the next append. A file whose lock is held
        belongs to a live writer and is left alone."""
        try:
            if not stat.S_ISDIR(os.lstat(self.dir).st_mode):
                return head, size, False
            with os.scandir(self.dir) as entries:
                names = [entry.name for entry in itertools.islice(entries, WAITING_FILES_LOOKED)]
        except OSError:
            return head, size, False
        for name in names:
            path = os.path.join(self.dir, name)
            if name == self._name or not _WAITING_NAME.fullmatch(name):  # a companion, or not ours
                continue
            try:
                wfd = open_regular(path, os.O_RDWR, follow_symlinks=False)
            except OSError:
                continue
            try:
                try:
                    fcntl.flock(wfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its writer lives
                if os.fstat(wfd).st_nlink == 0:
                    continue
                head, size, left = Spill(self._chain, 0.0, path)._write_batch(wfd, fd, head, size, write)
                if not left and os.fstat(wfd).st_size > HEADER_BYTES:
                    return head, size, False  # not emptied: it could not be read now (logged), a later look
                if not left:  # then the counts, after the records, as the backlog hands them out
                    counts = LostRecords(self._chain, 0.0, path + DROPPED_SUFFIX)
                    head, size = counts.write_into(fd, head, size, write)
                    for done in (counts.path, path):
                        with contextlib.suppress(OSError):
                            os.unlink(done)
                return head, size, True
            finally:
                release(wfd)
        return head, size, False


def left_beside(chain_path: str) -> tuple[str, ...]:
    """The files beside the chain holding what its writers left for it and it does not hold yet (the next
    append writes them in): the spill file's records, ``<chain>.lost``'s counts of records lost, and the
    records of a waiting file (a killed writer's, or one still waiting for the lock); a ``stat`` each,
    of the first :data:`WAITING_FILES_LOOKED` names of ``<chain>.waiting/``."""
    files: list[Spill | LostRecords] = [Spill(chain_path, None), LostRecords(chain_path, None)]
    waiting = chain_path + ".waiting"
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(waiting).st_mode):
            with os.scandir(waiting) as entries:
                names = sorted(entry.name for entry in itertools.islice(entries, WAITING_FILES_LOOKED))
            files += [
                Spill(chain_path, None, os.path.join(waiting, n))
                for n in names
                if not n.endswith(DROPPED_SUFFIX)
            ]
    return tuple(f.path for f in files if f.pending())


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
