"""collector-config/: every Collector configuration is wired, names only real attributes, and validates.

Static checks read each ``otelcol*.yaml``: every component a pipeline references is defined, every defined
component is used, every ``route_shadow.*`` attribute named is in the plugin's attribute table
(``otel_route_shadow/shadow/attributes.py``) or is a chain checkpoint attribute, and every listener binds
loopback by default. ``builder-config.yaml`` names exactly the components the configurations use, at one
release. Then the collector that `make collector` built runs ``otelcol validate`` on each configuration
(skipped only when no collector is built and ROUTE_SHADOW_OTELCOL is unset; `make test` sets it, so there
a missing build fails). rotel.env and the stack requirements are checked too; when the stack environment
is installed (ROUTE_SHADOW_STACK_VENV), each ROTEL_* variable is also checked against the installed
rotel-agent's own --help.
"""

from __future__ import annotations

import importlib.util
import json
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

REPO = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO / "collector-config"
OTELCOL = CONFIG_DIR / "otelcol.yaml"
SAMPLED = CONFIG_DIR / "otelcol-sampled.yaml"
GATEWAY = CONFIG_DIR / "otelcol-gateway.yaml"
CONFIGS = sorted(CONFIG_DIR.glob("otelcol*.yaml"))
BUILDER_CONFIG = CONFIG_DIR / "builder-config.yaml"
KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")
SIGNALS = ("traces", "metrics", "logs")
# The chain checkpoint spans (the writer's signed size and root) carry route_shadow.checkpoint.* keys; the
# sampling configurations must keep every span that has the origin.
CHECKPOINT_ORIGIN = "route_shadow.checkpoint.origin"
ATTRIBUTE_KEYS = {spec.key for spec in ATTRIBUTES} | {CHECKPOINT_ORIGIN}
ROUTE_SHADOW_NAME = re.compile(r"route_shadow\.[A-Za-z0-9_.]*[A-Za-z0-9_]")
LOOPBACK_DEFAULT = "${env:OTELCOL_BIND_HOST:-127.0.0.1}"


