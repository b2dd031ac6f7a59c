"""The plugin's checkpoint schedule: every N records or T seconds, in one background thread, at shutdown."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tlog_support import ORIGIN, notes

from otel_route_shadow.chain import RoutingAuditLog
from otel_route_shadow.instrumentation.checkpointing import WORKER_NAME, ScheduledCheckpointer
from otel_route_shadow.tlog import Checkpointer, SignedCheckpoint


def _scheduled(chain: Path, every: int, *, background: bool = False) -> ScheduledCheckpointer:
    return ScheduledCheckpointer(Checkpointer(str(chain), ORIGIN, None), every, 3600.0, background=background)


def test_a_checkpoint_every_n_records_and_at_shutdown(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = _scheduled(chain, 100)
    seen: list[int] = []
    scheduled.add_listener(lambda c: seen.append(c.size))
    with RoutingAuditLog(chain) as log:
        for n in range(250):
            log.append({"n": n})
            scheduled.after_append()
    assert seen == [100, 200]
    last = scheduled.checkpoint_now()
    assert last is not None and last.size == 250 and seen == [100, 200, 250]
    assert scheduled.checkpoint_now() is last  # nothing new: the last one made
    assert len(notes(chain)) == 3 and scheduled.origin == ORIGIN


def test_a_backlog_is_caught_up_on_the_appends_that_follow(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    with RoutingAuditLog(chain) as log:
        for n in range(1000):
            log.append({"n": n})
    scheduled = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, None, max_leaves=300), 1, 3600.0, background=False
    )
    sizes = []
    scheduled.add_listener(lambda c: sizes.append(c.size))
    for _ in range(5):
        scheduled.after_append()
    assert sizes == [300, 600, 900, 1000]


def test_a_background_checkpointer_never_checkpoints_in_the_appending_thread(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(chain)
    scheduled = _scheduled(chain, 3, background=True)
    made: list[tuple[int, str]] = []
    done = threading.Event()

    def listener(c: SignedCheckpoint) -> None:
        made.append((c.size, threading.current_thread().name))
        done.set()

    scheduled.add_listener(listener)
    for i in range(7):
        log.append({"n": i})
        scheduled.after_append()  # due at the third: it only wakes the thread
    assert done.wait(30)  # a hang guard, not a speed assertion
    assert made[0][1] == WORKER_NAME and 3 <= made[0][0] <= 7
    final = scheduled.checkpoint_now()  # synchronous, in this thread
    assert final is not None and final.size == 7
    scheduled.close()
    assert not [t for t in threading.enumerate() if t.name == WORKER_NAME]
    log.close()


def test_closing_leaks_no_thread_across_cycles(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(chain)
    for cycle in range(20):
        scheduled = _scheduled(chain, 1, background=True)
        log.append({"cycle": cycle})
        scheduled.after_append()
        scheduled.checkpoint_now()
        scheduled.close()
    assert not [t for t in threading.enumerate() if t.name == WORKER_NAME]
    log.close()


def test_a_forked_child_checkpoints_although_the_parent_was_checkpointing(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(chain)
    for n in range(5):
        log.append({"n": n})
    scheduled = _scheduled(chain, 1)
    scheduled._mutex.acquire()  # as if the parent's thread were inside a checkpoint at fork time
    pid = os.fork()
    if pid == 0:  # the child: its own lock, its own thread
        made = scheduled.checkpoint_now()
        os._exit(0 if made is not None and made.size == 5 else 1)
    scheduled._mutex.release()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [n.split("\n")[1] for n in notes(chain)] == ["5"]
    log.close()
