"""A line's leaf hash in the chain's Merkle tree: ``SHA-256(0x00 || line)`` (RFC 9162 section 2.1.1).

Defined here, beside the line check, because the one pass over the chain (``scan``) hashes each line as
a leaf while it checks it, in this process or in worker processes, from the block it already holds;
``otel_route_shadow.tlog`` builds its tree over these leaves and re-exports :func:`leaf_hash`.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Executor
from typing import Final, Protocol

__all__ = ["LEAF_BYTES", "LeafSink", "leaf_hash", "leaf_hashes"]

LEAF_BYTES: Final = 32
_LEAF_PREFIX: Final = hashlib.sha256(b"\x00")


class LeafSink(Protocol):
    """Takes a pass's leaf hashes in file order (32 bytes each, concatenated), a block at a time."""

    def add(self, leaves: bytes) -> None: ...

    def parallel(self, executor: Executor) -> None:
        """Called once, before the first leaves, when the pass runs in the worker processes of
        ``executor``: the sink may queue work of its own on the same pool."""


def leaf_hash(line: bytes) -> bytes:
    """``SHA-256(0x00 || line)``: the leaf hash of one line (without its LF)."""
    return hashlib.sha256(b"\x00" + line).digest()


def leaf_hashes(block: bytes | bytearray, stop: int | None = None) -> bytes:
    """The leaf hash of each line of ``block[:stop]`` (lines joined by LF), concatenated.

    Each line is fed to a copy of a hash already holding ``0x00`` through a memoryview, so no line is
    copied.
    """
    stop = len(block) if stop is None else stop
    view = memoryview(block)
    find, fresh = block.find, _LEAF_PREFIX.copy
    out: list[bytes] = []
    append = out.append
    start, end = 0, find(b"\n", 0, stop)
    while end >= 0:
        digest = fresh()
        digest.update(view[start:end])
        append(digest.digest())
        start, end = end + 1, find(b"\n", end + 1, stop)
    digest = fresh()
    digest.update(view[start:stop])
    append(digest.digest())
    return b"".join(out)
