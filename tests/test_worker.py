"""The one background worker: a step per wake on one lazily started daemon thread, bounded waits, and a
forked child that never runs (or waits for) the parent's thread."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import weakref

import pytest

from otel_route_shadow.worker import AFTER_FORK, ProcessHook, Worker, WorkerName

HANG_GUARD_S = 30.0


def _threads(name: WorkerName) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_no_thread_until_the_first_wake_then_one_step_per_wake_on_that_thread() -> None:
    ran: list[str] = []
    worker = Worker(WorkerName.PREFETCH, lambda: ran.append(threading.current_thread().name))
    assert not worker.busy and worker.idle(0.0)  # nothing asked for: idle without a thread
    worker.wake()
    assert worker.idle(HANG_GUARD_S)  # a hang guard, not a speed assertion
    worker.wake()
    assert worker.idle(HANG_GUARD_S)
    assert ran == [WorkerName.PREFETCH.value] * 2 and len(_threads(WorkerName.PREFETCH)) == 1
    assert worker.stop(HANG_GUARD_S)
    assert not _threads(WorkerName.PREFETCH)
    worker.wake()  # not a latch: a later wake starts a new thread
    assert worker.idle(HANG_GUARD_S) and len(ran) == 3
    assert worker.stop(HANG_GUARD_S)


def test_stop_and_idle_are_bounded_when_the_step_blocks() -> None:
    entered, release = threading.Event(), threading.Event()

    def blocked() -> None:
        entered.set()
        release.wait(HANG_GUARD_S)

    worker = Worker(WorkerName.CHECKPOINT_SPANS, blocked)
    worker.wake()
    assert entered.wait(HANG_GUARD_S)
    assert worker.busy
    assert worker.idle(0.01) is False  # the step is stuck: the wait ends anyway
    assert worker.stop(0.01) is False  # the thread outlives the wait, a daemon
    (stuck,) = _threads(WorkerName.CHECKPOINT_SPANS)
    assert stuck.daemon
    release.set()
    stuck.join(HANG_GUARD_S)
    assert not stuck.is_alive() and not worker.busy


def test_a_step_that_raises_is_logged_once_and_the_worker_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def explode() -> None:
        calls.append(1)
        raise RuntimeError("a bug")

    worker = Worker(WorkerName.PREFETCH, explode)
    for _ in range(3):
        worker.wake()
        assert worker.idle(HANG_GUARD_S)
    worker.stop(HANG_GUARD_S)
    assert len(calls) == 3
    assert sum("worker's step raised RuntimeError" in r.getMessage() for r in caplog.records) == 1


def test_a_step_runs_again_unprompted_after_the_wait_it_returns() -> None:
    second = threading.Event()
    runs: list[int] = []

    def step() -> float | None:
        runs.append(1)
        if len(runs) >= 2:
            second.set()
            return None
        return 0.0  # run again at once, with no wake

    worker = Worker(WorkerName.WITNESS, step)
    worker.wake()
    assert second.wait(HANG_GUARD_S)
    worker.stop(HANG_GUARD_S)
    assert len(runs) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_never_runs_or_waits_for_the_parents_thread() -> None:
    """The parent's step is stuck at fork time: the child does not believe it in flight, does not wait
    for it, and its first wake runs its own step on a thread of its own."""
    entered, release = threading.Event(), threading.Event()
    ran_in: list[tuple[int, threading.Thread]] = []

    def step() -> None:
        ran_in.append((os.getpid(), threading.current_thread()))
        if os.getpid() == parent:
            entered.set()
            release.wait(HANG_GUARD_S)

    parent = os.getpid()
    worker = Worker(WorkerName.CHECKPOINTER, step)
    worker.wake()
    assert entered.wait(HANG_GUARD_S)
    parent_thread = ran_in[0][1]
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = not worker.busy and worker.idle(0.0)  # nothing in flight here: the parent's step is not ours
            ok = ok and worker.stop(0.0)  # no thread of the parent's to join
            worker.wake()
            ok = ok and worker.idle(HANG_GUARD_S)
            mine = [t for p, t in ran_in if p == os.getpid()]
            ok = ok and len(mine) == 1 and mine[0] is not parent_thread
            ok = ok and len(_threads(WorkerName.CHECKPOINTER)) == 1
            ok = ok and worker.stop(HANG_GUARD_S)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    release.set()
    assert os.waitstatus_to_exitcode(status) == 0
    assert worker.idle(HANG_GUARD_S) and [p for p, _ in ran_in] == [parent]
    assert worker.stop(HANG_GUARD_S)


def test_workers_made_and_dropped_register_no_fork_handler_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.register_at_fork`` keeps what it is given for good: a handler a worker (one per instrument
    cycle) was a handler kept forever. The one ``AFTER_FORK`` handler holds workers weakly."""
    registered: list[object] = []
    monkeypatch.setattr(os, "register_at_fork", lambda **hooks: registered.append(hooks))
    workers = [Worker(WorkerName.PREFETCH, lambda: None) for _ in range(100)]
    assert registered == [] and all(w in AFTER_FORK for w in workers)
    gone = weakref.ref(workers[0])
    del workers
    gc.collect()
    assert gone() is None


