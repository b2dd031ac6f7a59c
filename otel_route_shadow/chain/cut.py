"""Cutting a chain into segments: closing the live file ``X.jsonl`` as ``X.jsonl.segments/<a>.jsonl``
and starting a new live file whose first line is the anchor record (docs/chain-format.md section 14).

A cut runs under the chain's file lock (the one every writer takes), in four durable steps:

1. the records of the live file ``[a, b)`` are synced and, when the chain has a log, a checkpoint of
   size ``b`` is signed (``sign``: the caller's, which catches the tree up to ``b`` first);
2. the new live content, the anchor line (record ``b``, linked to record ``b - 1``), is written to
   ``X.jsonl.cut`` and synced;
3. ``X.jsonl`` is hard-linked to ``X.jsonl.segments/<a>.jsonl`` (the folder made first), the folder
   synced;
4. ``X.jsonl.cut`` is renamed over ``X.jsonl``, the directory synced.

``X.jsonl`` always exists. A process killed at any step leaves a state the next writer (or cut) puts
right under the lock, :func:`resume_cut`: a prepared anchor that still follows the live file's last
record finishes the cut (step 4); otherwise the link is removed and the prepared file too. Writers keep
appending to the file they hold only while it is the one at the path (``DecisionChain`` re-checks the
inode under the lock), so a record is never written to a closed segment.

The SHA-256 of the closed file is computed up to its last complete line, and the file synced, before
the lock is taken (the file is append-only there), and both are finished under it, so the lock is held
for the tail, the signature and the renames only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import time
from collections.abc import Callable
from typing import Any, Final

from otel_route_shadow.chain.anchor import ANCHOR_KIND, hash_range, same_value
from otel_route_shadow.chain.errors import ChainError, ChainFormatError, ChainLockTimeout
from otel_route_shadow.chain.group_commit import LOCK_POLL_S
from otel_route_shadow.chain.head import tail_head
from otel_route_shadow.chain.reader import open_chain
from otel_route_shadow.chain.record import (
    MAX_LINE_BYTES,
    ChainHead,
    ChainRecord,
    encode_payload,
    encode_record,
    parse_record_line,
)
from otel_route_shadow.chain.segments import SEGMENTS_SUFFIX, segment_name
from otel_route_shadow.files import fsync_directory, write_all
from otel_route_shadow.lines import complete_end, first_line
from otel_route_shadow.locking import flock_bounded, release

__all__ = [
    "CUT_SUFFIX",
    "ChainCut",
    "CutRefused",
    "cut_chain",
    "cut_pending",
    "first_record",
    "resume_cut",
]

CUT_SUFFIX: Final = ".cut"
"""``X.jsonl.cut``: the new live file while a cut prepares it."""
CUT_TRIES: Final = 8
"""Times a cut starts again when the live file was replaced (cut by another process, or a cut it
left finished) while it waited for the lock: the same bound as an append's."""
_MODE: Final = 0o640

Sign = Callable[[int], str | None]
"""Given ``b``, the signed note of the tree of exactly ``b`` leaves (catching the tree up first); raises
:class:`CutRefused` when it cannot be had."""


def _no_hook(step: int) -> None:
    """The default :data:`step_reached`: nothing."""


step_reached: Callable[[int], None] = _no_hook
"""Called after each step of a cut (1 to 4, and 0 once the lock is held): the crash tests kill the
process there."""


class CutRefused(ChainError):
    """The chain was not cut (nothing changed): a torn tail, a checkpoint that could not be signed,
    a segment name already taken."""


@dataclasses.dataclass(frozen=True, slots=True)
class ChainCut:
    """A cut made: the closed segment's path, its records ``[first_seq, end)``, its size and SHA-256
    (hex), and the checkpoint note of size ``end`` in the anchor (None for a chain with no log)."""

    segment: str
    first_seq: int
    end: int
    bytes: int
    sha256: str
    checkpoint: str | None


def cut_pending(path: str) -> bool:
    """Whether a cut of the chain at ``path`` was left unfinished (its prepared file exists): one
    ``stat``."""
    return os.path.lexists(path + CUT_SUFFIX)


