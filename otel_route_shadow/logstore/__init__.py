"""The log on disk beside the chain, ``<chain>.tlog/``, and the processes that read and write it.

``tlog`` is the pure specification (Merkle math, notes, checkpoints, cosignatures, proofs, tile
arithmetic); this package is its storage and I/O: the directory (:class:`LogStore`), tiles, entry
bundles and their index, the checkpointer that writes the log, the reader that publishes it, and the
checks of a chain against its checkpoints and tiles. Nothing read from the directory is trusted before
it is authenticated against a signed checkpoint (docs/chain-format.md section 13).
"""

from __future__ import annotations

from otel_route_shadow.logstore.anchoring import (
    ACKNOWLEDGEABLE,
    ACKNOWLEDGED_FILE,
    Acknowledgement,
    acknowledge_last_refusal,
    empty_tree_note,
)
from otel_route_shadow.logstore.checkpointer import (
    Checkpointer,
    SignedCheckpoint,
    default_origin,
    signed_checkpoint_from_note,
)
from otel_route_shadow.logstore.consistency import (
    ChainCheck,
    CheckpointVerdict,
    ConsistencyReason,
    ConsistencyReport,
    check_chain,
    locate_first_changed,
)
from otel_route_shadow.logstore.entries import (
    MAX_ENTRY_BYTES,
    BundleUnservable,
    LongEntry,
    bundle_path,
    long_entries,
)
from otel_route_shadow.logstore.integrity import chain_tree
from otel_route_shadow.logstore.keys import (
    KeyFileError,
    generate_key_file,
    read_policy_file,
    read_signer_file,
)
from otel_route_shadow.logstore.published import NotFound, PublishedLog, Unservable, parse_resource
from otel_route_shadow.logstore.store import (
    CHECKPOINT_FILE,
    CHECKPOINTS_FILE,
    REFUSALS_FILE,
    WITNESS_REFUSALS_FILE,
    Cosigned,
    LogStore,
    read_note_file,
    tlog_dir,
)
from otel_route_shadow.logstore.tile_sweep import SWEEP_TILES, TileSweep

__all__ = [
    "ACKNOWLEDGEABLE",
    "ACKNOWLEDGED_FILE",
    "CHECKPOINTS_FILE",
    "CHECKPOINT_FILE",
    "MAX_ENTRY_BYTES",
    "REFUSALS_FILE",
    "SWEEP_TILES",
    "WITNESS_REFUSALS_FILE",
    "Acknowledgement",
    "BundleUnservable",
    "ChainCheck",
    "CheckpointVerdict",
    "Checkpointer",
    "ConsistencyReason",
    "ConsistencyReport",
    "Cosigned",
    "KeyFileError",
    "LogStore",
    "LongEntry",
    "NotFound",
    "PublishedLog",
    "SignedCheckpoint",
    "TileSweep",
    "Unservable",
    "acknowledge_last_refusal",
    "bundle_path",
    "chain_tree",
    "check_chain",
    "default_origin",
    "empty_tree_note",
    "generate_key_file",
    "locate_first_changed",
    "long_entries",
    "parse_resource",
    "read_note_file",
    "read_policy_file",
    "read_signer_file",
    "signed_checkpoint_from_note",
    "tlog_dir",
]
