"""``explain --store`` while a writer holds a store without ``current.json`` says so.

The load is then an unavailable snapshot marked ``loading`` (state ``absent``), and every decision
holds with ``snapshot-loading``; the note said "no policy snapshot saved; every decision is legacy
compatibility", contradicting the decisions printed under it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from otel_route_shadow.cli import explain as explain_cli
from otel_route_shadow.cli import main
from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import CURRENT_FILE, LOCK_FILE, RoutingPolicyStore

_CONTEXT = Path(__file__).resolve().parent.parent / "examples" / "contexts" / "selected-managed-policy.json"


def test_explain_note_says_a_writer_holds_the_store_not_that_nothing_was_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    RoutingPolicyStore(tmp_path).save([RoutingPolicy.model_validate({"id": "kept"})])
    (tmp_path / CURRENT_FILE).unlink()  # as a first save leaves it between its two writes
    monkeypatch.setattr(explain_cli, "COMMAND_READ_WAIT_S", 0.05)  # the lock stays held throughout
    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: the command cannot get it
        code = main(["explain", "--context", str(_CONTEXT), "--store", str(tmp_path)])
    finally:
        os.close(fd)
    out, err = capsys.readouterr()
    assert code == 0
    assert '"reason": "snapshot-loading"' in out
    assert "holds the store's lock" in err
    assert "legacy compatibility" not in err
