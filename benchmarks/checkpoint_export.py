"""What the checkpoint spans' threads save: the writer's wait for a checkpoint span, and the wait at exit.

``python -m benchmarks.checkpoint_export [--checkpoints N]``

A diagnostic for ``docs/benchmarks.md`` ("Caches, windows and threads"), never part of ``make bench``
(no row exercises OTLP: row 1 runs without an endpoint). One ``CheckpointSpans`` as shipped (the
SDK's ``BatchSpanProcessor``: one worker thread) against the same with a ``SimpleSpanProcessor``
(the export in the caller's thread: the checkpointer's, or the host's at uninstrument), each with
the SDK's OTLP/HTTP exporter:

* **receiver up**: a loopback HTTP server (a child process) that answers 200 to every POST;
  the time one listener call (one checkpoint handed over) takes, median of N;
* **receiver hangs**: a loopback socket that takes connections and never answers, the exporter's
  timeout set to ``--timeout`` seconds (as ``OTEL_EXPORTER_OTLP_TIMEOUT`` would; 10 s by default):
  the listener call, and what closing costs: ``close()`` (bounded by ``SHUTDOWN_TIMEOUT_S``
  through a daemon thread) against the provider's own ``shutdown()`` called directly.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

_SERVER = """
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _checkpoint(size: int) -> Any:
    from otel_route_shadow.logstore import SignedCheckpoint

    origin = "bench.example/route-shadow/checkpoint-export"
    return SignedCheckpoint(origin, size, bytes(32), f"{origin}\n{size}\n{'A' * 43}=\n", False, None)


def _emitters(endpoint: str, timeout: float) -> dict[str, Any]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    from otel_route_shadow.instrumentation.checkpoint_spans import SCOPE_NAME, CheckpointSpans

    batch = CheckpointSpans(OTLPSpanExporter(endpoint=endpoint, timeout=timeout), Resource.create({}))
    simple = CheckpointSpans(OTLPSpanExporter(endpoint=endpoint, timeout=timeout), Resource.create({}))
    provider = TracerProvider(resource=Resource.create({}), sampler=ALWAYS_ON, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(simple._exporter))
    simple._provider, simple._tracer = provider, provider.get_tracer(SCOPE_NAME)
    return {"batch (shipped)": batch, "simple (caller's thread)": simple}


def _listener_ms(emitter: Any, count: int) -> float:
    times = []
    for size in range(1, count + 1):
        start = time.perf_counter()
        emitter(_checkpoint(size))
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _silent_listener() -> socket.socket:
    """A loopback socket whose backlog takes connections that nobody ever reads or answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.checkpoint_export", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--checkpoints", type=int, default=50, help="listener calls per side, receiver up")
    parser.add_argument("--timeout", type=float, default=10.0, help="the OTLP exporter's timeout, s")
    args = parser.parse_args(argv)
    rows = []
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        up = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1/traces"
        for name, emitter in _emitters(up, args.timeout).items():
            rows.append(
                (name, "receiver up", "listener call, median", _listener_ms(emitter, args.checkpoints))
            )
            emitter.close()
    finally:
        server.kill()
        server.wait()
    with _silent_listener() as listener:
        hangs = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"
        for name, emitter in _emitters(hangs, args.timeout).items():
            rows.append((name, "receiver hangs", "listener call, median of 2", _listener_ms(emitter, 2)))
            start = time.perf_counter()
            emitter.close()
            rows.append((name, "receiver hangs", "close()", (time.perf_counter() - start) * 1e3))
        emitter = _emitters(hangs, args.timeout)["batch (shipped)"]
        emitter(_checkpoint(1))
        start = time.perf_counter()
        emitter._provider.shutdown()
        elapsed = (time.perf_counter() - start) * 1e3
        rows.append(("batch (shipped)", "receiver hangs", "provider.shutdown() unbounded", elapsed))
    print(f"OTLP/HTTP exporter timeout {args.timeout:g} s; pid {os.getpid()}")
    print("| processor | receiver | measured | ms |")
    print("|---|---|---|---|")
    for name, receiver, what, ms in rows:
        print(f"| {name} | {receiver} | {what} | {ms:,.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
