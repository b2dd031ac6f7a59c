"""`make stack` / `make stack-down` (collector-config/stack.py) and the no-orphans guarantees."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import STACK_SCRIPT, stack_venv

pytestmark = pytest.mark.e2e


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _wait_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _port_open(url_or_hostport: str) -> bool:
    hostport = url_or_hostport.split("//")[-1].rstrip("/")
    host, port = hostport.rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def _stack(venv: Path, state: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), str(STACK_SCRIPT), "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_stack_up_status_down(tmp_path: Path) -> None:
    venv = stack_venv()
    state = tmp_path / "state"
    pids: list[int] = []
    try:
        t0 = time.monotonic()
        up = _stack(venv, state, "up", "--json")
        elapsed = time.monotonic() - t0
        assert up.returncode == 0, up.stderr
        endpoints = json.loads(up.stdout)
        pids = [p["pid"] for p in json.loads((state / "state.json").read_text())["processes"]]
        assert len(pids) == 2 and all(_alive(p) for p in pids), "`up` must leave both running after it exits"
        assert all(
            url.startswith("http://127.0.0.1:")
            for url in (endpoints["phoenix_url"], endpoints["otlp_http_endpoint"])
        )
        with urllib.request.urlopen(endpoints["phoenix_url"] + "/healthz", timeout=5) as response:
            assert response.status == 200
        assert _port_open(endpoints["otlp_http_endpoint"]) and _port_open(endpoints["otlp_grpc_endpoint"])
        env_file = (state / "stack.env").read_text()
        assert f"OTEL_EXPORTER_OTLP_ENDPOINT={endpoints['otlp_http_endpoint']}" in env_file
        print(f"[e2e] stack.py up took {elapsed:.1f}s")

        status = _stack(venv, state, "status")
        assert status.returncode == 0 and "phoenix" in status.stdout and "otelcol" in status.stdout
        again = _stack(venv, state, "up")
        assert again.returncode == 0 and "already running" in again.stdout

        working_dir = Path(json.loads((state / "state.json").read_text())["phoenix_working_dir"])
        assert working_dir.is_dir()
        down = _stack(venv, state, "down", timeout=60)
        assert down.returncode == 0, down.stderr
        assert "otelcol" in down.stdout and "phoenix" in down.stdout
        assert _wait_gone(pids) == []
        assert not (state / "state.json").exists() and not working_dir.exists()
        assert _stack(venv, state, "down").returncode == 0  # idempotent
        assert _stack(venv, state, "status").returncode == 1
    finally:
        _stack(venv, state, "down", timeout=60)
        for pid in pids:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)


def test_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    """SIGKILL the process that started the stack: the kernel takes rotel and Phoenix with it.

    This one runs rotel, the lighter collector `make stack` can run instead (STACK_COLLECTOR=rotel), so that
    its start-up path stays tested too."""
    venv = stack_venv()
    script = textwrap.dedent(
        f"""
        import importlib.util, json, sys, time
        spec = importlib.util.spec_from_file_location("stack", {str(STACK_SCRIPT)!r})
        module = importlib.util.module_from_spec(spec)
        sys.modules["stack"] = module
        spec.loader.exec_module(module)
        stack = module.Stack({str(tmp_path / "state")!r}, {str(venv / "bin")!r}, die_with_parent=True, collector="rotel")
        stack.up()
        print(json.dumps({{"pids": [p.pid for p in stack._procs], "url": stack.endpoints.phoenix_url}}), flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the parent did not start the stack"
        started = json.loads(line)
        pids = started["pids"]
        assert all(_alive(p) for p in pids)
        parent.kill()  # SIGKILL: no finalizer, no atexit, no signal handler runs
        parent.wait(timeout=10)
        assert _wait_gone(pids) == [], "children outlived their parent"
        # (No port check here: on a shared machine another run may bind the freed port at once.)
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in pids:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
        # Nothing ran `down`: remove the Phoenix working directory the dead parent left behind.
        state_file = tmp_path / "state" / "state.json"
        if state_file.exists():
            left = json.loads(state_file.read_text()).get("phoenix_working_dir")
            if left:
                shutil.rmtree(left, ignore_errors=True)
