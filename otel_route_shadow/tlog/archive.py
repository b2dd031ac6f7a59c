"""Range proofs: leaves ``[a, b)`` are exactly the range ``[a, b)`` of the tree of ``size`` leaves with a
given root, and the proof document an archived segment carries (docs/chain-format.md section 14.5).

The tree hash of ``[0, size)`` is RFC 6962's recursion, split at the largest power of two below the
range's length. One walk (:func:`_walk`) follows it: a node wholly outside ``[a, b)`` is one hash of the
proof (in walk order, left to right), a node wholly inside is computed from the leaves, any other is split.
The prover passes a :class:`~otel_route_shadow.tlog.merkle.NodeReader` over the whole tree (the tiles)
for both; the verifier passes the proof's hashes for the nodes outside and the archive's leaf hashes for
those inside, and the walk gives the root to compare with the signed one. Each rule of verification is one
small function. At most two hashes per level: a proof has at most ``2 * 63`` hashes.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from otel_route_shadow.tlog.checkpoint import Checkpoint
from otel_route_shadow.tlog.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    NodeReader,
    ProofError,
    node_hash,
    perfect_root,
    range_hash,
    split_point,
)
from otel_route_shadow.tlog.proofs import decode_hash

__all__ = [
    "ArchiveProofDoc",
    "LeafRange",
    "check_archive_doc",
    "range_proof",
    "range_root",
    "verify_range",
]

_B64Hash = Annotated[str, Field(min_length=44, max_length=44)]
_HEX64 = r"^[0-9a-f]{64}$"
_MAX_PROOF = 2 * 64

_Nodes = Callable[[int, int], bytes]


def _walk(lo: int, hi: int, a: int, b: int, outside: _Nodes, inside: _Nodes) -> bytes:
    """The hash of the tree node over leaves ``[lo, hi)``: ``outside(lo, hi)`` for a node disjoint from
    ``[a, b)``, ``inside(lo, hi)`` for one within it, else the node hash of its two children."""
    if hi <= a or lo >= b:
        return outside(lo, hi)
    if a <= lo and hi <= b:
        return inside(lo, hi)
    k = split_point(hi - lo)
    left = _walk(lo, lo + k, a, b, outside, inside)
    return node_hash(left, _walk(lo + k, hi, a, b, outside, inside))


def _check_range(a: int, b: int, size: int) -> None:
    if not 0 <= a <= b <= size:
        raise ProofError(f"no range [{a}, {b}) in a tree of {size} leaves")


def range_proof(a: int, b: int, size: int, reader: NodeReader) -> list[bytes]:
    """The hashes of the nodes of the tree of ``size`` leaves (read from ``reader``) that cover
    ``[0, a)`` and ``[b, size)``, in the order :func:`range_root` takes them."""
    _check_range(a, b, size)
    proof: list[bytes] = []

    def outside(lo: int, hi: int) -> bytes:
        proof.append(range_hash(reader, lo, hi))
        return proof[-1]

    if size:
        _walk(0, size, a, b, outside, lambda lo, hi: range_hash(reader, lo, hi))
    return proof


class LeafRange:
    """A :class:`~otel_route_shadow.tlog.merkle.NodeReader` over the leaf hashes of ``[first, first +
    len(leaves) / 32)`` only (concatenated): the perfect subtrees lying within that range."""

    def __init__(self, first: int, leaves: bytes) -> None:
        self.first = first
        self.leaves = leaves

    def node(self, height: int, index: int) -> bytes:
        start = ((index << height) - self.first) * HASH_SIZE
        end = start + (HASH_SIZE << height)
        if start < 0 or end > len(self.leaves):
            raise ProofError(f"node ({height}, {index}) is not within the archived leaves")
        return perfect_root(self.leaves[start:end])


def _check_leaves(a: int, b: int, leaves: bytes) -> None:
    if len(leaves) != (b - a) * HASH_SIZE:
        raise ProofError(f"{len(leaves) // HASH_SIZE} leaves, but the range [{a}, {b}) has {b - a}")


def _check_hash_sizes(proof: Sequence[bytes]) -> None:
    for digest in proof:
        if len(digest) != HASH_SIZE:
            raise ProofError(f"a hash of {len(digest)} bytes, not {HASH_SIZE}")


def _taker(proof: Sequence[bytes]) -> tuple[_Nodes, Iterator[bytes]]:
    """The ``outside`` of the verifier's walk: the proof's hashes in order (too few: ``ProofError``)."""
    hashes = iter(proof)

    def outside(_lo: int, _hi: int) -> bytes:
        digest = next(hashes, None)
        if digest is None:
            raise ProofError("the range proof is too short")
        return digest

    return outside, hashes


def _check_used_up(rest: Iterator[bytes]) -> None:
    if next(rest, None) is not None:
        raise ProofError("the range proof is too long")


def range_root(a: int, b: int, size: int, leaves: bytes, proof: Sequence[bytes]) -> bytes:
    """The root of the tree of ``size`` leaves from the leaf hashes of ``[a, b)`` (concatenated) and
    ``proof`` (:func:`range_proof`); ``ProofError`` when they cannot make one."""
    _check_range(a, b, size)
    _check_leaves(a, b, leaves)
    _check_hash_sizes(proof)
    if size == 0:
        _check_used_up(iter(proof))
        return EMPTY_ROOT
    outside, rest = _taker(proof)
    tree = LeafRange(a, leaves)
    root = _walk(0, size, a, b, outside, lambda lo, hi: range_hash(tree, lo, hi))
    _check_used_up(rest)
    return root


def verify_range(a: int, b: int, size: int, leaves: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raise ``ProofError`` unless ``leaves`` are exactly leaves ``[a, b)`` of the tree ``root`` of
    ``size`` leaves."""
    if range_root(a, b, size, leaves, proof) != root:
        raise ProofError("the leaves and the range proof do not lead to the checkpoint's root")


