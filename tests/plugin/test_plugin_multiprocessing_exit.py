"""A ``multiprocessing`` child (a ``Pool`` worker, a ``Process`` target; fork start method) ends in
``os._exit``, which runs no ``atexit`` entry: its way out runs among ``multiprocessing``'s own exit
callbacks instead, so the records still waiting in its backlog reach the chain (written, or spilled and
written by the next writer), never lost unmarked.

Deterministic: the records wait because another process holds the chain's lock for the whole of the
workers' spawns (each worker says how many wait in its backlog); the lock is released by closing the
holder's stdin, and every wait is a join or a result with a hang guard, never a sleep.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from test_chain_lock import HANG_GUARD_S, lock_held_by_another_process

from otel_route_shadow.chain import DROPPED_KIND, iter_payloads
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

CALLS = 4
"""Spawns per task; two workers' worth stays within one batch of the spill file (16 records)."""


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[Path]:
    """Instrumented (a 10 ms lock wait) over a chain the parent has written one record to."""
    path = tmp_path / "chain.jsonl"
    provider = TracerProvider()
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=provider, chain_path=path, seams=(), chain_lock_timeout_ms=10)
    try:
        _spawns(1)
        yield path
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def _spawns(n: int) -> None:
    for job in factory.plan_jobs(n, factory.FactorySettings()):
        with shadow_spawn(factory.context_for(job, "agentic"), seam="t"):
            pass


def _waiting() -> int:
    """How many records wait in this process's backlog."""
    runtime = RouteShadowInstrumentor().runtime
    assert runtime is not None and runtime.exporter._log is not None
    return sum(runtime.exporter._log.backlog_records)


def _task(_: int) -> int:
    _spawns(CALLS)
    return _waiting()


def _target() -> None:
    _spawns(CALLS)
    sys.exit(0 if _waiting() == CALLS else 3)


def _counts(path: Path) -> tuple[int, int]:
    """The chain's seam records, and the records its ``records-dropped`` events count."""
    payloads = [payload for _, payload in iter_payloads(path)]
    dropped = sum(int(p["count"]) for p in payloads if p.get("kind") == DROPPED_KIND)
    return sum(p.get("kind") == "route-shadow" for p in payloads), dropped


@pytest.mark.timeout(120)
def test_records_waiting_in_a_pool_worker_are_written_when_it_exits(chain: Path) -> None:
    """The lock is free again when the workers exit: their exit writes what waited. It was lost unmarked."""
    pool = multiprocessing.get_context("fork").Pool(2)  # before the holder: no worker keeps its stdin open
    try:
        with lock_held_by_another_process(chain):
            waiting = pool.map_async(_task, range(4)).get(HANG_GUARD_S)
        assert waiting and all(n >= CALLS for n in waiting)  # each task's records waited
        pool.close()
        pool.join()  # bounded by the test's timeout: the workers' exit waits are bounded
    finally:
        pool.terminate()
    assert _counts(chain) == (1 + 4 * CALLS, 0)


@pytest.mark.timeout(120)
def test_records_waiting_in_a_process_target_are_spilled_when_it_exits_under_the_lock(chain: Path) -> None:
    """The lock is still held when the targets exit: their exit spills what waited, and the parent's next
    append writes it into the chain first. It was lost unmarked."""
    context = multiprocessing.get_context("fork")
    with lock_held_by_another_process(chain):
        processes = [context.Process(target=_target) for _ in range(2)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(HANG_GUARD_S)
            assert process.exitcode == 0  # each target's records waited
    _spawns(1)
    assert _counts(chain) == (2 + 2 * CALLS, 0)
