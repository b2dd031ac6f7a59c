"""Helpers for the backend tests: an in-memory witness, a host that checkpoints, chain tampering, and a
stand-in for Phoenix's REST API on loopback.

``FakeBackend`` holds spans the way a trace backend does (query by time window and attribute values).
``Host`` writes a chain with the real chain writer and the real ``tlog.Checkpointer``; each checkpoint
reaches the backend through the same attribute mapping the plugin's checkpoint spans carry
(``checkpoint_attributes``), and each seam record's span reaches it unless the host's sampler drops it.
The tamper functions play an attacker who holds the file and can recompute every hash.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from otel_route_shadow.backend.base import AttributeValue, BackendSpan, QueryWindow
from otel_route_shadow.chain import GENESIS_HASH, DecisionChain, iter_records, sanitize_payload
from otel_route_shadow.chain.record import encode_payload, encode_record
from otel_route_shadow.instrumentation.checkpoint_spans import checkpoint_attributes
from otel_route_shadow.logstore import Checkpointer, SignedCheckpoint
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.tlog import Signer

T0 = time.time_ns() - 3600 * 10**9  # an hour ago: every span lies between the epoch and now


class FakeBackend:
    kind = "fake"
    time_tolerance_ns = 0

    def __init__(self) -> None:
        self.spans: list[BackendSpan] = []
        self._ids = 0

    def describe(self) -> str:
        return "fake witness"

    def fetch_spans(
        self, window: QueryWindow, attributes: Mapping[str, AttributeValue] | None = None
    ) -> Iterator[BackendSpan]:
        for span in self.spans:
            if not window.start_unix_nano <= span.start_time_unix_nano < window.end_unix_nano:
                continue
            wanted = attributes or {}
            if all(k in span.attributes and span.attributes[k] == v for k, v in wanted.items()):
                yield span

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def add_checkpoint(self, checkpoint: SignedCheckpoint) -> None:
        n = self.next_id()
        self.spans.append(
            BackendSpan(
                f"{n:032x}", f"{n:016x}", time.time_ns(), checkpoint_attributes(checkpoint), cpa.SPAN_NAME
            )
        )

    def add_seam(self, payload: Mapping[str, Any]) -> None:
        self.spans.append(
            BackendSpan(
                payload["trace_id"],
                payload["span_id"],
                int(payload["start_time_unix_nano"]),
                dict(payload["attributes"]),
                "chat",
            )
        )


def seam_payload(origin: str, i: int, salt: int) -> dict[str, Any]:
    n = salt * 1_000_000 + i + 1
    return {
        "kind": "route-shadow",
        "trace_id": f"{n:032x}",
        "span_id": f"{n:016x}",
        "start_time_unix_nano": str(T0 + i * 1_000_000 + salt),
        "attributes": {
            "route_shadow.seam": "runner_utils.run_lightweight_agent",
            "route_shadow.decision_id": f"sha256:{n:064x}",
            "route_shadow.agreed": i % 2 == 0,
            "route_shadow.origin": origin,
            "gen_ai.operation.name": "chat",
        },
    }


@dataclass
class Host:
    """One host: its chain, its origin, its signer; spans and checkpoints go to ``witness``."""

    directory: Path
    origin: str
    witness: FakeBackend
    signer: Signer | tuple[Signer, ...] | None = None
    salt: int = 1
    sampled: set[int] = field(default_factory=set)  # seqs whose span reached the backend

    @property
    def chain(self) -> Path:
        return self.directory / "chain.jsonl"

    def run(
        self,
        records: int,
        *,
        every: int = 10,
        keep: float = 1.0,
        final_checkpoint: bool = True,
        first: int = 0,
    ) -> Host:
        """Append ``records`` seam records (numbered from ``first``), checkpointing every ``every``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        checkpointer = Checkpointer(str(self.chain), self.origin, self.signer)
        checkpointer.add_listener(self.witness.add_checkpoint)
        rng = random.Random(self.salt + first)
        with DecisionChain(self.chain) as log:
            for i in range(first, first + records):
                payload = seam_payload(self.origin, i, self.salt)
                log.append(payload)
                if (i - first + 1) % every == 0:
                    checkpointer.checkpoint()
                if rng.random() < keep:
                    self.sampled.add(i)
                    self.witness.add_seam(payload)
        if final_checkpoint:
            checkpointer.checkpoint()
        return self


def copy_host(host: Host, directory: Path) -> Host:
    """The host's chain and its .tlog beside it, copied (the attacker works on the copy)."""
    shutil.copytree(host.directory, directory)
    return Host(directory, host.origin, host.witness, host.signer, host.salt, set(host.sampled))


