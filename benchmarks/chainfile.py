"""Large decision chains, generated fast but validly, cached between rows and runs; and the minimal
reference verify loop that ``verify`` is measured against.

The generator writes the lines ``docs/chain-format.md`` specifies directly (``orjson`` with sorted keys
and strict integers for the canonical payload, ``hashlib.sha256`` over the record body, the hash linked
from record to record) instead of calling ``DecisionChain.append`` a million times. Before a chain is
used, its first records are compared byte for byte with what the real append API writes for the same
payloads, and the real ``verify`` must accept the whole chain; the cache key carries the format
version, the size and a fingerprint of the payloads, so a change in the code that produces them
regenerates the chain.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.payloads import demo_policies, distinct_payloads, stamp

FORMAT_VERSION = 1
GENESIS_HASH = "0" * 64
GENERATOR_VERSION = 1
CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
CHECK_RECORDS = 64
"""Leading records compared byte for byte with the real append API."""


def encode_line(seq: int, prev_hash: str, payload: dict[str, Any]) -> tuple[bytes, str]:
    """One record line (newline included) and its record hash, per docs/chain-format.md."""
    body = b"".join(
        (
            b'{"payload":',
            orjson.dumps(payload, option=CANONICAL),
            b',"prev_hash":"',
            prev_hash.encode("ascii"),
            b'","redactions":[],"seq":',
            str(seq).encode("ascii"),
            b',"v":1}',
        )
    )
    record_hash = hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"record_hash":"' + record_hash.encode("ascii") + b'"}\n', record_hash


def write_chain(path: Path, templates: list[dict[str, Any]], records: int, seed: int = 8) -> str:
    """Write ``records`` records cycling through ``templates``; returns the head hash."""
    rng = random.Random(seed)
    prev = GENESIS_HASH
    tmp = path.with_suffix(".partial")
    with open(tmp, "wb", buffering=1 << 20) as handle:
        for seq in range(records):
            line, prev = encode_line(seq, prev, stamp(templates[seq % len(templates)], rng, seq))
            handle.write(line)
    os.replace(tmp, path)
    return prev


def reference_verify(path: Path) -> int:
    """The minimal reference loop, per docs/chain-format.md sections 4, 5 and 8: read a line, parse it
    with orjson, take ``record_hash`` out, re-canonicalize the body with the same rules (sorted keys,
    strict integers), check the line is exactly that body plus its hash (the layout rule, one bytes
    comparison), SHA-256 the body, and compare the record hash, ``prev_hash``, ``seq`` and ``v``.
    Returns the record count; raises on a broken chain. No diagnosis, no torn-tail handling, no locks."""
    prev = GENESIS_HASH
    seq = 0
    loads, dumps, sha256 = orjson.loads, orjson.dumps, hashlib.sha256
    with open(path, "rb") as handle:
        for line in handle:
            record = loads(line)
            record_hash = record.pop("record_hash")
            body = dumps(record, option=CANONICAL)
            if line != body[:-1] + b',"record_hash":"' + record_hash.encode() + b'"}\n':
                raise ValueError(f"line {seq + 1} is not in canonical layout")
            if sha256(body).hexdigest() != record_hash:
                raise ValueError(f"record hash mismatch at seq {seq}")
            if record["seq"] != seq or record["prev_hash"] != prev or record["v"] != FORMAT_VERSION:
                raise ValueError(f"chain broken at seq {seq}")
            prev = record_hash
            seq += 1
    return seq


class ChainSet:
    """The benchmark's chains: one large chain and its policy store, generated once and cached."""

    def __init__(self, workdir: Path, records: int, distinct: int) -> None:
        self.workdir = workdir
        self.records = records
        self.distinct = distinct
        self.snapshot: Any = None
        self.templates: list[dict[str, Any]] = []
        self.path: Path | None = None
        self.store_dir: Path | None = None
        self.generated_s: float | None = None
        self.reused = False
        self.head_hash: str | None = None

    def _prepare_store(self) -> Any:
        from otel_route_shadow.core import policy_set_hash
        from otel_route_shadow.store import RoutingPolicyStore

        store_dir = self.workdir / "chains" / "store"
        store = RoutingPolicyStore(store_dir)
        policies = demo_policies()
        load = store.load()
        if load.state != "ok" or load.snapshot.content_hash != policy_set_hash(policies):
            shutil.rmtree(store_dir, ignore_errors=True)
            store = RoutingPolicyStore(store_dir)
            store.save(policies)
            load = store.load()
        self.store_dir = store_dir
        return load.snapshot

    def payload_templates(self) -> list[dict[str, Any]]:
        """The large chain's distinct payloads (its policy store prepared), without writing the chain."""
        if not self.templates:
            self.snapshot = self._prepare_store()
            self.templates = distinct_payloads(self.snapshot, self.distinct)
        return self.templates

    def large(self) -> Path:
        """The large chain (generated, or reused from the cache when its key still matches)."""
        if self.path is not None:
            return self.path
        templates = orjson.dumps(self.payload_templates(), option=CANONICAL)
        fingerprint = hashlib.sha256(templates).hexdigest()[:16]
        name = (
            f"chain-v{FORMAT_VERSION}-g{GENERATOR_VERSION}-{self.records}-{self.distinct}-{fingerprint}.jsonl"
        )
        path = self.workdir / "chains" / name
        meta_path = path.with_suffix(".meta.json")
        if path.exists() and meta_path.exists():
            meta = orjson.loads(meta_path.read_bytes())
            if meta.get("size") == path.stat().st_size and meta.get("verified"):
                self.path, self.reused, self.head_hash = path, True, meta.get("head_hash")
                return path
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob("chain-v*.jsonl"):
            if stale != path:
                stale.unlink()
                stale.with_suffix(".meta.json").unlink(missing_ok=True)
        self.check_against_append_api()
        start = time.perf_counter()
        head = write_chain(path, self.templates, self.records)
        self.generated_s = time.perf_counter() - start
        result = self.real_verify(path)
        if not result["intact"] or result["records"] != self.records or result["head_hash"] != head:
            raise RuntimeError(f"the real verify does not accept the generated chain: {result}")
        meta_path.write_bytes(
            orjson.dumps(
                {"size": path.stat().st_size, "verified": True, "head_hash": head, "records": self.records}
            )
        )
        self.path, self.head_hash = path, head
        return path

    def check_against_append_api(self) -> None:
        """The generator's first records must equal, byte for byte, what ``append`` writes."""
        from otel_route_shadow.chain import DecisionChain

        probe = self.workdir / "chains" / "probe.jsonl"
        probe.unlink(missing_ok=True)
        generated = self.workdir / "chains" / "probe-generated.jsonl"
        count = min(CHECK_RECORDS, max(len(self.templates), 1))
        write_chain(generated, self.templates, count)
        rng = random.Random(8)
        log = DecisionChain(probe, durability="flush")
        for seq in range(count):
            log.append(stamp(self.templates[seq % len(self.templates)], rng, seq))
        _close(log)
        ours, real = generated.read_bytes(), probe.read_bytes()
        probe.unlink()
        generated.unlink()
        if ours != real:
            first = next(
                i
                for i, (a, b) in enumerate(zip(ours.splitlines(), real.splitlines(), strict=False))
                if a != b
            )
            raise RuntimeError(f"generated chain differs from DecisionChain.append output at record {first}")

    @staticmethod
    def real_verify(path: Path, jobs: int = 1) -> dict[str, Any]:
        from otel_route_shadow.chain import DecisionChain

        result = DecisionChain(path).verify(jobs=jobs)
        return {"intact": bool(result.intact), "records": int(result.records), "head_hash": result.head_hash}

    def empty_copy_dir(self, name: str) -> Path:
        directory = self.workdir / name
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        return directory


def _close(log: Any) -> None:
    close = getattr(log, "close", None)
    if callable(close):
        close()