class ArchiveProofDoc(BaseModel):
    """The ``.proof`` file of an archived segment: its records are leaves ``[first, end)`` of the tree
    of the signed ``checkpoint`` note (``proof``: :func:`range_proof`, standard base64); ``segment``,
    ``sha256`` (hex) and ``size`` name the segment file as it was before compression."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["archive"] = "archive"
    origin: str
    checkpoint: str
    first: int = Field(ge=0)
    end: int = Field(ge=0)
    segment: str
    sha256: str = Field(pattern=_HEX64)
    size: int = Field(ge=0)
    proof: list[_B64Hash] = Field(max_length=_MAX_PROOF)

    @classmethod
    def of(
        cls,
        checkpoint: Checkpoint,
        note: str,
        first: int,
        end: int,
        segment: tuple[str, str, int],
        proof: Sequence[bytes],
    ) -> ArchiveProofDoc:
        """The document for ``proof`` of ``[first, end)`` against ``checkpoint`` (signed as ``note``);
        ``segment`` is the file's name, SHA-256 (hex) and size."""
        name, sha256, size = segment
        return cls(
            origin=checkpoint.origin,
            checkpoint=note,
            first=first,
            end=end,
            segment=name,
            sha256=sha256,
            size=size,
            proof=[base64.b64encode(h).decode("ascii") for h in proof],
        )


def _check_origin(doc: ArchiveProofDoc, checkpoint: Checkpoint) -> None:
    if doc.origin != checkpoint.origin:
        raise ProofError(f"the proof is for log {doc.origin!r}, the checkpoint for {checkpoint.origin!r}")


def check_archive_doc(doc: ArchiveProofDoc, checkpoint: Checkpoint, leaves: bytes) -> None:
    """Raise ``ProofError`` unless ``leaves`` (the archive's leaf hashes, concatenated) are leaves
    ``[doc.first, doc.end)`` of ``checkpoint``'s tree (authenticated by the caller) by ``doc``'s proof."""
    _check_origin(doc, checkpoint)
    proof = [decode_hash(h) for h in doc.proof]
    verify_range(doc.first, doc.end, checkpoint.size, leaves, proof, checkpoint.root)
