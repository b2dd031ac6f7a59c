"""Commands over a store without ``current.json`` while another process holds its writers' lock.

A store whose ``current.json`` is missing while its history is not (a first save between its two
writes, or a save that died there) is only called ``current-missing`` under the writers' lock. When
another process holds that lock past the command's wait, the load is an unavailable snapshot marked
``loading``, and decisions hold with ``snapshot-loading``. ``policy export`` printed that placeholder as
``{"policies": []}`` with exit 0, an empty set an operator would take for the current one (and could save
back as a revision), and ``policy show`` and ``history`` said ``absent``; ``explain --store`` noted "no
policy snapshot saved; every decision is legacy compatibility" above decisions held.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from otel_route_shadow.cli import explain as explain_cli
from otel_route_shadow.cli import main
from otel_route_shadow.cli import policy as policy_cli
from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import CURRENT_FILE, LOCK_FILE, RoutingPolicyStore

_CONTEXT = Path(__file__).resolve().parent.parent / "examples" / "contexts" / "selected-managed-policy.json"


@contextmanager
def held_without_current(store: Path, command: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A saved store whose ``current.json`` is gone, its writers' lock held by another open file
    description throughout (``command``'s read wait cut short)."""
    RoutingPolicyStore(store).save([RoutingPolicy.model_validate({"id": "kept"})])
    (store / CURRENT_FILE).unlink()  # as a first save leaves it between its two writes
    monkeypatch.setattr(command, "COMMAND_READ_WAIT_S", 0.05)
    fd = os.open(store / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@pytest.mark.parametrize("argv", [["export"], ["show"], ["show", "--json"], ["history"], ["history", "--json"]])
def test_show_history_and_export_refuse_while_a_writer_holds_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # show and history said "state: absent" (with a note), exit 0, while export refused: a reader was
    # told as a fact that nothing is saved while a first save may be between its two writes.
    with held_without_current(tmp_path, policy_cli, monkeypatch):
        code = main(["policy", *argv, "--store", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2, out
    assert out == ""
    assert "holds the store's lock" in err and "nothing read" in err and err.count("\n") == 1


def test_explain_note_says_a_writer_holds_the_store_not_that_nothing_was_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with held_without_current(tmp_path, explain_cli, monkeypatch):
        code = main(["explain", "--context", str(_CONTEXT), "--store", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert '"reason": "snapshot-loading"' in out
    assert "holds the store's lock" in err
    assert "legacy compatibility" not in err
