"""A host that forks while another of its threads is inside the shadow path: the child spawns as the
parent does, and never waits for a lock the parent's thread held at fork time (copied held, released
by no thread of the child's).

Deterministic: the parent holds the lock itself (or holds its background read inside the store read,
at a gate) when it forks, so the fork always lands inside; the child checks under a hang guard
(``fork_support``), so a lock never reset fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fork_support import exit_code, fork_checking

from otel_route_shadow.demo import factory
from otel_route_shadow.demo.run import default_policy_file
from otel_route_shadow.instrumentation import runtime as runtime_module
from otel_route_shadow.instrumentation import seams
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import RoutingPolicyStore
from otel_route_shadow.store.loading import SnapshotLoader

from .conftest import Harness, make_harness

_WAIT_S = 10.0  # a bound on a wait, below the child's hang guard; never a timing the test depends on


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    """Instrumented over a store holding revision 1 (the demo set: small, read in the spawn), looked
    at on every spawn."""
    RoutingPolicyStore(tmp_path / "store").save(list(default_policy_file().policies))
    made = make_harness(tmp_path, snapshot_recheck_ms=0)
    try:
        yield made
    finally:
        made.instrumentor.uninstrument()
        made.provider.shutdown()


def _runtime(harness: Harness) -> ShadowRuntime:
    runtime = harness.instrumentor.runtime
    assert runtime is not None
    return runtime


def _spawn(harness: Harness) -> tuple[Any, Any]:
    """One spawn; the snapshot revision and state its span resolved against."""
    factory.dispatch(factory.plan_jobs(1, factory.FactorySettings())[0])
    span = harness.spans()[-1]
    return span.attributes[attr.SNAPSHOT_REVISION], span.attributes[attr.SNAPSHOT_STATE]


def _forked_while_held(lock: Any, check: Callable[[], bool]) -> int:
    """The child's exit code: ``check`` run in a child forked while ``lock`` was held (as another
    thread of the parent's holds it), the lock released in the parent after the fork."""
    with lock:
        pid = fork_checking(check)
    return exit_code(pid)


def test_a_child_forked_while_a_snapshot_loads_does_not_hang_its_first_spawn(harness: Harness) -> None:
    """Another host thread's spawn is reading the store (``SnapshotLoader._reload_lock`` is held for
    the whole read) when the host forks: the child's first spawn reads the store itself. It waited for
    the copied-held lock without bound."""
    loader = _runtime(harness)._policy_store()._loader
    assert loader.peek() is None  # not read yet: the child's spawn must read it
    assert _forked_while_held(loader._reload_lock, lambda: _spawn(harness) == (1, "ok")) == 0
    assert _spawn(harness) == (1, "ok")


def test_a_child_forked_while_the_first_background_read_runs_reads_the_store_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gunicorn ``--preload`` pattern: instrumented in the parent (a large store's first read
    starts in the background) and forked while that read is inside the store. The child starts a read
    of its own and its spawns resolve against the store once it is done; its read used to wait for
    the copied-held ``_reload_lock`` for good, and every spawn of the child resolved as ``loading``."""
    monkeypatch.setattr(runtime_module, "PREFETCH_MIN_BYTES", 0)  # every store counts as large
    RoutingPolicyStore(tmp_path / "store").save(list(default_policy_file().policies))
    parent = os.getpid()
    inside, release = threading.Event(), threading.Event()
    real = SnapshotLoader._reload

    def held_in_the_parent(loader: SnapshotLoader, *args: Any) -> Any:
        if os.getpid() == parent:  # the parent's read: held inside, under the lock, until the fork
            inside.set()
            assert release.wait(_WAIT_S)
        return real(loader, *args)

    monkeypatch.setattr(SnapshotLoader, "_reload", held_in_the_parent)
    harness = make_harness(tmp_path, snapshot_recheck_ms=0)
    try:
        runtime = _runtime(harness)
        assert inside.wait(_WAIT_S)

        def child() -> bool:
            first = _spawn(harness)  # starts the child's own read; none is done yet
            return first == (0, "loading") and runtime.prefetch.wait(_WAIT_S) and _spawn(harness) == (1, "ok")

        try:
            pid = fork_checking(child)
        finally:
            release.set()
        assert exit_code(pid) == 0
        assert runtime.prefetch.wait(_WAIT_S) and _spawn(harness) == (1, "ok")
    finally:
        harness.instrumentor.uninstrument()
        harness.provider.shutdown()


@pytest.mark.parametrize("held", ["memo", "exporter", "prefetch"])
def test_a_child_forked_while_a_runtime_lock_is_held_does_not_hang_its_first_spawn(
    held: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another host thread holds one of the runtime's locks when the host forks: the memo's (its
    first spawn puts its decision), the chain exporter's (its first spawn opens the chain) or the
    background read's (its first spawn takes the read's result): the child's first spawn used to
    wait for it without bound."""
    if held == "prefetch":  # the first read is in the background; its result waits to be taken
        monkeypatch.setattr(runtime_module, "PREFETCH_MIN_BYTES", 0)
    RoutingPolicyStore(tmp_path / "store").save(list(default_policy_file().policies))
    harness = make_harness(tmp_path, snapshot_recheck_ms=0)
    try:
        runtime = _runtime(harness)
        assert runtime.prefetch.wait(_WAIT_S)
        lock = {"memo": runtime.memo, "exporter": runtime.exporter, "prefetch": runtime.prefetch}[held]._lock
        assert _forked_while_held(lock, lambda: _spawn(harness) == (1, "ok")) == 0
        assert _spawn(harness) == (1, "ok")
    finally:
        harness.instrumentor.uninstrument()
        harness.provider.shutdown()


def test_a_child_forked_while_a_failure_is_counted_counts_its_own(harness: Harness) -> None:
    """Another host thread is counting a contained failure (``ShadowRuntime.contain``, under the
    runtime's lock) when the host forks: a failure in the child's spawn is counted and marked on its
    span; the spawn waited for the copied-held lock without bound."""
    runtime = _runtime(harness)

    def full_disk(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    def child() -> bool:
        runtime.exporter.append_templated = full_disk  # type: ignore[method-assign]
        runtime.exporter.append = full_disk  # type: ignore[method-assign]
        _spawn(harness)
        return (
            harness.spans()[-1].attributes.get(attr.ERROR_TYPE) == "OSError"
            and runtime.errors[("chain", "OSError")] == 1
        )

    assert _forked_while_held(runtime._lock, child) == 0
    assert runtime.errors[("chain", "OSError")] == 0


def test_a_child_forked_while_the_default_runtime_is_made_makes_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another host thread is making the decorators' default runtime (under its lock) when the host
    forks: the child makes its own; it waited for the copied-held lock without bound."""
    made: list[int] = []
    monkeypatch.setattr(seams, "_make_default_runtime", lambda: made.append(os.getpid()))
    default = seams._DefaultRuntime()
    assert _forked_while_held(default._lock, lambda: default.get() is None and made == [os.getpid()]) == 0
    assert made == []
