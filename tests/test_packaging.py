"""The package as a user gets it: ``python -m build`` makes a wheel and an sdist (both with ``py.typed``);
the wheel, installed with its ``distro`` extra into a clean virtual environment (``pip check`` clean),
instruments a host run under ``opentelemetry-instrument`` configured by environment variables alone, and
the console exporter prints the seam spans with their ``route_shadow.*`` attributes while the chain gets
one record per spawn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.version import __version__

ROOT = Path(__file__).parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HOST = '''
"""A host that knows nothing of OpenTelemetry: a runner that spawns agents."""
from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route
from otel_route_shadow.shadow import local_account_availability


class Runner:
    def execute(self, loop):
        return f"{loop} done"


def extract_execute(call):
    stages = [LegacyStage(mechanism="role-dial", provider="anthropic", model="claude-sonnet")]
    return RouteContext(
        repo="acme/widgets", role="reviewer", principal_id=call.args[0], request_face=call.request_face,
        requirement="frontier", accounts=local_account_availability(),
        legacy_route=build_legacy_route(stages, call.request_face, "anthropic-legacy"),
    )
'''

APP = """
from factory_host import Runner
print([Runner().execute(f"loop-{n}") for n in range(3)])
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


def _one(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def test_build_makes_a_wheel_and_an_sdist_that_ship_py_typed(dist: Path) -> None:
    wheel = _one(dist, f"otel_route_shadow-{__version__}-py3-none-any.whl")
    sdist = _one(dist, f"otel_route_shadow-{__version__}.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"otel_route_shadow-{__version__}.dist-info/METADATA").decode()
        entry_points = archive.read(f"otel_route_shadow-{__version__}.dist-info/entry_points.txt").decode()
    assert "otel_route_shadow/py.typed" in names
    assert "otel_route_shadow/tlog/cosignature.py" in names
    assert not any(name.startswith("tests/") for name in names)
    assert "Provides-Extra: distro" in metadata
    assert "route_shadow = otel_route_shadow.instrumentation:RouteShadowInstrumentor" in entry_points
    with tarfile.open(sdist) as archive:
        assert f"otel_route_shadow-{__version__}/otel_route_shadow/py.typed" in archive.getnames()


def test_the_wheel_installed_with_its_distro_extra_exports_the_seam_spans_under_opentelemetry_instrument(
    dist: Path, tmp_path: Path
) -> None:
    wheel = _one(dist, "*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python, bin_dir = env_dir / "bin" / "python", env_dir / "bin"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "OTEL_", "PIP_"))}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{wheel}[distro]"],
        capture_output=True,
        text=True,
        env=clean,
        timeout=600,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-4000:]
    check = subprocess.run(
        [str(python), "-m", "pip", "check"],
        capture_output=True,
        text=True,
        env=clean,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr

    host = tmp_path / "host"
    host.mkdir()
    (host / "factory_host.py").write_text(textwrap.dedent(HOST))
    (host / "app.py").write_text(textwrap.dedent(APP))
    chain = tmp_path / "chain.jsonl"
    env = {
        **clean,
        "OTEL_SERVICE_NAME": "factory",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_ROUTE_SHADOW_SEAMS": "factory_host:Runner.execute,agentic,factory_host:extract_execute",
        "OTEL_PYTHON_ROUTE_SHADOW_STORE": str(tmp_path / "policies"),
        "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH": str(chain),
    }
    done = subprocess.run(
        [str(bin_dir / "opentelemetry-instrument"), str(python), "app.py"],
        cwd=host,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, _, printed = done.stdout.partition("\n")
    assert first == "['loop-0 done', 'loop-1 done', 'loop-2 done']"
    spans = _console_spans(printed)
    seams = [s for s in spans if any(k.startswith("route_shadow.") for k in s.get("attributes", {}))]
    assert len(seams) == 3, done.stdout
    for span in seams:
        assert span["attributes"]["route_shadow.seam"] == "Runner.execute"
        assert span["attributes"]["route_shadow.request_face"] == "agentic"
        assert span["attributes"]["route_shadow.role"] == "reviewer"
        assert span["resource"]["attributes"]["service.name"] == "factory"
    records = [p for _, p in iter_payloads(chain) if p.get("kind") == "route-shadow"]
    assert sorted(r["attributes"]["route_shadow.principal_id"] for r in records) == [
        "loop-0",
        "loop-1",
        "loop-2",
    ]
    exported = {
        (s["context"]["trace_id"].removeprefix("0x"), s["context"]["span_id"].removeprefix("0x"))
        for s in seams
    }
    assert {(r["trace_id"], r["span_id"]) for r in records} == exported  # each record is one exported span


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console span exporter printed, one after another."""
    decoder = json.JSONDecoder()
    spans: list[dict[str, Any]] = []
    index = 0
    while True:
        start = text.find("{", index)
        if start < 0:
            return spans
        value, index = decoder.raw_decode(text, start)
        spans.append(value)
