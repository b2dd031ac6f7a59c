"""How fresh the snapshot behind a seam's decision is: the store is looked at again once
``snapshot_recheck_ms`` has passed, and every record names the revision it actually used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.demo import factory
from otel_route_shadow.demo.run import default_policy_file
from otel_route_shadow.instrumentation import runtime as runtime_module
from otel_route_shadow.instrumentation.config import DEFAULT_SNAPSHOT_RECHECK_MS, RouteShadowConfig
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import RoutingPolicyStore

from .conftest import make_harness


class _Clock:
    def __init__(self) -> None:
        self.now = 10**12

    def __call__(self) -> int:
        return self.now


def _spawn_revision(harness: Any) -> tuple[int, str]:
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    factory.dispatch(job)
    span = harness.spans()[-1]
    record = harness.records()[-1]
    assert record["attributes"][attr.SNAPSHOT_REVISION] == span.attributes[attr.SNAPSHOT_REVISION]
    return span.attributes[attr.SNAPSHOT_REVISION], span.attributes[attr.SNAPSHOT_STATE]


def _save(store: Path) -> None:
    RoutingPolicyStore(store).save(list(default_policy_file().policies))


def test_with_recheck_zero_a_save_is_seen_by_the_very_next_spawn(tmp_path: Path) -> None:
    harness = make_harness(tmp_path, snapshot_recheck_ms=0)
    try:
        assert _spawn_revision(harness) == (0, "absent")
        _save(harness.store)
        assert _spawn_revision(harness) == (1, "ok")
    finally:
        harness.instrumentor.uninstrument()


def test_within_the_interval_the_last_verdict_is_reused_and_the_record_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(runtime_module.time, "monotonic_ns", clock)
    harness = make_harness(tmp_path, snapshot_recheck_ms=250)
    try:
        assert _spawn_revision(harness) == (0, "absent")
        loads = RoutingPolicyStore.load_within  # a spawn's read of a small store
        calls: list[int] = []

        def counting(self: RoutingPolicyStore, max_bytes: int) -> Any:
            calls.append(1)
            return loads(self, max_bytes)

        monkeypatch.setattr(RoutingPolicyStore, "load_within", counting)
        _save(harness.store)
        clock.now += 249_000_000
        assert _spawn_revision(harness) == (0, "absent")  # what it resolved against, truthfully
        assert calls == []  # the store was not even looked at
        clock.now += 1_000_000
        assert _spawn_revision(harness) == (1, "ok")
        assert calls == [1]
    finally:
        harness.instrumentor.uninstrument()


def test_a_store_that_failed_to_load_is_retried_on_the_next_spawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _save(tmp_path / "store")
    harness = make_harness(tmp_path, snapshot_recheck_ms=60_000)
    try:
        real = RoutingPolicyStore.load_within  # a spawn's read of a small store
        failing = {"on": True}

        def flaky(self: RoutingPolicyStore, max_bytes: int) -> Any:
            if failing["on"]:
                raise OSError("the disk hiccupped")
            return real(self, max_bytes)

        monkeypatch.setattr(RoutingPolicyStore, "load_within", flaky)
        assert _spawn_revision(harness) == (0, "corrupt")
        failing["on"] = False
        assert _spawn_revision(harness) == (1, "ok")
    finally:
        harness.instrumentor.uninstrument()


def test_the_recheck_setting_comes_from_the_environment_or_the_keyword() -> None:
    assert RouteShadowConfig.resolve(environ={}).snapshot_recheck_ms == DEFAULT_SNAPSHOT_RECHECK_MS == 100
    env = {"OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS": " 0 "}
    assert RouteShadowConfig.resolve(environ=env).snapshot_recheck_ms == 0
    assert RouteShadowConfig.resolve(environ=env, snapshot_recheck_ms=40).snapshot_recheck_ms == 40


@pytest.mark.parametrize("value", ["soon", "1.5", "-1", "3600001"])
def test_a_bad_recheck_setting_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValueError, match=r"SNAPSHOT_RECHECK_MS|snapshot_recheck_ms"):
        RouteShadowConfig.resolve(environ={"OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS": value})


@pytest.mark.parametrize("value", [-5, True, "soon", "1.5"])
def test_a_bad_recheck_keyword_is_refused(value: Any) -> None:
    # a string is read as the variable's value is ("100" is 100: docs/instrumenting.md, Settings)
    with pytest.raises(ValueError, match="snapshot_recheck_ms"):
        RouteShadowConfig.resolve(environ={}, snapshot_recheck_ms=value)


def test_the_chain_lock_timeout_comes_from_the_environment_or_the_keyword(tmp_path: Path) -> None:
    from otel_route_shadow.instrumentation.config import DEFAULT_CHAIN_LOCK_TIMEOUT_MS

    assert RouteShadowConfig.resolve(environ={}).chain_lock_timeout_ms == DEFAULT_CHAIN_LOCK_TIMEOUT_MS == 100
    env = {"OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS": "0"}
    assert RouteShadowConfig.resolve(environ=env).chain_lock_timeout_ms == 0
    assert RouteShadowConfig.resolve(environ=env, chain_lock_timeout_ms=7).chain_lock_timeout_ms == 7
    for bad in ("soon", "-1", "60001"):
        with pytest.raises(ValueError, match=r"CHAIN_LOCK_TIMEOUT_MS|chain_lock_timeout_ms"):
            RouteShadowConfig.resolve(environ={"OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS": bad})
    harness = make_harness(tmp_path, chain_lock_timeout_ms=25)
    try:
        _spawn_revision(harness)
        runtime = harness.instrumentor.runtime
        assert runtime is not None
        log = runtime.exporter._chain()
        assert log is not None and log._lock_timeout == 0.025
    finally:
        harness.instrumentor.uninstrument()
