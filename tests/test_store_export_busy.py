"""``policy export`` of the current snapshot while a writer holds the store exports nothing.

A store whose ``current.json`` is missing while its history is not (a first save between its two
writes, or a save that died there) is only called ``current-missing`` under the writers' lock. When
another process holds that lock past the command's wait, the load is an unavailable snapshot marked
``loading``: decisions hold. ``policy export`` printed that placeholder as ``{"policies": []}`` with
exit 0, an empty set an operator would take for the current one (and could save back as a revision).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.cli import policy as policy_cli
from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import CURRENT_FILE, LOCK_FILE, RoutingPolicyStore


def test_export_of_the_current_snapshot_refuses_while_a_writer_holds_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    RoutingPolicyStore(tmp_path).save([RoutingPolicy.model_validate({"id": "kept"})])
    (tmp_path / CURRENT_FILE).unlink()  # as a first save leaves it between its two writes
    monkeypatch.setattr(policy_cli, "COMMAND_READ_WAIT_S", 0.05)  # the lock stays held throughout
    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: the command cannot get it
        code = main(["policy", "export", "--store", str(tmp_path)])
    finally:
        os.close(fd)
    out, err = capsys.readouterr()
    assert code == 2, out
    assert out == ""
    assert "holds the store's lock" in err and "nothing exported" in err
