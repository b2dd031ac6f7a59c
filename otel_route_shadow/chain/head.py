"""Finding a chain's head: the last complete line, read from the end of the file in bounded windows.

The head is what the next record links to. It is found without reading the chain from the start: a
small window at the end, widened geometrically while the last line does not fit, up to the longest
line a verifier accepts (:data:`MAX_LINE_BYTES`: chains written before the entry bound may hold such
lines). Bytes after the last newline are a torn tail, never a record.
"""

from __future__ import annotations

import fcntl
import os
from typing import Final

from otel_route_shadow.chain.errors import ChainCorruptError, ChainFormatError
from otel_route_shadow.chain.reader import open_chain
from otel_route_shadow.chain.record import MAX_LINE_BYTES, ChainHead, parse_record_line

__all__ = ["BLOCK_BYTES", "read_head", "tail_head"]

TAIL_WINDOW: Final = 8 * 1024
"""The first window read back from the end (most lines are shorter)."""

BLOCK_BYTES: Final = 1 << 20
"""The largest block any part of the writer reads or copies at once."""


def read_head(path: str | os.PathLike[str]) -> ChainHead | None:
    """The last complete record of the chain at ``path`` (None when missing or empty).

    Read-only, under a shared lock: a torn tail is ignored, not repaired (the next append does that).
    Raises :class:`ChainCorruptError` when the last complete line is not a record.
    """
    try:
        fd = open_chain(os.fspath(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        head, _ = tail_head(fd, os.fstat(fd).st_size)
        return head
    finally:
        os.close(fd)


def tail_head(fd: int, size: int) -> tuple[ChainHead | None, int]:
    """The head of the complete prefix of ``[0, size)`` and where that prefix ends.

    Raises :class:`ChainCorruptError` when the last complete line is not a record (or is longer than
    any record).
    """
    if size == 0:
        return None, 0
    complete = _last_newline(fd, size) + 1
    if complete == 0:
        return None, 0
    window = TAIL_WINDOW
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
    block_size = TAIL_WINDOW
    while pos > 0:
        start = max(0, pos - block_size)
        block = os.pread(fd, pos - start, start)
        nl = block.rfind(b"\n")
        if nl >= 0:
            return start + nl
        pos = start
        block_size = min(block_size * 8, BLOCK_BYTES)
    return -1
