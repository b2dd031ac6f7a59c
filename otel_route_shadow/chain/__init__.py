"""The hash-linked decision chain (ADR-0139 D6): append, recover, verify, read.

Shell code: files, locks and processes live here; the pure rules it relies on (canonical JSON,
redaction) live in ``otel_route_shadow.core``. The format is specified in ``docs/chain-format.md``.

Modules: ``canonical`` (the canonical JSON encoding), ``sanitize`` (the payload walk), ``truncation``
(cutting what would not fit one tlog-tiles entry), ``record`` (the record layout, payload encoding
and templates), ``log`` (appending), ``head`` (finding the last record), ``quarantine`` (the torn-tail
policy), ``group_commit`` (shared fsyncs), ``backlog`` (records waiting for the lock, drop counts),
``spill`` (records left at exit), ``reader`` (reading), ``errors``. Verifying: ``verify`` (the entry
points), ``check`` (one line), ``scan`` (the streaming pass), ``parallel`` (the pass in worker
processes), ``diagnosis`` (why a record does not link), ``leaves`` (a line's Merkle leaf hash),
``result``.
"""

from __future__ import annotations

from otel_route_shadow.chain.backlog import BACKLOG_RECORDS, DroppedGap
from otel_route_shadow.chain.canonical import MAX_SAFE_INTEGER, canonical_bytes
from otel_route_shadow.chain.check import RECORD_HASH_TAIL, record_hash_of
from otel_route_shadow.chain.errors import (
    ChainCorruptError,
    ChainError,
    ChainFormatError,
    ChainLockTimeout,
    ChainPathError,
    ChainPayloadError,
)
from otel_route_shadow.chain.head import read_head
from otel_route_shadow.chain.leaves import LeafSink, leaf_hashes
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
from otel_route_shadow.chain.result import ChainPass, Reason, TornTail, Verdict, VerifyResult
from otel_route_shadow.chain.sanitize import (
    MAX_PAYLOAD_DEPTH,
    RULE_CREDENTIAL,
    RULE_INVALID_UNICODE,
    RULE_TRUNCATED,
    RedactionMark,
    sanitize_payload,
)
from otel_route_shadow.chain.truncation import TRUNCATED_KIND
from otel_route_shadow.chain.verify import verify_chain, verify_pass

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
    "RECORD_HASH_TAIL",
    "RULE_CREDENTIAL",
    "RULE_INVALID_UNICODE",
    "RULE_TRUNCATED",
    "TRUNCATED_KIND",
    "ChainCorruptError",
    "ChainError",
    "ChainFormatError",
    "ChainHead",
    "ChainLockTimeout",
    "ChainPass",
    "ChainPathError",
    "ChainPayloadError",
    "ChainRecord",
    "DroppedGap",
    "Durability",
    "EncodedPayload",
    "LeafSink",
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
    "leaf_hashes",
    "open_chain",
    "read_head",
    "record_hash_of",
    "sanitize_payload",
    "verify_chain",
    "verify_pass",
]
