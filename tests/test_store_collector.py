"""A save holds the garbage collector off around its bulk build and gives the host back exactly the
setting it found: enabled or disabled, on success and on error, with saves running concurrently."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import InvalidPolicySetError, RoutingPolicyStore
from otel_route_shadow.store.collector import collector_paused

HANG_GUARD_S = 30.0


@pytest.fixture(autouse=True)
def _collector_enabled_after() -> Iterator[None]:
    yield
    gc.enable()


def _policies(ids: list[str], seen: list[bool]) -> Iterator[RoutingPolicy]:
    """The policies, noting whether the collector was enabled while the save read them."""
    for pid in ids:
        seen.append(gc.isenabled())
        yield RoutingPolicy.model_validate({"id": pid, "match": {"repo_ids": [f"acme/{pid}"]}})


def test_a_save_pauses_the_collector_and_leaves_it_enabled(tmp_path: Path) -> None:
    seen: list[bool] = []
    RoutingPolicyStore(tmp_path / "store").save(_policies(["a", "b"], seen))
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_save_refused_for_its_problems_leaves_the_collector_enabled(tmp_path: Path) -> None:
    seen: list[bool] = []
    with pytest.raises(InvalidPolicySetError):
        RoutingPolicyStore(tmp_path / "store").save(_policies(["same", "same"], seen))
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_host_that_disabled_the_collector_keeps_it_disabled(tmp_path: Path) -> None:
    gc.disable()
    RoutingPolicyStore(tmp_path / "store").save(_policies(["a"], []))
    assert not gc.isenabled()


def test_the_block_raising_restores_the_collector() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_overlapping_pauses_end_with_the_last_one_out() -> None:
    inside, release = threading.Event(), threading.Event()

    def other_save() -> None:
        with collector_paused():
            inside.set()
            release.wait(HANG_GUARD_S)

    thread = threading.Thread(target=other_save)
    thread.start()
    assert inside.wait(HANG_GUARD_S)
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other block is still inside its bulk build
    release.set()
    thread.join(HANG_GUARD_S)
    assert gc.isenabled()
