"""Divergence metrics, seen: the demo through the built collector, counted by spanmetrics, scraped from the
Prometheus exporter, and equal to what `otel-route-shadow report --json` computes from the chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .collector_proc import CALLS_METRIC, calls, running_collector, scrape, wait_for_calls

pytestmark = pytest.mark.e2e

SPAWNS = 60
# Prometheus labels of the four spanmetrics dimensions the issue asks for, in report's key order.
LABELS = (
    "route_shadow_legacy_mechanism",
    "route_shadow_transport",
    "route_shadow_outcome",
    "route_shadow_agreed",
)
CARDINALITY_LIMIT = 3


def _cli() -> Path:
    return Path(sys.executable).with_name("otel-route-shadow")


def run_demo(otlp_http_endpoint: str, out: Path, spawns: int = SPAWNS, project: str = "") -> Path:
    """`otel-route-shadow demo` exporting over OTLP/HTTP to ``otlp_http_endpoint``; returns the chain."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_http_endpoint
    project = project or f"e2e-collector-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [str(_cli()), "demo", "--spawns", str(spawns), "--out", str(out), "--project", project, "--quiet"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "chain.jsonl"


def report(chain: Path, by: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(_cli()), "report", str(chain), "--json", "--by", by, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def report_calls(chain: Path) -> Counter[tuple[str, ...]]:
    """The report's spawns per (mechanism, transport, outcome, agreed), from the chain."""
    by = "mechanism+transport+outcome"
    expected: Counter[tuple[str, ...]] = Counter()
    for group in report(chain, by)["groups"][by]:
        key = (group["key"]["mechanism"], group["key"]["transport"], group["key"]["outcome"])
        expected[(*key, "true")] += group["agreed"]
        expected[(*key, "false")] += group["diverged"]
    return +expected  # drop the zero counts: Prometheus has no series for them


def report_served(chain: Path) -> Counter[tuple[str, ...]]:
    """The report's spawns per served status (same, differs, unknown), from the chain."""
    served = report(chain, "mechanism")["served"]
    return +Counter({(state,): served[state] for state in ("same", "differs", "unknown")})


def test_spanmetrics_counts_equal_the_report(stack: Any, tmp_path: Path) -> None:
    with running_collector("otelcol.yaml", stack.endpoints.phoenix_url, tmp_path) as collector:
        chain = run_demo(collector.otlp_http_endpoint, tmp_path / "demo")
        expected = report_calls(chain)
        assert sum(expected.values()) == SPAWNS
        wait_for_calls(collector.prometheus_url, SPAWNS)
        seen = calls(collector.prometheus_url, LABELS)
        served = calls(collector.prometheus_url, ("route_shadow_served_status",))
        findings = calls(collector.prometheus_url, ("route_shadow_finding",))
    assert seen == expected
    assert any(key[3] == "false" for key in seen), "the demo produced no divergence to count"
    # The served route reaches Prometheus as its own dimension, equal to the report's counts.
    assert served == report_served(chain)
    assert served[("differs",)] > 0, "the demo's gateway fell back on no spawn"
    served_differs = sum(n for (codes,), n in findings.items() if "served-differs" in codes.split(","))
    assert served_differs == served[("differs",)]


def test_past_the_cardinality_limit_calls_go_to_the_overflow_series(stack: Any, tmp_path: Path) -> None:
    limit = {"OTELCOL_SPANMETRICS_CARDINALITY_LIMIT": str(CARDINALITY_LIMIT)}
    with running_collector("otelcol.yaml", stack.endpoints.phoenix_url, tmp_path, limit) as collector:
        chain = run_demo(collector.otlp_http_endpoint, tmp_path / "demo")
        assert len(report_calls(chain)) > CARDINALITY_LIMIT, "the demo must exceed the limit"
        wait_for_calls(collector.prometheus_url, SPAWNS)
        series = [labels for name, labels, _ in scrape(collector.prometheus_url) if name == CALLS_METRIC]
        totals = calls(collector.prometheus_url, ("otel_metric_overflow",))
    overflow = [labels for labels in series if labels.get("otel_metric_overflow") == "true"]
    regular = [labels for labels in series if "otel_metric_overflow" not in labels]
    # Past the limit, new label combinations share ONE series without the dimension labels...
    assert len(overflow) == 1 and not any(key.startswith("route_shadow_") for key in overflow[0])
    assert 0 < len(regular) <= CARDINALITY_LIMIT
    # ...and no call is lost: the regular series and the overflow series add up to every spawn.
    assert sum(totals.values()) == SPAWNS and totals[("true",)] > 0
