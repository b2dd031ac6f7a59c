"""Canonical JSON and digests shared by decision ids, snapshot hashes and the decision chain.

One encoding everywhere means an auditor re-derives every digest with one rule: sorted keys, no
insignificant whitespace, UTF-8, no floats. Under those rules a plain sorted-keys encoder and RFC 8785
(JCS) produce the same bytes, as long as keys are ASCII and integers stay within +-2**53 (the chain
enforces both before it writes).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["canonical_json", "digest", "digest_bytes"]

_ENCODER = json.JSONEncoder(
    ensure_ascii=False,
    sort_keys=True,
    separators=(",", ":"),
    allow_nan=False,
    check_circular=True,
)


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` in the canonical form.

    Lone surrogates cannot be represented in UTF-8; ``surrogatepass`` keeps the encoding total and
    deterministic for the pure core (the chain replaces them before anything is written).
    """
    return _ENCODER.encode(value).encode("utf-8", "surrogatepass")


def digest_bytes(data: bytes) -> str:
    """Lower-case hex SHA-256, the one digest this project uses."""
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 over the canonical JSON form of ``value``."""
    return digest_bytes(canonical_json(value))
