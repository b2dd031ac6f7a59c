"""The report's per-key counts in ClickHouse: collector-config/clickhouse-report-counts.sql, run by chDB over
what the built collector exported, gives the counts `otel-route-shadow report --json` gives on the same run.

The demo sends its spans through the built collector with the complete configuration (otelcol.yaml); its
trace backend is an OTLP sink (tests/e2e/otlp_rows.py) writing each exported span as a row of the contrib
clickhouseexporter's ``otel_traces`` table. chDB (ClickHouse's embedded engine) runs in its own environment
(``.venv-chdb``, built by `make chdb` and `make test`, which sets ROUTE_SHADOW_CHDB_VENV): it creates the
table (tests/e2e/clickhouse_otel_traces.sql), loads the rows and runs the shipped SQL.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter

from .collector_proc import CONFIG_DIR, running_collector
from .conftest import REPO
from .otlp_rows import otlp_row_sink, rows
from .test_collector_metrics import report, run_demo

pytestmark = pytest.mark.e2e

SPAWNS = 120
HERE = Path(__file__).resolve().parent
COUNTS_SQL = CONFIG_DIR / "clickhouse-report-counts.sql"
FIGURES = ("spawns", "agreed", "diverged", "managed", "bypass")
DIMENSIONS = ("repo", "role", "mechanism", "transport")


def chdb_python() -> Path:
    """The chDB environment's Python. Skipped only when no environment was asked for and none is built;
    a configured one that is missing or broken fails (`make test` must not pass by skipping)."""
    configured = os.environ.get("ROUTE_SHADOW_CHDB_VENV", "")
    venv = Path(configured) if configured else REPO / ".venv-chdb"
    python = venv / "bin" / "python"
    if not configured and not python.exists():
        pytest.skip("no chDB environment (.venv-chdb): `make chdb` builds it; `make test` builds and uses it")
    if not (venv / ".installed").exists():
        pytest.fail(f"{venv}: no chDB installed there (run `make chdb`)")
    return python


def run_counts_sql(python: Path, rows: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [
            str(python),
            str(HERE / "chdb_query.py"),
            str(HERE / "clickhouse_otel_traces.sql"),
            str(rows),
            str(COUNTS_SQL),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def report_counts(result: dict[str, Any]) -> dict[tuple[str, str | None], tuple[int, ...]]:
    """(dimension, key) -> the figures, from `report --json`: its totals and its default breakdowns."""
    counts: dict[tuple[str, str | None], tuple[int, ...]] = {
        ("total", None): tuple(result["totals"][f] for f in FIGURES)
    }
    for dimension in DIMENSIONS:
        for row in result["groups"][dimension]:
            counts[(dimension, row["key"][dimension])] = tuple(row[f] for f in FIGURES)
    return counts


def sql_counts(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str | None], tuple[int, ...]]:
    return {(row["dimension"], row["key"]): tuple(int(row[f]) for f in FIGURES) for row in rows}


def test_the_shipped_clickhouse_sql_counts_what_report_counts(tmp_path: Path) -> None:
    python = chdb_python()
    rows = tmp_path / "otel_traces.jsonl"
    with (
        otlp_row_sink(rows) as sink,
        running_collector("otelcol.yaml", sink.url, tmp_path) as collector,
    ):
        chain = run_demo(
            collector.otlp_http_endpoint, tmp_path / "demo", SPAWNS, f"e2e-ch-{uuid.uuid4().hex[:8]}"
        )
        seam_spans = {p["span_id"] for _, p in iter_payloads(chain) if p.get("kind") == "route-shadow"}
        assert len(seam_spans) >= SPAWNS
        deadline = time.monotonic() + 90  # tail sampling waits 1s per trace, then a 1s batch
        while time.monotonic() < deadline:
            if seam_spans <= {row["SpanId"] for row in sink.spans()}:
                break
            time.sleep(0.5)
    exported = {row["SpanId"] for row in sink.spans()}
    assert seam_spans <= exported, f"{len(seam_spans - exported)} seam spans never reached the backend"

    expected = report_counts(report(chain, ",".join(DIMENSIONS)))
    found = sql_counts(run_counts_sql(python, rows))
    assert found == expected
    assert expected[("total", None)][0] > 0 and expected[("total", None)][1] < expected[("total", None)][0]


# Every way a record can agree or not that the SQL must judge as the report does: the served route
# (status, reason, a served-differs finding among others), an absent decision key, a record without a
# decision, and the managed and bypass markers.
SERVED: tuple[dict[str, str], ...] = (
    {"route_shadow.served.status": "same"},
    {"route_shadow.served.status": "differs", "route_shadow.served.why": "fallback"},
    {"route_shadow.served.status": "differs", "route_shadow.served.why": "alias"},
    {"route_shadow.served.status": "differs"},
    {"route_shadow.finding": "requirement-defied, served-differs"},
    {"route_shadow.finding": "requirement-defied"},
    {},
)
KEYS: tuple[dict[str, str], ...] = (
    {"route_shadow.repo": "acme/widgets", "route_shadow.role": "worker"},
    {"route_shadow.repo": "acme/other"},
    {},
)


def _value(value: object) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(string_value=str(value))


def test_the_clickhouse_sql_judges_agreement_as_the_report_does(tmp_path: Path) -> None:
    python = chdb_python()
    chain = tmp_path / "chain.jsonl"
    exporter = RouteShadowChainExporter(chain)
    spans = []
    combos = itertools.product(SERVED, KEYS, (True, False), ("managed-policy", "legacy-compatibility"))
    for i, (served, key, agreed, source) in enumerate(combos, start=1):
        attributes: dict[str, object] = {
            "route_shadow.seam": "base_runner._execute",
            "route_shadow.outcome": "selected" if i % 5 else "held",
            "route_shadow.agreed": agreed,
            "route_shadow.policy_source": source,
            "route_shadow.rung": 2,
            "route_shadow.legacy.mechanism": ("env-var", "settings-file")[i % 2],
            "route_shadow.transport": ("direct-http", "gateway")[i % 3 == 0],
            **({} if agreed else {"route_shadow.divergence": "provider-differs"}),
            **served,
            **key,
        }
        if i % 11 == 0:  # a shadow path that failed: no decision, in no figure
            del attributes["route_shadow.outcome"]
            attributes["route_shadow.error.type"] = "ValueError"
        start = 1_764_730_000_000_000_000 + i
        exporter.append(7, i, start, attributes)
        span = Span(trace_id=(7).to_bytes(16, "big"), span_id=i.to_bytes(8, "big"), name="seam")
        span.start_time_unix_nano, span.end_time_unix_nano = start, start + 1000
        span.attributes.extend(KeyValue(key=k, value=_value(v)) for k, v in attributes.items())
        spans.append(span)
    exporter.close()
    spans.append(spans[0])  # an export retried: the same span inserted twice
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    table = tmp_path / "otel_traces.jsonl"
    table.write_text("".join(json.dumps(row) + "\n" for row in rows(request)), encoding="utf-8")

    expected = report_counts(report(chain, ",".join(DIMENSIONS)))
    assert sql_counts(run_counts_sql(python, table)) == expected
    total = expected[("total", None)]
    assert 0 < total[1] < total[0] and 0 < total[3] < total[0] and 0 < total[4] < total[0]