def first_record(fd: int, size: int) -> ChainRecord | None:
    """The first record of the file open at ``fd`` (``size`` bytes), None when it holds no complete
    line within a record's size. Raises :class:`ChainFormatError` when that line is not a record."""
    line = first_line(fd, 0, size, MAX_LINE_BYTES)
    return None if line is None else parse_record_line(line)


def cut_chain(
    path: str, *, sign: Sign | None, timeout: float | None, live: tuple[int, int] | None = None
) -> ChainCut | None:
    """Cut the chain at ``path`` (see the module docstring); None when there is nothing to cut (no
    chain, or a live file holding nothing after its anchor). ``sign`` is None for a chain with no log
    (the anchor's ``checkpoint`` is then null). Waits at most ``timeout`` seconds for the chain's lock
    in all (None: as long as it takes), starting again at most :data:`CUT_TRIES` times when the live
    file was replaced meanwhile: :class:`ChainLockTimeout`, nothing changed. ``live``: the (device, inode)
    of the live file the caller found due a cut; None (nothing cut) once the path names another file, when it
    is hashed or opened to be locked (another process cut it meanwhile: cutting the new one would close a
    segment of a few records). Raises
    :class:`CutRefused` (nothing changed; a ``path`` that is a symbolic link among the causes) and ``OSError``."""
    if os.path.islink(path):  # ``link`` would close the link itself, a relative one dangling in the folder
        raise CutRefused(
            f"{path}: a symbolic link, not the chain's file; not cutting (name the chain by its file)"
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    for _ in range(CUT_TRIES):
        try:
            digest, hashed, identity = _prehash(path)
        except FileNotFoundError:
            return None
        if live is not None and identity != live:
            return None
        fd = open_chain(path, os.O_RDWR)
        try:
            if live is not None and _identity(os.fstat(fd)) != live:
                return None  # another process cut the file ``_prehash`` read before it was opened again
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not flock_bounded(fd, fcntl.LOCK_EX, left, LOCK_POLL_S):
                raise ChainLockTimeout(f"{path}: another process held the chain's lock for {timeout} s")
            step_reached(0)
            st = os.fstat(fd)
            # A file that is no longer the live file (another cut closed it while this one waited for
            # its lock) is a closed segment: never resumed, never cut; the path names another file now.
            if _identity(os.stat(path)) == _identity(st) and not resume_cut(path, fd, st.st_size):
                if _identity(st) != identity or st.st_size < hashed:
                    digest, hashed = hashlib.sha256(), 0
                return _cut_locked(path, fd, st.st_size, digest, hashed, sign)
        finally:
            release(fd)
    raise ChainLockTimeout(f"{path}: the live file was replaced {CUT_TRIES} times while a cut waited for it")


def resume_cut(path: str, fd: int, size: int) -> bool:
    """Under the chain's lock, ``fd`` the file at ``path`` (``size`` bytes): finish or undo a cut a killed
    process left. Returns True when the cut was finished (``path`` now names the new live file: reopen
    it). Finished when the prepared anchor follows the live file's last record and names its size;
    otherwise the link and the prepared file are removed."""
    prepared = path + CUT_SUFFIX
    try:
        live = first_record(fd, size)
    except ChainFormatError:
        live = None  # no segment to name: only the prepared file can be left over
    link = os.path.join(path + SEGMENTS_SUFFIX, segment_name(0 if live is None else live.seq))
    linked = _same_file(link, fd)
    if linked and _anchor_follows(prepared, fd, size):
        os.rename(prepared, path)
        fsync_directory(os.path.dirname(os.path.abspath(path)))
        return True
    if linked:
        os.unlink(link)
        fsync_directory(os.path.dirname(link))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(prepared)
    return False


def _cut_locked(
    path: str, fd: int, size: int, digest: Any, hashed: int, sign: Sign | None
) -> ChainCut | None:
    head, complete = tail_head(fd, size)
    if complete != size:
        raise CutRefused(f"{path}: the chain ends in a torn line; the next append repairs it, then cut")
    live = first_record(fd, size)
    if head is None or live is None or (head.seq == live.seq and _is_anchor(live)):
        return None
    first, end = live.seq, head.seq + 1
    segments = path + SEGMENTS_SUFFIX
    link = os.path.join(segments, segment_name(first))
    if os.path.lexists(link):
        raise CutRefused(f"{link} exists and is not this chain's live file; not cutting")
    os.fsync(fd)
    note = sign(end) if sign is not None else None
    step_reached(1)
    hash_range(fd, digest, hashed, size)
    payload = {
        "kind": ANCHOR_KIND,
        "segment": segment_name(first),
        "first_seq": first,
        "last_seq": head.seq,
        "last_record_hash": head.record_hash,
        "sha256": digest.hexdigest(),
        "bytes": size,
        "checkpoint": note,
    }
    try:
        _prepare(path + CUT_SUFFIX, head, payload)
        step_reached(2)
        if not os.path.isdir(segments):
            os.mkdir(segments, 0o750)
            fsync_directory(os.path.dirname(os.path.abspath(segments)))
        os.link(path, link)
        fsync_directory(segments)
        step_reached(3)
    except OSError:
        _undo(path + CUT_SUFFIX, link, fd)
        raise
    os.rename(path + CUT_SUFFIX, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))
    step_reached(4)
    return ChainCut(link, first, end, size, payload["sha256"], note)


