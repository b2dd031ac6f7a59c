"""The decision as a log event, end to end: a host under ``opentelemetry-instrument`` with only
environment variables (OTLP/HTTP for traces and logs, the global providers the SDK configures) sends
through the built collector (otelcol.yaml, its logs pipeline); the collector's OTLP/HTTP exporters
deliver to a receiver this test runs. Every chain record has exactly one ``feature_flag.evaluation``
log record, carrying the record's trace and span ids."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from otel_route_shadow.chain import iter_payloads

from .collector_proc import running_collector
from .conftest import load_stack_module

pytestmark = pytest.mark.e2e

SPAWNS = 12
HOST = """
from otel_route_shadow.demo import factory
for job in factory.plan_jobs({spawns}, factory.FactorySettings()):
    factory.dispatch(job)
"""


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that keeps every request body by path and answers success."""

    bodies: dict[str, list[bytes]]
    lock = threading.Lock()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with self.lock:
            self.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _receiving() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    bodies: dict[str, list[bytes]] = {}
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", load_stack_module().free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _flag_events(bodies: list[bytes]) -> list[tuple[str, str, dict[str, str]]]:
    """(trace id, span id, attributes) of every feature_flag.evaluation log record received."""
    events = []
    for body in bodies:
        request = ExportLogsServiceRequest.FromString(body)
        for resource_logs in request.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    if record.event_name == "feature_flag.evaluation":
                        attributes = {a.key: a.value.string_value for a in record.attributes}
                        events.append((record.trace_id.hex(), record.span_id.hex(), attributes))
    return events


def _instrumented_host(collector_http: str, chain: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    seams = ";".join(
        f"{target},{face},otel_route_shadow.demo.factory:extract_job"
        for target, face in (
            ("otel_route_shadow.demo.factory:AgentRunner._execute", "agentic"),
            ("otel_route_shadow.demo.factory:run_lightweight_agent", "one-shot"),
        )
    )
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector_http,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "route-shadow-e2e-logs",
            "OTEL_PYTHON_ROUTE_SHADOW_SEAMS": seams,
            "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": str(chain),
        }
    )
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    done = subprocess.run(
        [str(instrument), sys.executable, "-c", HOST.format(spawns=SPAWNS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_decision_reaches_the_log_backend_as_a_flag_evaluation_of_its_span(tmp_path: Path) -> None:
    with _receiving() as (url, bodies):
        with running_collector(
            "otelcol.yaml", url, tmp_path / "collector", {"ROUTE_SHADOW_LOGS_BACKEND_URL": url}
        ) as collector:
            chain = tmp_path / "chain.jsonl"
            _instrumented_host(collector.otlp_http_endpoint, chain)
            records = [p for _, p in iter_payloads(chain) if p["kind"] == "route-shadow"]
            deadline = time.monotonic() + 60
            while (
                len(_flag_events(bodies.get("/v1/logs", []))) < len(records) and time.monotonic() < deadline
            ):
                time.sleep(0.5)
        events = _flag_events(bodies.get("/v1/logs", []))
    assert len(records) > 0
    assert sorted((trace, span) for trace, span, _ in events) == sorted(
        (p["trace_id"], p["span_id"]) for p in records
    )
    for _, _, attributes in events:
        assert attributes["feature_flag.key"].startswith("route_shadow.route/")
        assert attributes["feature_flag.provider.name"] == "otel-route-shadow"
