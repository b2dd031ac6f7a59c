"""The hash-linked decision chain (ADR-0139 D6): append, recover, verify, read.

Shell code: files, locks and processes live here; the pure rules it relies on (canonical JSON,
redaction) live in ``otel_route_shadow.core``. The format is specified in ``docs/chain-format.md``.

Modules: ``canonical`` (the canonical JSON encoding), ``sanitize`` (the payload walk), ``truncation``
(cutting what would not fit one tlog-tiles entry), ``record`` (the record layout, payload encoding and
templates), ``log`` (appending), ``written`` (a line appended, as the listener hears of it), ``head``
(finding the last record), ``quarantine`` (the torn-tail policy), ``group_commit`` (shared fsyncs),
``backlog`` (records waiting for the lock, drop counts), ``spill`` (records left at exit or by a killed
writer), ``cut`` (closing the live file as a segment, the anchor), ``segments`` (a chain's files: closed
segments, then the live file), ``reader`` (reading, across segments), ``errors``. Verifying: ``verify``
(the entry points), ``check`` (one line), ``scan`` (the streaming pass), ``parallel`` (the pass in
worker processes), ``diagnosis`` (why a record does not link), ``anchor`` (a segment's anchor against
the segment before it), ``leaves`` (a line's Merkle leaf hash), ``result``.
"""

from __future__ import annotations

import warnings

from otel_route_shadow.chain.anchor import ANCHOR_KIND, same_value
from otel_route_shadow.chain.backlog import BACKLOG_RECORDS, REASON_NOT_OBSERVED, DroppedGap
from otel_route_shadow.chain.canonical import MAX_SAFE_INTEGER, canonical_bytes
from otel_route_shadow.chain.check import RECORD_HASH_TAIL, Good, check_line, fast_run, record_hash_of
from otel_route_shadow.chain.cut import (
    CUT_SUFFIX,
    ChainCut,
    CutRefused,
    cut_chain,
    first_record,
)
from otel_route_shadow.chain.errors import (
    ChainCorruptError,
    ChainError,
    ChainFormatError,
    ChainLockTimeout,
    ChainPathError,
    ChainPayloadError,
)
from otel_route_shadow.chain.head import read_head, tail_head
from otel_route_shadow.chain.leaves import LeafSink, leaf_hashes
from otel_route_shadow.chain.log import DecisionChain, Durability
from otel_route_shadow.chain.reader import (
    ChainBytes,
    anchor_checkpoints,
    chain_line,
    each_chain_file,
    iter_chain_lines,
    iter_lines,
    iter_payloads,
    iter_records,
    line_seq,
    open_chain,
)
from otel_route_shadow.chain.record import (
    DROPPED_KIND,
    FORMAT_VERSION,
    GENESIS_HASH,
    MAX_ENTRY_BYTES,
    MAX_LINE_BYTES,
    QUARANTINE_KIND,
    ChainHead,
    ChainRecord,
    EncodedPayload,
    PayloadTemplate,
    encode_payload,
)
from otel_route_shadow.chain.result import ChainPass, Reason, TornTail, Verdict, VerifyResult
from otel_route_shadow.chain.sanitize import (
    MAX_PAYLOAD_DEPTH,
    RULE_CREDENTIAL,
    RULE_INVALID_UNICODE,
    RULE_TRUNCATED,
    RedactionMark,
    sanitize_payload,
)
from otel_route_shadow.chain.scan import ScanState, check_lines
from otel_route_shadow.chain.segments import SEGMENTS_SUFFIX, Segment, chain_segments, live_path, segment_name
from otel_route_shadow.chain.truncation import TRUNCATED_KIND
from otel_route_shadow.chain.verify import verify_chain, verify_pass
from otel_route_shadow.chain.waiting import left_beside
from otel_route_shadow.chain.written import LineListener, WrittenLine

__all__ = [
    "ANCHOR_KIND",
    "BACKLOG_RECORDS",
    "CUT_SUFFIX",
    "DROPPED_KIND",
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "MAX_ENTRY_BYTES",
    "MAX_LINE_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_SAFE_INTEGER",
    "QUARANTINE_KIND",
    "REASON_NOT_OBSERVED",
    "RECORD_HASH_TAIL",
    "RULE_CREDENTIAL",
    "RULE_INVALID_UNICODE",
    "RULE_TRUNCATED",
    "SEGMENTS_SUFFIX",
    "TRUNCATED_KIND",
    "ChainBytes",
    "ChainCorruptError",
    "ChainCut",
    "ChainError",
    "ChainFormatError",
    "ChainHead",
    "ChainLockTimeout",
    "ChainPass",
    "ChainPathError",
    "ChainPayloadError",
    "ChainRecord",
    "CutRefused",
    "DecisionChain",
    "DroppedGap",
    "Durability",
    "EncodedPayload",
    "Good",
    "LeafSink",
    "LineListener",
    "PayloadTemplate",
    "Reason",
    "RedactionMark",
    "ScanState",
    "Segment",
    "TornTail",
    "Verdict",
    "VerifyResult",
    "WrittenLine",
    "anchor_checkpoints",
    "canonical_bytes",
    "chain_line",
    "chain_segments",
    "check_line",
    "check_lines",
    "cut_chain",
    "each_chain_file",
    "encode_payload",
    "fast_run",
    "first_record",
    "iter_chain_lines",
    "iter_lines",
    "iter_payloads",
    "iter_records",
    "leaf_hashes",
    "left_beside",
    "line_seq",
    "live_path",
    "open_chain",
    "read_head",
    "record_hash_of",
    "same_value",
    "sanitize_payload",
    "segment_name",
    "tail_head",
    "verify_chain",
    "verify_pass",
]


def __getattr__(name: str) -> object:
    """``RoutingAuditLog``, the name ADR-0139 gives the chain, is a deprecated alias of :class:`DecisionChain`."""
    if name == "RoutingAuditLog":
        warnings.warn(
            "otel_route_shadow.chain.RoutingAuditLog is deprecated: use DecisionChain (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return DecisionChain
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
