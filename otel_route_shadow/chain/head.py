"""Finding a chain's head: the last complete line, read from the end of the file in bounded windows.

The head is what the next record links to. It is found without reading the chain from the start, by
``lines.complete_end``: a small window at the end, widened geometrically while the last line does not
fit, up to the longest line a verifier accepts (:data:`MAX_LINE_BYTES`: chains written before the entry
bound may hold such lines). Bytes after the last newline are a torn tail, never a record.
"""

from __future__ import annotations

import io
import os
from typing import Final

from otel_route_shadow.chain.errors import ChainCorruptError, ChainFormatError
from otel_route_shadow.chain.reader import open_chain
from otel_route_shadow.chain.record import MAX_LINE_BYTES, ChainHead, parse_record_line
from otel_route_shadow.lines import LineTooLong, complete_end
from otel_route_shadow.locking import settled_size

__all__ = ["BLOCK_BYTES", "read_head", "tail_head"]

BLOCK_BYTES: Final = 1 << 20
"""The largest block any part of the writer reads or copies at once."""


def read_head(path: str | os.PathLike[str]) -> ChainHead | None:
    """The last complete record of the chain at ``path`` (None when missing or empty).

    Read-only, at the size the file has with no append in flight (``locking.settled_size``): a torn
    tail is ignored, not repaired (the next append does that).
    Raises :class:`ChainCorruptError` when the last complete line is not a record.
    """
    try:
        fd = open_chain(os.fspath(path), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        head, _ = tail_head(fd, settled_size(fd))
        return head
    finally:
        os.close(fd)


def tail_head(fd: int, size: int) -> tuple[ChainHead | None, int]:
    """The head of the complete prefix of ``[0, size)`` and where that prefix ends.

    Raises :class:`ChainCorruptError` when the last complete line is not a record (or is longer than
    any record).
    """
    with io.FileIO(fd, "rb", closefd=False) as handle:
        complete = complete_end(handle, size)
        if complete == 0:
            return None, 0
        end = complete - 1  # the LF ending the last complete line
        try:
            offset = complete_end(handle, end, MAX_LINE_BYTES)
        except LineTooLong:
            raise ChainCorruptError(
                f"the last line (ending at byte {end}) is longer than {MAX_LINE_BYTES} bytes: not a record; "
                "run `otel-route-shadow verify`"
            ) from None
    line = os.pread(fd, end - offset, offset)
    try:
        record = parse_record_line(line)
    except ChainFormatError as exc:
        raise ChainCorruptError(
            f"the last complete line (byte {offset}) is not a record ({exc}); nothing was appended; "
            "run `otel-route-shadow verify`"
        ) from None
    return ChainHead(record.seq, record.record_hash), complete
