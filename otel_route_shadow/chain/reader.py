"""Streaming readers for verified chains: records, and the fast ``(seq, payload)`` stream.

Readers do not verify: they are for chains that ``verify`` has already accepted (the report and
what-if commands verify first, then stream). They read fixed-size blocks, so memory does not grow with
the chain, and they stop silently at a torn tail, which is not a record.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Iterator
from typing import Any, Final

import orjson

from otel_route_shadow.chain.errors import ChainFormatError, ChainPathError
from otel_route_shadow.chain.record import MAX_LINE_BYTES, ChainRecord, parse_record_line
from otel_route_shadow.files import FileRefused, check_regular
from otel_route_shadow.lines import FileHandle
from otel_route_shadow.lines import iter_lines_from as lines_from

__all__ = ["iter_lines", "iter_lines_from", "iter_payloads", "iter_records", "open_chain"]

_MODE: Final = 0o640

_BLOCK_BYTES: Final = 1 << 20


def iter_lines_from(handle: FileHandle, offset: int, end: int) -> Iterator[tuple[int, bytes | None]]:
    """``(offset, line)`` for every complete line of the chain in ``[offset, end)``; a line longer than
    a record (:data:`MAX_LINE_BYTES`) comes out as None, never held (``lines.iter_lines_from``)."""
    return lines_from(handle, offset, end, MAX_LINE_BYTES, _BLOCK_BYTES)


def iter_lines(
    path: str | os.PathLike[str], end: int | None = None, *, skip_oversize: bool = False
) -> Iterator[tuple[int, bytes]]:
    """``(line_number, line)`` for every newline-terminated line (newline stripped), streaming.

    ``end`` stops at that byte offset (a reader that must not look past what ``verify`` covered;
    default: the size the file has when reading starts). Lines are read by
    ``lines.iter_lines_from``: a line longer than the record limit is never buffered whole: it raises
    :class:`ChainFormatError`, or with ``skip_oversize`` comes out once as an empty line (not a
    record, so a lenient reader counts it as one malformed line). A torn tail, however long, is not a
    line.
    """
    name = os.fspath(path)
    with io.FileIO(open_chain(name, os.O_RDONLY), "rb") as handle:
        stop = os.fstat(handle.fileno()).st_size if end is None else end
        for number, (_, line) in enumerate(iter_lines_from(handle, 0, stop), start=1):
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


def iter_payloads(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(seq, payload)`` of every complete record, in file order: one ``orjson`` parse per line and
    nothing else, for analyses that stream a verified chain. Quarantine events are included (filter on
    ``payload["kind"]``). Raises :class:`ChainFormatError` for a line that is not a record object."""
    loads = orjson.loads
    for number, line in iter_lines(path):
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
