"""End to end: host -> rotel -> Phoenix, queried back by attribute and held against the chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.backend import BackendNotFound, BackendSpan, PhoenixBackend, QueryWindow
from otel_route_shadow.cli import main

from . import chainfile
from .emit import emit_seam_events

pytestmark = pytest.mark.e2e

SPAWNS = 60
SAMPLED_SPAWNS = 40
RECORD_ONLY_EVERY = 4  # a quarter of the spans never reach the backend


@dataclass
class Run:
    project: str
    chain: Path
    payloads: list[dict[str, Any]]
    backend: PhoenixBackend
    backend_url: str


def _window(payloads: list[dict[str, Any]]) -> QueryWindow:
    starts = [int(p["start_time_unix_nano"]) for p in payloads]  # the chain keeps a decimal string
    return QueryWindow(min(starts), max(starts) + 1)


def wait_for_spans(
    backend: PhoenixBackend, window: QueryWindow, expected: int, timeout: float = 60.0
) -> list[BackendSpan]:
    """Poll until the backend holds ``expected`` seam spans (a fresh project answers 404 at first)."""
    deadline = time.monotonic() + timeout
    seen = -1
    while True:
        try:
            spans = [s for s in backend.fetch_spans(window) if s.attributes.get("route_shadow.seam")]
            seen = len(spans)
            if seen >= expected:
                return spans
        except BackendNotFound:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{backend.describe()}: {seen} of {expected} seam spans after {timeout:.0f}s")
        time.sleep(0.25)


def _emit(stack: Any, tmp_path_factory: pytest.TempPathFactory, spawns: int, **kwargs: Any) -> Run:
    project = f"e2e-{uuid.uuid4().hex[:12]}"
    out = tmp_path_factory.mktemp(project)
    chain = emit_seam_events(stack.endpoints.otlp_http_endpoint, project, out, spawns, **kwargs)
    payloads = [p for p in chainfile.payloads(chain) if p["kind"] == "route-shadow"]
    assert len(payloads) == spawns
    backend = PhoenixBackend(stack.endpoints.phoenix_url, project)
    return Run(project, chain, payloads, backend, stack.endpoints.phoenix_url)


@pytest.fixture(scope="module")
def run(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Every span exported: the backend is a complete backend."""
    result = _emit(stack, tmp_path_factory, SPAWNS)
    wait_for_spans(result.backend, _window(result.payloads), SPAWNS)
    return result


