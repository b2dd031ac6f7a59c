"""Streaming readers for verified chains: records, and the fast ``(seq, payload)`` stream.

Readers do not verify: they are for chains that ``verify`` has already accepted (the report and
what-if commands verify first, then stream). They read fixed-size blocks, so memory does not grow with
the chain, and they stop silently at a torn tail, which is not a record.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Final

import orjson

from otel_route_shadow.chain._format import MAX_LINE_BYTES, ChainFormatError, ChainRecord, parse_record_line

__all__ = ["iter_lines", "iter_payloads", "iter_records"]

_BLOCK: Final = 1 << 20


def iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """``(line_number, line)`` for every newline-terminated line (newline stripped), streaming.

    A line longer than the record limit raises :class:`ChainFormatError` instead of being buffered.
    """
    number = 0
    carry = b""
    with open(os.fspath(path), "rb", buffering=0) as handle:
        while True:
            block = handle.read(_BLOCK)
            if not block:
                return
            lines = block.split(b"\n")
            if carry:
                lines[0] = carry + lines[0]
            carry = lines.pop()
            for line in lines:
                number += 1
                yield number, line
            if len(carry) > MAX_LINE_BYTES:
                raise ChainFormatError(f"{os.fspath(path)}: line {number + 1} exceeds {MAX_LINE_BYTES} bytes")


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