def _rewrite(path: Path, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Write ``(seq, payload)`` records as a perfectly linked chain: every hash recomputed."""
    out: list[bytes] = []
    prev = GENESIS_HASH
    for seq, payload in records:
        clean, marks = sanitize_payload(payload)
        line, prev = encode_record(seq, prev, *encode_payload(clean, marks))
        out.append(line)
    path.write_bytes(b"".join(out))


def payloads(path: Path) -> list[dict[str, Any]]:
    return [copy.deepcopy(r.payload) for r in iter_records(path)]


def truncate(path: Path, keep: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:keep]))


def prune_head(path: Path, drop: int) -> None:
    """Drop the first records and re-link the rest from a new genesis, seqs renumbered."""
    rest = payloads(path)[drop:]
    _rewrite(path, list(enumerate(rest)))


def rewrite(path: Path, seq: int, mutate: Callable[[dict[str, Any]], None]) -> None:
    records = payloads(path)
    mutate(records[seq])
    _rewrite(path, list(enumerate(records)))


def insert(path: Path, seq: int, payload: dict[str, Any]) -> None:
    records = payloads(path)
    records.insert(seq, payload)
    _rewrite(path, list(enumerate(records)))


# -- Phoenix's REST API on loopback --------------------------------------------------------------------


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()  # what Phoenix does (float)


class FakePhoenix:
    """Phoenix 20.26's span route (``GET /v1/projects/{project}/spans``) and its project list, in memory."""

    def __init__(self) -> None:
        self.projects: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[dict[str, list[str]]] = []
        self.status: int | None = None  # force an error status
        self.raw_body: bytes | None = None  # force a body
        self.delay = 0.0
        self.not_phoenix = False  # answer as a collector's OTLP port does

    def add(self, project: str, payload: dict[str, Any]) -> None:
        self.projects.setdefault(project, []).append(
            {
                "id": f"span-{len(self.projects.get(project, []))}",
                "name": "seam",
                "context": {"trace_id": payload["trace_id"], "span_id": payload["span_id"]},
                "span_kind": "AGENT",
                "parent_id": None,
                "start_time": _iso(int(payload["start_time_unix_nano"])),
                "end_time": _iso(int(payload["start_time_unix_nano"]) + 1000),
                "status_code": "UNSET",
                "status_message": "",
                "attributes": {**payload["attributes"], "llm.provider": "anthropic"},
                "events": [],
            }
        )

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        if path == "/v1/projects" and not self.not_phoenix:  # the backend's "is this Phoenix?" probe
            names = [{"name": name} for name in self.projects]
            return 200, json.dumps({"data": names, "next_cursor": None}).encode()
        self.requests.append(query)
        if self.not_phoenix:
            return 404, b"404 page not found"  # what a collector's OTLP/HTTP port answers to a GET
        if self.status is not None:
            return self.status, self.raw_body or b"forced"
        if self.raw_body is not None:
            return 200, self.raw_body
        parts = path.split("/")
        if len(parts) != 5 or parts[1:3] != ["v1", "projects"] or parts[4] != "spans":
            return 404, b"Not Found"
        project = urllib.parse.unquote(parts[3])
        if project not in self.projects:
            return 404, f"Project with name {project} not found".encode()
        spans = sorted(self.projects[project], key=lambda s: s["start_time"])
        start = datetime.fromisoformat(query["start_time"][0].replace("Z", "+00:00"))
        end = datetime.fromisoformat(query["end_time"][0].replace("Z", "+00:00"))
        spans = [s for s in spans if start <= datetime.fromisoformat(s["start_time"]) < end]
        for filt in query.get("attribute", []):
            key, _, value = filt.partition(":")
            wanted = json.loads(value)
            spans = [
                s
                for s in spans
                if key in s["attributes"]
                and s["attributes"][key] == wanted
                and type(s["attributes"][key]) is type(wanted)
            ]
        offset = int(query.get("cursor", ["0"])[0])
        limit = int(query["limit"][0])
        page = spans[offset : offset + limit]
        next_cursor = str(offset + limit) if offset + limit < len(spans) else None
        return 200, json.dumps({"data": page, "next_cursor": next_cursor}).encode()


@contextlib.contextmanager
def phoenix_on_loopback() -> Iterator[tuple[FakePhoenix, str]]:
    """A :class:`FakePhoenix` served on 127.0.0.1 (a free port) by a thread of this process, and its URL."""
    state = FakePhoenix()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parsed = urllib.parse.urlsplit(self.path)
            if state.delay:
                threading.Event().wait(state.delay)
            status, body = state.answer(parsed.path, urllib.parse.parse_qs(parsed.query))
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def publish(backend: FakeBackend, phoenix: FakePhoenix, project: str) -> None:
    """Every span ``backend`` holds (seam and checkpoint spans), put in ``project`` of ``phoenix``."""
    for span in backend.spans:
        phoenix.add(
            project,
            {
                "trace_id": span.trace_id,
                "span_id": span.span_id,
                "start_time_unix_nano": span.start_time_unix_nano,
                "attributes": dict(span.attributes),
            },
        )
