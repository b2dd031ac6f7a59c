"""The hash-linked decision chain (ADR-0139 D6): append, recover, verify, read.

Shell code: files, locks and processes live here; the pure rules it relies on (canonical JSON,
redaction) live in ``otel_route_shadow.core``. The format is specified in ``docs/chain-format.md``.
"""

from __future__ import annotations

from otel_route_shadow.chain.format import (
    FORMAT_VERSION,
    GENESIS_HASH,
    MAX_LINE_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_SAFE_INTEGER,
    QUARANTINE_KIND,
    RULE_CREDENTIAL,
    RULE_INVALID_UNICODE,
    ChainCorruptError,
    ChainError,
    ChainFormatError,
    ChainHead,
    ChainPayloadError,
    ChainRecord,
    PayloadTemplate,
    RedactionMark,
    SanitizedMapping,
    canonical_bytes,
    sanitize_payload,
    sanitized_mapping,
)
from otel_route_shadow.chain.log import Durability, RoutingAuditLog, read_head
from otel_route_shadow.chain.reader import iter_lines, iter_payloads, iter_records
from otel_route_shadow.chain.verify import Reason, TornTail, Verdict, VerifyResult, verify_chain

__all__ = [
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "MAX_LINE_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_SAFE_INTEGER",
    "QUARANTINE_KIND",
    "RULE_CREDENTIAL",
    "RULE_INVALID_UNICODE",
    "ChainCorruptError",
    "ChainError",
    "ChainFormatError",
    "ChainHead",
    "ChainPayloadError",
    "ChainRecord",
    "Durability",
    "PayloadTemplate",
    "Reason",
    "RedactionMark",
    "RoutingAuditLog",
    "SanitizedMapping",
    "TornTail",
    "Verdict",
    "VerifyResult",
    "canonical_bytes",
    "iter_lines",
    "iter_payloads",
    "iter_records",
    "read_head",
    "sanitize_payload",
    "sanitized_mapping",
    "verify_chain",
]
