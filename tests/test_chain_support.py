"""Helpers shared by the chain tests (imported as a module; it holds no tests itself)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from otel_route_shadow.chain import GENESIS_HASH, DecisionChain
from otel_route_shadow.chain.record import encode_record

CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


def plugin_payload(i: int) -> dict[str, Any]:
    """A payload shaped like the plugin's, deterministic in ``i``."""
    h = hashlib.sha256(str(i).encode()).hexdigest()
    return {
        "kind": "route-shadow",
        "trace_id": h[:32],
        "span_id": h[32:48],
        "start_time_unix_nano": str(1_790_000_000_000_000_000 + i * 50_000_000),
        "attributes": {
            "route_shadow.outcome": "selected",
            "route_shadow.policy_source": "managed-policy" if i % 3 else "legacy-compatibility",
            "route_shadow.rung": i % 10,
            "route_shadow.provider": "anthropic" if i % 2 else "zai",
            "route_shadow.agreed": bool(i % 2),
            "route_shadow.decision_id": h,
            "route_shadow.repo": f"acme/service-{i % 7:02d}",
        },
    }


def build_chain(path: Path, count: int, payload: Any = plugin_payload) -> list[bytes]:
    """Append ``count`` records through the real API; return the file's lines (newline included)."""
    with DecisionChain(path) as log:
        for i in range(count):
            log.append(payload(i))
    return path.read_bytes().splitlines(keepends=True)


def build_old_chain(path: Path, count: int, payload: Any) -> list[bytes]:
    """``count`` records as a writer before the 65,535-byte entry bound wrote them (lines up to 4 MiB,
    nothing cut); return the file's lines (newline included)."""
    lines, prev = [], GENESIS_HASH
    for i in range(count):
        line, prev = encode_record(i, prev, orjson.dumps(payload(i), option=CANONICAL), b"[]")
        lines.append(line)
    write_lines(path, lines)
    return lines


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def forge(seq: int, prev_hash: str, payload: dict[str, Any], marks: bytes = b"[]") -> tuple[bytes, str]:
    """A well-formed record with a correctly recomputed hash: what a forger with the format spec writes."""
    return encode_record(seq, prev_hash, orjson.dumps(payload, option=CANONICAL), marks)


def hash_of(line: bytes) -> str:
    """The record hash a line carries."""
    value = orjson.loads(line)["record_hash"]
    assert isinstance(value, str)
    return value


def edited(lines: list[bytes], seq: int) -> list[bytes]:
    """``lines`` with line ``seq``'s ``"n"`` member changed and its record hash not recomputed."""
    out = list(lines)
    out[seq] = out[seq].replace(f'"n":{seq},'.encode(), f'"n":{seq + 1000},'.encode(), 1)
    if out[seq] == lines[seq]:
        out[seq] = out[seq].replace(f'"n":{seq}}}'.encode(), f'"n":{seq + 1000}}}'.encode())
    assert out[seq] != lines[seq]
    return out


def forge_chain(path: Path, payloads: list[dict[str, Any]], seqs: list[int] | None = None) -> list[bytes]:
    """Write a self-consistent chain directly (hashes recomputed), optionally with chosen seq numbers."""
    prev = GENESIS_HASH
    lines = []
    for index, payload in enumerate(payloads):
        line, prev = forge(index if seqs is None else seqs[index], prev, payload)
        lines.append(line)
    write_lines(path, lines)
    return lines


def relink(lines: list[bytes], start: int) -> list[bytes]:
    """Recompute hashes from ``lines[start]`` on, as a forger covering an edit would."""
    out = list(lines[:start])
    prev = GENESIS_HASH if start == 0 else orjson.loads(lines[start - 1])["record_hash"]
    for line in lines[start:]:
        record = orjson.loads(line)
        new, prev = forge(
            record["seq"], prev, record["payload"], orjson.dumps(record["redactions"], option=CANONICAL)
        )
        out.append(new)
    return out
