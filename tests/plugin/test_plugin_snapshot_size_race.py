"""A snapshot that grows past the inline bound between the size check and the read is not read in a spawn.

A look at a changed store takes ``current.json``'s size (one ``lstat``) to decide where to read it:
inside the spawn when small, in the background when large. A ``policy save`` of a large set that
renamed its ``current.json`` in between the two was read and indexed inside the spawn all the same
(a 20,000-policy set: about a quarter of a second of the host's spawn), since the read itself had
no bound but the store's 64 MiB. Deterministic: the save is made from inside the size check.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import runtime as runtime_module
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import RoutingPolicyStore

from .conftest import Harness, make_harness

_WAIT_S = 30.0  # a bound on a join, not a timing the test depends on


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = make_harness(tmp_path, snapshot_recheck_ms=0)
    try:
        yield h
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


def _policies(prefix: str, count: int) -> list[RoutingPolicy]:
    return [
        RoutingPolicy.model_validate({"id": f"{prefix}-{n}", "match": {"principal_ids": [f"{prefix}-{n}"]}})
        for n in range(count)
    ]


def _spawn(harness: Harness) -> tuple[Any, Any]:
    factory.dispatch(factory.plan_jobs(1, factory.FactorySettings())[0])
    span = harness.spans()[-1]
    return span.attributes[attr.SNAPSHOT_REVISION], span.attributes[attr.SNAPSHOT_STATE]


def test_a_large_snapshot_renamed_in_after_the_size_check_is_read_in_the_background(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = RoutingPolicyStore(harness.store)
    writer.save(_policies("small", 1))
    assert _spawn(harness) == (1, "ok")
    runtime = harness.instrumentor.runtime
    assert runtime is not None
    store = runtime._policy_store()
    real_size = store.current_size
    large = _policies("large", 400)

    def size_then_a_large_save() -> int | None:
        size = real_size()
        monkeypatch.setattr(store, "current_size", real_size)  # once
        assert writer.save(large).revision == 3  # lands after the size was taken, before the read
        return size

    writer.save(_policies("small-too", 1))  # revision 2: the store changed, the next look re-reads
    monkeypatch.setattr(store, "current_size", size_then_a_large_save)
    assert _spawn(harness) == (1, "ok")  # the revision it had, while the background reads revision 3
    assert store.current_size() > runtime_module.PREFETCH_MIN_BYTES
    assert runtime.prefetch.wait(_WAIT_S)
    assert _spawn(harness) == (3, "ok")
