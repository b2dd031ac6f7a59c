"""Answering the operator's questions from the decision chain alone, offline (ISSUE 7).

* :func:`build_report`: the divergence report (:class:`Report`), with the noise baseline
  (:mod:`.noise`), the served route (:mod:`.served`) and the log's evidence status (:mod:`.evidence`);
* :func:`replay`: the what-if replay against a candidate snapshot (:class:`WhatIfResult`);
* :func:`build_matrix`: the effective-route matrix (:class:`Matrix`).
* :func:`build_fleet_report`, :func:`fleet_replay`: the same over a fleet of logs, local or remote, each
  verified against its newest checkpoint first (:mod:`.fleet`, :mod:`.remote`);
  :func:`follow_fleet`: the fleet followed from a state file, reading only new records (:mod:`.monitor`).

All three read the chain through one reader and filter (:mod:`.records`), and replay contexts through
one memoised replayer (:mod:`.replaying`). This folder computes result objects; rendering them as
text and HTML is the command line's (``otel_route_shadow.cli``). Its public API is what this module
re-exports.

Shell code: it reads the chain (``otel_route_shadow.chain``), the log's checkpoint
(``otel_route_shadow.tlog``) and the policy store, and calls the pure core. See ``docs/reports.md``.
"""

from otel_route_shadow.analysis.cells import AGREED_LABEL, UNSPECIFIED
from otel_route_shadow.analysis.changes import ChangeTally, Transition
from otel_route_shadow.analysis.cohorts import COHORT_DEFINITION, ERROR_NOTE, LATENCY_NOTE, Cohort
from otel_route_shadow.analysis.evidence import (
    ABSENT,
    FAILED,
    NOT_CHECKED,
    NOT_VERIFIED,
    PRESENT,
    UNREADABLE,
    VERIFIED,
    VERIFY_HINT,
    LogEvidence,
    read_evidence,
)
from otel_route_shadow.analysis.figures import BYPASS_DEFINITION, DEFIED_COUNTS_NOTE, NO_STORE_NOTE, Report
from otel_route_shadow.analysis.fleet import FleetError, chain_paths, is_remote, verifier_keys
from otel_route_shadow.analysis.fleet_logs import EXCLUDED, INCLUDED, Fleet, FleetLog, Followed
from otel_route_shadow.analysis.fleet_report import build_fleet_report, fleet_replay
from otel_route_shadow.analysis.gaps import (
    MIN_SPAWNS,
    NOT_ENOUGH,
    NOT_READY,
    READY,
    TRANSIENT_ONLY,
    GapCounts,
    GapTally,
    SpawnFacts,
)
from otel_route_shadow.analysis.groups import (
    DIMENSIONS,
    HOST_KEY,
    GroupingError,
    GroupSpec,
    key_label,
    label,
    parse_by,
)
from otel_route_shadow.analysis.integrity import IntegrityReport
from otel_route_shadow.analysis.kept import Kept, kept_records
from otel_route_shadow.analysis.matrix import (
    COLUMNS,
    DEFAULT_ACCOUNTS,
    MAX_ROWS,
    Matrix,
    MatrixAxes,
    MatrixError,
    MatrixRow,
    axes_from_chain,
    build_matrix,
    parse_account,
    parse_axis,
)
from otel_route_shadow.analysis.monitor import follow_fleet
from otel_route_shadow.analysis.noise import (
    KEY_NAMES,
    NOISE_DEFINITION,
    ROUTE_NAMES,
    NoisePart,
    NoiseRow,
    NoiseTable,
    fraction_rate,
)
from otel_route_shadow.analysis.records import RecordCounts
from otel_route_shadow.analysis.refusals import Refusals, read_refusals
from otel_route_shadow.analysis.remote import Fetch, RemoteError
from otel_route_shadow.analysis.report import aggregate, build_report
from otel_route_shadow.analysis.served import (
    DIFFERS,
    SAME,
    SERVED_DIFFERS,
    SERVED_STATES,
    finding_codes,
)
from otel_route_shadow.analysis.snapshots import (
    InvalidCandidateError,
    SnapshotSourceError,
    SourcedSnapshot,
    candidate_snapshot,
    cited_loader,
    store_snapshot,
)
from otel_route_shadow.analysis.source import (
    ChainAnalysisError,
    ChainStatus,
    EmptyChainError,
    MissingChainError,
    UnverifiedChainError,
    chain_status,
)
from otel_route_shadow.analysis.tally import Tally, interval, rate, sorted_counts, top_counts
from otel_route_shadow.analysis.timeline import TimelinePoint, width_label
from otel_route_shadow.analysis.usage import PolicyUse, UsageTable
from otel_route_shadow.analysis.whatif import NOISE_LANES, WhatIfResult, replay, replay_payloads
from otel_route_shadow.analysis.window import TimeWindow, WindowError, format_ns

__all__ = [
    "ABSENT",
    "AGREED_LABEL",
    "BYPASS_DEFINITION",
    "COHORT_DEFINITION",
    "COLUMNS",
    "DEFAULT_ACCOUNTS",
    "DEFIED_COUNTS_NOTE",
    "DIFFERS",
    "DIMENSIONS",
    "ERROR_NOTE",
    "EXCLUDED",
    "FAILED",
    "HOST_KEY",
    "INCLUDED",
    "KEY_NAMES",
    "LATENCY_NOTE",
    "MAX_ROWS",
    "MIN_SPAWNS",
    "NOISE_DEFINITION",
    "NOISE_LANES",
    "NOT_CHECKED",
    "NOT_ENOUGH",
    "NOT_READY",
    "NOT_VERIFIED",
    "NO_STORE_NOTE",
    "PRESENT",
    "READY",
    "ROUTE_NAMES",
    "SAME",
    "SERVED_DIFFERS",
    "SERVED_STATES",
    "TRANSIENT_ONLY",
    "UNREADABLE",
    "UNSPECIFIED",
    "VERIFIED",
    "VERIFY_HINT",
    "ChainAnalysisError",
    "ChainStatus",
    "ChangeTally",
    "Cohort",
    "EmptyChainError",
    "Fetch",
    "Fleet",
    "FleetError",
    "FleetLog",
    "Followed",
    "GapCounts",
    "GapTally",
    "GroupSpec",
    "GroupingError",
    "IntegrityReport",
    "InvalidCandidateError",
    "Kept",
    "LogEvidence",
    "Matrix",
    "MatrixAxes",
    "MatrixError",
    "MatrixRow",
    "MissingChainError",
    "NoisePart",
    "NoiseRow",
    "NoiseTable",
    "PolicyUse",
    "RecordCounts",
    "Refusals",
    "RemoteError",
    "Report",
    "SnapshotSourceError",
    "SourcedSnapshot",
    "SpawnFacts",
    "Tally",
    "TimeWindow",
    "TimelinePoint",
    "Transition",
    "UnverifiedChainError",
    "UsageTable",
    "WhatIfResult",
    "WindowError",
    "aggregate",
    "axes_from_chain",
    "build_fleet_report",
    "build_matrix",
    "build_report",
    "candidate_snapshot",
    "chain_paths",
    "chain_status",
    "cited_loader",
    "finding_codes",
    "fleet_replay",
    "follow_fleet",
    "format_ns",
    "fraction_rate",
    "interval",
    "is_remote",
    "kept_records",
    "key_label",
    "label",
    "parse_account",
    "parse_axis",
    "parse_by",
    "rate",
    "read_evidence",
    "read_refusals",
    "replay",
    "replay_payloads",
    "sorted_counts",
    "store_snapshot",
    "top_counts",
    "verifier_keys",
    "width_label",
]
