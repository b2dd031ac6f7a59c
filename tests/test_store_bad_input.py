"""Every bad input named by issue 3 has a clear outcome: corrupt (never absent), never a traceback.

Each corrupter damages a store that held two good revisions. The outcome is always the same shape:
``load()`` says ``corrupt`` with a stable ``problem_kind``, reports revision 0 and an unavailable
empty snapshot (so ``explain`` holds), the problem text never quotes the file, and ``save`` refuses
with ``CorruptSnapshotError`` without writing a byte.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.core import EMPTY_SET_HASH, RoutingPolicy, canonical_json
from otel_route_shadow.store import (
    CURRENT_FILE,
    HISTORY_DIR,
    PROBLEM_KINDS,
    CorruptSnapshotError,
    PolicyFileError,
    RevisionNotFoundError,
    RoutingPolicyStore,
    StoreIOError,
    read_policy_file,
    revision_file_name,
)

SECRET = "sk-ant-api03-DO-NOT-ECHO"


def _policy(pid: str, **fields: Any) -> RoutingPolicy:
    return RoutingPolicy.model_validate({"id": pid, **fields})


def _good_sets() -> tuple[list[RoutingPolicy], list[RoutingPolicy]]:
    first = [_policy("reviewers", match={"roles": ["reviewer"]}, action={"provider_lock": "zai-harness"})]
    second = [
        *first,
        _policy("web", match={"repo_ids": ["acme/web"]}, action={"provider_lock": "anthropic-harness"}),
    ]
    return first, second


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    store = RoutingPolicyStore(root)
    first, second = _good_sets()
    store.save(first)
    store.save(second)
    return root


def _current(root: Path) -> Path:
    return root / CURRENT_FILE


def _document(root: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_current(root).read_text("utf-8"))
    return loaded


def _write(root: Path, document: Any) -> None:
    _current(root).write_text(json.dumps(document, indent=2), "utf-8")


def _rehash(document: dict[str, Any]) -> dict[str, Any]:
    """What a careful hand-editor does after reading docs/policy-store.md: sort, then hash."""
    document["policies"] = sorted(document["policies"], key=canonical_json)
    document["content_hash"] = hashlib.sha256(canonical_json(document["policies"])).hexdigest()
    return document


def _truncate(root: Path) -> None:
    data = _current(root).read_bytes()
    _current(root).write_bytes(data[: len(data) // 2])


def _not_json(root: Path) -> None:
    _current(root).write_text(f"policies: {SECRET}\n", "utf-8")


def _empty_file(root: Path) -> None:
    _current(root).write_bytes(b"")


def _not_utf8(root: Path) -> None:
    _current(root).write_bytes(b'{"format": "\xff\xfe"}')


def _duplicate_key(root: Path) -> None:
    text = _current(root).read_text("utf-8")
    _current(root).write_text(text.replace('"revision": 2', f'"revision": 2, "{SECRET}": 1, "{SECRET}": 2'))


def _nan(root: Path) -> None:
    text = _current(root).read_text("utf-8")
    _current(root).write_text(text.replace('"priority":0', '"priority":NaN', 1))


def _array(root: Path) -> None:
    _write(root, [SECRET])


def _missing_field(root: Path) -> None:
    document = _document(root)
    del document["content_hash"]
    _write(root, document)


def _extra_field(root: Path) -> None:
    document = _document(root)
    document[SECRET] = True
    _write(root, document)


def _wrong_format(root: Path) -> None:
    document = _document(root)
    document["format"] = SECRET
    _write(root, document)


def _revision_as_string(root: Path) -> None:
    document = _document(root)
    document["revision"] = "2"
    _write(root, document)


def _policy_with_unknown_field(root: Path) -> None:
    document = _document(root)
    document["policies"][0]["action"][SECRET] = SECRET
    _write(root, document)


def _policy_with_wrong_type(root: Path) -> None:
    document = _document(root)
    document["policies"][0]["priority"] = SECRET
    _write(root, _rehash(document))


def _hand_edit_keeping_the_hash(root: Path) -> None:
    text = _current(root).read_text("utf-8")
    _current(root).write_text(text.replace('"zai-harness"', '"anthropic-harness"', 1), "utf-8")


def _by_id(document: dict[str, Any], pid: str) -> dict[str, Any]:
    found: dict[str, Any] = next(p for p in document["policies"] if p["id"] == pid)
    return found


def _hand_edit_recomputing_the_hash(root: Path) -> None:
    document = _document(root)
    _by_id(document, "web")["action"]["provider_lock"] = "zai-harness"
    _write(root, _rehash(document))


def _hand_edit_of_the_history_copy(root: Path) -> None:
    path = root / HISTORY_DIR / revision_file_name(2)
    document = json.loads(path.read_text("utf-8"))
    _by_id(document, "web")["priority"] = 9
    path.write_text(json.dumps(_rehash(document)), "utf-8")


def _hand_edit_of_saved_at(root: Path) -> None:
    document = _document(root)
    document["saved_at"] = "2020-01-01T00:00:00Z"
    _write(root, document)


def _hand_edit_of_the_revision_number(root: Path) -> None:
    document = _document(root)
    document["revision"] = 1  # history/1 holds a different set
    _write(root, document)


def _non_canonical_recomputed(root: Path) -> None:
    # Drop a default-valued field and rehash the raw array: the hash matches the bytes, but it no
    # longer covers every field, so the stored form is refused.
    document = _document(root)
    del document["policies"][0]["enabled"]
    _write(root, _rehash(document))


def _unsorted_recomputed(root: Path) -> None:
    # The same set, hashed over an array in another order: the hash no longer is the set's hash.
    document = _document(root)
    document["policies"].reverse()
    document["content_hash"] = hashlib.sha256(canonical_json(document["policies"])).hexdigest()
    _write(root, document)


def _conflict_recomputed(root: Path) -> None:
    document = _document(root)
    clone = json.loads(json.dumps(_by_id(document, "web")))
    clone["id"] = "web-2"
    clone["action"]["provider_lock"] = "zai-harness"
    document["policies"] = sorted([*document["policies"], clone], key=canonical_json)
    _write(root, _rehash(document))


def _history_copy_deleted(root: Path) -> None:
    (root / HISTORY_DIR / revision_file_name(2)).unlink()


def _history_copy_garbage(root: Path) -> None:
    (root / HISTORY_DIR / revision_file_name(2)).write_text("{", "utf-8")


def _current_deleted(root: Path) -> None:
    _current(root).unlink()


def _symlink_to_a_valid_snapshot(root: Path) -> None:
    _current(root).unlink()
    _current(root).symlink_to(root / HISTORY_DIR / revision_file_name(2))


def _dangling_symlink(root: Path) -> None:
    _current(root).unlink()
    _current(root).symlink_to(root / "nowhere.json")


def _directory_in_place(root: Path) -> None:
    _current(root).unlink()
    _current(root).mkdir()


def _fifo_in_place(root: Path) -> None:
    _current(root).unlink()
    os.mkfifo(_current(root))


def _seventy_megabytes(root: Path) -> None:
    with _current(root).open("r+b") as handle:
        handle.truncate(70 * 1024 * 1024)  # sparse: the test stays fast, the store must not read it


CORRUPTERS: list[tuple[Callable[[Path], None], str]] = [
    (_truncate, "invalid-json"),
    (_not_json, "invalid-json"),
    (_empty_file, "invalid-json"),
    (_not_utf8, "not-utf8"),
    (_duplicate_key, "invalid-json"),
    (_nan, "invalid-json"),
    (_array, "wrong-schema"),
    (_missing_field, "wrong-schema"),
    (_extra_field, "wrong-schema"),
    (_wrong_format, "wrong-schema"),
    (_revision_as_string, "wrong-schema"),
    (_policy_with_unknown_field, "wrong-schema"),
    (_policy_with_wrong_type, "wrong-schema"),
    (_hand_edit_keeping_the_hash, "hash-mismatch"),
    (_hand_edit_recomputing_the_hash, "history-mismatch"),
    (_hand_edit_of_the_history_copy, "history-mismatch"),
    (_hand_edit_of_saved_at, "history-mismatch"),
    (_hand_edit_of_the_revision_number, "history-mismatch"),
    (_non_canonical_recomputed, "not-canonical"),
    (_unsorted_recomputed, "not-canonical"),
    # A load trusts a snapshot by its hash and does not re-validate the set (the save did): a
    # conflicting policy added by hand, hash recomputed, is caught as an edit against the history.
    (_conflict_recomputed, "history-mismatch"),
    (_history_copy_deleted, "history-missing"),
    (_history_copy_garbage, "history-corrupt"),
    (_current_deleted, "current-missing"),
    (_symlink_to_a_valid_snapshot, "not-a-regular-file"),
    (_dangling_symlink, "not-a-regular-file"),
    (_directory_in_place, "not-a-regular-file"),
    (_fifo_in_place, "not-a-regular-file"),
    (_seventy_megabytes, "too-large"),
]


def _tree(root: Path) -> dict[str, bytes | str]:
    """Everything under the store except the lock file, for 'nothing was written' assertions."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.name == ".lock":
            continue
        if path.is_symlink():
            found[rel] = f"-> {os.readlink(path)}"
        elif path.is_fifo():
            found[rel] = "fifo"
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[rel] = "dir"
    return found


