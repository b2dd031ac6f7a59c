"""Streaming readers for verified chains: records, and the fast ``(seq, payload)`` stream.

Readers do not verify: they are for chains that ``verify`` has already accepted (the report and
what-if commands verify first, then stream). They read fixed-size blocks, so memory does not grow with
the chain, and they stop silently at a torn tail, which is not a record. A segmented chain is read
across its files in order (``segments``), its byte positions running over them as over one file.
"""

from __future__ import annotations

import errno
import io
import os
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any, Final

import orjson

from otel_route_shadow.chain.anchor import Anchor, anchor_of
from otel_route_shadow.chain.errors import ChainFormatError, ChainPathError
from otel_route_shadow.chain.record import MAX_LINE_BYTES, ChainRecord, parse_record_line
from otel_route_shadow.chain.segments import Segment, chain_segments, live_path
from otel_route_shadow.files import FileRefused, check_regular
from otel_route_shadow.lines import FileHandle, first_line
from otel_route_shadow.lines import iter_lines_from as lines_from

__all__ = [
    "ChainBytes",
    "anchor_checkpoints",
    "chain_line",
    "each_chain_file",
    "iter_chain_lines",
    "iter_lines",
    "iter_lines_from",
    "iter_payloads",
    "iter_records",
    "line_seq",
    "open_chain",
]

_MODE: Final = 0o640

_BLOCK_BYTES: Final = 1 << 20


def iter_lines_from(handle: FileHandle, offset: int, end: int) -> Iterator[tuple[int, bytes | None]]:
    """``(offset, line)`` for every complete line of the chain in ``[offset, end)``; a line longer than
    a record (:data:`MAX_LINE_BYTES`) comes out as None, never held (``lines.iter_lines_from``)."""
    return lines_from(handle, offset, end, MAX_LINE_BYTES, _BLOCK_BYTES)


def each_chain_file(path: str | os.PathLike[str], kept_from: int = 0) -> Iterator[tuple[Segment, io.FileIO]]:
    """The chain's files in order (``segments.chain_segments``), each opened read-only through
    :func:`open_chain` when its turn comes and closed when the caller moves on. The live file is
    opened first, and a closed segment that is the same file (a cut in progress linked it there) ends
    the list, so a cut between the listing and the reading neither loses nor repeats records.
    ``kept_from`` (a pruned chain's minimum index): the closed segments named below it are not the
    chain's (an interrupted prune left them) and are passed over."""
    live = live_path(path)
    with io.FileIO(open_chain(live, os.O_RDONLY), "rb") as live_handle:
        found = os.fstat(live_handle.fileno())
        for segment in chain_segments(live)[:-1]:
            if segment.first is not None and segment.first < kept_from:
                continue
            with io.FileIO(open_chain(segment.path, os.O_RDONLY), "rb") as handle:
                info = os.fstat(handle.fileno())
                if (info.st_dev, info.st_ino) == (found.st_dev, found.st_ino):
                    break
                yield segment, handle
        yield Segment(live, None), live_handle


def iter_chain_lines(
    path: str | os.PathLike[str],
    start: int = 0,
    end: int | None = None,
    block_bytes: int = _BLOCK_BYTES,
    *,
    kept_from: int = 0,
) -> Iterator[tuple[int, bytes | None]]:
    """``(position, line)`` for every complete line of the chain in ``[start, end)``, over its
    segments in order (a position counts the bytes of every file before it); a line longer than a
    record comes out as None (:func:`iter_lines_from`). ``end`` defaults to the chain's size when
    reading starts; ``block_bytes`` is the size of one read. Bytes after a file's last newline are not
    a line. ``kept_from``: a pruned chain's minimum index; positions count from the file that begins
    there (:func:`each_chain_file`)."""
    base = 0
    for _, handle in each_chain_file(path, kept_from):
        size = os.fstat(handle.fileno()).st_size
        stop = size if end is None else min(size, end - base)
        if stop > start - base:
            for offset, line in lines_from(handle, max(0, start - base), stop, MAX_LINE_BYTES, block_bytes):
                yield base + offset, line
        base += size
        if end is not None and base >= end:
            return


