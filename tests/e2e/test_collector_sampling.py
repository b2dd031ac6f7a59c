"""Tail sampling that never drops a divergence: the demo through otelcol-sampled.yaml into Phoenix.

Every span of the chain that diverged, was held or rejected, or carries route_shadow.error.type is found in
Phoenix; of the agreeing rest, about 10% (by a hash of the trace id, so the exact share varies from run to
run: the test asserts "fewer than all, and well under half", never an exact count).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import iter_payloads

from .collector_proc import phoenix_seam_spans, running_collector
from .test_collector_metrics import run_demo

pytestmark = pytest.mark.e2e

SPAWNS = 150


def must_keep(attributes: dict[str, Any]) -> bool:
    """What the sampled configuration promises to keep, read from a chain record."""
    return (
        attributes.get("route_shadow.agreed") is False
        or attributes.get("route_shadow.outcome") in ("held", "rejected")
        or "route_shadow.error.type" in attributes
    )


def test_every_divergent_span_reaches_phoenix_and_fewer_than_all_agreeing(stack: Any, tmp_path: Path) -> None:
    phoenix = stack.endpoints.phoenix_url
    project = f"e2e-sampled-{uuid.uuid4().hex[:8]}"
    with running_collector("otelcol-sampled.yaml", phoenix, tmp_path) as collector:
        chain = run_demo(collector.otlp_http_endpoint, tmp_path / "demo", SPAWNS, project=project)
        records = [p for _, p in iter_payloads(chain) if p["kind"] == "route-shadow"]
        kept = {p["span_id"] for p in records if must_keep(p["attributes"])}
        rest = {p["span_id"] for p in records} - kept
        assert kept and rest, "the demo must produce both divergent and agreeing decisions"
        deadline = time.monotonic() + 90
        found = phoenix_seam_spans(phoenix, project)
        while not kept <= set(found) and time.monotonic() < deadline:
            time.sleep(0.5)
            found = phoenix_seam_spans(phoenix, project)
    # The collector has stopped (and flushed): Phoenix now holds all it will ever get from this run.
    found = phoenix_seam_spans(phoenix, project)
    missing = kept - set(found)
    assert not missing, f"{len(missing)} of {len(kept)} divergent/held/rejected spans dropped"
    agreeing_kept = rest & set(found)
    print(
        f"\n[e2e] sampled: {len(kept)} must-keep spans all found; {len(agreeing_kept)} of {len(rest)} agreeing"
    )
    assert len(agreeing_kept) < len(rest)
    assert len(agreeing_kept) <= 0.4 * len(rest), "10% sampling kept far more agreeing spans than expected"
    assert set(found) <= kept | rest, "Phoenix holds a seam span the chain does not"
