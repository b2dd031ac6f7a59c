"""Start and stop the local trace stack: rotel (collector) forwarding OTLP to Arize Phoenix (backend).

    .venv-stack/bin/python collector-config/stack.py up      # `make stack`
    .venv-stack/bin/python collector-config/stack.py status
    .venv-stack/bin/python collector-config/stack.py down    # `make stack-down`

Everything binds to 127.0.0.1 on free ports picked at start (bind port 0), so several stacks (a user's,
parallel test runs) never collide; fixed ports can be asked for with flags or ROUTE_SHADOW_STACK_* variables.
The one exception is Phoenix's OTLP gRPC listener, which Phoenix always binds on every interface: it gets a
free port too, and nothing here ever sends to it (rotel exports to Phoenix over HTTP).

State lives in a state directory (default `.stack/` in the repository, git-ignored): `state.json` with the
endpoints and the pid and kernel start time of each process (so `down` never signals a recycled pid),
`phoenix.pid`, `rotel.pid`, logs, and `stack.env`, a shell snippet with the endpoints. Phoenix keeps its
SQLite database in a fresh temporary working directory that `down` removes.

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

__all__ = ["Endpoints", "PortBusy", "Stack", "StackError", "free_port", "main", "read_env_file"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_STATE_DIR = REPO / ".stack"
ROTEL_ENV_FILE = HERE / "rotel.env"
LOOPBACK = "127.0.0.1"
DEFAULT_PROJECT = "route-shadow-demo"  # the demo's default project; stack.env points `audit` at it

# Measured on a 2-core machine: Phoenix answers /healthz after about 10 s; allow for a slow CI host.
PHOENIX_START_TIMEOUT_S = 120.0
ROTEL_START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0

# Variables never passed on to the children: a user's shell may point OTEL_* at this very stack, and
# stray PHOENIX_* / ROTEL_* settings would override the loopback-only configuration below.
_STRIPPED_PREFIXES = ("OTEL_", "PHOENIX_", "ROTEL_")

_PR_SET_PDEATHSIG = 1


class StackError(RuntimeError):
    """The stack could not be started or stopped; the message says why."""


class PortBusy(StackError):
    """A port picked as free was taken before the process bound it (a lost race): worth a retry."""


@dataclass(frozen=True)
class Endpoints:
    """Where the running stack listens (every address on loopback)."""

    phoenix_url: str  # UI and REST API, e.g. http://127.0.0.1:6006
    otlp_http_endpoint: str  # rotel OTLP/HTTP receiver: OTEL_EXPORTER_OTLP_ENDPOINT
    otlp_grpc_endpoint: str  # rotel OTLP/gRPC receiver
    phoenix_grpc_port: int  # Phoenix's own gRPC listener (all interfaces, never used)

    def env_lines(self) -> list[str]:
        return [
            f"export OTEL_EXPORTER_OTLP_ENDPOINT={self.otlp_http_endpoint}",
            "export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
            f"export ROUTE_SHADOW_PHOENIX_URL={self.phoenix_url}",
            # Phoenix files spans under the project named by this resource attribute; `audit` reads it back.
            f"export OTEL_RESOURCE_ATTRIBUTES=openinference.project.name={DEFAULT_PROJECT}",
            f"export ROUTE_SHADOW_PHOENIX_PROJECT={DEFAULT_PROJECT}",
        ]


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
    """rotel + Phoenix on loopback, with pid files and a robust stop.

    ``venv_bin`` is the bin directory of the environment holding `phoenix` and the `rotel` package.
    """

    def __init__(
        self,
        state_dir: Path = DEFAULT_STATE_DIR,
        venv_bin: Path | None = None,
        *,
        die_with_parent: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.venv_bin = Path(venv_bin) if venv_bin is not None else Path(sys.executable).parent
        self.die_with_parent = die_with_parent and sys.platform.startswith("linux")
        self._log = log or (lambda message: None)
        self._procs: list[_Proc] = []
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

    # ---- starting ----------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> _Proc:
        log_path = self.state_dir / f"{name}.log"
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
        self._procs.append(proc)
        (self.state_dir / f"{name}.pid").write_text(f"{popen.pid}\n", encoding="ascii")
        self._save_state()
        return proc

    def _start_phoenix(self, port: int, grpc_port: int) -> _Proc:
        self.phoenix_working_dir = Path(tempfile.mkdtemp(prefix="route-shadow-phoenix-"))
        env = _child_env(
            {
                "PHOENIX_HOST": LOOPBACK,
                "PHOENIX_PORT": str(port),
                "PHOENIX_GRPC_PORT": str(grpc_port),
                "PHOENIX_WORKING_DIR": str(self.phoenix_working_dir),
                "PHOENIX_TELEMETRY_ENABLED": "false",
                "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
                "PHOENIX_ENABLE_PROMETHEUS": "false",
                "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
                "PHOENIX_ENABLE_MCP_SERVER": "false",
                "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
            }
        )
        return self._spawn("phoenix", self.phoenix_command(), env, self.phoenix_working_dir)

    def _start_rotel(self, http_port: int, grpc_port: int, phoenix_url: str) -> _Proc:
        settings = read_env_file(ROTEL_ENV_FILE)
        settings.update(
            {
                "ROTEL_OTLP_HTTP_ENDPOINT": f"{LOOPBACK}:{http_port}",
                "ROTEL_OTLP_GRPC_ENDPOINT": f"{LOOPBACK}:{grpc_port}",
                "ROTEL_OTLP_EXPORTER_ENDPOINT": phoenix_url,
                "ROTEL_PID_FILE": str(self.state_dir / "rotel-agent.pid"),
                "ROTEL_LOG_FILE": str(self.state_dir / "rotel-agent.log"),
            }
        )
        settings.pop("ROTEL_DAEMON", None)  # we keep the process as our child: never daemonize
        return self._spawn("rotel", [str(self.rotel_binary()), "start"], _child_env(settings), self.state_dir)

    def up(
        self,
        *,
        phoenix_port: int | None = None,
        otlp_http_port: int | None = None,
        otlp_grpc_port: int | None = None,
        timeout: float = PHOENIX_START_TIMEOUT_S,
        attempts: int = 3,
    ) -> Endpoints:
        """Start Phoenix and rotel and wait until both answer; on any failure stop what was started."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fixed = any(p is not None for p in (phoenix_port, otlp_http_port, otlp_grpc_port))
        last_error: StackError | None = None
        for _attempt in range(1 if fixed else attempts):
            try:
                return self._up_once(phoenix_port, otlp_http_port, otlp_grpc_port, timeout)
            except PortBusy as exc:  # only a lost race for a free port is worth a retry
                last_error = exc
                self.down()
            except BaseException:
                self.down()
                raise
        assert last_error is not None
        raise last_error

    def _up_once(
        self,
        phoenix_port: int | None,
        otlp_http_port: int | None,
        otlp_grpc_port: int | None,
        timeout: float,
    ) -> Endpoints:
        ports = [phoenix_port or free_port(), free_port(), otlp_http_port or 0, otlp_grpc_port or 0]
        ports[2] = ports[2] or free_port()
        ports[3] = ports[3] or free_port()
        if len(set(ports)) != len(ports):
            raise PortBusy(f"port collision while picking ports {ports}")
        for port in ports:
            if _port_open(port):
                raise PortBusy(f"port {port} on {LOOPBACK} is already in use")
        p_port, p_grpc, r_http, r_grpc = ports
        phoenix_url = f"http://{LOOPBACK}:{p_port}"
        self.endpoints = Endpoints(
            phoenix_url=phoenix_url,
            otlp_http_endpoint=f"http://{LOOPBACK}:{r_http}",
            otlp_grpc_endpoint=f"http://{LOOPBACK}:{r_grpc}",
            phoenix_grpc_port=p_grpc,
        )
        t0 = time.monotonic()
        phoenix = self._start_phoenix(p_port, p_grpc)
        rotel = self._start_rotel(r_http, r_grpc, phoenix_url)
        self._wait(rotel, lambda: _port_open(r_http) and _port_open(r_grpc), ROTEL_START_TIMEOUT_S)
        self.timings["rotel_ready_s"] = time.monotonic() - t0
        self._wait(phoenix, lambda: _healthy(phoenix_url), timeout)
        self.timings["phoenix_ready_s"] = time.monotonic() - t0
        self._log(f"phoenix ready after {self.timings['phoenix_ready_s']:.1f}s at {phoenix_url}")
        self._write_env_file()
        self._save_state()
        return self.endpoints

    def _wait(self, proc: _Proc, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(proc):
                tail = _tail(proc.log)
                if "in use" in tail.lower():
                    raise PortBusy(
                        f"{proc.name} exited during start-up: port in use; last log lines:\n{tail}"
                    )
                raise StackError(f"{proc.name} exited during start-up; last log lines:\n{tail}")
            if ready():
                return
            time.sleep(0.2)
        raise StackError(f"{proc.name} not ready after {timeout:.0f}s; last log lines:\n{_tail(proc.log)}")

    # ---- state -------------------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def _save_state(self) -> None:
        state: dict[str, Any] = {
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
        """Adopt the processes recorded in the state directory (for `status` and `down`)."""
        try:
            state = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        self._procs = [
            _Proc(str(p["name"]), int(p["pid"]), p.get("start_ticks"), str(p.get("log", "")))
            for p in state.get("processes", [])
        ]
        endpoints = state.get("endpoints")
        self.endpoints = Endpoints(**endpoints) if endpoints else None
        working_dir = state.get("phoenix_working_dir")
        self.phoenix_working_dir = Path(working_dir) if working_dir else None
        return True

    def running(self) -> list[str]:
        return [p.name for p in self._procs if _alive(p)]

    # ---- stopping ----------------------------------------------------------------------------------

    def down(self, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """Stop every recorded process group: SIGTERM, then SIGKILL after ``timeout``. Idempotent."""
        stopped: list[str] = []
        for proc in reversed(self._procs):  # rotel first: it may still be flushing into Phoenix
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
        for name in ("state.json", "phoenix.pid", "rotel.pid", "rotel-agent.pid", "stack.env"):
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


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:  # noqa: S310
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
    stack = Stack(Path(args.state_dir), log=lambda m: print(m, file=sys.stderr))
    if stack.load():
        alive = stack.running()
        if alive and stack.endpoints is not None:
            print(f"stack already running ({', '.join(alive)}) in {stack.state_dir}")
            _print_endpoints(stack.endpoints, args.json)
            return 0
        stack.down()  # stale state: clear it
    print("starting rotel and Phoenix on 127.0.0.1 (Phoenix takes about 10 s) ...", file=sys.stderr)
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
    print(f"Phoenix UI and API     {endpoints.phoenix_url}/")
    print(f"OTLP/HTTP (rotel)      {endpoints.otlp_http_endpoint}   <- OTEL_EXPORTER_OTLP_ENDPOINT")
    print(f"OTLP/gRPC (rotel)      {endpoints.otlp_grpc_endpoint}")
    print("\n" + "\n".join(endpoints.env_lines()))


def _cmd_status(args: argparse.Namespace) -> int:
    stack = Stack(Path(args.state_dir))
    if not stack.load():
        print(f"no stack recorded in {stack.state_dir}")
        return 1
    alive = stack.running()
    print(f"running: {', '.join(alive) if alive else 'nothing'}")
    if stack.endpoints is not None and alive:
        _print_endpoints(stack.endpoints, args.json)
    return 0 if alive else 1


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
    up = sub.add_parser("up", help="start rotel and Phoenix on loopback and print the endpoints")
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
    status = sub.add_parser("status", help="show what is running")
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
