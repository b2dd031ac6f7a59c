"""RFC 6962 / RFC 9162 section 2.1 Merkle tree hashing: one tree over a node reader, and the proofs.

Leaf ``SHA-256(0x00 || data)`` (:func:`leaf_hash`; the chain's verification pass hashes every line as a
leaf with it while it checks it), interior node ``SHA-256(0x01 || left || right)``, empty tree
``SHA-256("")``. A tree over n leaves splits at k, the largest power of two smaller than n.

As Go's ``golang.org/x/mod/sumdb/tlog`` does with its ``HashReader``, every computation over the tree
is written once here over a :class:`NodeReader`: anything that gives the root of a perfect subtree,
``node(height, index)`` (the ``2**height`` leaves from ``index << height`` on). The hash of leaves
``[lo, hi)`` is the split of the range into maximal aligned perfect subtrees (:func:`subtrees`),
folded right to left (:func:`fold`); the tree hash, inclusion and consistency proofs are built from
it. Readers: :class:`TreeLevels` (every level in memory, as a chain scan builds them), the tiles on
disk (``tiles.TileReader``, which authenticates each tile before use) and the writer's right edge
(``tiles.TreeBuilder``). :class:`CompactRange` is the smallest right edge (the subtree roots alone)
and takes its root with the same fold. Proof *verification* follows RFC 9162 sections 2.1.3.2 and
2.1.4.2 step by step, one small function each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Protocol

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "NodeReader",
    "ProofError",
    "TreeLevels",
    "consistency_proof",
    "fold",
    "inclusion_proof",
    "leaf_hash",
    "leaf_hasher",
    "node_hash",
    "parent_row",
    "perfect_root",
    "range_hash",
    "split_point",
    "subtrees",
    "tree_hash",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
"""The root of the empty tree: SHA-256 of the empty string."""

leaf_hasher: Final = hashlib.sha256(b"\x00").copy
"""A new SHA-256 already holding ``0x00``: updated with a line, its digest is the line's leaf hash (a
bound method of ``hashlib``, so a loop over many lines calls no Python function per line)."""
_NODE_PREFIX = b"\x01"


class ProofError(ValueError):
    """A proof that does not verify, or arguments no proof can exist for."""


class NodeReader(Protocol):
    """Gives the root of any perfect subtree of one tree (raising when it cannot)."""

    def node(self, height: int, index: int) -> bytes:
        """The root of the ``2**height`` leaves from leaf ``index << height`` on."""
        ...


def leaf_hash(line: bytes | bytearray | memoryview) -> bytes:
    """``SHA-256(0x00 || line)``: the leaf hash of one entry (a chain line without its LF), never copying it."""
    digest = leaf_hasher()
    digest.update(line)
    return digest.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def parent_row(row: bytes | bytearray) -> bytes:
    """The level above ``row`` (hashes concatenated): the node hash of each complete pair, concatenated."""
    sha = hashlib.sha256
    return b"".join([sha(_NODE_PREFIX + row[i : i + 64]).digest() for i in range(0, len(row) - 63, 64)])


def perfect_root(hashes: Sequence[bytes] | bytes) -> bytes:
    """The root of a perfect subtree: ``hashes`` are its ``2**k`` lowest nodes (a list, or concatenated),
    hashed level by level with :func:`parent_row`."""
    row = hashes if isinstance(hashes, bytes) else b"".join(hashes)
    while len(row) > HASH_SIZE:
        row = parent_row(row)
    return row


def subtrees(lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """Split leaves ``[lo, hi)`` into maximal aligned perfect subtrees, left to right: ``(height, index)``
    (the subtree of ``2**height`` leaves from ``index << height`` on)."""
    while lo < hi:
        height = (lo & -lo).bit_length() - 1 if lo else (hi - lo).bit_length() - 1
        while lo + (1 << height) > hi:
            height -= 1
        yield height, lo >> height
        lo += 1 << height


def fold(parts: Sequence[bytes]) -> bytes:
    """The root over consecutive subtree roots, folded right to left (``EMPTY_ROOT`` for none)."""
    if not parts:
        return EMPTY_ROOT
    digest = parts[-1]
    for left in reversed(parts[:-1]):
        digest = node_hash(left, digest)
    return digest


def range_hash(reader: NodeReader, lo: int, hi: int) -> bytes:
    """MTH of leaves ``[lo, hi)`` (RFC 6962's hash of ``D[lo:hi]``) from ``reader``'s subtree roots, for
    the ranges a tree is made of: ``lo`` a multiple of a power of two at least ``hi - lo`` (as Go's
    ``subTreeHash``; every range the tree hash and the proofs ask for is one)."""
    return fold([reader.node(height, index) for height, index in subtrees(lo, hi)])


def tree_hash(reader: NodeReader, size: int) -> bytes:
    """The root of the tree of the first ``size`` leaves (Go's ``tlog.TreeHash``)."""
    return range_hash(reader, 0, size)


class TreeLevels:
    """A :class:`NodeReader` holding every complete node of a tree in memory, level by level (level h:
    the nodes of ``2**h`` leaves, concatenated): about n extra hashes for n leaves, computed level by
    level with :func:`parent_row`; any root or proof then costs at most log2(n) node hashes.

    ``lower`` holds levels 1, 2, ... already built elsewhere (``integrity.TreeSink`` builds them in
    worker processes), possibly ending in levels with no node; the rest are built here.
    """

    def __init__(self, leaves: bytes, lower: Sequence[bytes] = ()) -> None:
        self.levels = [leaves]
        for row in lower:
            if len(self.levels[-1]) < 2 * HASH_SIZE:
                break
            self.levels.append(row)
        row = self.levels[-1]
        while len(row) >= 2 * HASH_SIZE:
            row = parent_row(row)
            self.levels.append(row)

    @property
    def size(self) -> int:
        """The number of leaves."""
        return len(self.levels[0]) // HASH_SIZE

    def node(self, height: int, index: int) -> bytes:
        return self.levels[height][index * HASH_SIZE : (index + 1) * HASH_SIZE]


class CompactRange:
    """The smallest right edge of a growing tree: the roots of its perfect subtrees, largest first
    (the subtrees of ``[0, size)``, see :func:`subtrees`), so the root is their :func:`fold`.

    Appending a leaf costs one hash plus one per carry (amortized O(1)).
    """

    __slots__ = ("levels", "nodes", "size")

    def __init__(self, size: int = 0, nodes: Iterable[bytes] = ()) -> None:
        self.size = size
        self.nodes: list[bytes] = list(nodes)
        self.levels: list[int] = [height for height, _ in subtrees(0, size)]
        if len(self.levels) != len(self.nodes):
            raise ValueError(
                f"a compact range of size {size} has {len(self.levels)} nodes, not {len(self.nodes)}"
            )

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash at the right edge."""
        self.size += 1
        digest, level = leaf, 0
        nodes, levels = self.nodes, self.levels
        while levels and levels[-1] == level:
            digest = node_hash(nodes.pop(), digest)
            levels.pop()
            level += 1
        nodes.append(digest)
        levels.append(level)

    def root(self) -> bytes:
        """The tree's root hash (``EMPTY_ROOT`` for an empty tree)."""
        return fold(self.nodes)


def inclusion_proof(index: int, size: int, reader: NodeReader) -> list[bytes]:
    """PATH(index, D[0:size]) of RFC 6962 section 2.1.1, leaf-to-root order (Go's ``tlog.ProveRecord``)."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of size {size}")
    return _path(index, 0, size, reader)


def _path(index: int, lo: int, hi: int, reader: NodeReader) -> list[bytes]:
    if hi - lo == 1:
        return []
    k = split_point(hi - lo)
    if index < lo + k:
        return [*_path(index, lo, lo + k, reader), range_hash(reader, lo + k, hi)]
    return [*_path(index, lo + k, hi, reader), range_hash(reader, lo, lo + k)]


def consistency_proof(old_size: int, new_size: int, reader: NodeReader) -> list[bytes]:
    """PROOF(old_size, D[0:new_size]) of RFC 6962 section 2.1.2 (empty when the sizes are equal or 0;
    Go's ``tlog.ProveTree``)."""
    if not 0 <= old_size <= new_size:
        raise ProofError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    return _subproof(old_size, 0, new_size, True, reader)


def _subproof(m: int, lo: int, hi: int, complete: bool, reader: NodeReader) -> list[bytes]:
    n = hi - lo
    if m == n:
        return [] if complete else [range_hash(reader, lo, hi)]
    k = split_point(n)
    if m <= k:
        return [*_subproof(m, lo, lo + k, complete, reader), range_hash(reader, lo + k, hi)]
    return [*_subproof(m - k, lo + k, hi, False, reader), range_hash(reader, lo, lo + k)]


# --- verification, RFC 9162 section 2.1.3.2 (inclusion) ---------------------------------------------


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raise ``ProofError`` unless ``proof`` shows leaf hash ``leaf`` at ``index`` in the tree ``root``."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is not below the tree size {size}")
    _check_hash_sizes([leaf, root, *proof])
    if _inclusion_root(index, size, leaf, proof) != root:
        raise ProofError("the inclusion proof does not lead to the checkpoint's root")


def _inclusion_root(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than the tree is deep")
    return r


# --- verification, RFC 9162 section 2.1.4.2 (consistency) -------------------------------------------


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Raise ``ProofError`` unless ``proof`` shows tree ``old_root`` is a prefix of tree ``new_root``."""
    if not 0 <= old_size <= new_size:
        raise ProofError(f"size {old_size} cannot precede size {new_size}")
    _check_hash_sizes([old_root, new_root, *proof])
    if old_size == new_size:
        _expect(not proof, "a proof between equal sizes must be empty")
        _expect(old_root == new_root, "two checkpoints of one size have different roots")
        return
    if old_size == 0:
        _expect(not proof, "a proof from the empty tree must be empty")
        return
    _expect(bool(proof), "the consistency proof is empty")
    fr, sr = _consistency_roots(old_size, new_size, old_root, proof)
    _expect(fr == old_root, "the consistency proof does not lead to the old root")
    _expect(sr == new_root, "the consistency proof does not lead to the new root")


def _consistency_roots(m: int, n: int, old_root: bytes, proof: Sequence[bytes]) -> tuple[bytes, bytes]:
    path = list(proof)
    if m & (m - 1) == 0:  # step 2: old size a power of two, the old root is the first node
        path.insert(0, old_root)
    fn, sn = m - 1, n - 1
    while fn & 1:  # step 4
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        _expect(sn != 0, "the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    _expect(sn == 0, "the consistency proof is too short")
    return fr, sr


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ProofError(message)


def _check_hash_sizes(hashes: Iterable[bytes]) -> None:
    for h in hashes:
        _expect(len(h) == HASH_SIZE, f"a hash of {len(h)} bytes, not {HASH_SIZE}")