def _load_stack_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("route_shadow_stack", CONFIG_DIR / "stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), path
    return loaded


@pytest.fixture(scope="module", params=CONFIGS, ids=[p.name for p in CONFIGS])
def config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _load(request.param)


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


def test_the_folder_ships_the_three_configurations() -> None:
    assert {p.name for p in CONFIGS} == {"otelcol.yaml", "otelcol-sampled.yaml", "otelcol-gateway.yaml"}


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
    unknown = named - ATTRIBUTE_KEYS
    assert not unknown, f"not in shadow/attributes.py: {sorted(unknown)}"


def test_default_listen_addresses_are_loopback(config: dict[str, Any]) -> None:
    endpoints = [p["endpoint"] for p in config["receivers"]["otlp"]["protocols"].values()]
    endpoints += [e["endpoint"] for e in (config.get("extensions") or {}).values()]
    if "prometheus" in config["exporters"]:
        endpoints.append(config["exporters"]["prometheus"]["endpoint"])
    for endpoint in endpoints:
        assert endpoint.startswith(f"{LOOPBACK_DEFAULT}:"), endpoint
    # The collector's own metrics: on loopback too (the default would be every interface's :8888).
    readers = config["service"]["telemetry"]["metrics"]["readers"]
    assert [r["pull"]["exporter"]["prometheus"]["host"] for r in readers] == [LOOPBACK_DEFAULT]


def test_spanmetrics_dimensions_give_rates_by_mechanism_transport_role_outcome() -> None:
    for path in (OTELCOL, SAMPLED):
        config = _load(path)
        spanmetrics = config["connectors"]["spanmetrics"]
        dimensions = {d["name"] for d in spanmetrics["dimensions"]}
        assert {
            "route_shadow.legacy.mechanism",
            "route_shadow.transport",
            "route_shadow.role",
            "route_shadow.outcome",
            "route_shadow.agreed",
            "route_shadow.divergence",
        } <= dimensions
        assert "aggregation_cardinality_limit" in spanmetrics, path.name
        # Metrics count every decision: their pipeline reads the traces before any sampling.
        pipelines = config["service"]["pipelines"]
        feeding = [p for p in pipelines.values() if "spanmetrics" in p["exporters"]]
        assert feeding and all("tail_sampling" not in p.get("processors", []) for p in feeding)
        metrics = [p for n, p in pipelines.items() if n.split("/")[0] == "metrics"]
        assert any("spanmetrics" in p["receivers"] and "prometheus" in p["exporters"] for p in metrics)


def _policies(config: dict[str, Any]) -> list[dict[str, Any]]:
    policies: list[dict[str, Any]] = config["processors"]["tail_sampling"]["policies"]
    return policies


def _ottl_conditions(config: dict[str, Any]) -> set[str]:
    return {
        condition
        for p in _policies(config)
        if p["type"] == "ottl_condition"
        for condition in p["ottl_condition"]["span"]
    }


def test_tail_sampling_keeps_every_route_shadow_span() -> None:
    config = _load(OTELCOL)
    assert 'attributes["route_shadow.seam"] != nil' in _ottl_conditions(config)
    # The traces pipeline that samples also exports to the OTLP backend.
    traces = config["service"]["pipelines"]["traces"]
    assert "tail_sampling" in traces["processors"]
    assert any(e.split("/")[0] in ("otlp", "otlphttp") for e in traces["exporters"])


@pytest.mark.parametrize("path", [OTELCOL, SAMPLED], ids=lambda p: p.name)
def test_tail_sampling_keeps_every_checkpoint(path: Path) -> None:
    assert f'attributes["{CHECKPOINT_ORIGIN}"] != nil' in _ottl_conditions(_load(path))


def test_sampled_config_keeps_every_divergence_and_a_tenth_of_the_rest() -> None:
    config = _load(SAMPLED)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for policy in _policies(config):
        by_type.setdefault(policy["type"], []).append(policy[policy["type"]])
    assert {"key": "route_shadow.agreed", "value": False} in by_type["boolean_attribute"]
    assert {"key": "route_shadow.outcome", "values": ["held", "rejected"]} in by_type["string_attribute"]
    assert 'attributes["route_shadow.error.type"] != nil' in _ottl_conditions(config)
    assert [p["sampling_percentage"] for p in by_type["probabilistic"]] == [
        "${env:OTELCOL_AGREEING_SAMPLING_PERCENTAGE:-10}"
    ]
    # No policy that drops: no inverted ("not") policy and no seam-wide keep that would defeat the sample.
    assert not any(t.startswith(("not_", "drop")) for t in by_type)
    assert 'attributes["route_shadow.seam"] != nil' not in _ottl_conditions(config)


def test_sampled_config_differs_from_the_default_only_in_its_sampling_policies() -> None:
    default, sampled = _load(OTELCOL), _load(SAMPLED)
    for config in (default, sampled):
        del config["processors"]["tail_sampling"]["policies"]
    assert sampled == default


def test_gateway_routes_whole_traces_to_the_second_tier() -> None:
    config = _load(GATEWAY)
    loadbalancing = config["exporters"]["loadbalancing"]
    assert loadbalancing["routing_key"] == "traceID"
    assert len(loadbalancing["resolver"]["static"]["hostnames"]) >= 2
    assert "loadbalancing" in config["service"]["pipelines"]["traces"]["exporters"]
    # Tier 1 must not sample or aggregate: tier 2 sees the whole trace.
    assert not {"tail_sampling", "spanmetrics"} & (
        set(config["processors"]) | set(config.get("connectors") or {})
    )


# --------------------------------------------------------------------------------------------------
# The builder manifest and the built collector
# --------------------------------------------------------------------------------------------------

# Component type (as configurations name it) -> the Go module that provides it.
MODULE_OF_TYPE = {
    "otlp@receivers": "receiver/otlpreceiver",
    "batch": "processor/batchprocessor",
    "memory_limiter": "processor/memorylimiterprocessor",
    "filter": "processor/filterprocessor",
    "tail_sampling": "processor/tailsamplingprocessor",
    "spanmetrics": "connector/spanmetricsconnector",
    "otlphttp": "exporter/otlphttpexporter",
    "otlp@exporters": "exporter/otlpexporter",
    "debug": "exporter/debugexporter",
    "prometheus": "exporter/prometheusexporter",
    "loadbalancing": "exporter/loadbalancingexporter",
    "health_check": "extension/healthcheckextension",
}


def _used_modules() -> set[str]:
    used = set()
    for path in CONFIGS:
        config = _load(path)
        for kind in KINDS:
            for name in config.get(kind) or {}:
                component_type = name.split("/")[0]
                key = f"{component_type}@{kind}" if component_type == "otlp" else component_type
                assert key in MODULE_OF_TYPE, f"{path.name}: {kind} {name!r} has no module in this table"
                used.add(MODULE_OF_TYPE[key])
    return used


def _builder_modules() -> dict[str, str]:
    manifest = _load(BUILDER_CONFIG)
    modules = {}
    for kind in KINDS:
        for entry in manifest.get(kind) or []:
            module, version = entry["gomod"].split()
            modules[module] = version
    return modules


def test_builder_config_names_exactly_the_components_the_configurations_use() -> None:
    built = {
        module.split("/", 3)[-1] if "contrib" in module else module.split("/", 2)[-1]
        for module in _builder_modules()
    }
    assert built == _used_modules()


def test_builder_config_pins_one_release_for_every_module() -> None:
    manifest = _load(BUILDER_CONFIG)
    versions = set(_builder_modules().values())
    assert versions == {f"v{manifest['dist']['version']}"}
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert f"OTELCOL_RELEASE := {manifest['dist']['version']}" in makefile


def _built_collector() -> Path:
    configured = os.environ.get("ROUTE_SHADOW_OTELCOL", "")
    binary = Path(configured) if configured else REPO / ".otelcol" / "otelcol-route-shadow"
    if not os.access(binary, os.X_OK):
        if configured:
            pytest.fail(f"ROUTE_SHADOW_OTELCOL={configured}: no collector there (run `make collector`)")
        pytest.skip("no collector built (run `make collector`; `make test` builds it)")
    return binary


def _validate(binary: Path, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTELCOL_", "ROUTE_SHADOW_"))}
    return subprocess.run(
        [str(binary), "validate", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_the_built_collector_validates_the_configuration(path: Path) -> None:
    done = _validate(_built_collector(), path)
    assert done.returncode == 0, f"{path}: otelcol validate failed:\n{done.stderr}{done.stdout}"


def test_the_built_collector_names_a_misspelt_field(tmp_path: Path) -> None:
    broken = tmp_path / "otelcol-broken.yaml"
    broken.write_text(OTELCOL.read_text(encoding="utf-8").replace("decision_wait:", "decision_wiat:"))
    done = _validate(_built_collector(), broken)
    assert done.returncode != 0
    assert "decision_wiat" in done.stderr and "tail_sampling" in done.stderr, done.stderr


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


# --------------------------------------------------------------------------------------------------
# stack.py's bookkeeping, without starting anything
# --------------------------------------------------------------------------------------------------


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait(timeout=30)
    return done.pid


def test_status_names_a_dead_process_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = _load_stack_module()
    state = {
        "collector": "otelcol",
        "ports": {"phoenix": 1, "phoenix_grpc": 2, "otlp_http": 3, "otlp_grpc": 4, "health": 5},
        "processes": [{"name": "otelcol", "pid": _dead_pid(), "start_ticks": None, "log": "x.log"}],
    }
    (tmp_path / "state.json").write_text(json.dumps(state))
    assert stack.main(["--state-dir", str(tmp_path), "status"]) == 1
    out, err = capsys.readouterr()
    assert "otelcol  dead" in out
    assert err.strip() == "stack.py: otelcol is dead (`make stack` restarts what died)"


def test_each_start_gets_its_own_log_and_name_log_links_the_newest(tmp_path: Path) -> None:
    stack = _load_stack_module().Stack(tmp_path, tmp_path)
    first, second = stack._new_log("otelcol"), stack._new_log("otelcol")
    assert first != second and first.exists() and second.exists()
    assert (tmp_path / "otelcol.log").resolve() == second.resolve()


def test_a_relative_config_and_collector_are_run_from_where_they_were_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stack.py up --config collector-config/otelcol-sampled.yaml` from the repository passed the file
    check, then the collector, started in the state directory, could not open it and exited."""
    module = _load_stack_module()
    (tmp_path / "otelcol").write_text("#!/bin/sh\n")
    (tmp_path / "otelcol").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    stack = module.Stack(tmp_path / "state", otelcol_binary=Path("otelcol"), otelcol_config=Path("otelcol"))
    binary, _, config = stack.otelcol_command()
    assert binary == config == str(tmp_path / "otelcol")


def test_up_without_a_built_collector_says_so_and_starts_nothing(tmp_path: Path) -> None:
    module = _load_stack_module()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "phoenix").write_text("#!/bin/sh\nexit 1\n")
    stack = module.Stack(tmp_path / "state", bin_dir, collector="otelcol", otelcol_binary=tmp_path / "none")
    with pytest.raises(module.StackError, match="run `make collector`"):
        stack.up()
    assert not (tmp_path / "state").exists()


def test_an_unknown_collector_is_refused() -> None:
    module = _load_stack_module()
    with pytest.raises(module.StackError, match="choose one of otelcol, rotel"):
        module.Stack(collector="jaeger-agent")
