"""Start, check and stop the local trace stack: a collector forwarding OTLP to Arize Phoenix (backend).

    .venv-stack/bin/python collector-config/stack.py up       # `make stack`
    .venv-stack/bin/python collector-config/stack.py status   # exit 0 only when everything answers
    .venv-stack/bin/python collector-config/stack.py down     # `make stack-down`

The collector is the OpenTelemetry Collector that `make collector` builds (`.otelcol/otelcol-route-shadow`,
running `otelcol.yaml`: tail sampling, spanmetrics on a Prometheus port), or, with `--collector rotel`
(ROUTE_SHADOW_STACK_COLLECTOR=rotel), the lighter rotel from PyPI (no sampling, no metrics).

Everything binds to 127.0.0.1 on free ports picked at the first start (bind port 0), so several stacks (a
user's, parallel test runs) never collide; fixed ports can be asked for with flags or ROUTE_SHADOW_STACK_*
variables. The ports are recorded: a second `up` keeps them, and restarts on them whatever died (Phoenix,
the collector, or both), keeping Phoenix's database. Phoenix's OTLP gRPC listener binds every interface
whatever it is told (see collector-config/README.md): it gets a free port too, nothing here sends to it, and
`phoenix_grpc_guard.py` makes it refuse every call.

State lives in a state directory (default `.stack/` in the repository, git-ignored): `state.json` with the
endpoints, the ports, and the pid and kernel start time of each process (so `down` never signals a recycled
pid), `<name>.pid`, one log file per start (`<name>-<UTC time>.log`; `<name>.log` links to the newest), and
`stack.env`, a shell snippet with the endpoints. Phoenix keeps its SQLite database in a temporary working
directory that `down` removes.

The module is also imported by the end-to-end tests (`tests/e2e/conftest.py`), which run the same `Stack`
with `die_with_parent=True`: each child then gets SIGKILL from the kernel if the test process dies, even by
SIGKILL, on top of the fixture's finalizer, an atexit hook and a SIGTERM handler.

Standard library only: it runs under .venv-stack's Python and is imported by the plugin's test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "COLLECTORS",
    "Endpoints",
    "PortBusy",
    "ProcessHealth",
    "Stack",
    "StackError",
    "free_port",
    "main",
    "read_env_file",
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_STATE_DIR = REPO / ".stack"
ROTEL_ENV_FILE = HERE / "rotel.env"
OTELCOL_CONFIG = HERE / "otelcol.yaml"
OTELCOL_BINARY = REPO / ".otelcol" / "otelcol-route-shadow"  # `make collector`
PHOENIX_GRPC_GUARD = HERE / "phoenix_grpc_guard.py"
LOOPBACK = "127.0.0.1"
DEFAULT_PROJECT = "route-shadow-demo"  # the demo's default project; stack.env points `audit` at it
COLLECTORS = ("otelcol", "rotel")
DEFAULT_COLLECTOR = "otelcol"

# Measured on a 2-core machine: Phoenix answers /healthz after about 10 s alone, and after up to 116 s while
# eight engineers share the machine (and a collector compiles): the bound allows for that.
PHOENIX_START_TIMEOUT_S = 240.0
COLLECTOR_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

# Variables never passed on to the children: a user's shell may point OTEL_* at this very stack, and
# stray PHOENIX_* / ROTEL_* / OTELCOL_* settings would override the loopback-only configuration below.
_STRIPPED_PREFIXES = ("OTEL_", "OTELCOL_", "PHOENIX_", "ROTEL_")

# The ports a stack records, by role. The collector's last three exist for otelcol only.
_PORT_NAMES = ("phoenix", "phoenix_grpc", "otlp_http", "otlp_grpc", "prometheus", "health", "telemetry")

_PR_SET_PDEATHSIG = 1


class StackError(RuntimeError):
    """The stack could not be started or stopped; the message says why."""


class PortBusy(StackError):
    """A port picked as free was taken before the process bound it (a lost race): worth a retry."""


@dataclass(frozen=True)
class Endpoints:
    """Where the running stack listens (every address on loopback)."""

    phoenix_url: str  # UI and REST API, e.g. http://127.0.0.1:6006
    otlp_http_endpoint: str  # collector OTLP/HTTP receiver: OTEL_EXPORTER_OTLP_ENDPOINT
    otlp_grpc_endpoint: str  # collector OTLP/gRPC receiver
    phoenix_grpc_port: int  # Phoenix's own gRPC listener (all interfaces, refuses every call, never used)
    collector: str = "rotel"  # which collector: otelcol or rotel
    prometheus_url: str | None = None  # spanmetrics scrape target (otelcol only), e.g. .../metrics

    def env_lines(self) -> list[str]:
        lines = [
            f"export OTEL_EXPORTER_OTLP_ENDPOINT={self.otlp_http_endpoint}",
            "export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
            f"export ROUTE_SHADOW_PHOENIX_URL={self.phoenix_url}",
            # Phoenix files spans under the project named by this resource attribute; `audit` reads it back.
            f"export OTEL_RESOURCE_ATTRIBUTES=openinference.project.name={DEFAULT_PROJECT}",
            f"export ROUTE_SHADOW_PHOENIX_PROJECT={DEFAULT_PROJECT}",
        ]
        if self.prometheus_url:
            lines.append(f"export ROUTE_SHADOW_PROMETHEUS_URL={self.prometheus_url}")
        return lines


@dataclass(frozen=True)
class ProcessHealth:
    """One recorded process as `status` sees it. ``state``: running, dead, or not answering."""

    name: str
    pid: int
    state: str
    log: str


@dataclass
class _Proc:
    name: str
    pid: int
    start_ticks: int | None
    log: str
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port free on loopback right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _port_open(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a KEY=VALUE file (blank lines and # comments skipped, optional `export `, optional quotes)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise StackError(f"{path}:{number}: expected KEY=VALUE, got {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        if fields[0] == "Z":
            return None  # a zombie has exited already
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _alive(proc: _Proc) -> bool:
    if proc.popen is not None:
        return proc.popen.poll() is None
    ticks = _start_ticks(proc.pid)
    return ticks is not None and (proc.start_ticks is None or ticks == proc.start_ticks)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _tail(path: str, lines: int = 15) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _child_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update(extra)
    return env


# --------------------------------------------------------------------------------------------------
# The stack
# --------------------------------------------------------------------------------------------------


class Stack:
    """Phoenix and a collector (otelcol or rotel) on loopback, with pid files, health checks and a robust stop.

    ``venv_bin`` is the bin directory of the environment holding `phoenix` (and the `rotel` package when
    ``collector="rotel"``). ``otelcol_config`` and ``collector_env`` choose the otelcol configuration and
    extra variables for it (the e2e tests use them for the sampling config and a low cardinality limit).
    """

    def __init__(
        self,
        state_dir: Path = DEFAULT_STATE_DIR,
        venv_bin: Path | None = None,
        *,
        die_with_parent: bool = False,
        log: Callable[[str], None] | None = None,
        collector: str | None = None,
        otelcol_binary: Path | None = None,
        otelcol_config: Path | None = None,
        collector_env: Mapping[str, str] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.venv_bin = Path(venv_bin) if venv_bin is not None else Path(sys.executable).parent
        self.die_with_parent = die_with_parent and sys.platform.startswith("linux")
        self._log = log or (lambda message: None)
        self.collector = collector or os.environ.get("ROUTE_SHADOW_STACK_COLLECTOR") or DEFAULT_COLLECTOR
        if self.collector not in COLLECTORS:
            raise StackError(f"collector {self.collector!r}: choose one of {', '.join(COLLECTORS)}")
        binary = otelcol_binary or os.environ.get("ROUTE_SHADOW_OTELCOL") or OTELCOL_BINARY
        # Absolute: the collector runs in the state directory, not where they were named.
        self.otelcol_binary = Path(binary).absolute()
        self.otelcol_config = Path(otelcol_config or OTELCOL_CONFIG).absolute()
        self.collector_env = dict(collector_env or {})
        self._procs: list[_Proc] = []
        self.ports: dict[str, int] = {}
        self.endpoints: Endpoints | None = None
        self.phoenix_working_dir: Path | None = None
        self.timings: dict[str, float] = {}

    # ---- locating the programs -------------------------------------------------------------------

    def phoenix_command(self) -> list[str]:
        exe = self.venv_bin / "phoenix"
        if not exe.exists():
            raise StackError(f"{exe}: not found (run `make stack-install`)")
        return [str(exe), "serve"]

    def rotel_binary(self) -> Path:
        python = self.venv_bin / "python"
        found = subprocess.run(
            [str(python), "-c", "import rotel, pathlib; print(pathlib.Path(rotel.__file__).parent)"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            env=_child_env({}),
        )
        if found.returncode != 0:
            raise StackError(f"{python}: the rotel package is not installed (run `make stack-install`)")
        binary = Path(found.stdout.strip()) / "rotel-agent"
        if not os.access(binary, os.X_OK):
            raise StackError(f"{binary}: not an executable rotel-agent")
        return binary

    def otelcol_command(self) -> list[str]:
        if not os.access(self.otelcol_binary, os.X_OK):
            raise StackError(f"{self.otelcol_binary}: no collector built there (run `make collector`)")
        if not self.otelcol_config.is_file():
            raise StackError(f"{self.otelcol_config}: no such collector configuration")
        return [str(self.otelcol_binary), "--config", str(self.otelcol_config)]

    # ---- starting ----------------------------------------------------------------------------------

    def _new_log(self, name: str) -> Path:
        """A fresh log file for this start (``name-<UTC time>[-n].log``); ``name.log`` links to it."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = self.state_dir / f"{name}-{stamp}.log"
        number = 1
        while path.exists():
            number += 1
            path = self.state_dir / f"{name}-{stamp}-{number}.log"
        path.touch()
        link = self.state_dir / f"{name}.log"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        with contextlib.suppress(OSError):
            link.symlink_to(path.name)
        return path

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> _Proc:
        log_path = self._new_log(name)
        handle: IO[bytes]
        with log_path.open("ab") as handle:
            popen = subprocess.Popen(
                argv,
                env=env,
                cwd=str(cwd),
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals the whole group
                preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509
            )
        proc = _Proc(name, popen.pid, _start_ticks(popen.pid), str(log_path), popen)
        self._procs = [p for p in self._procs if p.name != name] + [proc]
        (self.state_dir / f"{name}.pid").write_text(f"{popen.pid}\n", encoding="ascii")
        self._save_state()
        return proc

    def _start_phoenix(self) -> _Proc:
        if self.phoenix_working_dir is None or not self.phoenix_working_dir.is_dir():
            self.phoenix_working_dir = Path(tempfile.mkdtemp(prefix="route-shadow-phoenix-"))
        env = _child_env(
            {
                "PHOENIX_HOST": LOOPBACK,
                "PHOENIX_PORT": str(self.ports["phoenix"]),
                "PHOENIX_GRPC_PORT": str(self.ports["phoenix_grpc"]),
                "PHOENIX_WORKING_DIR": str(self.phoenix_working_dir),
                "PHOENIX_TELEMETRY_ENABLED": "false",
                "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
                "PHOENIX_ENABLE_PROMETHEUS": "false",
                "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
                "PHOENIX_ENABLE_MCP_SERVER": "false",
                "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
                # The gRPC listener binds every interface whatever PHOENIX_HOST says: refuse every call.
                "PHOENIX_GRPC_INTERCEPTOR_PATHS": f"{PHOENIX_GRPC_GUARD}:RefuseEveryCall",
            }
        )
        return self._spawn("phoenix", self.phoenix_command(), env, self.phoenix_working_dir)

    def _start_rotel(self) -> _Proc:
        settings = read_env_file(ROTEL_ENV_FILE)
        settings.update(
            {
                "ROTEL_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{self.ports['otlp_http']}",
                "ROTEL_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{self.ports['otlp_grpc']}",
                "ROTEL_OTLP_EXPORTER_ENDPOINT": f"http://{LOOPBACK}:{self.ports['phoenix']}",
                "ROTEL_PID_FILE": str(self.state_dir / "rotel-agent.pid"),
                "ROTEL_LOG_FILE": str(self.state_dir / "rotel-agent.log"),
            }
        )
        settings.pop("ROTEL_DAEMON", None)  # we keep the process as our child: never daemonize
        return self._spawn("rotel", [str(self.rotel_binary()), "start"], _child_env(settings), self.state_dir)

    def _start_otelcol(self) -> _Proc:
        settings = {
            "OTELCOL_BIND_HOST": LOOPBACK,
            "OTELCOL_OTLP_HTTP_PORT": str(self.ports["otlp_http"]),
            "OTELCOL_OTLP_GRPC_PORT": str(self.ports["otlp_grpc"]),
            "OTELCOL_PROMETHEUS_PORT": str(self.ports["prometheus"]),
            "OTELCOL_HEALTH_PORT": str(self.ports["health"]),
            "OTELCOL_TELEMETRY_PORT": str(self.ports["telemetry"]),
            "ROUTE_SHADOW_BACKEND_URL": f"http://{LOOPBACK}:{self.ports['phoenix']}",
            # A local stack shows spans and metrics within seconds (production defaults: 10s and 15s).
            "OTELCOL_DECISION_WAIT": "1s",
            "OTELCOL_METRICS_FLUSH_INTERVAL": "1s",
            **self.collector_env,
        }
        return self._spawn("otelcol", self.otelcol_command(), _child_env(settings), self.state_dir)

    def _start(self, name: str) -> _Proc:
        starters = {
            "phoenix": self._start_phoenix,
            "rotel": self._start_rotel,
            "otelcol": self._start_otelcol,
        }
        return starters[name]()

    def _answers(self, name: str) -> bool:
        """Whether the process answers on its ports (Phoenix /healthz, otelcol's health_check)."""
        if name == "phoenix":
            return _healthy(f"http://{LOOPBACK}:{self.ports['phoenix']}/healthz")
        if name == "otelcol":
            return _healthy(f"http://{LOOPBACK}:{self.ports['health']}/")
        return _port_open(self.ports["otlp_http"]) and _port_open(self.ports["otlp_grpc"])

    def _pick_ports(self, fixed: Mapping[str, int | None]) -> dict[str, int]:
        names = _PORT_NAMES if self.collector == "otelcol" else _PORT_NAMES[:4]
        ports = {name: fixed.get(name) or free_port() for name in names}
        if len(set(ports.values())) != len(ports):
            raise PortBusy(f"port collision while picking ports {ports}")
        for port in ports.values():
            if _port_open(port):
                raise PortBusy(f"port {port} on {LOOPBACK} is already in use")
        return ports

    def _endpoints(self) -> Endpoints:
        ports = self.ports
        prometheus = ports.get("prometheus")
        return Endpoints(
            phoenix_url=f"http://{LOOPBACK}:{ports['phoenix']}",
            otlp_http_endpoint=f"http://{LOOPBACK}:{ports['otlp_http']}",
            otlp_grpc_endpoint=f"http://{LOOPBACK}:{ports['otlp_grpc']}",
            phoenix_grpc_port=ports["phoenix_grpc"],
            collector=self.collector,
            prometheus_url=f"http://{LOOPBACK}:{prometheus}/metrics" if prometheus else None,
        )

    def up(
        self,
        *,
        phoenix_port: int | None = None,
        otlp_http_port: int | None = None,
        otlp_grpc_port: int | None = None,
        timeout: float = PHOENIX_START_TIMEOUT_S,
        attempts: int = 3,
    ) -> Endpoints:
        """Start Phoenix and the collector and wait until both answer; on any failure stop what was started."""
        self.phoenix_command()  # both programs must exist before anything starts
        if self.collector == "otelcol":
            self.otelcol_command()
        else:
            self.rotel_binary()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fixed = {"phoenix": phoenix_port, "otlp_http": otlp_http_port, "otlp_grpc": otlp_grpc_port}
        last_error: StackError | None = None
        for _attempt in range(1 if any(fixed.values()) else attempts):
            try:
                return self._up_once(fixed, timeout)
            except PortBusy as exc:  # only a lost race for a free port is worth a retry
                last_error = exc
                self.down()
            except BaseException:
                self.down()
                raise
        assert last_error is not None
        raise last_error

    def _up_once(self, fixed: Mapping[str, int | None], timeout: float) -> Endpoints:
        self.ports = self._pick_ports(fixed)
        self.endpoints = self._endpoints()
        t0 = time.monotonic()
        phoenix = self._start("phoenix")
        collector = self._start(self.collector)
        self._wait(collector, COLLECTOR_START_TIMEOUT_S)
        self.timings["collector_ready_s"] = time.monotonic() - t0
        self._wait(phoenix, timeout)
        self.timings["phoenix_ready_s"] = time.monotonic() - t0
        self._log(
            f"phoenix ready after {self.timings['phoenix_ready_s']:.1f}s at {self.endpoints.phoenix_url}"
        )
        self._write_env_file()
        self._save_state()
        return self.endpoints

    def restart_dead(self, timeout: float = PHOENIX_START_TIMEOUT_S) -> list[str]:
        """Start again, on the recorded ports, every recorded process that died; wait until all answer.

        Phoenix keeps its working directory (and so its database) when it still exists. Returns the
        names restarted. A port taken meanwhile by another program is an error naming it.
        """
        dead = [p.name for p in self._procs if not _alive(p)]
        for name in dead:
            port = self.ports["phoenix" if name == "phoenix" else "otlp_http"]
            if _port_open(port):
                raise StackError(
                    f"{name} died and its port {port} is now taken by another program; "
                    "run `make stack-down` and `make stack` for new ports"
                )
            self._log(f"{name} is dead: restarting it on its recorded ports")
            self._start(name)
        for proc in list(self._procs):
            self._wait(proc, timeout if proc.name == "phoenix" else COLLECTOR_START_TIMEOUT_S)
        self._write_env_file()
        self._save_state()
        return dead

    def _wait(self, proc: _Proc, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(proc):
                tail = _tail(proc.log)
                if "in use" in tail.lower():
                    raise PortBusy(
                        f"{proc.name} exited during start-up: port in use; last log lines:\n{tail}"
                    )
                raise StackError(f"{proc.name} exited during start-up ({proc.log}); last log lines:\n{tail}")
            if self._answers(proc.name):
                return
            time.sleep(0.2)
        raise StackError(
            f"{proc.name} not ready after {timeout:.0f}s ({proc.log}); last log lines:\n{_tail(proc.log)}"
        )

    # ---- state -------------------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def _save_state(self) -> None:
        state: dict[str, Any] = {
            "collector": self.collector,
            "otelcol_config": str(self.otelcol_config),
            "collector_env": self.collector_env,
            "ports": self.ports,
            "processes": [
                {"name": p.name, "pid": p.pid, "start_ticks": p.start_ticks, "log": p.log}
                for p in self._procs
            ],
            "endpoints": asdict(self.endpoints) if self.endpoints else None,
            "phoenix_working_dir": str(self.phoenix_working_dir) if self.phoenix_working_dir else None,
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.state_file)

    def _write_env_file(self) -> None:
        assert self.endpoints is not None
        text = "# Written by collector-config/stack.py; source it: . .stack/stack.env\n"
        (self.state_dir / "stack.env").write_text(text + "\n".join(self.endpoints.env_lines()) + "\n")

    def load(self) -> bool:
        """Adopt the processes recorded in the state directory (for `status`, `up` again and `down`)."""
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        self._procs = [
            _Proc(str(p["name"]), int(p["pid"]), p.get("start_ticks"), str(p.get("log", "")))
            for p in state.get("processes", [])
        ]
        self.collector = str(state.get("collector") or self.collector)
        if state.get("otelcol_config"):
            self.otelcol_config = Path(state["otelcol_config"])
        self.collector_env = dict(state.get("collector_env") or {})
        self.ports = {str(k): int(v) for k, v in (state.get("ports") or {}).items()}
        endpoints = state.get("endpoints")
        self.endpoints = Endpoints(**endpoints) if endpoints else None
        working_dir = state.get("phoenix_working_dir")
        self.phoenix_working_dir = Path(working_dir) if working_dir else None
        return True

    def running(self) -> list[str]:
        return [p.name for p in self._procs if _alive(p)]

    def health(self) -> list[ProcessHealth]:
        """Each recorded process: running (alive and answering), not answering (alive), or dead."""
        result = []
        for proc in self._procs:
            if not _alive(proc):
                state = "dead"
            elif self.ports and not self._answers(proc.name):
                state = "not answering"
            else:
                state = "running"
            result.append(ProcessHealth(proc.name, proc.pid, state, proc.log))
        return result

    # ---- stopping ----------------------------------------------------------------------------------

    def down(self, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """Stop every recorded process group: SIGTERM, then SIGKILL after ``timeout``. Idempotent."""
        stopped: list[str] = []
        for proc in reversed(self._procs):  # the collector first: it may still be flushing into Phoenix
            if _alive(proc):
                _signal_group(proc, signal.SIGTERM)
                stopped.append(proc.name)
        deadline = time.monotonic() + timeout
        for proc in reversed(self._procs):
            while _alive(proc) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(proc):
                _signal_group(proc, signal.SIGKILL)
            if proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=5)
            # Anything left in the group (a worker the leader spawned) goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        self._procs = []
        for name in ("state.json", "phoenix.pid", "rotel.pid", "otelcol.pid", "rotel-agent.pid", "stack.env"):
            with contextlib.suppress(FileNotFoundError):
                (self.state_dir / name).unlink()
        if self.phoenix_working_dir is not None:
            shutil.rmtree(self.phoenix_working_dir, ignore_errors=True)
            self.phoenix_working_dir = None
        return stopped


def _signal_group(proc: _Proc, sig: signal.Signals) -> None:
    """Signal the process group the child leads (start_new_session made pgid == pid)."""
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


@contextlib.contextmanager
def running_stack(state_dir: Path, venv_bin: Path, **kwargs: Any) -> Iterator[Stack]:
    """Context manager for scripts: start the stack, always stop it."""
    stack = Stack(state_dir, venv_bin, die_with_parent=True)
    try:
        stack.up(**kwargs)
        yield stack
    finally:
        stack.down()


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def _env_port(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise StackError(f"{name}={value!r}: not a TCP port")
    return int(value)


def _cmd_up(args: argparse.Namespace) -> int:
    stack = Stack(
        Path(args.state_dir),
        log=lambda m: print(m, file=sys.stderr),
        collector=args.collector,
        otelcol_config=Path(args.config) if args.config else None,
    )
    if stack.load() and stack.ports:
        # A stack was started here before: keep its ports, start again whatever died.
        restarted = stack.restart_dead(timeout=args.timeout)
        assert stack.endpoints is not None
        if restarted:
            message = f"restarted {', '.join(restarted)} on the recorded ports in {stack.state_dir}"
        else:
            message = f"stack already running ({', '.join(stack.running())}) in {stack.state_dir}"
        print(message, file=sys.stderr if args.json else sys.stdout)
        _print_endpoints(stack.endpoints, args.json)
        return 0
    stack.down()  # a state without ports (an older stack.py) or none: clear it
    print(
        f"starting {stack.collector} and Phoenix on 127.0.0.1 (Phoenix takes about 10 s) ...",
        file=sys.stderr,
    )
    endpoints = stack.up(
        phoenix_port=args.phoenix_port
        if args.phoenix_port is not None
        else _env_port("ROUTE_SHADOW_STACK_PHOENIX_PORT"),
        otlp_http_port=args.otlp_http_port
        if args.otlp_http_port is not None
        else _env_port("ROUTE_SHADOW_STACK_OTLP_HTTP_PORT"),
        otlp_grpc_port=args.otlp_grpc_port
        if args.otlp_grpc_port is not None
        else _env_port("ROUTE_SHADOW_STACK_OTLP_GRPC_PORT"),
        timeout=args.timeout,
    )
    _print_endpoints(endpoints, args.json)
    if not args.json:
        print(f"\nsource {stack.state_dir / 'stack.env'} to export these; stop with `make stack-down`.")
    return 0


def _print_endpoints(endpoints: Endpoints, as_json: bool) -> None:
    if as_json:
        print(json.dumps(asdict(endpoints), indent=2))
        return
    name = endpoints.collector
    print(f"Phoenix UI and API     {endpoints.phoenix_url}/")
    print(
        f"OTLP/HTTP ({name})".ljust(23) + f"{endpoints.otlp_http_endpoint}   <- OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    print(f"OTLP/gRPC ({name})".ljust(23) + endpoints.otlp_grpc_endpoint)
    if endpoints.prometheus_url:
        print(f"spanmetrics (scrape)   {endpoints.prometheus_url}")
    print("\n" + "\n".join(endpoints.env_lines()))


def _cmd_status(args: argparse.Namespace) -> int:
    """Exit 0 only when every recorded process is alive and answers; otherwise 1, naming which is not."""
    stack = Stack(Path(args.state_dir))
    if not stack.load():
        print(f"no stack recorded in {stack.state_dir}")
        return 1
    health = stack.health()
    for proc in health:
        print(f"{proc.name:<8} {proc.state:<14} pid {proc.pid:<8} log {proc.log}")
    bad = [p for p in health if p.state != "running"]
    if not health:
        print("running: nothing")
        return 1
    if bad:
        named = "; ".join(f"{p.name} is {p.state}" for p in bad)
        print(f"stack.py: {named} (`make stack` restarts what died)", file=sys.stderr)
        return 1
    print(f"running: {', '.join(p.name for p in health)}")
    if stack.endpoints is not None:
        _print_endpoints(stack.endpoints, args.json)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    stack = Stack(Path(args.state_dir))
    if not stack.load():
        print(f"no stack recorded in {stack.state_dir}; nothing to stop")
        return 0
    stopped = stack.down(timeout=args.timeout)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="stack.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR), help="pid files, logs, stack.env")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser(
        "up",
        help="start the collector and Phoenix on loopback (or restart what died) and print the endpoints",
    )
    up.add_argument(
        "--collector",
        choices=COLLECTORS,
        help=f"default: $ROUTE_SHADOW_STACK_COLLECTOR or {DEFAULT_COLLECTOR}",
    )
    up.add_argument("--config", help=f"otelcol configuration (default {OTELCOL_CONFIG.name})")
    up.add_argument(
        "--phoenix-port", type=int, help="default: a free port ($ROUTE_SHADOW_STACK_PHOENIX_PORT)"
    )
    up.add_argument(
        "--otlp-http-port", type=int, help="default: a free port ($ROUTE_SHADOW_STACK_OTLP_HTTP_PORT)"
    )
    up.add_argument(
        "--otlp-grpc-port", type=int, help="default: a free port ($ROUTE_SHADOW_STACK_OTLP_GRPC_PORT)"
    )
    up.add_argument(
        "--timeout", type=float, default=PHOENIX_START_TIMEOUT_S, help="seconds to wait for Phoenix"
    )
    up.add_argument("--json", action="store_true", help="print the endpoints as JSON")
    up.set_defaults(handler=_cmd_up)
    status = sub.add_parser("status", help="show what runs; exit 1 naming what died or does not answer")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_cmd_status)
    down = sub.add_parser("down", help="stop everything `up` started")
    down.add_argument("--timeout", type=float, default=STOP_TIMEOUT_S, help="seconds before SIGKILL")
    down.set_defaults(handler=_cmd_down)
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except StackError as exc:
        print(f"stack.py: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stack.py: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
