"""RFC 6962 / RFC 9162 section 2.1 Merkle tree hashing, compact ranges and proofs.

Leaf ``SHA-256(0x00 || data)``, interior node ``SHA-256(0x01 || left || right)``, empty tree
``SHA-256("")``. A tree over n leaves splits at k, the largest power of two smaller than n.

Proof *generation* takes a ``range_hash(lo, hi)`` callable (the hash of the subtree over leaves
``[lo, hi)``), so the same code builds proofs from an in-memory list or from stored tiles. Proof
*verification* follows RFC 9162 sections 2.1.3.2 and 2.1.4.2 step by step, one small function each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "ProofError",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "parent_row",
    "perfect_root",
    "root_from_leaf_hashes",
    "split_point",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
"""The root of the empty tree: SHA-256 of the empty string."""

RangeHash = Callable[[int, int], bytes]

_NODE_PREFIX = b"\x01"


class ProofError(ValueError):
    """A proof that does not verify, or arguments no proof can exist for."""


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def parent_row(row: bytes | bytearray) -> bytes:
    """The level above ``row`` (hashes concatenated): ``SHA-256(0x01 || left || right)`` of each
    complete pair, concatenated."""
    sha = hashlib.sha256
    return b"".join([sha(_NODE_PREFIX + row[i : i + 64]).digest() for i in range(0, len(row) - 63, 64)])


def perfect_root(hashes: Sequence[bytes]) -> bytes:
    """The root of a perfect subtree: ``hashes`` are its ``2**k`` leaf hashes (or lower nodes).

    Level by level (:func:`parent_row`), without the :class:`CompactRange` bookkeeping per node, which
    :func:`root_from_leaf_hashes` pays: a tile root is computed for every 256 leaves a checkpointer adds.
    """
    row = b"".join(hashes)
    while len(row) > HASH_SIZE:
        row = parent_row(row)
    return row


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """The root of the tree whose leaf hashes are ``hashes`` (MTH of RFC 6962)."""
    if not hashes:
        return EMPTY_ROOT
    compact = CompactRange()
    for h in hashes:
        compact.append(h)
    return compact.root()


class CompactRange:
    """The right edge of a growing tree: the roots of its perfect subtrees, largest first.

    Appending a leaf costs one hash plus one per carry (amortized O(1)); the root costs at most
    log2(n) hashes. ``nodes[i]`` covers ``2**levels[i]`` leaves; the sizes are the binary digits of n.
    """

    __slots__ = ("levels", "nodes", "size")

    def __init__(self, size: int = 0, nodes: Iterable[bytes] = ()) -> None:
        self.size = size
        self.nodes: list[bytes] = list(nodes)
        self.levels: list[int] = [bit for bit in range(size.bit_length() - 1, -1, -1) if size >> bit & 1]
        if len(self.levels) != len(self.nodes):
            raise ValueError(
                f"a compact range of size {size} has {len(self.levels)} nodes, not {len(self.nodes)}"
            )

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash at the right edge."""
        self.append_subtree(0, leaf)

    def append_subtree(self, level: int, digest: bytes) -> None:
        """Add the root of a perfect subtree of ``2**level`` leaves (the size must be a multiple of it)."""
        if self.size & ((1 << level) - 1):
            raise ValueError(f"a subtree of 2**{level} leaves cannot follow {self.size} leaves")
        self.size += 1 << level
        nodes, levels = self.nodes, self.levels
        while levels and levels[-1] == level:
            digest = hashlib.sha256(b"\x01" + nodes.pop() + digest).digest()
            levels.pop()
            level += 1
        nodes.append(digest)
        levels.append(level)

    def root(self) -> bytes:
        """The tree's root hash (``EMPTY_ROOT`` for an empty tree)."""
        if not self.nodes:
            return EMPTY_ROOT
        digest = self.nodes[-1]
        for left in reversed(self.nodes[:-1]):
            digest = node_hash(left, digest)
        return digest


def inclusion_proof(index: int, size: int, range_hash: RangeHash) -> list[bytes]:
    """PATH(index, D[0:size]) of RFC 6962 section 2.1.1, leaf-to-root order."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of size {size}")
    return _path(index, 0, size, range_hash)


def _path(index: int, lo: int, hi: int, range_hash: RangeHash) -> list[bytes]:
    if hi - lo == 1:
        return []
    k = split_point(hi - lo)
    if index < lo + k:
        return [*_path(index, lo, lo + k, range_hash), range_hash(lo + k, hi)]
    return [*_path(index, lo + k, hi, range_hash), range_hash(lo, lo + k)]


def consistency_proof(old_size: int, new_size: int, range_hash: RangeHash) -> list[bytes]:
    """PROOF(old_size, D[0:new_size]) of RFC 6962 section 2.1.2 (empty when the sizes are equal or 0)."""
    if not 0 <= old_size <= new_size:
        raise ProofError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    return _subproof(old_size, 0, new_size, True, range_hash)


def _subproof(m: int, lo: int, hi: int, complete: bool, range_hash: RangeHash) -> list[bytes]:
    n = hi - lo
    if m == n:
        return [] if complete else [range_hash(lo, hi)]
    k = split_point(n)
    if m <= k:
        return [*_subproof(m, lo, lo + k, complete, range_hash), range_hash(lo + k, hi)]
    return [*_subproof(m - k, lo + k, hi, False, range_hash), range_hash(lo, lo + k)]


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
