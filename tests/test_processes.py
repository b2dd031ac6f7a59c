"""``processes.map_in_workers``: work goes to worker processes when they can be started, and to this
process, whole, when one cannot; no worker is ever left waiting for a task.

Each case runs in an interpreter of its own (it patches how that interpreter starts processes), under
a hang guard: a pool left with workers and no manager thread kept the interpreter from exiting."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HANG_GUARD_S = 120

FORK_FAILS_SECOND = """
    import errno, os
    from otel_route_shadow.processes import map_in_workers, mp_context
    assert mp_context().get_start_method() == "fork"
    real, calls = os.fork, [0]
    def fork():
        calls[0] += 1
        if calls[0] == 2:  # a process limit: the second worker cannot be forked
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return real()
    os.fork = fork
    print(map_in_workers(pow, [(2, 3), (3, 2), (4, 2)], 3), flush=True)
"""

SPAWN_FAILS_SECOND = """
    import errno, threading
    import multiprocessing.util as util
    from otel_route_shadow.processes import map_in_workers, mp_context
    real, calls = util.spawnv_passfds, [0]
    def spawnv_passfds(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:  # the resource tracker, the first worker, then the second: refused
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return real(*args, **kwargs)
    util.spawnv_passfds = spawnv_passfds
    if __name__ == "__main__":
        held = threading.Event()
        threading.Thread(target=held.wait, daemon=True).start()  # a host's thread: spawn, not fork
        assert mp_context().get_start_method() == "spawn"
        print(map_in_workers(pow, [(2, 3), (3, 2), (4, 2)], 3), flush=True)
        held.set()
"""


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def test_a_worker_that_cannot_be_forked_leaves_no_worker_waiting_and_the_work_done_here() -> None:
    """The first worker was forked, the second failed: the pool had no manager thread yet, so the first
    waited for tasks for ever and the interpreter never exited (a fleet report written, then a hang)."""
    done = _run(FORK_FAILS_SECOND)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[8, 9, 16]"


def test_a_worker_that_cannot_be_spawned_while_tasks_are_queued_gives_the_work_to_this_process() -> None:
    """With spawn, workers start as tasks are queued: the failure came out of ``map`` as a traceback."""
    done = _run(SPAWN_FAILS_SECOND)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[8, 9, 16]"


TASK_RAISES = """
    import os, tempfile
    from otel_route_shadow.processes import map_in_workers
    calls = tempfile.mkdtemp()
    main = os.getpid()
    def work(number):
        with open(os.path.join(calls, f"{number}-{os.getpid()}"), "w"):
            pass
        if number == 3:
            raise PermissionError(13, "Permission denied", f"log{number}.jsonl")
        return number
    try:
        map_in_workers(work, [(n,) for n in range(6)], 2)
    except PermissionError as exc:
        print("raised", exc.filename)
    print("here", sum(name.endswith(f"-{main}") for name in os.listdir(calls)))
"""


def test_a_tasks_own_os_error_is_raised_not_the_whole_work_done_again_here() -> None:
    """An OSError out of ``map`` was taken for a worker that could not start: every item was worked
    again in this process (a fleet read twice), and only then did the error come out."""
    done = _run(TASK_RAISES)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["raised log3.jsonl", "here 0"], done.stdout