def iter_lines(
    path: str | os.PathLike[str], end: int | None = None, *, skip_oversize: bool = False, kept_from: int = 0
) -> Iterator[tuple[int, bytes]]:
    """``(line_number, line)`` for every newline-terminated line (newline stripped), streaming, over
    the chain's segments (:func:`iter_chain_lines`).

    ``end`` stops at that byte position (a reader that must not look past what ``verify`` covered;
    default: the size the chain has when reading starts; ``kept_from``: as for
    :func:`iter_chain_lines`). Lines are read by
    ``lines.iter_lines_from``: a line longer than the record limit is never buffered whole: it raises
    :class:`ChainFormatError`, or with ``skip_oversize`` comes out once as an empty line (not a
    record, so a lenient reader counts it as one malformed line). A torn tail, however long, is not a
    line.
    """
    name = os.fspath(path)
    for number, (_, line) in enumerate(iter_chain_lines(name, 0, end, kept_from=kept_from), start=1):
        if line is not None:
            yield number, line
        elif skip_oversize:
            yield number, b""
        else:
            raise ChainFormatError(f"{name}: line {number} exceeds {MAX_LINE_BYTES} bytes")


def iter_records(path: str | os.PathLike[str]) -> Iterator[ChainRecord]:
    """Every complete record in file order. Shapes are checked, hashes and links are not (verify
    first). Raises :class:`ChainFormatError` naming the line for a complete line that is not a record."""
    for number, line in iter_lines(path):
        try:
            yield parse_record_line(line)
        except ChainFormatError as exc:
            raise ChainFormatError(f"{os.fspath(path)}: line {number}: {exc}") from None


