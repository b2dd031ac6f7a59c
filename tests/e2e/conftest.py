"""The real stack for the end-to-end suite: the collector and Arize Phoenix on loopback, started once per session.

``collector-config/stack.py`` does the work (the same code `make stack` runs), here with
``die_with_parent=True``. Every process started is stopped:

* normally, by the session fixture's finalizer (also on a failing test or Ctrl-C: pytest tears the
  session down on KeyboardInterrupt);
* on SIGTERM (a CI timeout, `kill`), by a handler that stops the stack and then raises KeyboardInterrupt;
* on any other interpreter exit, by an atexit hook;
* and if this process dies without running Python code at all (SIGKILL, a crash), by the kernel: each
  child was started with PR_SET_PDEATHSIG=SIGKILL.

Each child leads its own process group, so the whole group is signalled; pid files and logs are in the
session's temporary state directory (printed when start-up fails). The stack's Python environment comes
from ROUTE_SHADOW_STACK_VENV (`make test` and `make e2e` set it); without it the e2e tests are skipped.
The collector is the one `make collector` builds (ROUTE_SHADOW_OTELCOL, also set by those targets).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
STACK_SCRIPT = REPO / "collector-config" / "stack.py"


def load_stack_module() -> ModuleType:
    name = "route_shadow_stack"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, STACK_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stack_venv() -> Path:
    value = os.environ.get("ROUTE_SHADOW_STACK_VENV", "")
    if not value:
        pytest.skip("ROUTE_SHADOW_STACK_VENV is not set: run `make e2e` or `make test`")
    venv = Path(value)
    if not (venv / "bin" / "phoenix").exists():
        # Set but broken is an error, not a skip: CI must not pass by skipping.
        pytest.fail(f"ROUTE_SHADOW_STACK_VENV={venv}: no bin/phoenix there (run `make stack-install`)")
    return venv


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running stack; yields the ``Stack`` (``.endpoints``: phoenix_url, otlp_http_endpoint, ...)."""
    venv = stack_venv()
    module = load_stack_module()
    state_dir = tmp_path_factory.mktemp("stack")
    running = module.Stack(state_dir, venv / "bin", die_with_parent=True)

    owner = os.getpid()

    def stop(*_: object) -> None:
        if os.getpid() == owner:
            running.down()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            # A child forked later in the session (a multiprocessing worker, a kill-loop appender)
            # inherits this handler: it must die as SIGTERM says, not stop the stack.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        running.down()
        raise KeyboardInterrupt(f"signal {signum}")

    atexit.register(stop)
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        try:
            running.up()
        except module.StackError as exc:
            pytest.fail(f"the e2e stack did not start (state in {state_dir}): {exc}")
        print(  # shown with -s or on failure
            f"\n[e2e] phoenix {running.endpoints.phoenix_url} ready in {running.timings['phoenix_ready_s']:.1f}s; "
            f"{running.endpoints.collector} OTLP/HTTP {running.endpoints.otlp_http_endpoint}"
        )
        yield running
    finally:
        running.down()
        atexit.unregister(stop)
        signal.signal(signal.SIGTERM, previous)