def _prepare(prepared: str, head: ChainHead, payload: dict[str, Any]) -> None:
    """Write the anchor line, record ``head.seq + 1``, to the new live file beside the chain, synced."""
    encoded = encode_payload(payload, [])
    line, _ = encode_record(head.seq + 1, head.record_hash, encoded.payload, encoded.marks)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(prepared)
    out = os.open(prepared, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, _MODE)
    try:
        write_all(out, line)
        os.fsync(out)
    finally:
        os.close(out)


def _undo(prepared: str, link: str, fd: int) -> None:
    """A step failed (the disk refused): remove what the cut made so far, as far as the disk lets."""
    with contextlib.suppress(OSError):
        if _same_file(link, fd):
            os.unlink(link)
    with contextlib.suppress(OSError):
        os.unlink(prepared)


def _anchor_follows(prepared: str, fd: int, size: int) -> bool:
    """Whether the prepared file holds one complete anchor line that follows the last record of the
    file on ``fd`` and names its size."""
    try:
        pfd = open_chain(prepared, os.O_RDONLY)
    except OSError:
        return False
    try:
        psize = os.fstat(pfd).st_size
        anchor = first_record(pfd, psize) if 0 < psize <= MAX_LINE_BYTES else None
    except ChainFormatError:
        anchor = None
    finally:
        os.close(pfd)
    try:
        head, complete = tail_head(fd, size)
    except ChainError:
        return False
    return (
        anchor is not None
        and head is not None
        and complete == size
        and _is_anchor(anchor)
        and anchor.seq == head.seq + 1
        and anchor.prev_hash == head.record_hash
        and same_value(anchor.payload.get("bytes"), size)
    )


def _is_anchor(record: ChainRecord) -> bool:
    return isinstance(record.payload, dict) and record.payload.get("kind") == ANCHOR_KIND


def _same_file(path: str, fd: int) -> bool:
    try:
        return _identity(os.lstat(path)) == _identity(os.fstat(fd))
    except FileNotFoundError:
        return False


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _prehash(path: str) -> tuple[Any, int, tuple[int, int]]:
    """SHA-256 of the live file up to its last complete line, read without the lock (those bytes never
    change), the offset it reached and the file's identity; the file is synced too, so that the sync
    under the lock has only the last lines to write."""
    fd = open_chain(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        with open(fd, "rb", buffering=0, closefd=False) as handle:
            end = complete_end(handle, st.st_size)
        digest = hashlib.sha256()
        hash_range(fd, digest, 0, end)
        os.fsync(fd)
        return digest, end, _identity(st)
    finally:
        os.close(fd)
