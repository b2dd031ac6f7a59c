"""``load()`` runs inside spawns: its one wait for the writers' lock is short, and never repeated.

A store whose ``current.json`` is missing while its history is not is called ``current-missing`` only
under the writers' lock (the first save may be between its two writes). Any process that can open
``.lock`` read-only can hold that lock (``flock(LOCK_EX)`` works on an ``O_RDONLY`` descriptor): a
spawn used to wait the writers' ``lock_timeout`` (30 s) for it, every spawn again, one after another.
No test here measures time: the waits asked for are observed, and a thread's join timeout is only a
failure detector.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.core import RouteContext, RoutingPolicy, explain
from otel_route_shadow.store import CURRENT_FILE, LOCK_FILE, RoutingPolicyStore, SnapshotLoad
from otel_route_shadow.store import layout as layout_module

_GENEROUS_S = 10.0
"""Only ever reached when the code under test hangs: the loads here return at once."""


def _current_missing_store(root: Path) -> RoutingPolicyStore:
    RoutingPolicyStore(root).save([RoutingPolicy.model_validate({"id": "a"})])
    (root / CURRENT_FILE).unlink()
    store = RoutingPolicyStore(root)
    store.racy_window_ns = 0  # every verdict that may be cached is cached at once
    return store


def _observe_lock_waits(monkeypatch: pytest.MonkeyPatch, result: bool | None = None) -> list[float]:
    """Record the timeout of every wait for the store's lock; ``result``, if given, is the answer
    (False: the lock stayed busy) instead of a real ``flock``."""
    waits: list[float] = []
    real = layout_module.flock_within

    def observed(fd: int, mode: int, timeout: float, poll: float) -> bool:
        waits.append(timeout)
        return real(fd, mode, timeout, poll) if result is None else result

    monkeypatch.setattr(layout_module, "flock_within", observed)
    return waits


def _context() -> RouteContext:
    return RouteContext.model_validate(
        {
            "request_face": "agentic",
            "legacy_route": {"provider": "anthropic", "transport": "gateway", "mechanism": "role-dial"},
        }
    )


def test_a_held_store_lock_never_holds_a_spawn_past_its_short_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _current_missing_store(tmp_path)
    waits = _observe_lock_waits(monkeypatch)
    holder = os.open(tmp_path / LOCK_FILE, os.O_RDONLY)  # read access is all a holder needs
    fcntl.flock(holder, fcntl.LOCK_EX)
    loads: list[SnapshotLoad] = []
    spawn = threading.Thread(target=lambda: loads.append(store.load()), daemon=True)
    try:
        spawn.start()
        spawn.join(_GENEROUS_S)
        returned_while_held = not spawn.is_alive()
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
        spawn.join()
    assert returned_while_held
    assert waits and max(waits) <= store.read_lock_wait <= 0.05
    (load,) = loads
    # Held, as while a first snapshot is read; never "current-missing" without the lock, never absent
    # as if no policy applied.
    assert (load.state, load.available, load.snapshot.loading, load.revision) == ("absent", False, True, 0)
    assert load.note is not None and "lock" in load.note
    decision = explain(_context(), load.snapshot)
    assert (decision.outcome, decision.reason) == ("held", "snapshot-loading")
    # Not cached: with the lock free, the next load looks again and names what it finds.
    after = store.load()
    assert (after.state, after.problem_kind) == ("corrupt", "current-missing")


class _AnnouncingLock:
    """A ``threading.Lock`` that says when a caller has to wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def __enter__(self) -> _AnnouncingLock:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_spawn_queued_behind_another_spawns_reload_takes_its_verdict_not_a_second_lock_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _current_missing_store(tmp_path)
    waits = _observe_lock_waits(monkeypatch, result=False)  # the lock stays busy
    inside, go_on = threading.Event(), threading.Event()
    busy_wait = layout_module.flock_within

    def first_waits_for_the_test(fd: int, mode: int, timeout: float, poll: float) -> bool:
        inside.set()
        go_on.wait(_GENEROUS_S)
        return busy_wait(fd, mode, timeout, poll)

    monkeypatch.setattr(layout_module, "flock_within", first_waits_for_the_test)
    queue = _AnnouncingLock()
    store._loader._reload_lock = queue  # type: ignore[assignment]
    results: dict[str, Any] = {}
    first = threading.Thread(target=lambda: results.update(first=store.load()), daemon=True)
    second = threading.Thread(target=lambda: results.update(second=store.load()), daemon=True)
    try:
        first.start()
        assert inside.wait(_GENEROUS_S)  # the first spawn is waiting for the store's lock
        second.start()
        assert queue.contended.wait(_GENEROUS_S)  # the second is queued behind its reload
    finally:
        go_on.set()
        first.join(_GENEROUS_S)
        second.join(_GENEROUS_S)
    assert not first.is_alive() and not second.is_alive()
    assert len(waits) == 1  # one wait for the store's lock, not one per spawn
    assert results["second"] is results["first"]
    assert results["first"].snapshot.loading


def test_a_command_waits_for_a_first_save_between_its_two_writes_not_a_spawns_few_milliseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``policy show`` and ``explain --store`` waited a spawn's 5 ms for the writers' lock, so
    one run during a first save's two writes said no snapshot was saved; no spawn waits for a command."""
    from otel_route_shadow.cli import main
    from otel_route_shadow.store import COMMAND_READ_WAIT_S

    _current_missing_store(tmp_path)
    waits = _observe_lock_waits(monkeypatch, result=False)  # the lock stays held: the waits asked are seen
    main(["policy", "show", "--store", str(tmp_path)])
    assert waits == [COMMAND_READ_WAIT_S]
    capsys.readouterr()


def test_policy_history_waits_for_a_writer_once_not_once_per_read_of_the_current_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``policy history`` loaded the current snapshot, then ``history()`` loaded it again:
    with a writer holding the store, two waits of :data:`COMMAND_READ_WAIT_S` (10 s, not 5)."""
    from otel_route_shadow.cli import main
    from otel_route_shadow.store import COMMAND_READ_WAIT_S

    _current_missing_store(tmp_path)
    waits = _observe_lock_waits(monkeypatch, result=False)  # the lock stays held: the waits asked are seen
    main(["policy", "history", "--store", str(tmp_path)])
    assert waits == [COMMAND_READ_WAIT_S]
    capsys.readouterr()
