"""A large policy snapshot is read off the spawn path (``SnapshotPrefetch``), decided by size.

Deterministic: the size threshold is set to 0 (every snapshot counts as large) or left at its
default (the demo set is small), and the background read is held at a gate the test opens; waits
for the thread are bounded joins, never sleeps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.analysis.whatif import replay
from otel_route_shadow.core import PolicyIndex
from otel_route_shadow.demo import factory
from otel_route_shadow.demo.run import default_policy_file
from otel_route_shadow.instrumentation import runtime as runtime_module
from otel_route_shadow.instrumentation.prefetch import SnapshotPrefetch
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import RoutingPolicyStore
from otel_route_shadow.worker import WorkerName

from .conftest import Harness, make_harness

_WAIT_S = 30.0  # a bound on a join, not a timing the test depends on


class _Gate:
    """Holds every store read made on the prefetch thread until ``open()``; optionally fails it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, open_: bool = True) -> None:
        self.event = threading.Event()
        if open_:
            self.event.set()
        self.fail = False
        self.background_reads = 0
        self.entered = threading.Event()
        """Set when a background read reaches the gate."""
        real = RoutingPolicyStore.load

        def gated(store: RoutingPolicyStore) -> Any:
            if threading.current_thread().name == WorkerName.PREFETCH:
                self.background_reads += 1
                self.entered.set()
                assert self.event.wait(_WAIT_S)
                if self.fail:
                    raise RuntimeError("the background read broke")
            return real(store)

        monkeypatch.setattr(RoutingPolicyStore, "load", gated)

    def open(self) -> None:
        self.event.set()

    def close(self) -> None:
        self.event.clear()


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every snapshot counts as large: any change is read in the background. The store caches a
    verdict at once (no racy window), so a read is started by a change only, and the reads counted
    here are exact (inside the window every look would start one more)."""
    monkeypatch.setattr(runtime_module, "PREFETCH_MIN_BYTES", 0)
    monkeypatch.setattr(RoutingPolicyStore, "racy_window_ns", 0)


def _save(store: Path, drop: int = 0) -> int:
    policies = list(default_policy_file().policies)
    return RoutingPolicyStore(store).save(policies[drop:]).revision


def _spawn(harness: Harness) -> tuple[int, str, str]:
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    factory.dispatch(job)
    span = harness.spans()[-1]
    record = harness.records()[-1]["attributes"]
    seen = (span.attributes[attr.SNAPSHOT_REVISION], span.attributes[attr.SNAPSHOT_STATE])
    assert (record[attr.SNAPSHOT_REVISION], record[attr.SNAPSHOT_STATE]) == seen
    assert record[attr.REASON] == span.attributes[attr.REASON]
    return seen[0], seen[1], span.attributes[attr.REASON]


def _runtime(harness: Harness) -> ShadowRuntime:
    runtime = harness.instrumentor.runtime
    assert runtime is not None
    return runtime


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[Harness]]:
    harnesses: list[Harness] = []
    yield harnesses
    for harness in harnesses:
        harness.instrumentor.uninstrument()
        harness.provider.shutdown()


def _harness(tmp_path: Path, made: list[Harness]) -> Harness:
    harness = make_harness(tmp_path, snapshot_recheck_ms=0)
    made.append(harness)
    return harness


@pytest.mark.usefixtures("large")
def test_a_large_store_change_keeps_seams_on_the_old_revision_until_the_background_read_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    gate = _Gate(monkeypatch)
    _save(tmp_path / "store")
    harness = _harness(tmp_path, made)
    runtime = _runtime(harness)
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (1, "ok")
    gate.close()
    gate.entered.clear()
    assert _save(harness.store, drop=1) == 2
    assert _spawn(harness)[:2] == (1, "ok")  # the revision it resolved against, truthfully
    assert runtime.prefetch.running
    assert gate.entered.wait(_WAIT_S)  # the read is held at the gate
    assert _spawn(harness)[:2] == (1, "ok")  # one read at a time: no second thread
    assert gate.background_reads == 2
    gate.open()
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (2, "ok")


def test_a_small_store_change_is_picked_up_by_the_very_next_spawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    gate = _Gate(monkeypatch)
    harness = _harness(tmp_path, made)
    assert _spawn(harness)[:2] == (0, "absent")
    _save(harness.store)
    assert _spawn(harness)[:2] == (1, "ok")
    _save(harness.store, drop=1)
    assert _spawn(harness)[:2] == (2, "ok")
    assert gate.background_reads == 0
    assert not _runtime(harness).prefetch.running


@pytest.mark.usefixtures("large")
def test_before_a_large_store_s_first_read_a_seam_holds_with_snapshot_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    gate = _Gate(monkeypatch, open_=False)
    _save(tmp_path / "store")
    harness = _harness(tmp_path, made)
    runtime = _runtime(harness)
    assert runtime.prefetch.running  # started at instrument time, not by a spawn
    assert _spawn(harness) == (0, "loading", "snapshot-loading")
    span = harness.spans()[-1]
    assert span.attributes[attr.OUTCOME] == "held"
    assert attr.ERROR_TYPE not in span.attributes  # loading is a state, not a fault
    gate.open()
    assert runtime.prefetch.wait(_WAIT_S)
    revision, state, reason = _spawn(harness)
    assert (revision, state) == (1, "ok") and reason != "snapshot-loading"
    assert gate.background_reads == 1


@pytest.mark.usefixtures("large")
def test_a_failing_background_read_is_logged_once_and_the_old_snapshot_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness], caplog: pytest.LogCaptureFixture
) -> None:
    gate = _Gate(monkeypatch)
    _save(tmp_path / "store")
    harness = _harness(tmp_path, made)
    runtime = _runtime(harness)
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (1, "ok")
    gate.fail = True
    _save(harness.store, drop=1)
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        for _ in range(2):
            assert _spawn(harness)[:2] == (1, "ok")
            assert runtime.prefetch.wait(_WAIT_S)
        assert _spawn(harness)[:2] == (1, "ok")
        assert runtime.prefetch.wait(_WAIT_S)
    assert runtime.errors[("prefetch", "RuntimeError")] == 3
    lines = [r for r in caplog.records if "prefetch" in r.getMessage()]
    assert len(lines) == 1 and "the background read broke" in lines[0].getMessage()
    gate.fail = False
    assert _spawn(harness)[:2] == (1, "ok")  # this look starts a read that succeeds
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (2, "ok")


@pytest.mark.usefixtures("large")
def test_no_prefetch_thread_outlives_uninstrument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _Gate(monkeypatch, open_=False)
    real_close = SnapshotPrefetch.close

    def open_then_close(self: SnapshotPrefetch) -> None:
        gate.open()  # the read is still in flight when close() starts waiting for it
        real_close(self)

    monkeypatch.setattr(SnapshotPrefetch, "close", open_then_close)
    _save(tmp_path / "store")
    for _ in range(3):
        gate.close()
        harness = make_harness(tmp_path, snapshot_recheck_ms=0)
        assert _runtime(harness).prefetch.running
        harness.instrumentor.uninstrument()
        harness.provider.shutdown()
        alive = [t for t in threading.enumerate() if t.name == WorkerName.PREFETCH]
        assert alive == []
    assert gate.background_reads == 3


def test_the_store_says_whether_it_changed_without_reading(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    assert store.peek() is None and store.current_size() is None
    _save(tmp_path / "store")
    size = (tmp_path / "store" / "current.json").stat().st_size
    assert store.current_size() == size
    store.racy_window_ns = 0  # let the verdict be cached at once
    loaded = store.load()
    assert store.peek() == loaded and store.full_loads == 1
    _save(tmp_path / "store", drop=1)
    assert store.peek() is None and store.full_loads == 1


@pytest.mark.usefixtures("large")
def test_a_record_made_while_loading_reproduces_in_whatif(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    """Regression: whatif replayed a ``loading`` record against an available empty snapshot and
    reported it as an integrity finding (decision-id-mismatch)."""
    gate = _Gate(monkeypatch, open_=False)
    _save(tmp_path / "store")
    harness = _harness(tmp_path, made)
    assert _spawn(harness)[:2] == (0, "loading")
    gate.open()
    assert _runtime(harness).prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (1, "ok")
    store = RoutingPolicyStore(harness.store)
    result = replay(harness.chain, store.revision(1), cited_loader=store.revision)
    assert (result.integrity.checked, result.integrity.passed, result.integrity_findings) == (2, 2, 0)


class _IndexGate:
    """Counts the builds of a non-empty policy index per thread (the empty set's index, what a
    ``loading`` seam resolves against, costs nothing) and holds those on the prefetch thread until
    ``open()``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.event = threading.Event()
        self.entered = threading.Event()
        """Set once a build on the prefetch thread is waiting at the gate: the verdict is read."""
        self.builds: list[str] = []
        gate = self

        class GatedIndex(PolicyIndex):
            def __init__(self, policies: Any) -> None:
                name = threading.current_thread().name
                if len(policies):
                    gate.builds.append(name)
                if name == WorkerName.PREFETCH:
                    gate.entered.set()
                    assert gate.event.wait(_WAIT_S)
                super().__init__(policies)

        monkeypatch.setattr(runtime_module, "PolicyIndex", GatedIndex)

    def open(self) -> None:
        self.event.set()

    def close(self) -> None:
        self.event.clear()
        self.entered.clear()

    def in_seams(self) -> int:
        return sum(1 for name in self.builds if name != WorkerName.PREFETCH)


