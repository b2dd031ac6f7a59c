"""Reading a file of LF-terminated lines in large blocks, and cutting it at line boundaries.

Shell code shared by every reader of the chain (verification, the tree, audits, reports):

* :func:`read_line_blocks` is the one block reader: it reads into one reused buffer and yields the
  complete lines of each block in place (the tail of an unfinished line moves to the buffer's front);
* :func:`iter_lines_from` is the one line reader: each complete line with its offset, a line
  longer than the caller's bound reported and passed over, never held;
* :func:`first_line` is the line at an offset alone (a file's first line), read in small probes;
* :func:`complete_end` is where the complete lines of a file end (a torn tail is not a line), or
  where the line ending at a given LF begins: every backward scan for a line boundary;
* :func:`iter_lines_back` reads the last lines first, within a bound (a log's newest entries);
* :func:`line_segments` cuts a byte range into about ``parts`` segments that begin and end at line
  boundaries, for work split between processes (``otel_route_shadow.processes``).

Bytes after the last LF (a torn tail, or an append in flight) are never yielded. Given ``max_line``,
the readers raise :class:`LineTooLong` instead of buffering a line longer than that.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Final, Protocol

__all__ = [
    "BLOCK_BYTES",
    "FileHandle",
    "LineTooLong",
    "complete_end",
    "first_line",
    "iter_blocks",
    "iter_lines_back",
    "iter_lines_from",
    "line_after",
    "line_segments",
    "read_line_blocks",
]

BLOCK_BYTES: Final = 8 * 1024 * 1024
"""How much one read asks for."""
_PROBE_BYTES: Final = 8 * 1024
"""First read when looking for a line boundary (doubled until one is found): lines are a few KB."""
_MAX_PROBE_BYTES: Final = 1024 * 1024
"""The doubling stops here: a huge torn tail or line is probed in reads of this size, never whole."""


class LineTooLong(ValueError):
    """A line longer than the reader's ``max_line``; ``offset`` is where it begins (read backwards,
    :func:`complete_end`: the earliest byte read, which the line holds)."""

    def __init__(self, offset: int, max_line: int) -> None:
        super().__init__(f"the line at byte {offset} exceeds the {max_line}-byte limit")
        self.offset = offset


class FileHandle(Protocol):
    """What the readers need of an open binary file (``open(path, "rb", buffering=0)`` has it)."""

    def seek(self, offset: int, /) -> int: ...
    def read(self, size: int = -1, /) -> bytes | None: ...
    def readinto(self, buffer: memoryview, /) -> int | None: ...
    def fileno(self) -> int: ...


def read_line_blocks(
    handle: FileHandle, start: int, end: int, block_bytes: int = BLOCK_BYTES, max_line: int | None = None
) -> Iterator[tuple[int, bytearray, int]]:
    """Yield ``(offset, buffer, stop)`` for the complete lines of ``handle`` in ``[start, end)``.

    ``buffer[:stop]`` holds whole lines joined by LF (the LF at ``stop`` ends the last of them) and
    begins at file offset ``offset``. The buffer is reused: a caller that keeps bytes copies them
    before asking for the next block. A line longer than the buffer grows it. ``handle`` must be
    unbuffered or positioned by this function alone (it seeks to ``start``). A line still open after
    ``max_line`` bytes raises :class:`LineTooLong` (a complete line that fits in the buffer is yielded
    whatever its length: the caller checks it).
    """
    buffer = bytearray(2 * block_bytes)
    view = memoryview(buffer)
    carried, offset = 0, start  # bytes of an unfinished line at the buffer's front; its file offset
    handle.seek(start)
    while offset + carried < end:
        if carried == len(buffer):  # one line longer than the buffer: grow it (no further than max_line)
            view.release()
            grown = 2 * len(buffer) if max_line is None else min(2 * len(buffer), max_line + 2)
            buffer.extend(bytes(grown - len(buffer)))
            view = memoryview(buffer)
        want = min(len(buffer) - carried, block_bytes, end - offset - carried)
        got = handle.readinto(view[carried : carried + want])
        if not got:
            return
        filled = carried + got
        stop = buffer.rfind(b"\n", 0, filled)
        if stop < 0:
            carried = filled
        else:
            yield offset, buffer, stop
            carried, offset = filled - stop - 1, offset + stop + 1
            buffer[:carried] = buffer[stop + 1 : filled]
        if max_line is not None and carried > max_line:
            raise LineTooLong(offset, max_line)


def iter_blocks(
    handle: FileHandle, start: int, end: int, block_bytes: int = BLOCK_BYTES, max_line: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """:func:`read_line_blocks` with each block copied out: ``(offset after the block, lines joined
    by LF without the last LF)``, for callers that keep or split a block."""
    for offset, buffer, stop in read_line_blocks(handle, start, end, block_bytes, max_line):
        yield offset + stop + 1, memoryview(buffer)[:stop].tobytes()


def iter_lines_from(
    handle: FileHandle, offset: int, end: int, max_line: int, block_bytes: int = BLOCK_BYTES
) -> Iterator[tuple[int, bytes | None]]:
    """``(offset, line)`` for every complete line in ``[offset, end)`` (without its LF), in order. A
    line longer than ``max_line`` is never held whole: it comes out once as ``(its offset, None)``
    and reading goes on after it. Bytes after the last LF (a torn tail) never come out."""
    while offset < end:
        try:
            for after, block in iter_blocks(handle, offset, end, block_bytes, max_line):
                at = after - len(block) - 1
                for line in block.split(b"\n"):
                    yield at, line if len(line) <= max_line else None
                    at += len(line) + 1
                offset = after
        except LineTooLong as exc:
            offset = line_after(handle, exc.offset, end)
            handle.seek(offset - 1)
            if handle.read(1) != b"\n":
                return  # no LF after it: a torn tail, not a line
            yield exc.offset, None
        else:
            return


def first_line(fd: int, start: int, end: int, max_line: int) -> bytes | None:
    """The complete line at ``start`` of the file open at ``fd`` (without its LF), read with ``pread`` (the
    file's position untouched) in probes that grow from a few KB; None when ``[start, end)`` holds no LF,
    or none within ``max_line`` bytes (a longer line is never read whole)."""
    data = b""
    while len(data) <= max_line and start + len(data) < end:
        want = min(max(_PROBE_BYTES, len(data)), _MAX_PROBE_BYTES, end - start - len(data))
        block = os.pread(fd, want, start + len(data))
        if not block:
            return None
        if (at := block.find(b"\n")) >= 0:
            line = data + block[:at]
            return line if len(line) <= max_line else None
        data += block
    return None


def complete_end(handle: FileHandle, size: int | None = None, max_line: int | None = None) -> int:
    """The offset just after the last LF of the file's first ``size`` bytes (default: all of them; 0
    when there is no LF): where the complete lines end, or, with ``size`` at an LF, where the line
    ending there begins. Reads back in probes that grow from a few KB.

    Given ``max_line``, no more than ``max_line + 1`` bytes are read back: when they hold no LF and
    ``size`` is over ``max_line``, :class:`LineTooLong` is raised (the line begins before its offset).
    """
    end = os.fstat(handle.fileno()).st_size if size is None else size
    floor = 0 if max_line is None else max(0, end - max_line - 1)
    position, step = end, _PROBE_BYTES
    while position > floor:
        step = min(step, position - floor)
        cut = os.pread(handle.fileno(), step, position - step).rfind(b"\n")
        if cut >= 0:
            return position - step + cut + 1
        position, step = position - step, min(2 * step, _MAX_PROBE_BYTES)
    if max_line is not None and end > max_line:
        raise LineTooLong(floor, max_line)
    return 0


def iter_lines_back(
    handle: FileHandle, end: int, max_bytes: int, step: int = _MAX_PROBE_BYTES
) -> Iterator[bytes]:
    """The complete lines of the file's first ``end`` bytes (without LF), the last first, read back in
    reads of ``step`` bytes; reading stops once ``max_bytes`` were read (a line cut there never comes
    out). Bytes after the last LF (a torn tail) never come out."""
    fd = handle.fileno()
    end = complete_end(handle, end)
    position, carry, first = end, b"", True
    while position > 0 and end - position < max_bytes:
        size = min(step, position)
        position -= size
        pieces = (os.pread(fd, size, position) + carry).split(b"\n")
        carry = pieces.pop(0) if position > 0 else b""
        if first:
            pieces.pop()  # after the last LF: nothing
            first = False
        yield from reversed(pieces)


def line_after(handle: FileHandle, position: int, end: int) -> int:
    """The offset just after the first LF at or after ``position`` (``end`` when none is before it)."""
    handle.seek(position)
    step = _PROBE_BYTES
    while position < end:
        data = handle.read(min(step, end - position))
        if not data:
            break
        cut = data.find(b"\n")
        if cut >= 0:
            return position + cut + 1
        position, step = position + len(data), min(2 * step, _MAX_PROBE_BYTES)
    return end


def line_segments(handle: FileHandle, start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """``[start, end)`` (which begins at a line boundary) cut into at most ``parts`` non-empty
    segments, each beginning just after an LF; a few probes per cut, never a scan of the range."""
    cuts = [start]
    for k in range(1, max(1, parts)):
        cut = line_after(handle, max(cuts[-1], start + (end - start) * k // parts), end)
        if cut < end:
            cuts.append(cut)
    cuts.append(end)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]
