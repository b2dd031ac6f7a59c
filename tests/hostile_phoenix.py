"""A hostile stand-in for Phoenix on loopback, for the tests of what a backend must not be able to do to
``audit``: each test gives the handler that answers every GET (drip, redirect, loop, escape sequences,
not HTTP at all), and the server records each request's path and Authorization header.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from otel_route_shadow.chain import DecisionChain

T0 = 1_796_000_000_000_000_000


@dataclass
class Seen:
    """What the server received: (path, Authorization header) per request."""

    requests: list[tuple[str, str | None]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


Answer = Callable[[BaseHTTPRequestHandler, Seen], None]


@contextlib.contextmanager
def hostile_phoenix(answer: Answer) -> Iterator[tuple[Seen, str]]:
    """A server on 127.0.0.1 (a free port) answering every GET with ``answer``, and its URL."""
    seen = Seen()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            seen.requests.append((self.path, self.headers.get("Authorization")))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                answer(self, seen)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield seen, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        seen.stop.set()  # a dripping answer ends
        server.shutdown()
        server.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, **headers: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    handler.wfile.write(body)


def payload(i: int) -> dict[str, Any]:
    return {
        "kind": "route-shadow",
        "trace_id": f"{i + 1:032x}",
        "span_id": f"{i + 1:016x}",
        "start_time_unix_nano": str(T0 + i * 1_000_123),
        "attributes": {
            "route_shadow.seam": "runner_utils.run_lightweight_agent",
            "route_shadow.decision_id": f"sha256:{i:064x}",
            "route_shadow.agreed": True,
            "gen_ai.operation.name": "chat",
        },
    }


def write_chain(path: Path, records: int = 2) -> Path:
    with DecisionChain(path) as log:
        for i in range(records):
            log.append(payload(i))
    return path
