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
    Acknowledgement,
    acknowledge_last_refusal,
    empty_tree_note,
)
from otel_route_shadow.logstore.archives import (
    ArchiveProblem,
    check_archive,
    proof_path,
)
from otel_route_shadow.logstore.checkpointer import Checkpointer
from otel_route_shadow.logstore.consistency import (
    ChainCheck,
    CheckpointVerdict,
    ConsistencyReason,
    ConsistencyReport,
    check_chain,
    locate_first_changed,
)
from otel_route_shadow.logstore.cutting import cut_signed
from otel_route_shadow.logstore.entries import (
    MAX_ENTRY_BYTES,
    BundleUnservable,
    LongEntry,
    bundle_path,
    long_entries,
)
from otel_route_shadow.logstore.first_kept import PrunedError, authenticate_first_kept, check_kept_chain
from otel_route_shadow.logstore.integrity import chain_tree
from otel_route_shadow.logstore.keys import (
    KeyFileError,
    generate_key_file,
    read_signing_keys,
    read_witness_policy_file,
)
from otel_route_shadow.logstore.note_file import MAX_NOTE_FILE, NoteFile, read_note_file
from otel_route_shadow.logstore.prune_lock import PruneRunning, prunes_held_off
from otel_route_shadow.logstore.pruned import (
    MAX_COMMAND_CHARS,
    Pruned,
    pruned_resource,
    served_min_index,
)
from otel_route_shadow.logstore.pruning import (
    PRUNE_LOCK_WAIT_S,
    PruneOptions,
    PruneRefused,
    PruneResult,
    Retention,
    prune,
)
from otel_route_shadow.logstore.published import NotFound, PublishedLog, Resource, Unservable, parse_resource
from otel_route_shadow.logstore.signed import SignedCheckpoint, default_origin, signed_checkpoint_from_note
from otel_route_shadow.logstore.store import (
    CHECKPOINT_FILE,
    CHECKPOINTS_FILE,
    REFUSALS_FILE,
    WITNESS_REFUSALS_FILE,
    Cosigned,
    LogStore,
    StateError,
    tlog_dir,
)
from otel_route_shadow.logstore.tile_sweep import TileSweep

__all__ = [
    "ACKNOWLEDGEABLE",
    "CHECKPOINTS_FILE",
    "CHECKPOINT_FILE",
    "MAX_COMMAND_CHARS",
    "MAX_ENTRY_BYTES",
    "MAX_NOTE_FILE",
    "PRUNE_LOCK_WAIT_S",
    "REFUSALS_FILE",
    "WITNESS_REFUSALS_FILE",
    "Acknowledgement",
    "ArchiveProblem",
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
    "NoteFile",
    "PruneOptions",
    "PruneRefused",
    "PruneResult",
    "PruneRunning",
    "Pruned",
    "PrunedError",
    "PublishedLog",
    "Resource",
    "Retention",
    "SignedCheckpoint",
    "StateError",
    "TileSweep",
    "Unservable",
    "acknowledge_last_refusal",
    "authenticate_first_kept",
    "bundle_path",
    "chain_tree",
    "check_archive",
    "check_chain",
    "check_kept_chain",
    "cut_signed",
    "default_origin",
    "empty_tree_note",
    "generate_key_file",
    "locate_first_changed",
    "long_entries",
    "parse_resource",
    "proof_path",
    "prune",
    "pruned_resource",
    "prunes_held_off",
    "read_note_file",
    "read_signing_keys",
    "read_witness_policy_file",
    "served_min_index",
    "signed_checkpoint_from_note",
    "tlog_dir",
]
