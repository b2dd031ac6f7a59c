"""The hash-linked decision chain (ADR-0139 D6): append, recover, verify, read.

Shell code: files, locks and processes live here; the pure rules it relies on (canonical JSON,
redaction) live in ``otel_route_shadow.core``. The format is specified in ``docs/chain-format.md``.

Modules: ``canonical`` (the canonical JSON encoding), ``sanitize`` (the payload walk), ``truncation``
(cutting what would not fit one tlog-tiles entry), ``record`` (the record layout, payload encoding
and templates), ``log`` (appending), ``head`` (finding the last record), ``quarantine`` (the torn-tail
policy), ``group_commit`` (shared fsyncs), ``backlog`` (records waiting for the lock, drop counts),
``spill`` (records left at exit), ``verify`` and ``reader`` (reading), ``errors``.
"""

from __future__ import annotations

from otel_route_shadow.chain.backlog import BACKLOG_RECORDS, DroppedGap
from otel_route_shadow.chain.canonical import MAX_SAFE_INTEGER, canonical_bytes
from otel_route_shadow.chain.errors import (
    ChainCorruptError,
    ChainError,
    ChainFormatError,
    ChainLockTimeout,
    ChainPathError,
    ChainPayloadError,
)
from otel_route_shadow.chain.head import read_head
from otel_route_shadow.chain.log import Durability, LineListener, RoutingAuditLog, WrittenLine
from otel_route_shadow.chain.reader import iter_lines, iter_payloads, iter_records, open_chain
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
from otel_route_shadow.chain.sanitize import (
    MAX_PAYLOAD_DEPTH,
    RULE_CREDENTIAL,
    RULE_INVALID_UNICODE,
    RULE_TRUNCATED,
    RedactionMark,
    sanitize_payload,
)
from otel_route_shadow.chain.truncation import TRUNCATED_KIND
from otel_route_shadow.chain.verify import Reason, TornTail, Verdict, VerifyResult, verify_chain

__all__ = [
    "BACKLOG_RECORDS",
    "DROPPED_KIND",
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "MAX_ENTRY_BYTES",
    "MAX_LINE_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_SAFE_INTEGER",
    "QUARANTINE_KIND",
    "RULE_CREDENTIAL",
    "RULE_INVALID_UNICODE",
    "RULE_TRUNCATED",
    "TRUNCATED_KIND",
    "ChainCorruptError",
    "ChainError",
    "ChainFormatError",
    "ChainHead",
    "ChainLockTimeout",
    "ChainPathError",
    "ChainPayloadError",
    "ChainRecord",
    "DroppedGap",
    "Durability",
    "EncodedPayload",
    "LineListener",
    "PayloadTemplate",
    "Reason",
    "RedactionMark",
    "RoutingAuditLog",
    "TornTail",
    "Verdict",
    "VerifyResult",
    "WrittenLine",
    "canonical_bytes",
    "encode_payload",
    "iter_lines",
    "iter_payloads",
    "iter_records",
    "open_chain",
    "read_head",
    "sanitize_payload",
    "verify_chain",
]
