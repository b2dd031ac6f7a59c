"""A repair marker a save failed to remove does not excuse a later missing ``current.json``.

``save`` writes the history copy, then ``current.json``, then removes ``repaired.json``. A save killed
between the last two steps leaves a marker beside a good current snapshot. Nothing reads the marker
while ``current.json`` is there, but if that file is later lost, the stale marker used to explain its
absence: the store read ``absent`` ("repaired ... no managed policy applies"), every decision resolved
through legacy compatibility, though revisions were saved after that repair and decisions cite them.
The store must read ``corrupt`` (``current-missing``), as it does without a marker.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import CURRENT_FILE, RoutingPolicyStore
from otel_route_shadow.store.layout import REPAIR_MARKER


def _policy(name: str) -> RoutingPolicy:
    return RoutingPolicy.model_validate({"id": name, "match": {"principal_ids": [name]}})


def _save_killed_before_removing_the_marker(root: str) -> None:
    """In a child process: save, and die by SIGKILL at the call that would remove the marker."""
    real_unlink = os.unlink

    def unlink(path: str, *args: object, **kwargs: object) -> None:
        if os.path.basename(os.fspath(path)) == REPAIR_MARKER:
            os.kill(os.getpid(), signal.SIGKILL)
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    os.unlink = unlink  # type: ignore[assignment]
    RoutingPolicyStore(root).save([_policy("after-repair")])


def test_a_marker_left_by_a_killed_save_does_not_make_a_lost_current_file_absent(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = RoutingPolicyStore(root)
    store.save([_policy("one")])
    (root / CURRENT_FILE).write_bytes(b"{")  # corrupt
    assert store.repair().repaired
    assert (root / REPAIR_MARKER).exists()

    child = multiprocessing.get_context("fork").Process(
        target=_save_killed_before_removing_the_marker, args=(str(root),)
    )
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert (root / REPAIR_MARKER).exists()  # the save died between its current.json and the marker

    after_crash = RoutingPolicyStore(root).load()
    assert after_crash.state == "ok"
    assert after_crash.revision == 2

    (root / CURRENT_FILE).unlink()  # revision 2 was current; now its current file is lost
    load = RoutingPolicyStore(root).load()
    assert load.state == "corrupt", load.note
    assert load.problem_kind == "current-missing"
    assert not load.snapshot.available

    repaired = RoutingPolicyStore(root).repair()  # the explicit way from corrupt to absent still works
    assert repaired.repaired and repaired.next_revision == 3
    assert RoutingPolicyStore(root).load().state == "absent"
    assert RoutingPolicyStore(root).save([_policy("three")]).revision == 3
