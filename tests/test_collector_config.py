"""Static checks of collector-config/: the Collector config is wired and names only real attributes.

The official Collector cannot be installed on this kind of machine, so otelcol.yaml is checked by
reading it: every component a pipeline references is defined, every defined component is used, and
every ``route_shadow.*`` attribute it names is in the plugin's attribute table
(``otel_route_shadow/shadow/attributes.py``). rotel.env and the stack
requirements are checked too; when the stack environment is installed (ROUTE_SHADOW_STACK_VENV), each
ROTEL_* variable is also checked against the installed rotel-agent's own --help.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from otel_route_shadow.shadow.attributes import ATTRIBUTES

CONFIG_DIR = Path(__file__).resolve().parent.parent / "collector-config"
OTELCOL = CONFIG_DIR / "otelcol.yaml"
KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")
SIGNALS = ("traces", "metrics", "logs")
ATTRIBUTE_KEYS = {spec.key for spec in ATTRIBUTES}
ROUTE_SHADOW_NAME = re.compile(r"route_shadow\.[A-Za-z0-9_.]*[A-Za-z0-9_]")


def _load_stack_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("route_shadow_stack", CONFIG_DIR / "stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded = yaml.safe_load(OTELCOL.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def test_every_referenced_component_is_defined(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"]
    assert pipelines
    defined = {kind: set(config.get(kind) or {}) for kind in KINDS}
    for name, pipeline in pipelines.items():
        assert name.split("/")[0] in SIGNALS, name
        assert pipeline.get("receivers") and pipeline.get("exporters"), name
        for receiver in pipeline["receivers"]:
            assert receiver in defined["receivers"] | defined["connectors"], (name, receiver)
        for processor in pipeline.get("processors", []):
            assert processor in defined["processors"], (name, processor)
        for exporter in pipeline["exporters"]:
            assert exporter in defined["exporters"] | defined["connectors"], (name, exporter)
    for extension in config["service"].get("extensions", []):
        assert extension in defined["extensions"], extension


def test_every_defined_component_is_used(config: dict[str, Any]) -> None:
    pipelines = config["service"]["pipelines"].values()
    used_as_receiver = {r for p in pipelines for r in p["receivers"]}
    used_as_exporter = {e for p in pipelines for e in p["exporters"]}
    used_processors = {x for p in pipelines for x in p.get("processors", [])}
    assert set(config["receivers"]) <= used_as_receiver
    assert set(config["processors"]) <= used_processors
    assert set(config["exporters"]) <= used_as_exporter
    for connector in config.get("connectors") or {}:
        # A connector joins two pipelines: it must be an exporter of one and a receiver of another.
        assert connector in used_as_exporter and connector in used_as_receiver, connector
    assert set(config.get("extensions") or {}) == set(config["service"].get("extensions", []))


def test_processor_order_is_operator_safe(config: dict[str, Any]) -> None:
    for name, pipeline in config["service"]["pipelines"].items():
        processors = pipeline.get("processors", [])
        assert processors and processors[0] == "memory_limiter", name
        if "batch" in processors:
            assert processors[-1] == "batch", name


def test_every_route_shadow_attribute_named_exists(config: dict[str, Any]) -> None:
    named = {m for s in _strings(config) for m in ROUTE_SHADOW_NAME.findall(s)}
    assert named, "the config names no route_shadow attribute at all"
    unknown = named - ATTRIBUTE_KEYS
    assert not unknown, f"not in shadow/attributes.py: {sorted(unknown)}"


def test_spanmetrics_dimensions_give_rates_by_mechanism_transport_role_outcome(
    config: dict[str, Any],
) -> None:
    dimensions = {d["name"] for d in config["connectors"]["spanmetrics"]["dimensions"]}
    assert {
        "route_shadow.legacy.mechanism",
        "route_shadow.transport",
        "route_shadow.role",
        "route_shadow.outcome",
        "route_shadow.agreed",
        "route_shadow.divergence",
    } <= dimensions
    # The metrics pipeline reads the connector and ends at Prometheus.
    metrics = [p for n, p in config["service"]["pipelines"].items() if n.split("/")[0] == "metrics"]
    assert any("spanmetrics" in p["receivers"] and "prometheus" in p["exporters"] for p in metrics)


def test_tail_sampling_keeps_every_route_shadow_span(config: dict[str, Any]) -> None:
    policies = config["processors"]["tail_sampling"]["policies"]
    keep = [p for p in policies if p["type"] == "ottl_condition"]
    assert any(
        'attributes["route_shadow.seam"] != nil' in c for p in keep for c in p["ottl_condition"]["span"]
    )
    # The traces pipeline that samples also exports to the OTLP backend.
    traces = config["service"]["pipelines"]["traces"]
    assert "tail_sampling" in traces["processors"]
    assert any(e.split("/")[0] in ("otlp", "otlphttp") for e in traces["exporters"])


def test_default_listen_addresses_are_loopback(config: dict[str, Any]) -> None:
    endpoints = [
        config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"],
        config["receivers"]["otlp"]["protocols"]["http"]["endpoint"],
        config["exporters"]["prometheus"]["endpoint"],
        config["extensions"]["health_check"]["endpoint"],
    ]
    for endpoint in endpoints:
        assert endpoint.startswith("${env:OTELCOL_BIND_HOST:-127.0.0.1}:"), endpoint


# --------------------------------------------------------------------------------------------------
# rotel and the stack environment
# --------------------------------------------------------------------------------------------------


def test_rotel_env_is_loopback_otlp_to_phoenix() -> None:
    stack = _load_stack_module()
    env = stack.read_env_file(CONFIG_DIR / "rotel.env")
    assert all(key.startswith("ROTEL_") for key in env)
    assert env["ROTEL_OTLP_GRPC_ENDPOINT"].startswith("127.0.0.1:")
    assert env["ROTEL_OTLP_HTTP_ENDPOINT"].startswith("127.0.0.1:")
    assert env["ROTEL_EXPORTER"] == "otlp"
    assert env["ROTEL_OTLP_EXPORTER_PROTOCOL"] == "http"
    assert env["ROTEL_OTLP_EXPORTER_ENDPOINT"].startswith("http://127.0.0.1:")
    # rotel's resource attributes overwrite the application's, which would break Phoenix's projects.
    assert "ROTEL_OTEL_RESOURCE_ATTRIBUTES" not in env
    assert "ROTEL_DAEMON" not in env


def test_stack_requirements_pin_exact_versions() -> None:
    lines = [
        line.strip()
        for line in (CONFIG_DIR / "stack-requirements.txt").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    names = {line.split("==")[0] for line in lines}
    assert names == {"rotel", "arize-phoenix"}
    assert all(re.fullmatch(r"[a-z-]+==[0-9][0-9A-Za-z.]*", line) for line in lines), lines


def test_rotel_env_variables_are_known_to_the_installed_rotel() -> None:
    venv = os.environ.get("ROUTE_SHADOW_STACK_VENV")
    if not venv:
        pytest.skip("ROUTE_SHADOW_STACK_VENV not set (make test sets it)")
    stack = _load_stack_module()
    binary = stack.Stack(venv_bin=Path(venv) / "bin").rotel_binary()
    help_text = subprocess.run(
        [str(binary), "start", "--help"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    known = set(re.findall(r"\[env: (ROTEL_[A-Z0-9_]+)=", help_text))
    env = stack.read_env_file(CONFIG_DIR / "rotel.env")
    assert set(env) <= known, sorted(set(env) - known)


def test_read_env_file_rejects_garbage(tmp_path: Path) -> None:
    stack = _load_stack_module()
    good = tmp_path / "good.env"
    good.write_text("# comment\n\nexport A_B=1\nC='x y'\n")
    assert stack.read_env_file(good) == {"A_B": "1", "C": "x y"}
    bad = tmp_path / "bad.env"
    bad.write_text("just words\n")
    with pytest.raises(stack.StackError, match="expected KEY=VALUE"):
        stack.read_env_file(bad)