@pytest.fixture(scope="module")
def sampled_run(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    result = _emit(stack, tmp_path_factory, SAMPLED_SPAWNS, record_only_every=RECORD_ONLY_EVERY, seed=7)
    wait_for_spans(
        result.backend, _window(result.payloads), SAMPLED_SPAWNS - SAMPLED_SPAWNS // RECORD_ONLY_EVERY
    )
    return result


def _audit(
    capsys: pytest.CaptureFixture[str], run: Run, chain: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    code = main(
        ["audit", str(chain), "--backend", run.backend_url, "--project", run.project, "--json", *extra]
    )
    out, err = capsys.readouterr()
    assert err == "", err
    body = json.loads(out)
    return code, {**body["spans"], "verdict": body["verdict"], "audit": body}  # span findings at the top


# --------------------------------------------------------------------------------------------------


def test_spans_are_queryable_by_attribute(run: Run) -> None:
    """Every span with route_shadow.agreed=false and mechanism role-dial, against the chain."""
    for filters in (
        {"route_shadow.agreed": False, "route_shadow.legacy.mechanism": "role-dial"},
        {"route_shadow.agreed": True},
        {"route_shadow.transport": "harness-direct", "route_shadow.role": "reviewer"},
        {"route_shadow.rung": 9},
    ):
        expected = {
            p["span_id"]: p["attributes"]
            for p in run.payloads
            if all(
                p["attributes"].get(k) == val and type(p["attributes"].get(k)) is type(val)
                for k, val in filters.items()
            )
        }
        spans = list(run.backend.fetch_spans(_window(run.payloads), filters))
        assert {s.span_id for s in spans} == set(expected), filters
        for span in spans:
            for key, value in expected[span.span_id].items():
                assert span.attributes[key] == value and type(span.attributes[key]) is type(value), (
                    key,
                    filters,
                )
    disagreeing = [p for p in run.payloads if p["attributes"]["route_shadow.agreed"] is False]
    assert disagreeing, "the emitted sample has no disagreement at all"


def test_intact_chain_clean_verdict(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert chainfile.verify(run.chain)
    code, report = _audit(capsys, run, run.chain)
    assert code == 0, report
    assert report["verdict"] == "agree"
    assert report["matched"] == SPAWNS
    assert report["missing_in_backend"]["count"] == 0
    assert report["orphan_spans"] == [] and report["mismatches"] == []
    # The host's non-seam parent spans are in the window (all but the first, which starts before the
    # first seam span) but are not held against the chain.
    assert report["backend_spans"]["fetched"] == 2 * SPAWNS - 1
    assert report["backend_spans"]["seam_spans"] == SPAWNS


@pytest.mark.parametrize("k", [1, 7])
def test_truncated_chain_reports_the_k_records(
    run: Run, k: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = chainfile.truncated_copy(run.chain, tmp_path / "truncated.jsonl", k)
    assert chainfile.verify(chain), "a truncated chain is still a valid chain: the chain alone cannot tell"
    code, report = _audit(capsys, run, chain)
    assert code == 1
    assert report["verdict"] == "disagree"
    tail = run.payloads[-k:]
    assert sorted(o["span_id"] for o in report["orphan_spans"]) == sorted(p["span_id"] for p in tail)
    assert sorted(o["decision_id"] for o in report["orphan_spans"]) == sorted(
        p["attributes"]["route_shadow.decision_id"] for p in tail
    )
    assert report["matched"] == SPAWNS - k
    assert report["mismatches"] == []


def test_rewritten_record_with_recomputed_hashes_is_reported(
    run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = 17

    def forge(payload: dict[str, Any]) -> None:
        attrs = payload["attributes"]
        attrs["route_shadow.agreed"] = not attrs["route_shadow.agreed"]
        attrs["route_shadow.legacy.mechanism"] = (
            "fleet-ratchet" if attrs["route_shadow.legacy.mechanism"] != "fleet-ratchet" else "role-dial"
        )
        attrs["route_shadow.decision_id"] = "0" * 64

    chain = chainfile.rewritten_copy(run.chain, tmp_path / "rewritten.jsonl", target, forge)
    assert chainfile.verify(chain), "every hash was recomputed: the chain alone looks intact"
    code, report = _audit(capsys, run, chain)
    assert code == 1
    assert [m["seq"] for m in report["mismatches"]] == [target]
    assert report["decision_id_mismatches"] == [target]
    keys = {d["key"] for d in report["mismatches"][0]["diffs"]}
    assert keys == {"route_shadow.agreed", "route_shadow.legacy.mechanism", "route_shadow.decision_id"}
    assert report["orphan_spans"] == []


def test_sampled_out_records_are_a_rate_not_an_error(
    sampled_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _audit(capsys, sampled_run, sampled_run.chain)
    assert code == 0, report
    missing = report["missing_in_backend"]
    assert missing["count"] == SAMPLED_SPAWNS // RECORD_ONLY_EVERY
    assert missing["rate"] == pytest.approx(1 / RECORD_ONLY_EVERY)
    assert report["verdict"] == "agree"


def test_console_script_text_report_and_unreachable_backend(run: Run, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("otel-route-shadow")
    chain = chainfile.truncated_copy(run.chain, tmp_path / "t.jsonl", 2)
    done = subprocess.run(
        [str(exe), "audit", str(chain), "--backend", run.backend_url, "--project", run.project],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "spans with no chain record: 2 (a truncated or pruned chain)" in done.stdout
    assert "verdict: DISAGREE" in done.stdout
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    done = subprocess.run(
        [
            str(exe),
            "audit",
            str(run.chain),
            "--backend",
            f"http://127.0.0.1:{closed}",
            "--project",
            run.project,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 4
    assert len(done.stderr.strip().splitlines()) == 1 and "unreachable" in done.stderr


# --------------------------------------------------------------------------------------------------
# The real demo (the plugin under the bundled agent factory) through the same stack.


@pytest.fixture(scope="module")
def demo_run(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    project = f"e2e-demo-{uuid.uuid4().hex[:8]}"
    out = tmp_path_factory.mktemp("demo")
    env = {k: val for k, val in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = stack.endpoints.otlp_http_endpoint
    exe = Path(sys.executable).with_name("otel-route-shadow")
    done = subprocess.run(
        [str(exe), "demo", "--spawns", "80", "--out", str(out), "--project", project, "--quiet"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    chain = out / "chain.jsonl"
    payloads = [p for p in chainfile.payloads(chain) if p["kind"] == "route-shadow"]
    assert len(payloads) == 80
    backend = PhoenixBackend(stack.endpoints.phoenix_url, project)
    wait_for_spans(backend, _window(payloads), len(payloads))
    return Run(project, chain, payloads, backend, stack.endpoints.phoenix_url)


def test_demo_spans_queried_by_attribute_match_the_chain(demo_run: Run) -> None:
    filters = {"route_shadow.agreed": False, "route_shadow.legacy.mechanism": "role-dial"}
    expected = {
        p["span_id"]: p["attributes"]
        for p in demo_run.payloads
        if p["attributes"].get("route_shadow.agreed") is False
        and p["attributes"].get("route_shadow.legacy.mechanism") == "role-dial"
    }
    assert expected, "the demo produced no role-dial disagreement"
    spans = list(demo_run.backend.fetch_spans(_window(demo_run.payloads), filters))
    assert {s.span_id for s in spans} == set(expected)
    for span in spans:
        for key, value in expected[span.span_id].items():
            assert span.attributes[key] == value and type(span.attributes[key]) is type(value), key


def test_demo_chain_audits_clean_then_catches_truncation(
    demo_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _audit(capsys, demo_run, demo_run.chain)
    assert code == 0, report
    assert report["matched"] == len(demo_run.payloads)
    assert report["chain_linkage"]["verdict"] == "intact"
    chain = chainfile.truncated_copy(demo_run.chain, tmp_path / "demo-truncated.jsonl", 5)
    code, report = _audit(capsys, demo_run, chain)
    assert code == 1
    assert sorted(o["span_id"] for o in report["orphan_spans"]) == sorted(
        p["span_id"] for p in demo_run.payloads[-5:]
    )
