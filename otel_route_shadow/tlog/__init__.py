"""A verifiable log over the decision chain: Merkle tree, tiles, signed checkpoints and proofs.

Shell code (files, keys, clock-free): leaf i of the tree is line i of the chain without its LF; hashing
is RFC 6962; checkpoints are C2SP tlog-checkpoint texts in C2SP signed notes (Ed25519, Go's key
strings); the tree's hashes are stored beside the chain in the C2SP tlog-tiles layout. The formats are
specified in ``docs/chain-format.md`` (section 13). Never imports instrumentation, cli or OpenTelemetry.
"""

from __future__ import annotations

from otel_route_shadow.tlog.attestation import (
    Attestation,
    AttestationError,
    AttestationFault,
    WitnessCosignature,
    attest_checkpoint,
)
from otel_route_shadow.tlog.checkpoint import Checkpoint, CheckpointError, format_checkpoint, parse_checkpoint
from otel_route_shadow.tlog.checkpointer import (
    DEFAULT_EVERY_RECORDS,
    DEFAULT_EVERY_SECONDS,
    Checkpointer,
    SignedCheckpoint,
    default_origin,
    read_checkpoint_file,
    signed_checkpoint_from_note,
    tlog_dir,
)
from otel_route_shadow.tlog.consistency import (
    CheckpointVerdict,
    ConsistencyReason,
    ConsistencyReport,
    locate_first_changed,
    verify_against_checkpoints,
)
from otel_route_shadow.tlog.cosignature import (
    DEFAULT_SKEW_S,
    CosignatureError,
    CosignatureFault,
    Cosignatures,
    CosignatureVerifier,
    verify_cosignatures,
)
from otel_route_shadow.tlog.keys import KeyFileError, generate_key_file, read_signer_file
from otel_route_shadow.tlog.merkle import (
    EMPTY_ROOT,
    CompactRange,
    ProofError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)
from otel_route_shadow.tlog.note import (
    NoteError,
    OpenedNote,
    Signer,
    Verifier,
    open_note,
    parse_note,
    sign_note,
)
from otel_route_shadow.tlog.policy import (
    Policy,
    PolicyError,
    PolicyGroup,
    PolicyLog,
    PolicyWitness,
    QuorumVerdict,
    format_policy,
    parse_policy,
)
from otel_route_shadow.tlog.receipt import (
    Receipt,
    ReceiptError,
    ReceiptFault,
    ReceiptVerdict,
    format_receipt,
    parse_receipt,
    verify_receipt,
)
from otel_route_shadow.tlog.tiles import TileError, TileStore, TreeBuilder, tile_path

__all__ = [
    "DEFAULT_EVERY_RECORDS",
    "DEFAULT_EVERY_SECONDS",
    "DEFAULT_SKEW_S",
    "EMPTY_ROOT",
    "Attestation",
    "AttestationError",
    "AttestationFault",
    "Checkpoint",
    "CheckpointError",
    "CheckpointVerdict",
    "Checkpointer",
    "CompactRange",
    "ConsistencyReason",
    "ConsistencyReport",
    "CosignatureError",
    "CosignatureFault",
    "CosignatureVerifier",
    "Cosignatures",
    "KeyFileError",
    "NoteError",
    "OpenedNote",
    "Policy",
    "PolicyError",
    "PolicyGroup",
    "PolicyLog",
    "PolicyWitness",
    "ProofError",
    "QuorumVerdict",
    "Receipt",
    "ReceiptError",
    "ReceiptFault",
    "ReceiptVerdict",
    "SignedCheckpoint",
    "Signer",
    "TileError",
    "TileStore",
    "TreeBuilder",
    "Verifier",
    "WitnessCosignature",
    "attest_checkpoint",
    "consistency_proof",
    "default_origin",
    "format_checkpoint",
    "format_policy",
    "format_receipt",
    "generate_key_file",
    "inclusion_proof",
    "leaf_hash",
    "locate_first_changed",
    "node_hash",
    "open_note",
    "parse_checkpoint",
    "parse_note",
    "parse_policy",
    "parse_receipt",
    "read_checkpoint_file",
    "read_signer_file",
    "root_from_leaf_hashes",
    "sign_note",
    "signed_checkpoint_from_note",
    "tile_path",
    "tlog_dir",
    "verify_against_checkpoints",
    "verify_consistency",
    "verify_cosignatures",
    "verify_inclusion",
    "verify_receipt",
]
