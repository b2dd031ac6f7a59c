"""A fleet through the gateway: otelcol-gateway.yaml load-balances by trace id onto two tier-2 collectors
(otelcol.yaml); every seam span reaches Phoenix once, and the two tiers' counters add up to the chain."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import iter_payloads

from .collector_proc import calls, phoenix_seam_spans, running_collector
from .test_collector_metrics import run_demo

pytestmark = pytest.mark.e2e

SPAWNS = 60


def _grpc_hostport(collector: Any) -> str:
    return collector.otlp_grpc_endpoint.removeprefix("http://")


def test_gateway_spreads_whole_traces_over_two_tiers(stack: Any, tmp_path: Path) -> None:
    phoenix = stack.endpoints.phoenix_url
    project = f"e2e-gateway-{uuid.uuid4().hex[:8]}"
    with (
        running_collector("otelcol.yaml", phoenix, tmp_path / "a") as tier_a,
        running_collector("otelcol.yaml", phoenix, tmp_path / "b") as tier_b,
    ):
        tiers = {
            "ROUTE_SHADOW_TIER2_A": _grpc_hostport(tier_a),
            "ROUTE_SHADOW_TIER2_B": _grpc_hostport(tier_b),
        }
        with running_collector("otelcol-gateway.yaml", phoenix, tmp_path / "gw", tiers) as gateway:
            chain = run_demo(gateway.otlp_http_endpoint, tmp_path / "demo", SPAWNS, project=project)
            records = [p for _, p in iter_payloads(chain) if p["kind"] == "route-shadow"]
            deadline = time.monotonic() + 90
            while len(phoenix_seam_spans(phoenix, project)) < len(records) and time.monotonic() < deadline:
                time.sleep(0.5)
        deadline = time.monotonic() + 30
        counted = {"a": 0, "b": 0}
        while sum(counted.values()) < SPAWNS and time.monotonic() < deadline:
            time.sleep(0.5)
            counted = {
                n: sum(calls(t.prometheus_url, ()).values()) for n, t in (("a", tier_a), ("b", tier_b))
            }
    assert set(phoenix_seam_spans(phoenix, project)) == {p["span_id"] for p in records}
    # Each tier counted a share, and together they counted every seam span exactly once.
    assert counted["a"] > 0 and counted["b"] > 0, counted
    assert counted["a"] + counted["b"] == len(records) == SPAWNS, counted
