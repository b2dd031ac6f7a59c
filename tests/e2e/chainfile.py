"""Chain files for the e2e suite: write, truncate, and rewrite a record with every hash recomputed.

Until ``otel_route_shadow.chain.RoutingAuditLog`` lands this is a minimal stand-in with the documented
line shape ``{"v": 1, "seq": N, "prev_hash": H, "payload": {...}, "record_hash": H'}``, where
``record_hash`` is the SHA-256 of the canonical JSON of the record without ``record_hash``, and
``prev_hash`` links to the previous record (64 zeros for the first). ``rewrite_record`` plays an
attacker who can recompute hashes: the rewritten chain links and hashes perfectly (``verify`` below
passes), so only the witness can tell.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from otel_route_shadow.core.canonical import canonical_json, digest

GENESIS = "0" * 64


def _seal(seq: int, prev_hash: str, payload: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"v": 1, "seq": seq, "prev_hash": prev_hash, "payload": payload}
    record["record_hash"] = digest(record)
    return record


class ChainWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.records = read_records(path) if path.exists() else []
        self._handle = path.open("ab")

    def append(self, payload: dict[str, Any]) -> None:
        prev = self.records[-1]["record_hash"] if self.records else GENESIS
        record = _seal(len(self.records), prev, payload)
        self.records.append(record)
        self._handle.write(canonical_json(record) + b"\n")
        self._handle.flush()

    def __enter__(self) -> ChainWriter:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._handle.close()


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def payloads(path: Path) -> list[dict[str, Any]]:
    return [r["payload"] for r in read_records(path)]


def verify(path: Path) -> bool:
    """Hash linkage and record hashes: what a plain chain can check on its own."""
    prev = GENESIS
    for seq, record in enumerate(read_records(path)):
        body = {k: val for k, val in record.items() if k != "record_hash"}
        if record["seq"] != seq or record["prev_hash"] != prev or digest(body) != record["record_hash"]:
            return False
        prev = record["record_hash"]
    return True


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_bytes(b"".join(canonical_json(r) + b"\n" for r in records))


def truncated_copy(src: Path, dst: Path, k: int) -> Path:
    """The chain without its last ``k`` records: still a valid chain on its own."""
    records = read_records(src)
    _write(dst, records[: len(records) - k])
    return dst


def rewritten_copy(src: Path, dst: Path, seq: int, mutate: Callable[[dict[str, Any]], None]) -> Path:
    """Rewrite the payload of record ``seq`` and recompute every hash from there on."""
    records = read_records(src)
    rebuilt: list[dict[str, Any]] = []
    for record in records:
        payload = json.loads(json.dumps(record["payload"]))
        if record["seq"] == seq:
            mutate(payload)
        prev = rebuilt[-1]["record_hash"] if rebuilt else GENESIS
        rebuilt.append(_seal(record["seq"], prev, payload))
    _write(dst, rebuilt)
    return dst
