"""A verifiable log over the decision chain: Merkle tree, tiles, signed checkpoints and proofs.

Shell code (files and keys; no thread, no clock): leaf i of the tree is line i of the chain without its
LF; hashing is RFC 6962; checkpoints are C2SP tlog-checkpoint texts in C2SP signed notes (Ed25519, Go's
key strings); the tree's hashes are stored beside the chain in the C2SP tlog-tiles layout, in
``<chain>.tlog/`` (``directory``). Nothing read from that directory is trusted before it is
authenticated against a signed checkpoint. The formats are specified in ``docs/chain-format.md``
(section 13). Never imports instrumentation, cli or OpenTelemetry.
"""

from __future__ import annotations

from otel_route_shadow.tlog.attestation import (
    Attestation,
    AttestationError,
    AttestationFault,
    WitnessCosignature,
    attest_checkpoint,
)
from otel_route_shadow.tlog.authentication import (
    Authenticated,
    AuthenticationError,
    BadSignature,
    Malformed,
    UnknownKey,
    Unsigned,
    authenticate,
)
from otel_route_shadow.tlog.catchup import (
    AppendedLine,
)
from otel_route_shadow.tlog.checkpoint import (
    Checkpoint,
    CheckpointError,
    format_checkpoint,
    parse_checkpoint,
)
from otel_route_shadow.tlog.checkpointer import (
    Checkpointer,
    SignedCheckpoint,
    default_origin,
    signed_checkpoint_from_note,
)
from otel_route_shadow.tlog.consistency import (
    ChainCheck,
    CheckpointVerdict,
    ConsistencyReason,
    ConsistencyReport,
    Located,
    check_chain,
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
from otel_route_shadow.tlog.directory import (
    LogDirectory,
    NoteFile,
    read_checkpoint_file,
    read_note_file,
    tlog_dir,
)
from otel_route_shadow.tlog.health import (
    TileHealth,
)
from otel_route_shadow.tlog.integrity import TreeSink, chain_tree
from otel_route_shadow.tlog.keys import (
    KeyFileError,
    generate_key_file,
    read_signer_file,
)
from otel_route_shadow.tlog.merkle import (
    EMPTY_ROOT,
    CompactRange,
    NodeReader,
    ProofError,
    TreeLevels,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    range_hash,
    root_from_leaf_hashes,
    subtrees,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)
from otel_route_shadow.tlog.note import (
    NoteError,
    OpenedNote,
    SignatureError,
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
from otel_route_shadow.tlog.tiles import (
    REBUILD_HINT,
    TileDamaged,
    TileError,
    TileMissing,
    TileReader,
    TreeBuilder,
    tile_path,
)

__all__ = [
    "DEFAULT_SKEW_S",
    "EMPTY_ROOT",
    "REBUILD_HINT",
    "AppendedLine",
    "Attestation",
    "AttestationError",
    "AttestationFault",
    "Authenticated",
    "AuthenticationError",
    "BadSignature",
    "ChainCheck",
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
    "Located",
    "LogDirectory",
    "Malformed",
    "NodeReader",
    "NoteError",
    "NoteFile",
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
    "SignatureError",
    "SignedCheckpoint",
    "Signer",
    "TileDamaged",
    "TileError",
    "TileHealth",
    "TileMissing",
    "TileReader",
    "TreeBuilder",
    "TreeLevels",
    "TreeSink",
    "UnknownKey",
    "Unsigned",
    "Verifier",
    "WitnessCosignature",
    "attest_checkpoint",
    "authenticate",
    "chain_tree",
    "check_chain",
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
    "range_hash",
    "read_checkpoint_file",
    "read_note_file",
    "read_signer_file",
    "root_from_leaf_hashes",
    "sign_note",
    "signed_checkpoint_from_note",
    "subtrees",
    "tile_path",
    "tlog_dir",
    "tree_hash",
    "verify_against_checkpoints",
    "verify_consistency",
    "verify_cosignatures",
    "verify_inclusion",
    "verify_receipt",
]
