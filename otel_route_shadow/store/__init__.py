"""Shell code around the pure core: policy files and the versioned policy snapshot store (D5).

Everything here performs I/O; nothing in :mod:`otel_route_shadow.core` imports it.
"""

from otel_route_shadow.store.diff import FieldChange, PolicyChange, SnapshotDiff, diff_snapshots
from otel_route_shadow.store.policy_file import (
    MAX_POLICY_FILE_BYTES,
    PolicyFile,
    PolicyFileError,
    parse_policy_document,
    read_policy_file,
)
from otel_route_shadow.store.snapshot_format import (
    MAX_REVISION,
    MAX_SNAPSHOT_BYTES,
    SNAPSHOT_FORMAT,
    SnapshotDocument,
    SnapshotFormatError,
    canonical_policy_dumps,
    decode_snapshot,
    encode_snapshot,
)
from otel_route_shadow.store.store import (
    CURRENT_FILE,
    HISTORY_DIR,
    LOCK_FILE,
    QUARANTINE_DIR,
    REPAIR_MARKER,
    CorruptSnapshotError,
    HistoryEntry,
    InvalidPolicySetError,
    PolicyStoreError,
    RepairResult,
    RevisionCorruptError,
    RevisionNotFoundError,
    RevisionUnavailableError,
    RoutingPolicyStore,
    SaveResult,
    SnapshotLoad,
    StoreIOError,
    revision_file_name,
)
from otel_route_shadow.store.strict_json import StrictJSONError, loads_strict

__all__ = [
    "CURRENT_FILE",
    "HISTORY_DIR",
    "LOCK_FILE",
    "MAX_POLICY_FILE_BYTES",
    "MAX_REVISION",
    "MAX_SNAPSHOT_BYTES",
    "QUARANTINE_DIR",
    "REPAIR_MARKER",
    "SNAPSHOT_FORMAT",
    "CorruptSnapshotError",
    "FieldChange",
    "HistoryEntry",
    "InvalidPolicySetError",
    "PolicyChange",
    "PolicyFile",
    "PolicyFileError",
    "PolicyStoreError",
    "RepairResult",
    "RevisionCorruptError",
    "RevisionNotFoundError",
    "RevisionUnavailableError",
    "RoutingPolicyStore",
    "SaveResult",
    "SnapshotDiff",
    "SnapshotDocument",
    "SnapshotFormatError",
    "SnapshotLoad",
    "StoreIOError",
    "StrictJSONError",
    "canonical_policy_dumps",
    "decode_snapshot",
    "diff_snapshots",
    "encode_snapshot",
    "loads_strict",
    "parse_policy_document",
    "read_policy_file",
    "revision_file_name",
]