@pytest.mark.parametrize(("corrupt", "kind"), CORRUPTERS, ids=[c.__name__.strip("_") for c, _ in CORRUPTERS])
def test_bad_input_loads_as_corrupt_and_blocks_saving(
    store_dir: Path, corrupt: Callable[[Path], None], kind: str
) -> None:
    corrupt(store_dir)
    store = RoutingPolicyStore(store_dir)
    load = store.load()
    assert load.state == "corrupt", load
    assert load.problem_kind == kind, load.problem
    assert kind in PROBLEM_KINDS
    assert (load.revision, load.content_hash, load.available, load.snapshot.policies) == (
        0,
        EMPTY_SET_HASH,
        False,
        (),
    )
    assert load.problem and "\n" not in load.problem
    assert SECRET not in load.problem
    assert load.history_mismatch == (kind == "history-mismatch")
    before = _tree(store_dir)
    with pytest.raises(CorruptSnapshotError) as caught:
        store.save(_good_sets()[0])
    assert caught.value.problem_kind == kind
    assert SECRET not in str(caught.value)
    assert _tree(store_dir) == before


def test_a_truncated_write_is_reported_with_its_position(store_dir: Path) -> None:
    _truncate(store_dir)
    problem = RoutingPolicyStore(store_dir).load().problem or ""
    assert problem.startswith("current.json: invalid JSON at line ")


