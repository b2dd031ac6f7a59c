"""The chain's lines as leaves of its Merkle tree: ``SHA-256(0x00 || line)`` (RFC 9162 section 2.1.1,
``tlog.leaf_hash``), a block of lines at a time.

Here, beside the line check, because the one pass over the chain (``scan``) hashes each line as a leaf
while it checks it, in this process or in worker processes, from the block it already holds.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Protocol

from otel_route_shadow.tlog import leaf_hasher

__all__ = ["LeafSink", "leaf_hashes"]


class LeafSink(Protocol):
    """Takes a pass's leaf hashes in file order (32 bytes each, concatenated), a block at a time."""

    def add(self, leaves: bytes) -> None: ...

    def parallel(self, executor: Executor) -> None:
        """Called once, before the first leaves, when the pass runs in the worker processes of
        ``executor``: the sink may queue work of its own on the same pool."""


def leaf_hashes(
    block: bytes | bytearray, stop: int | None = None, *, noting: bytes = b"", noted: list[int] | None = None
) -> bytes:
    """The leaf hash of each line of ``block[:stop]`` (lines joined by LF), concatenated.

    Each line is fed to ``tlog.leaf_hasher`` (a hash already holding ``0x00``) through a memoryview, so
    no line is copied. With ``noted``, the offset of every line that begins with ``noting`` is appended to it
    (the pass finds its ``records-dropped`` events this way, without a search of its own).
    """
    stop = len(block) if stop is None else stop
    view = memoryview(block)
    find, fresh, begins = block.find, leaf_hasher, block.startswith
    out: list[bytes] = []
    append = out.append
    start, end = 0, find(b"\n", 0, stop)
    while True:
        if noted is not None and begins(noting, start):
            noted.append(start)
        digest = fresh()
        digest.update(view[start : end if end >= 0 else stop])
        append(digest.digest())
        if end < 0:
            return b"".join(out)
        start, end = end + 1, find(b"\n", end + 1, stop)
