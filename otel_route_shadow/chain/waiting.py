"""One writer's records waiting for the chain's lock, kept on disk too, in ``<chain>.waiting/<pid>-<hex>``
(the spill file's format, ``chain.spill``): a process killed by a signal runs no exit code, and the next
writer takes a dead writer's file into the chain, a batch per append (``docs/chain-format.md`` section 9,
"Waiting files")."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import re
import secrets
import stat
import time
from typing import Final

from otel_route_shadow.chain.lost import LostRecords, padded
from otel_route_shadow.chain.quarantine import CHAIN_FILE_MODE
from otel_route_shadow.chain.record import ChainHead, EncodedPayload, LineWriter
from otel_route_shadow.chain.spill import (
    _EMPTY,
    _UNCLAIMED,
    HEADER_BYTES,
    SPILL_MAX_BYTES,
    Spill,
    _header,
    _line,
)
from otel_route_shadow.files import check_regular, open_folder_beneath, open_regular, write_all
from otel_route_shadow.locking import release
from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = ["DROPPED_SUFFIX", "WAITING_FILES_LOOKED", "WaitingFile", "left_beside"]

DROPPED_SUFFIX: Final = ".dropped"
"""A waiting file's companion, its writer's counts of dropped records (:meth:`WaitingFile.counted`)."""
WAITING_FILES_LOOKED: Final = 256
"""Most names of ``<chain>.waiting/`` one look reads, a bound on its work in a folder that may be hostile
(more live writers' files than that can hide a dead one's until they are gone)."""
_WAITING_NAME: Final = re.compile(r"[0-9]{1,10}-[0-9a-f]{8}")
"""How :meth:`WaitingFile._create` names a waiting file; a look takes no other file."""


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
        self._reader = Spill(chain_path, 0.0, self.dir)
        """Reads a dead writer's file (:meth:`reap` points it at each): one warning for all of them."""

    def keep(self, entry: EncodedPayload) -> None:
        """Append ``entry``'s line after the others."""
        line = _line(entry)
        if self._end + len(line) > HEADER_BYTES + SPILL_MAX_BYTES:  # in memory only, as any it cannot keep
            self._cannot(OSError(errno.EFBIG, f"the file would pass {SPILL_MAX_BYTES} bytes"))
            return
        if self._fd < 0 and not self._create():
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
                self._reader.path = path
                head, size, left = self._reader._write_batch(wfd, fd, head, size, write)
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
                Spill(chain_path, None, os.path.join(waiting, n)) for n in names if _WAITING_NAME.fullmatch(n)
            ]
    return tuple(f.path for f in files if f.pending())