def test_a_hand_edit_with_a_recomputed_hash_reports_the_history_mismatch(store_dir: Path) -> None:
    _hand_edit_recomputing_the_hash(store_dir)
    load = RoutingPolicyStore(store_dir).load()
    assert load.history_mismatch
    assert load.claimed_revision == 2
    assert "does not match the history's copy of its own revision 2" in (load.problem or "")


def test_a_hand_edit_of_the_revision_number_is_caught_by_history(store_dir: Path) -> None:
    document = _document(store_dir)
    document["revision"] = 3  # the hash does not cover the revision; history does
    _write(store_dir, document)
    load = RoutingPolicyStore(store_dir).load()
    assert load.problem_kind == "history-missing"
    assert load.claimed_revision == 3


def test_a_revision_missing_from_history_is_missing_everywhere(store_dir: Path) -> None:
    (store_dir / HISTORY_DIR / revision_file_name(1)).unlink()
    store = RoutingPolicyStore(store_dir)
    assert store.load().state == "ok"  # revision 2 is current and has its copy
    with pytest.raises(RevisionNotFoundError, match="revision 1 is not in the history"):
        store.revision(1)
    assert [(e.revision, e.state) for e in store.history()] == [(1, "missing"), (2, "ok")]


def test_a_store_path_that_is_a_file_is_corrupt_not_absent(tmp_path: Path) -> None:
    path = tmp_path / "store"
    path.write_text("not a directory", "utf-8")
    store = RoutingPolicyStore(path)
    load = store.load()
    assert (load.state, load.problem_kind, load.available) == ("corrupt", "store-not-a-directory", False)
    with pytest.raises(StoreIOError, match="not a directory"):
        store.save(_good_sets()[0])
    with pytest.raises(StoreIOError):
        store.repair()


def test_a_store_under_a_file_is_corrupt_not_absent(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", "utf-8")
    load = RoutingPolicyStore(tmp_path / "file" / "store").load()
    assert (load.state, load.problem_kind) == ("corrupt", "store-unreadable")


def test_an_unreadable_snapshot_is_corrupt(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, so chmod cannot stop a read: fail at the OS boundary instead.
    real_open = os.open

    def deny(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith(CURRENT_FILE):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    load = RoutingPolicyStore(store_dir).load()
    assert (load.state, load.problem_kind) == ("corrupt", "unreadable")
    assert "Permission denied" in (load.problem or "")


def test_an_unlistable_history_is_corrupt(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _current_deleted(store_dir)
    real_listdir = os.listdir

    def deny(path: Any = ".") -> list[str]:
        if str(path).endswith(HISTORY_DIR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", deny)
    load = RoutingPolicyStore(store_dir).load()
    assert (load.state, load.problem_kind) == ("corrupt", "history-unreadable")


def test_load_is_total_even_when_the_store_code_itself_fails(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_route_shadow.store import loading as store_module

    def boom(_: bytes) -> Any:
        raise TypeError("a bug")

    monkeypatch.setattr(store_module, "decode_snapshot", boom)
    load = RoutingPolicyStore(store_dir).load()
    assert (load.state, load.problem_kind, load.available) == ("corrupt", "internal-error", False)


def test_a_policy_file_with_duplicate_keys_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "policies.json"
    path.write_text('{"policies": [{"id": "a", "priority": 1, "priority": 2}]}', "utf-8")
    with pytest.raises(PolicyFileError) as caught:
        read_policy_file(path)
    assert str(caught.value) == f"{path}: duplicate key 'priority'"


def test_a_seventy_megabyte_policy_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as handle:
        handle.truncate(70 * 1024 * 1024)
    with pytest.raises(PolicyFileError, match="larger than"):
        read_policy_file(path)
