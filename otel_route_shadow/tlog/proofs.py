"""Inclusion and consistency proofs as JSON documents, built from the tiles and checked offline.

``prove`` reads only the tiles and the checkpoint (never a chain line): O(log n) tile reads, each tile
authenticated against the checkpoint's signed root before use (``tiles.TileReader``), so a damaged tile
is a ``TileError`` naming it, never a wrong proof. The documents carry everything ``verify-proof`` needs besides the signed checkpoint and a verifier key:

* inclusion: ``seq``, ``tree_size``, ``leaf_hash``, ``proof`` (RFC 6962 audit path, leaf to root);
* consistency: ``old_size``, ``new_size``, ``old_root``, ``new_root``, ``proof`` (RFC 6962 order).

Hashes are standard base64, as in the checkpoint text. Both documents also carry the checkpoint note
they were made against (``checkpoint``), for convenience: a verifier authenticates the checkpoint it
is handed separately, never this copy.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from otel_route_shadow.tlog.checkpoint import Checkpoint
from otel_route_shadow.tlog.merkle import (
    HASH_SIZE,
    ProofError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)
from otel_route_shadow.tlog.tiles import TileReader

__all__ = [
    "ConsistencyProofDoc",
    "InclusionProofDoc",
    "ProofDoc",
    "check_consistency_doc",
    "check_inclusion_doc",
    "decode_hash",
    "prove_consistency",
    "prove_inclusion",
]

_B64Hash = Annotated[str, Field(min_length=44, max_length=44)]
_MAX_PROOF = 128


class InclusionProofDoc(BaseModel):
    """Record ``seq`` (leaf hash ``leaf_hash``) is in the tree of ``tree_size`` leaves."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["inclusion"] = "inclusion"
    origin: str
    seq: int = Field(ge=0)
    tree_size: int = Field(ge=1)
    leaf_hash: _B64Hash
    proof: list[_B64Hash] = Field(max_length=_MAX_PROOF)
    checkpoint: str = ""


class ConsistencyProofDoc(BaseModel):
    """The tree of ``old_size`` leaves (``old_root``) is a prefix of the tree of ``new_size`` leaves."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["consistency"] = "consistency"
    origin: str
    old_size: int = Field(ge=0)
    new_size: int = Field(ge=0)
    old_root: _B64Hash
    new_root: _B64Hash
    proof: list[_B64Hash] = Field(max_length=_MAX_PROOF)
    checkpoint: str = ""


ProofDoc = Annotated[InclusionProofDoc | ConsistencyProofDoc, Field(discriminator="kind")]


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def decode_hash(text: str) -> bytes:
    """A 32-byte hash from standard base64; ``ProofError`` otherwise."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ProofError("a hash is not base64") from None
    if len(raw) != HASH_SIZE:
        raise ProofError(f"a hash of {len(raw)} bytes, not {HASH_SIZE}")
    return raw


def _reader_of(reader: TileReader, checkpoint: Checkpoint) -> TileReader:
    if (reader.size, reader.root) != (checkpoint.size, checkpoint.root):
        raise ValueError("the tile reader is not for this checkpoint's tree")
    return reader


def prove_inclusion(
    reader: TileReader, checkpoint: Checkpoint, seq: int, note: str = ""
) -> InclusionProofDoc:
    """The inclusion proof of record ``seq`` in ``checkpoint``'s tree, from the tiles ``reader`` (made
    for that checkpoint) authenticates."""
    tiles = _reader_of(reader, checkpoint)
    path = inclusion_proof(seq, checkpoint.size, tiles)
    leaf = tiles.node(0, seq)
    return InclusionProofDoc(
        origin=checkpoint.origin,
        seq=seq,
        tree_size=checkpoint.size,
        leaf_hash=_b64(leaf),
        proof=[_b64(h) for h in path],
        checkpoint=note,
    )


def prove_consistency(
    reader: TileReader, checkpoint: Checkpoint, old_size: int, new_size: int, note: str = ""
) -> ConsistencyProofDoc:
    """The consistency proof from ``old_size`` to ``new_size`` (at most the checkpoint's size)."""
    tiles = _reader_of(reader, checkpoint)
    if not 0 <= old_size <= new_size <= checkpoint.size:
        raise ProofError(
            f"need 0 <= from ({old_size}) <= to ({new_size}) <= checkpoint size ({checkpoint.size})"
        )
    path = consistency_proof(old_size, new_size, tiles)
    return ConsistencyProofDoc(
        origin=checkpoint.origin,
        old_size=old_size,
        new_size=new_size,
        old_root=_b64(tree_hash(tiles, old_size)),
        new_root=_b64(tree_hash(tiles, new_size)),
        proof=[_b64(h) for h in path],
        checkpoint=note,
    )


def check_inclusion_doc(doc: InclusionProofDoc, checkpoint: Checkpoint, record_line: bytes | None) -> None:
    """Raise ``ProofError`` unless ``doc`` proves its leaf in ``checkpoint`` (authenticated by the caller).

    ``record_line``: the record's line (a trailing LF is ignored); its leaf hash must be the proof's.
    """
    _same_origin(doc.origin, checkpoint)
    if doc.tree_size != checkpoint.size:
        raise ProofError(
            f"the proof is for a tree of {doc.tree_size} leaves, the checkpoint has {checkpoint.size}"
        )
    leaf = decode_hash(doc.leaf_hash)
    if record_line is not None and leaf_hash(record_line.removesuffix(b"\n")) != leaf:
        raise ProofError("the record line's leaf hash is not the proof's leaf hash")
    verify_inclusion(doc.seq, doc.tree_size, leaf, [decode_hash(h) for h in doc.proof], checkpoint.root)


def check_consistency_doc(doc: ConsistencyProofDoc, checkpoints: Sequence[Checkpoint]) -> list[int]:
    """Raise ``ProofError`` unless ``doc`` holds and one of ``checkpoints`` (authenticated by the caller)
    signs its new root; return the sizes of the checkpoints whose roots the proof ties together."""
    old_root, new_root = decode_hash(doc.old_root), decode_hash(doc.new_root)
    verify_consistency(doc.old_size, doc.new_size, old_root, new_root, [decode_hash(h) for h in doc.proof])
    tied: list[int] = []
    for checkpoint in checkpoints:
        _same_origin(doc.origin, checkpoint)
        expected = {doc.old_size: old_root, doc.new_size: new_root}.get(checkpoint.size)
        if expected is None:
            continue
        if expected != checkpoint.root:
            raise ProofError(f"the checkpoint of size {checkpoint.size} has another root than the proof")
        tied.append(checkpoint.size)
    if doc.new_size not in tied:
        raise ProofError(f"no checkpoint of size {doc.new_size} was given to anchor the proof's new root")
    return tied


def _same_origin(origin: str, checkpoint: Checkpoint) -> None:
    if origin != checkpoint.origin:
        raise ProofError(f"the proof is for log {origin!r}, the checkpoint for {checkpoint.origin!r}")
