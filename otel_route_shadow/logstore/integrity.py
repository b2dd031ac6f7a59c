"""The chain's Merkle tree, built from the leaf hashes of the one pass over the chain.

The pass (``chain.verify_pass``) checks the lines and hands their leaf hashes, in file order, to a
:class:`TreeSink`. When the pass runs in worker processes, the sink queues each aligned chunk of
``2**chunk_levels`` leaves for its lower levels on the same pool as soon as its leaves are in, behind
the segments still to hash (so the tree does not wait for the last segment, and no second pool is
started); the short last chunk and the few levels above the chunks are built here.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future

from otel_route_shadow.chain import verify_pass
from otel_route_shadow.logstore.retained import RetainedTree
from otel_route_shadow.tlog import HASH_SIZE, NodeReader, TreeLevels, parent_row

__all__ = ["TreeSink", "chain_tree"]

_CHUNK_LEVELS = 14
_EVERY_LINE = 1 << 62


class TreeSink:
    """A ``chain.LeafSink`` that keeps the leaves and gives the :class:`TreeLevels` over them."""

    def __init__(self, chunk_levels: int = _CHUNK_LEVELS) -> None:
        self._leaves = bytearray()
        self._levels = chunk_levels
        self._executor: Executor | None = None
        self._chunks: list[Future[list[bytes]]] = []

    def parallel(self, executor: Executor) -> None:
        self._executor = executor

    def add(self, leaves: bytes) -> None:
        self._leaves += leaves
        if self._executor is None:
            return
        chunk = HASH_SIZE << self._levels
        while len(self._leaves) >= (len(self._chunks) + 1) * chunk:
            at = len(self._chunks) * chunk
            piece = bytes(self._leaves[at : at + chunk])
            self._chunks.append(self._executor.submit(_chunk_levels, piece, self._levels))

    @property
    def size(self) -> int:
        """The leaves taken so far."""
        return len(self._leaves) // HASH_SIZE

    def retained(self, start: int, below: NodeReader | None) -> RetainedTree:
        """The tree of a chain pruned below ``start`` whose leaves from ``start`` on this sink took
        (:class:`RetainedTree`; ``below`` gives the nodes wholly below ``start``)."""
        return RetainedTree(start, bytes(self._leaves), below)

    def tree(self) -> TreeLevels:
        """The tree over every leaf taken (after the pass: its pool, if any, has finished)."""
        leaves = bytes(self._leaves)
        if not self._chunks:
            return TreeLevels(leaves)
        rows = [future.result() for future in self._chunks]
        done = len(self._chunks) * (HASH_SIZE << self._levels)
        if len(leaves) > done:  # the short last chunk
            rows.append(_chunk_levels(leaves[done:], self._levels))
        lower = [b"".join(r[h] for r in rows if h < len(r)) for h in range(self._levels)]
        return TreeLevels(leaves, lower)


def _chunk_levels(leaves: bytes, levels: int) -> list[bytes]:
    """Levels 1 to ``levels`` over one aligned chunk of leaves (fewer for a short last chunk: the
    levels it has no complete node in)."""
    rows: list[bytes] = []
    row: bytes = leaves
    while len(row) >= 2 * HASH_SIZE and len(rows) < levels:
        row = parent_row(row)
        rows.append(row)
    return rows


def chain_tree(path: str) -> TreeLevels:
    """The tree over every complete line of the chain at ``path``, no line checked (for locating a
    changed record once a root was found not to match)."""
    sink = TreeSink()
    verify_pass(path, unchecked=_EVERY_LINE, leaves=sink)
    return sink.tree()
