"""A verifiable log over the decision chain, as a specification: Merkle tree, tiles, signed checkpoints,
cosignatures, witness policies, key sets (a rotated key's windows), proofs and receipts.

Pure computation, as Go's ``sumdb/tlog`` is: no file, no lock, no thread, no clock (``tests/
test_architecture.py`` holds it to that). Leaf i of the tree is line i of the chain without its LF;
hashing is RFC 6962; checkpoints are C2SP tlog-checkpoint texts in C2SP signed notes (Ed25519, Go's key
strings); tiles follow C2SP tlog-tiles and are read through a ``TileStorage`` (``read_tiles``/
``save_tiles``) and authenticated against a signed checkpoint before use (``TileReader``). Where the
log is kept, ``<chain>.tlog/``, and everything that reads or writes it is ``otel_route_shadow.logstore``.
The formats are specified in ``docs/chain-format.md`` (section 13).
"""

from __future__ import annotations

from otel_route_shadow.tlog.archive import (
    ArchiveProofDoc,
    check_archive_doc,
    range_proof,
    verify_range,
)
from otel_route_shadow.tlog.attestation import AttestationError, attest_checkpoint
from otel_route_shadow.tlog.authentication import (
    AuthenticationError,
    BadSignature,
    Malformed,
    authenticate,
    checkpoint_of,
)
from otel_route_shadow.tlog.checkpoint import Checkpoint, CheckpointError, parse_checkpoint, parse_size
from otel_route_shadow.tlog.cosignature import (
    DEFAULT_SKEW_S,
    CosignatureError,
    CosignatureVerifier,
    add_cosignatures,
    verify_cosignatures,
    without_false_cosignatures,
)
from otel_route_shadow.tlog.keyset import MAX_KEY_SET_BYTES, KeySetError, KeyWindow, LogKey, parse_key_set
from otel_route_shadow.tlog.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    CompactRange,
    NodeReader,
    ProofError,
    TreeLevels,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    leaf_hasher,
    parent_row,
    perfect_root,
    range_hash,
    split_point,
    subtrees,
    tree_hash,
    verify_consistency,
)
from otel_route_shadow.tlog.note import NoteError, OpenedNote, Signer, Verifier, parse_note, sign_note
from otel_route_shadow.tlog.policy import (
    MAX_POLICY_BYTES,
    PolicyLog,
    WitnessPolicy,
    WitnessPolicyError,
    parse_witness_policy,
)
from otel_route_shadow.tlog.proofs import (
    ConsistencyProofDoc,
    InclusionProofDoc,
    ProofDoc,
    check_consistency_doc,
    check_inclusion_doc,
    decode_hash,
    prove_consistency,
    prove_inclusion,
)
from otel_route_shadow.tlog.quorum import QuorumReport, WitnessedCheckpoint, attest_notes
from otel_route_shadow.tlog.receipt import Receipt, ReceiptError, ReceiptFault, format_receipt, verify_receipt
from otel_route_shadow.tlog.tiles import (
    REBUILD_HINT,
    TILE_BYTES,
    TILE_HEIGHT,
    TILE_WIDTH,
    Tile,
    TileDamaged,
    TileError,
    TileMissing,
    TileReader,
    TreeBuilder,
    decode_bundle,
    partial_tiles,
    tile_path,
    tile_width,
)

__all__ = [
    "DEFAULT_SKEW_S",
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MAX_KEY_SET_BYTES",
    "MAX_POLICY_BYTES",
    "REBUILD_HINT",
    "TILE_BYTES",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "ArchiveProofDoc",
    "AttestationError",
    "AuthenticationError",
    "BadSignature",
    "Checkpoint",
    "CheckpointError",
    "CompactRange",
    "ConsistencyProofDoc",
    "CosignatureError",
    "CosignatureVerifier",
    "InclusionProofDoc",
    "KeySetError",
    "KeyWindow",
    "LogKey",
    "Malformed",
    "NodeReader",
    "NoteError",
    "OpenedNote",
    "PolicyLog",
    "ProofDoc",
    "ProofError",
    "QuorumReport",
    "Receipt",
    "ReceiptError",
    "ReceiptFault",
    "Signer",
    "Tile",
    "TileDamaged",
    "TileError",
    "TileMissing",
    "TileReader",
    "TreeBuilder",
    "TreeLevels",
    "Verifier",
    "WitnessPolicy",
    "WitnessPolicyError",
    "WitnessedCheckpoint",
    "add_cosignatures",
    "attest_checkpoint",
    "attest_notes",
    "authenticate",
    "check_archive_doc",
    "check_consistency_doc",
    "check_inclusion_doc",
    "checkpoint_of",
    "consistency_proof",
    "decode_bundle",
    "decode_hash",
    "format_receipt",
    "inclusion_proof",
    "leaf_hash",
    "leaf_hasher",
    "parent_row",
    "parse_checkpoint",
    "parse_key_set",
    "parse_note",
    "parse_size",
    "parse_witness_policy",
    "partial_tiles",
    "perfect_root",
    "prove_consistency",
    "prove_inclusion",
    "range_hash",
    "range_proof",
    "sign_note",
    "split_point",
    "subtrees",
    "tile_path",
    "tile_width",
    "tree_hash",
    "verify_consistency",
    "verify_cosignatures",
    "verify_range",
    "verify_receipt",
    "without_false_cosignatures",
]
