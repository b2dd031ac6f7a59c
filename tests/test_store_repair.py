"""Repair is an explicit operator act: evidence moved aside, never deleted, and the revision sequence
continues from the highest number ever issued, so no revision is cited for two policy sets."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from otel_route_shadow.core import RoutingPolicy, policy_set_hash
from otel_route_shadow.store import (
    CURRENT_FILE,
    HISTORY_DIR,
    QUARANTINE_DIR,
    REPAIR_MARKER,
    CorruptSnapshotError,
    RoutingPolicyStore,
    revision_file_name,
)


def _policies(*ids: str) -> list[RoutingPolicy]:
    return [RoutingPolicy.model_validate({"id": pid, "match": {"principal_ids": [pid]}}) for pid in ids]


@pytest.fixture
def store(tmp_path: Path) -> RoutingPolicyStore:
    store = RoutingPolicyStore(tmp_path / "store")
    store.save(_policies("a"))
    store.save(_policies("a", "b"))
    return store


def _hand_edit(store: RoutingPolicyStore) -> bytes:
    path = store.root / CURRENT_FILE
    edited = path.read_text("utf-8").replace('"b"', '"c"')
    path.write_text(edited, "utf-8")
    return edited.encode("utf-8")


def test_repair_of_a_healthy_or_absent_store_does_nothing(store: RoutingPolicyStore, tmp_path: Path) -> None:
    before = sorted(p.name for p in store.root.iterdir())
    result = store.repair()
    assert (result.repaired, result.state_before, result.next_revision) == (False, "ok", 3)
    assert sorted(p.name for p in store.root.iterdir()) == before
    absent = RoutingPolicyStore(tmp_path / "never")
    assert absent.repair().repaired is False
    assert not (tmp_path / "never").exists()


def test_hand_edit_then_repair_then_save_continues_the_sequence(store: RoutingPolicyStore) -> None:
    edited = _hand_edit(store)
    assert store.load().state == "corrupt"
    with pytest.raises(CorruptSnapshotError):
        store.save(_policies("z"))

    result = store.repair()
    assert (result.repaired, result.problem_kind, result.moved) == (True, "hash-mismatch", (CURRENT_FILE,))
    assert (result.next_revision, result.reinstatable) == (3, 2)
    assert result.quarantine is not None and result.quarantine.parent == store.root / QUARANTINE_DIR
    # The evidence is kept byte for byte, with its digest and the problem, never deleted.
    assert (result.quarantine / CURRENT_FILE).read_bytes() == edited
    evidence = json.loads((result.quarantine / "evidence.json").read_text("utf-8"))
    assert evidence["problem_kind"] == "hash-mismatch"
    assert evidence["files"][0]["sha256"] == hashlib.sha256(edited).hexdigest()
    assert evidence["high_water"] == 2
    # Until the next save: absent, explicitly, with a note naming the repair.
    load = store.load()
    assert (load.state, load.revision, load.available) == ("absent", 0, True)
    assert "repaired at" in (load.note or "") and "revision 3" in (load.note or "")
    # The next save continues from the history and clears the marker.
    saved = store.save(_policies("z"))
    assert saved.revision == 3
    assert not (store.root / REPAIR_MARKER).exists()
    assert store.load().revision == 3
    # History is untouched: revision 2 still replays as it was saved.
    assert store.revision(2).content_hash == policy_set_hash(_policies("a", "b"))


def test_repair_keeps_the_revision_of_a_current_file_whose_history_copy_is_gone(
    store: RoutingPolicyStore,
) -> None:
    (store.root / HISTORY_DIR / revision_file_name(2)).unlink()
    assert store.load().problem_kind == "history-missing"
    result = store.repair()
    # Decisions may cite revision 2; the next save must not issue it again.
    assert result.next_revision == 3
    assert store.save(_policies("q")).revision == 3


def test_the_high_water_mark_survives_losing_the_marker(store: RoutingPolicyStore) -> None:
    (store.root / HISTORY_DIR / revision_file_name(2)).unlink()
    store.repair()
    (store.root / REPAIR_MARKER).unlink()
    (store.root / HISTORY_DIR / revision_file_name(1)).unlink()
    # No current, no history, no marker: absent, but the quarantine name still carries revision 2.
    assert store.load().state == "absent"
    assert store.save(_policies("q")).revision == 3


def test_repair_of_a_missing_current_file_moves_nothing_and_records_it(store: RoutingPolicyStore) -> None:
    (store.root / CURRENT_FILE).unlink()
    result = store.repair()
    assert (result.repaired, result.problem_kind, result.moved) == (True, "current-missing", ())
    assert result.quarantine is not None and (result.quarantine / "evidence.json").exists()
    assert store.load().state == "absent"
    assert store.save(_policies("a")).revision == 3


def test_repair_moves_a_symlink_itself_and_records_its_target(store: RoutingPolicyStore) -> None:
    target = store.root / HISTORY_DIR / revision_file_name(1)
    target_bytes = target.read_bytes()
    (store.root / CURRENT_FILE).unlink()
    (store.root / CURRENT_FILE).symlink_to(target)
    result = store.repair()
    assert result.quarantine is not None
    moved = result.quarantine / CURRENT_FILE
    assert moved.is_symlink()
    assert target.read_bytes() == target_bytes
    evidence = json.loads((result.quarantine / "evidence.json").read_text("utf-8"))
    assert evidence["files"][0]["type"] == "symlink"
    assert evidence["files"][0]["symlink_target"] == os.fspath(target)


def test_a_corrupt_repair_marker_is_corrupt_and_repairable(store: RoutingPolicyStore) -> None:
    _hand_edit(store)
    store.repair()
    (store.root / REPAIR_MARKER).write_text("{oops", "utf-8")
    load = store.load()
    assert (load.state, load.problem_kind) == ("corrupt", "marker-corrupt")
    result = store.repair()
    assert result.moved == (REPAIR_MARKER,)
    assert store.load().state == "absent"
    assert store.save(_policies("m")).revision == 3


def test_a_second_repair_is_a_no_op(store: RoutingPolicyStore) -> None:
    _hand_edit(store)
    assert store.repair().repaired
    again = store.repair()
    assert (again.repaired, again.state_before, again.next_revision) == (False, "absent", 3)
    assert len(list((store.root / QUARANTINE_DIR).iterdir())) == 1


def test_repair_of_a_seventy_megabyte_file_records_its_digest(store: RoutingPolicyStore) -> None:
    with (store.root / CURRENT_FILE).open("r+b") as handle:
        handle.truncate(70 * 1024 * 1024)
    result = store.repair()
    assert result.problem_kind == "too-large"
    assert result.quarantine is not None
    evidence = json.loads((result.quarantine / "evidence.json").read_text("utf-8"))
    assert evidence["files"][0]["size"] == 70 * 1024 * 1024
    assert len(evidence["files"][0]["sha256"]) == 64
