"""``WrittenLine``: one line a chain writer appended, as its line listener hears of it
(``DecisionChain``'s ``listener``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from otel_route_shadow.tlog import leaf_hash

__all__ = ["LineListener", "WrittenLine"]


class WrittenLine(NamedTuple):
    """One line a writer appended: where it starts, its bytes (its LF included, so the next line starts
    at ``offset + length``), its record hash and the record hash it links to (its ``prev_hash``; hex).
    The line is the very bytes object written: no copy is made, and nothing more is computed on the
    writer's path."""

    offset: int
    line: bytes
    record_hash: str
    prev_hash: str

    @property
    def length(self) -> int:
        return len(self.line)

    def leaf_hash(self) -> bytes:
        """Its RFC 6962 leaf hash, ``SHA-256(0x00 || line without LF)`` (32 bytes)."""
        return leaf_hash(memoryview(self.line)[:-1])


LineListener = Callable[[WrittenLine], None]