def iter_payloads(
    path: str | os.PathLike[str], *, kept_from: int = 0
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(seq, payload)`` of every complete record, in file order: one ``orjson`` parse per line and
    nothing else, for analyses that stream a verified chain. Quarantine events are included (filter on
    ``payload["kind"]``). Raises :class:`ChainFormatError` for a line that is not a record object.
    ``kept_from``: as for :func:`iter_chain_lines`."""
    loads = orjson.loads
    for number, line in iter_lines(path, kept_from=kept_from):
        try:
            record = loads(line)
            seq = record["seq"]
            payload = record["payload"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ChainFormatError(f"{os.fspath(path)}: line {number}: not a record ({exc})") from None
        if payload.__class__ is not dict or seq.__class__ is not int:
            raise ChainFormatError(f"{os.fspath(path)}: line {number}: not a record")
        yield seq, payload


def open_chain(path: str, flags: int) -> int:
    """Open the chain at ``path`` with ``flags``, refusing anything but a regular file.

    ``O_NONBLOCK`` keeps a FIFO at the path from hanging the caller (no reader or writer needed to
    open it), and the ``fstat`` runs before anything else touches the descriptor
    (:func:`otel_route_shadow.files.check_regular`). Raises :class:`ChainPathError` for a FIFO, a device
    or a socket, ``IsADirectoryError`` for a directory, ``OSError`` for the rest.
    """
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, _MODE)
    try:
        return check_regular(fd, path)
    except FileRefused as exc:
        if exc.problem == "is a directory":
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a chain file", path) from None
        raise ChainPathError(f"{path}: {exc.problem}; not a chain") from None


def chain_line(path: str | os.PathLike[str], seq: int) -> bytes | None:
    """Line ``seq`` of the chain (without its LF; line i holds seq i), or None when the chain has no
    such complete line (or it is longer than a record). A segmented chain is entered at the segment
    whose name says it holds ``seq``; the live file begins at its first record's seq (0 for a chain
    never cut, the anchor's after a cut or a prune)."""
    segments = chain_segments(path)
    firsts = [segment.first or 0 for segment in segments[:-1]]
    for segment in segments[max(0, bisect_right(firsts, seq) - 1) :]:
        with io.FileIO(open_chain(segment.path, os.O_RDONLY), "rb") as handle:
            lines = iter_lines_from(handle, 0, os.fstat(handle.fileno()).st_size)
            first = segment.first
            if first is None:
                head = next(lines, (0, None))[1]
                claimed = line_seq(head) if head is not None else -1
                first = claimed if claimed >= 0 or len(segments) > 1 else 0
                if first == seq:
                    return head
                first += 1
            for index, (_, line) in enumerate(lines, start=first):
                if index == seq:
                    return line
                if index > seq:
                    return None
    return None


def anchor_checkpoints(path: str | os.PathLike[str], start: int = 0) -> list[str]:
    """The signed notes the anchors of the chain's files carry (docs/chain-format.md 14.2), from the
    file beginning at seq ``start`` on: each file's first line, when it is an anchor whose checkpoint
    is a string (whether it is a note of the anchor's size is the verification's to say)."""
    notes: list[str] = []
    for segment, handle in each_chain_file(path):
        if segment.first is not None and segment.first < start:
            continue
        fd = handle.fileno()
        found = anchor_of(first_line(fd, 0, os.fstat(fd).st_size, MAX_LINE_BYTES))
        if isinstance(found, Anchor) and isinstance(found.payload.get("checkpoint"), str):
            notes.append(found.payload["checkpoint"])
    return notes


def line_seq(line: bytes) -> int:
    """The ``seq`` a chain line claims (its shape unchecked otherwise); -1 when it claims none."""
    try:
        seq = orjson.loads(line)["seq"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return -1
    return seq if seq.__class__ is int else -1


class ChainBytes:
    """The bytes of a chain's files one after the other (``segments``), read by position
    (:meth:`pread`) or as a stream (``seek``, ``read``, ``readinto``: what ``lines.iter_lines_from``
    and ``lines.line_after`` need); for a chain never cut, its one file. Sizes are those when opened.

    The live file is opened first (a closed segment that is the same file ends the list, as in
    :func:`each_chain_file`); a closed segment is opened when first read, through :func:`open_chain`.
    Use as a context manager: every file opened is closed on exit.

    ``start`` is the position of the first file's first byte: the bytes of the segments a prune removed
    (docs/chain-format.md section 14.5) still count, so a position names the same byte before and after a
    prune; nothing is read below it. ``kept_from`` (a pruned chain's minimum index): the closed segments
    named below it are not the chain's (an interrupted prune left them) and are passed over.
    """

    def __init__(self, path: str | os.PathLike[str], start: int = 0, kept_from: int = 0) -> None:
        self.path = live_path(path)
        self.start = start
        live = io.FileIO(open_chain(self.path, os.O_RDONLY), "rb")
        self._handles: dict[int, io.FileIO] = {}
        try:
            found = os.fstat(live.fileno())
            self._paths: list[str] = []
            self._starts: list[int] = []
            for segment in chain_segments(self.path)[:-1]:
                if segment.first is not None and segment.first < kept_from:
                    continue
                info = os.lstat(segment.path)  # a link is never followed: opening it is refused
                if (info.st_dev, info.st_ino) == (found.st_dev, found.st_ino):
                    break
                self._paths.append(segment.path)
                self._starts.append(start)
                start += info.st_size
        except BaseException:
            live.close()
            raise
        self._paths.append(self.path)
        self._starts.append(start)
        self._handles[len(self._paths) - 1] = live
        self.size = start + found.st_size
        self._position = self.start

    def __enter__(self) -> ChainBytes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    def pread(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes from chain position ``offset`` (fewer at the end)."""
        parts: list[bytes] = []
        while size > 0 and self.start <= offset < self.size:
            index = bisect_right(self._starts, offset) - 1
            limit = self._starts[index + 1] if index + 1 < len(self._starts) else self.size
            data = os.pread(
                self._handle(index).fileno(), min(size, limit - offset), offset - self._starts[index]
            )
            if not data:
                break
            parts.append(data)
            offset += len(data)
            size -= len(data)
        return b"".join(parts)

    def lines(self, start: int) -> Iterator[tuple[int, bytes | None]]:
        """``(position, line)`` for every complete line from chain position ``start`` (a line's first
        byte) to the size when opened, across the files; a line longer than a record comes out as None
        (:func:`iter_lines_from`)."""
        return iter_lines_from(self, start, self.size)

    def _handle(self, index: int) -> io.FileIO:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._handles[index] = io.FileIO(open_chain(self._paths[index], os.O_RDONLY), "rb")
        return handle

    def seek(self, offset: int, /) -> int:
        self._position = offset
        return offset

    def read(self, size: int = -1, /) -> bytes:
        data = self.pread(self.size - self._position if size < 0 else size, self._position)
        self._position += len(data)
        return data

    def readinto(self, buffer: memoryview, /) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def fileno(self) -> int:
        """Not one file: raises ``io.UnsupportedOperation`` (as ``io.BytesIO`` does)."""
        raise io.UnsupportedOperation("a chain's bytes span several files")
