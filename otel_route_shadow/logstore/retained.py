"""The Merkle tree of a pruned chain (docs/chain-format.md sections 14.4 and 14.5).

The records below the minimum index m are gone, but the tree and its signed roots are not: a node
wholly below m is read from the stored tiles, authenticated against a signed checkpoint's root
(``tlog.TileReader``); a node wholly at or above m is hashed from the retained records' leaves; a node
across m is the hash of its two children. Every root of a size >= m, and every proof a retained entry
needs, is made of such nodes (the nodes below m a root of any size >= m needs are the subtrees of
``[0, m)``, all in the tree of any checkpoint of size >= m).
"""

from __future__ import annotations

from otel_route_shadow.tlog import HASH_SIZE, NodeReader, TreeLevels, parent_row

__all__ = ["RetainedTree"]

_ALIGN = 16
"""The retained leaves are laid on a grid of ``2**_ALIGN`` leaves (at most that many placeholder leaves
before m), so that the nodes up to that height are read from one :class:`TreeLevels`; the nodes above
it from a second one over that height's row."""


class RetainedTree:
    """A ``NodeReader`` over the tree of ``start + len(leaves)`` leaves of which only those from
    ``start`` on are known (``leaves``: their hashes, concatenated); ``below`` gives the nodes wholly
    below ``start`` (None: none can be given, asking for one raises ``ValueError``); ``align``: the
    grid's height (:data:`_ALIGN`)."""

    def __init__(self, start: int, leaves: bytes, below: NodeReader | None, align: int = _ALIGN) -> None:
        self.start = start
        self.size = start + len(leaves) // HASH_SIZE
        self.below = below
        self._align = align
        self._base = start >> align << align
        self._lower = TreeLevels(bytes((start - self._base) * HASH_SIZE) + leaves)
        row = self._lower.levels[align] if len(self._lower.levels) > align else b""
        self._upper = TreeLevels(bytes((self._base >> align) * HASH_SIZE) + row)

    def node(self, height: int, index: int) -> bytes:
        first, end = index << height, (index + 1) << height
        if end > self.size:
            raise ValueError(f"node ({height}, {index}) is not in a tree of {self.size} leaves")
        if first >= self.start:
            if height <= self._align:
                return self._lower.node(height, index - (self._base >> height))
            return self._upper.node(height - self._align, index)
        if end <= self.start:
            if self.below is None:
                raise ValueError(
                    f"the records below seq {self.start} are pruned and no authenticated checkpoint's "
                    "tiles stand for them"
                )
            return self.below.node(height, index)
        return parent_row(self.node(height - 1, 2 * index) + self.node(height - 1, 2 * index + 1))
