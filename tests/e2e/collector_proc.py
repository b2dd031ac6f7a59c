"""One more OpenTelemetry Collector beside the session stack, for the collector e2e tests.

``running_collector`` starts the collector `make collector` built (ROUTE_SHADOW_OTELCOL) with one of the
configurations in collector-config/, every listener on a free loopback port, exporting to the session's
Phoenix; it waits until the health_check extension answers and always stops the process (SIGTERM, then
SIGKILL; the kernel kills it too if the test process dies: PR_SET_PDEATHSIG). ``scrape`` reads the
Prometheus exporter; ``calls`` sums the spanmetrics call counters by label.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import REPO, load_stack_module

CONFIG_DIR = REPO / "collector-config"
CALLS_METRIC = "route_shadow_calls_total"
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Collector:
    otlp_http_endpoint: str
    otlp_grpc_endpoint: str
    prometheus_url: str
    log: Path


def built_collector() -> Path:
    """The collector binary; a missing one fails (the e2e targets build it), never skips."""
    configured = os.environ.get("ROUTE_SHADOW_OTELCOL", "")
    binary = Path(configured) if configured else REPO / ".otelcol" / "otelcol-route-shadow"
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary}: no collector built (run `make collector`)")
    return binary


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


START_ATTEMPTS = 3
"""Starts tried with fresh ports when a port chosen free was taken by another process meanwhile."""


def _environment(
    ports: Mapping[str, int], backend_url: str, extra_env: Mapping[str, str] | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELCOL_"))}
    env.update(
        {
            "OTELCOL_BIND_HOST": "127.0.0.1",
            "OTELCOL_OTLP_HTTP_PORT": str(ports["http"]),
            "OTELCOL_OTLP_GRPC_PORT": str(ports["grpc"]),
            "OTELCOL_PROMETHEUS_PORT": str(ports["prometheus"]),
            "OTELCOL_HEALTH_PORT": str(ports["health"]),
            "OTELCOL_TELEMETRY_PORT": str(ports["telemetry"]),
            "ROUTE_SHADOW_BACKEND_URL": backend_url,
            "OTELCOL_DECISION_WAIT": "1s",
            "OTELCOL_METRICS_FLUSH_INTERVAL": "1s",
            **(extra_env or {}),
        }
    )
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _started(
    config: str, backend_url: str, log: Path, extra_env: Mapping[str, str] | None
) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """The collector running and healthy, on ports chosen free; tried again on fresh ports when one
    was taken between the choice and the bind (another process on the machine), failed otherwise."""
    stack = load_stack_module()
    for _ in range(START_ATTEMPTS):
        ports = {name: stack.free_port() for name in ("http", "grpc", "prometheus", "health", "telemetry")}
        start = log.stat().st_size if log.exists() else 0
        with log.open("ab") as handle:
            proc = subprocess.Popen(
                [str(built_collector()), "--config", str(CONFIG_DIR / config)],
                env=_environment(ports, backend_url, extra_env),
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=stack._die_with_parent,
            )
        deadline = time.monotonic() + 60
        while not _healthy(f"http://127.0.0.1:{ports['health']}/"):
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc)
                said = log.read_bytes()[start:].decode("utf-8", "replace")
                if "address already in use" in said:
                    break
                pytest.fail(f"the collector ({config}) did not start; its log:\n{said[-3000:]}")
            time.sleep(0.2)
        else:
            return proc, ports
    pytest.fail(f"the collector ({config}) found a port taken in each of {START_ATTEMPTS} starts; see {log}")


@contextmanager
def running_collector(
    config: str, backend_url: str, log_dir: Path, extra_env: Mapping[str, str] | None = None
) -> Iterator[Collector]:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"otelcol-{config.removesuffix('.yaml')}.log"
    proc, ports = _started(config, backend_url, log, extra_env)
    try:
        yield Collector(
            f"http://127.0.0.1:{ports['http']}",
            f"http://127.0.0.1:{ports['grpc']}",
            f"http://127.0.0.1:{ports['prometheus']}/metrics",
            log,
        )
    finally:
        _stop(proc)


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text exposition: (metric name, labels, value)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode("utf-8")
    samples = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        labels = {m["key"]: m["value"] for m in _LABEL.finditer(match["labels"] or "")}
        samples.append((match["name"], labels, float(match["value"])))
    return samples


def calls(url: str, by: tuple[str, ...]) -> Counter[tuple[str, ...]]:
    """The spanmetrics call counters summed by the labels ``by`` (a missing label reads "(none)")."""
    totals: Counter[tuple[str, ...]] = Counter()
    for name, labels, value in scrape(url):
        if name == CALLS_METRIC:
            totals[tuple(labels.get(label, "(none)") for label in by)] += int(value)
    return totals


def wait_for_calls(url: str, expected_total: int, timeout: float = 60.0) -> None:
    """Poll until the call counters add up to ``expected_total`` (the connector flushes every second)."""
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        with suppress(urllib.error.URLError, OSError):
            seen = sum(calls(url, ()).values())
            if seen >= expected_total:
                return
        time.sleep(0.5)
    pytest.fail(f"{url}: {seen} of {expected_total} calls counted after {timeout:.0f}s")


def phoenix_seam_spans(phoenix_url: str, project: str) -> dict[str, dict[str, object]]:
    """span_id -> attributes of every seam span Phoenix holds in ``project`` ({} while it has none)."""
    spans: dict[str, dict[str, object]] = {}
    cursor = ""
    for _page in range(100):  # 100 pages of 1000: far more than any test sends
        query = "limit=1000" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
        url = f"{phoenix_url}/v1/projects/{urllib.parse.quote(project, safe='')}/spans?{query}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # a project with no span yet
                return spans
            raise
        for raw in body["data"]:
            attributes = raw.get("attributes") or {}
            if "route_shadow.seam" in attributes:
                spans[raw["context"]["span_id"]] = attributes
        cursor = body.get("next_cursor") or ""
        if not cursor:
            break
    return spans
