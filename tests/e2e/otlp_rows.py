"""An OTLP/HTTP trace backend on loopback that writes what a collector exports as ``otel_traces`` rows.

``otlp_row_sink`` serves ``POST /v1/traces`` (protobuf, gzip or not, as the collector's ``otlphttp``
exporter sends it) and appends one JSON line per span to a file, in the columns and value forms of the
contrib ``clickhouseexporter`` of collector release 0.161.0 (``exporter_traces.go``): attribute values as
pdata's ``Value.AsString`` writes them (``true``/``false``, decimal integers, JSON for lists and maps), ids
in lower-case hex (empty when all zero), span kind and status code by their Go names. The file is
ClickHouse's ``JSONEachRow`` input for that table.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

MAX_BODY = 64 << 20
_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS = ("Unset", "Ok", "Error")


def _plain(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_plain(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None if which is None else getattr(value, which)


def as_string(value: AnyValue) -> str:
    """pdata's ``Value.AsString``: exact for strings, bools, integers, bytes (base64), lists and maps
    (JSON); a double as Python's ``repr`` (pdata's ES6 form differs only past 1e21; the shipped SQL reads
    no double)."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which == "int_value":
        return str(value.int_value)
    if which == "double_value":
        return repr(value.double_value)
    if which == "bytes_value":
        return str(_plain(value))
    return "" if which is None else json.dumps(_plain(value), separators=(",", ":"))


def _map(attributes: Any) -> dict[str, str]:
    return {kv.key: as_string(kv.value) for kv in attributes if isinstance(kv, KeyValue)}


def _hex(raw: bytes) -> str:
    return raw.hex() if any(raw) else ""


def _timestamp(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def rows(request: ExportTraceServiceRequest) -> Iterator[dict[str, Any]]:
    """One ``otel_traces`` row per span of ``request``."""
    for resource_spans in request.resource_spans:
        resource = _map(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "Timestamp": _timestamp(span.start_time_unix_nano),
                    "TraceId": _hex(span.trace_id),
                    "SpanId": _hex(span.span_id),
                    "ParentSpanId": _hex(span.parent_span_id),
                    "TraceState": span.trace_state,
                    "SpanName": span.name,
                    "SpanKind": _KINDS[span.kind] if span.kind < len(_KINDS) else "",
                    "ServiceName": resource.get("service.name", ""),
                    "ResourceAttributes": resource,
                    "ScopeName": scope_spans.scope.name,
                    "ScopeVersion": scope_spans.scope.version,
                    "SpanAttributes": _map(span.attributes),
                    "Duration": max(span.end_time_unix_nano - span.start_time_unix_nano, 0),
                    "StatusCode": _STATUS[span.status.code] if span.status.code < len(_STATUS) else "",
                    "StatusMessage": span.status.message,
                    "Events.Timestamp": [_timestamp(e.time_unix_nano) for e in span.events],
                    "Events.Name": [e.name for e in span.events],
                    "Events.Attributes": [_map(e.attributes) for e in span.events],
                    "Links.TraceId": [_hex(link.trace_id) for link in span.links],
                    "Links.SpanId": [_hex(link.span_id) for link in span.links],
                    "Links.TraceState": [link.trace_state for link in span.links],
                    "Links.Attributes": [_map(link.attributes) for link in span.links],
                }


@dataclass
class RowSink:
    url: str
    path: Path
    lock: threading.Lock

    def spans(self) -> list[dict[str, Any]]:
        """Every row written so far."""
        with self.lock:
            text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        return [json.loads(line) for line in text.splitlines()]


@contextmanager
def otlp_row_sink(path: Path) -> Iterator[RowSink]:
    """A running sink writing to ``path``; its ``url`` is the base URL for an ``otlphttp`` exporter."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/v1/traces" or not 0 <= length <= MAX_BODY:
                self.send_error(404 if self.path != "/v1/traces" else 413)
                return
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
            lines = "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows(request))
            with lock, path.open("a", encoding="utf-8") as out:
                out.write(lines)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RowSink(f"http://127.0.0.1:{server.server_address[1]}", path, lock)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
