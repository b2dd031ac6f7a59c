"""Streaming readers for verified chains: records, and the fast ``(seq, payload)`` stream.

Readers do not verify: they are for chains that ``verify`` has already accepted (the report and
what-if commands verify first, then stream). They read fixed-size blocks, so memory does not grow with
the chain, and they stop silently at a torn tail, which is not a record.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from typing import Any, Final

import orjson

from otel_route_shadow.chain.errors import ChainFormatError, ChainPathError
from otel_route_shadow.chain.record import MAX_LINE_BYTES, ChainRecord, parse_record_line
from otel_route_shadow.files import FileRefused, check_regular

__all__ = ["iter_lines", "iter_payloads", "iter_records", "open_chain"]

_MODE: Final = 0o640

_BLOCK: Final = 1 << 20


def iter_lines(
    path: str | os.PathLike[str], end: int | None = None, *, skip_oversize: bool = False
) -> Iterator[tuple[int, bytes]]:
    """``(line_number, line)`` for every newline-terminated line (newline stripped), streaming.

    ``end`` stops at that byte offset (a reader that must not look past what ``verify`` covered).
    A line longer than the record limit is never buffered whole: it raises
    :class:`ChainFormatError`, or with ``skip_oversize`` comes out once as an empty line (not a
    record, so a lenient reader counts it as one malformed line) and the rest of it is skipped.
    """
    number = 0
    carry = b""
    skipping = False
    remaining = -1 if end is None else end
    with os.fdopen(open_chain(os.fspath(path), os.O_RDONLY), "rb", buffering=0) as handle:
        while remaining != 0:
            block = handle.read(_BLOCK if remaining < 0 else min(_BLOCK, remaining))
            if not block:
                return
            if remaining > 0:
                remaining -= len(block)
            lines = block.split(b"\n")
            if carry:
                lines[0] = carry + lines[0]
            carry = lines.pop()
            for line in lines:
                number += 1
                if skipping:  # the rest of an over-long line, already reported
                    skipping = False
                    continue
                yield number, line
            if len(carry) > MAX_LINE_BYTES:
                if not skip_oversize:
                    raise ChainFormatError(
                        f"{os.fspath(path)}: line {number + 1} exceeds {MAX_LINE_BYTES} bytes"
                    )
                yield number + 1, b""
                carry = b""
                skipping = True


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
