"""Shell code around the pure core: policy files and the versioned policy snapshot store (D5).

Everything here performs I/O; nothing in :mod:`otel_route_shadow.core` imports it. Modules:
``policy_file`` (reading a policy file), ``snapshot_format`` (the on-disk document), ``layout`` (the
store directory and its lock), ``loading`` (the current verdict and its cache), ``saving``,
``revisions`` (one revision, the history, a diff), ``repair``, ``diff``, ``errors``, ``results``, and
``store`` (``RoutingPolicyStore``, the facade). Other folders import from this ``__init__`` only.
"""

from otel_route_shadow.store.diff import FieldChange, PolicyChange, SnapshotDiff, diff_snapshots
from otel_route_shadow.store.errors import (
    CorruptSnapshotError,
    InvalidPolicySetError,
    PolicyStoreError,
    RevisionCorruptError,
    RevisionNotFoundError,
    RevisionUnavailableError,
    StoreIOError,
)
from otel_route_shadow.store.layout import (
    CURRENT_FILE,
    HISTORY_DIR,
    LOCK_FILE,
    QUARANTINE_DIR,
    REPAIR_MARKER,
    revision_file_name,
)
from otel_route_shadow.store.policy_file import (
    MAX_POLICY_FILE_BYTES,
    PolicyFile,
    PolicyFileError,
    parse_policy_document,
    read_policy_file,
)
from otel_route_shadow.store.results import (
    ENVIRONMENT_PROBLEM_KINDS,
    PROBLEM_KINDS,
    HistoryEntry,
    RepairResult,
    SaveResult,
    SnapshotLoad,
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
from otel_route_shadow.store.store import COMMAND_READ_WAIT_S, RoutingPolicyStore
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "COMMAND_READ_WAIT_S",
    "CURRENT_FILE",
    "ENVIRONMENT_PROBLEM_KINDS",
    "HISTORY_DIR",
    "LOCK_FILE",
    "MAX_POLICY_FILE_BYTES",
    "MAX_REVISION",
    "MAX_SNAPSHOT_BYTES",
    "PROBLEM_KINDS",
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