@pytest.mark.usefixtures("large")
def test_index_race_a_seam_during_the_background_index_build_keeps_the_old_revision_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    """Regression: the background read cached the new verdict before building its index, so a seam
    in that window took the new snapshot and built its index inside the spawn."""
    _save(tmp_path / "store")
    index_gate = _IndexGate(monkeypatch)
    index_gate.open()
    harness = _harness(tmp_path, made)
    runtime = _runtime(harness)
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (1, "ok")
    index_gate.close()
    assert _save(harness.store, drop=1) == 2
    assert _spawn(harness)[:2] == (1, "ok")  # starts the read; its index build is held
    assert index_gate.entered.wait(_WAIT_S)
    assert runtime._policy_store().peek().revision == 2
    for _ in range(3):  # the verdict of revision 2 is cached by now: the window of the race
        assert _spawn(harness)[:2] == (1, "ok")
    assert index_gate.in_seams() == 0
    index_gate.open()
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (2, "ok")
    assert _spawn(harness)[:2] == (2, "ok")
    assert index_gate.in_seams() == 0
    assert index_gate.builds == [WorkerName.PREFETCH, WorkerName.PREFETCH]


@pytest.mark.usefixtures("large")
def test_index_race_a_seam_before_the_first_index_is_built_holds_with_loading_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    """Regression: a host started over a large store built the index inside a spawn when the spawn
    came after the first read was cached and before its index was built."""
    _save(tmp_path / "store")
    index_gate = _IndexGate(monkeypatch)
    harness = _harness(tmp_path, made)
    runtime = _runtime(harness)
    assert index_gate.entered.wait(_WAIT_S)
    assert runtime._policy_store().peek().revision == 1  # read and cached; only its index is pending
    for _ in range(3):
        assert _spawn(harness) == (0, "loading", "snapshot-loading")
    assert index_gate.in_seams() == 0
    index_gate.open()
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (1, "ok")
    assert index_gate.builds == [WorkerName.PREFETCH]


@pytest.mark.usefixtures("large")
def test_a_verdict_whose_index_build_failed_is_not_taken_up_by_a_seam(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Harness]
) -> None:
    """A background read whose index build raised leaves a cached verdict behind; the next look
    reads again in the background instead of taking that verdict and building the index itself."""
    _save(tmp_path / "store")
    index_gate = _IndexGate(monkeypatch)
    index_gate.open()
    harness = _harness(tmp_path, made)
    runtime = _runtime(harness)
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (1, "ok")
    real_prepare = runtime._prepare
    failures = [RuntimeError("the index build broke")]

    def failing_once(load: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_prepare(load)

    monkeypatch.setattr(runtime.prefetch, "_prepare", failing_once)
    _save(harness.store, drop=1)
    assert _spawn(harness)[:2] == (1, "ok")
    assert runtime.prefetch.wait(_WAIT_S)
    assert runtime._policy_store().peek() is not None
    assert _spawn(harness)[:2] == (1, "ok")  # a new background read, not the verdict in the cache
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness)[:2] == (2, "ok")
    assert index_gate.in_seams() == 0
    assert runtime.errors[("prefetch", "RuntimeError")] == 1