def test_a_wake_after_a_stop_that_timed_out_goes_on_in_the_same_thread_never_a_second() -> None:
    """``stop`` forgot its thread before waiting for it: when the wait timed out (a step still running),
    the next ``wake`` started a second thread, and two steps ran at once."""
    entered, release = threading.Event(), threading.Event()
    steps: list[int] = []

    def step() -> None:
        steps.append(1)
        entered.set()
        release.wait(30)

    worker = Worker(WorkerName.CHECKPOINTER, step)
    try:
        worker.wake()
        assert entered.wait(30)
        assert worker.stop(0.01) is False  # the step is still running
        worker.wake()
        assert len(_threads(WorkerName.CHECKPOINTER)) == 1  # a second thread would start inside wake()
    finally:
        release.set()
        assert worker.idle(30)
        worker.stop(30)
    assert len(steps) == 2 and not _threads(WorkerName.CHECKPOINTER)


_EXIT_HOOK_HOST = """
import multiprocessing, os
from otel_route_shadow.worker import ProcessHook, run_at_exit

class Owner:
    pass

def close(owner):
    print("closed", os.getpid(), flush=True)

OWNER = Owner()
HOOK = ProcessHook("closing at exit", close)
HOOK.add(OWNER)
run_at_exit(HOOK)
child = multiprocessing.get_context("fork").Process(target=print, args=("child",))
child.start()
child.join(30)
print("parent", os.getpid(), child.pid, child.exitcode, flush=True)
"""


def test_an_exit_hook_runs_once_where_atexit_runs_and_once_in_a_multiprocessing_child() -> None:
    """The child ends in ``os._exit`` (no ``atexit``): its hook runs among ``multiprocessing``'s exit
    callbacks; the parent ends normally, where both ``atexit`` and those callbacks run: one call."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", _EXIT_HOOK_HOST], capture_output=True, text=True, env=env, timeout=60, check=True
    ).stdout.split("\n")
    parent = next(line.split() for line in out if line.startswith("parent"))
    assert parent[3] == "0"
    assert sorted(line for line in out if line.startswith("closed")) == sorted(
        [f"closed {parent[1]}", f"closed {parent[2]}"]
    )


def test_a_drained_hook_calls_nothing_the_second_time() -> None:
    class Owner:
        pass

    calls: list[object] = []
    hook: ProcessHook[Owner] = ProcessHook("closing", calls.append)
    owners = [Owner(), Owner()]
    for owner in owners:
        hook.add(owner)
    hook.drain()
    hook.drain()
    assert calls == owners and not any(owner in hook for owner in owners)
