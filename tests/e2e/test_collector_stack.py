"""`make stack` tells the truth: `status` names a dead Phoenix or collector (exit 1), `up` again restarts
what died on the same ports, each start writes its own log, and Phoenix's gRPC listener refuses every call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from .conftest import STACK_SCRIPT, stack_venv
from .test_stack_lifecycle import _alive, _wait_gone

pytestmark = pytest.mark.e2e


def _stack(venv: Path, state: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), str(STACK_SCRIPT), "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _pids(state: Path) -> dict[str, int]:
    return {p["name"]: p["pid"] for p in json.loads((state / "state.json").read_text())["processes"]}


def _kill(pid: int) -> None:
    os.killpg(pid, signal.SIGKILL)
    assert _wait_gone([pid]) == []


def _dies_and_comes_back(venv: Path, state: Path, name: str, endpoints: dict[str, object]) -> None:
    _kill(_pids(state)[name])
    status = _stack(venv, state, "status")
    assert status.returncode == 1
    assert f"{name} is dead" in status.stderr and len(status.stderr.strip().splitlines()) == 1
    again = _stack(venv, state, "up", "--json")
    assert again.returncode == 0, again.stderr
    assert f"restarted {name}" in again.stderr
    assert json.loads(again.stdout) == endpoints, "a second `make stack` must keep the ports"
    assert _stack(venv, state, "status").returncode == 0
    logs = sorted(p.name for p in state.glob(f"{name}-*.log"))
    assert len(logs) == 2, logs  # one log file per start
    current = {p["name"]: p["log"] for p in json.loads((state / "state.json").read_text())["processes"]}[name]
    assert (state / f"{name}.log").resolve() == Path(current).resolve()  # name.log: the newest start's log


GRPC_EXPORT = textwrap.dedent(
    """
    import sys, grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb, trace_service_pb2_grpc as pbg
    with grpc.insecure_channel(sys.argv[1]) as channel:
        try:
            pbg.TraceServiceStub(channel).Export(pb.ExportTraceServiceRequest(), timeout=20)
            print("ACCEPTED")
        except grpc.RpcError as exc:
            print(exc.code().name)
    """
)


def test_status_names_what_died_and_up_restarts_it_on_the_same_ports(tmp_path: Path) -> None:
    venv = stack_venv()
    state = tmp_path / "state"
    pids: list[int] = []
    try:
        up = _stack(venv, state, "up", "--json")
        assert up.returncode == 0, up.stderr
        endpoints = json.loads(up.stdout)
        pids = list(_pids(state).values())
        assert endpoints["collector"] == "otelcol" and endpoints["prometheus_url"].startswith(
            "http://127.0.0.1:"
        )
        assert _stack(venv, state, "status").returncode == 0

        _dies_and_comes_back(venv, state, "otelcol", endpoints)
        _dies_and_comes_back(venv, state, "phoenix", endpoints)
        pids = list(_pids(state).values())

        # Phoenix's gRPC listener (bound on every interface by Phoenix itself) refuses every call.
        grpc_call = subprocess.run(
            [str(venv / "bin" / "python"), "-c", GRPC_EXPORT, f"127.0.0.1:{endpoints['phoenix_grpc_port']}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert grpc_call.stdout.strip() == "PERMISSION_DENIED", grpc_call.stdout + grpc_call.stderr
    finally:
        _stack(venv, state, "down", timeout=60)
        for pid in pids:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
