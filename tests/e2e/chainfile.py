"""Chain files for the e2e suite: read, verify, truncate, and rewrite a record with every hash recomputed.

Reading and verifying use the chain package itself. ``rewritten_copy`` plays an attacker who can
recompute hashes: it re-encodes the chain from the rewritten record on with the chain's own encoder
(``chain.record.encode_record``), so the result links and hashes perfectly and the chain's verify
calls it intact. Only the backend can tell.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from otel_route_shadow.chain import GENESIS_HASH, iter_payloads, iter_records, sanitize_payload, verify_chain
from otel_route_shadow.chain.record import encode_payload, encode_record


def payloads(path: Path) -> list[dict[str, Any]]:
    return [payload for _, payload in iter_payloads(path)]


def verify(path: Path) -> bool:
    """Hash linkage and record hashes: everything a plain chain can check on its own."""
    return verify_chain(path).intact


def truncated_copy(src: Path, dst: Path, k: int) -> Path:
    """The chain without its last ``k`` records: still a valid chain on its own."""
    lines = src.read_bytes().splitlines(keepends=True)
    dst.write_bytes(b"".join(lines[: len(lines) - k]))
    return dst


def rewritten_copy(src: Path, dst: Path, seq: int, mutate: Callable[[dict[str, Any]], None]) -> Path:
    """Rewrite the payload of record ``seq`` and recompute every hash from there on."""
    out: list[bytes] = []
    prev = GENESIS_HASH
    for record in iter_records(src):
        payload = copy.deepcopy(record.payload)
        if record.seq == seq:
            mutate(payload)
        clean, marks = sanitize_payload(payload)
        line, prev = encode_record(record.seq, prev, *encode_payload(clean, marks))
        out.append(line)
    dst.write_bytes(b"".join(out))
    return dst
