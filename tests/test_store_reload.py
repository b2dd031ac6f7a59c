"""Cheap reload: an unchanged store costs a few stats, and every change is still noticed.

Most tests set ``racy_window_ns = 0`` so a verdict is cacheable the moment it is computed (otherwise
a file written less than a second ago is re-read on purpose; that rule has its own tests below).
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.core import RoutingPolicy, policy_set_hash
from otel_route_shadow.store import (
    CURRENT_FILE,
    HISTORY_DIR,
    RevisionCorruptError,
    RoutingPolicyStore,
    revision_file_name,
)
from otel_route_shadow.store import loading as store_module


def _policy(pid: str, lock: str = "zai-harness") -> RoutingPolicy:
    return RoutingPolicy.model_validate(
        {"id": pid, "match": {"principal_ids": [pid]}, "action": {"provider_lock": lock}}
    )


def _store(root: Path, window_ns: int = 0) -> RoutingPolicyStore:
    store = RoutingPolicyStore(root)
    store.racy_window_ns = window_ns
    return store


def _same_size_edit(path: Path, old: str, new: str) -> None:
    """Rewrite in place with equal length, then put the old mtime back (what a careful hand does)."""
    assert len(old) == len(new)
    before = path.stat()
    text = path.read_text("utf-8")
    assert old in text
    with path.open("r+", encoding="utf-8") as handle:
        handle.write(text.replace(old, new, 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )


def test_an_unchanged_store_is_not_reread(tmp_path: Path) -> None:
    writer = _store(tmp_path)
    writer.save([_policy("a")])
    reader = _store(tmp_path)
    first = reader.load()
    for _ in range(200):
        assert reader.load() is first
    assert reader.full_loads == 1


def test_an_absent_store_is_cached_too_and_notices_the_first_save(tmp_path: Path) -> None:
    reader = _store(tmp_path / "store")
    assert reader.load().state == "absent"
    assert reader.load().state == "absent"
    assert reader.full_loads == 1
    _store(tmp_path / "store").save([_policy("a")])
    assert (reader.load().state, reader.load().revision) == ("ok", 1)


def test_a_save_by_another_store_object_is_noticed(tmp_path: Path) -> None:
    reader, writer = _store(tmp_path), _store(tmp_path)
    writer.save([_policy("a")])
    assert reader.load().revision == 1
    writer.save([_policy("a"), _policy("b")])
    load = reader.load()
    assert (load.revision, load.content_hash) == (2, policy_set_hash([_policy("a"), _policy("b")]))


def test_a_same_size_same_mtime_hand_edit_is_noticed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([_policy("a", "zai-harness")])
    assert store.load().state == "ok"
    assert store.load().state == "ok"
    assert store.full_loads == 1  # the cache was live before the edit
    # "zai-harness" -> "xai-harness": same length, hash no longer matches.
    _same_size_edit(tmp_path / CURRENT_FILE, '"zai-harness"', '"xai-harness"')
    load = store.load()
    assert (load.state, load.problem_kind) == ("corrupt", "hash-mismatch")
    assert store.full_loads == 2


def test_a_same_size_same_mtime_edit_of_the_history_copy_is_noticed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([_policy("a", "zai-harness")])
    assert store.load().state == "ok"
    _same_size_edit(tmp_path / HISTORY_DIR / revision_file_name(1), '"saved_at": "2', '"saved_at": "1')
    load = store.load()
    assert (load.state, load.problem_kind) == ("corrupt", "history-mismatch")


def test_deleting_the_current_file_is_noticed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([_policy("a")])
    assert store.load().state == "ok"
    (tmp_path / CURRENT_FILE).unlink()
    assert store.load().problem_kind == "current-missing"


def test_a_repair_by_another_process_is_noticed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([_policy("a")])
    (tmp_path / CURRENT_FILE).write_text("{", "utf-8")
    assert store.load().state == "corrupt"
    assert RoutingPolicyStore(tmp_path).repair().repaired
    load = store.load()
    assert load.state == "absent"
    assert "repaired at" in (load.note or "")


_STAT_KEY = store_module.stat_key


def _coarse(path: str, *, follow: bool = False) -> store_module.StatKey:
    """A stat key as a file system with one-second timestamps would report it."""
    key = _STAT_KEY(path, follow=follow)
    if key is None or len(key) != 6:
        return key
    dev, ino, mode, size, mtime, ctime = key  # type: ignore[misc]
    second = 1_000_000_000
    return (dev, ino, mode, size, mtime // second * second, ctime // second * second)


def test_on_coarse_timestamps_a_fresh_verdict_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With one-second timestamps a same-size edit inside the same second leaves the whole signature
    # unchanged; only the racy-window rule stands between that edit and a stale cached verdict.
    monkeypatch.setattr(store_module, "stat_key", _coarse)
    store = _store(tmp_path, window_ns=1_000_000_000)
    store.save([_policy("a", "zai-harness")])
    assert store.load().state == "ok"
    _same_size_edit(tmp_path / CURRENT_FILE, '"zai-harness"', '"xai-harness"')
    assert store.load().state == "corrupt"


def test_a_verdict_is_cached_once_its_files_are_older_than_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, window_ns=1_000_000_000)
    store.save([_policy("a")])
    store.load()
    store.load()
    assert store.full_loads == 2  # written just now: re-read every time
    real_now = store_module._now_ns
    monkeypatch.setattr(store_module, "_now_ns", lambda: real_now() + 2_000_000_000)
    store.load()
    store.load()
    store.load()
    assert store.full_loads == 3  # settled: read once more, then served from the cache


def test_a_transient_read_failure_is_retried_on_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.save([_policy("a")])
    real_open = os.open
    failing = {"on": True}

    def flaky(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if failing["on"] and str(path).endswith(CURRENT_FILE):
            raise OSError(errno.EMFILE, "Too many open files", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", flaky)
    assert store.load().state == "corrupt"  # hold for this spawn...
    failing["on"] = False
    assert store.load().state == "ok"  # ...but do not cache a verdict about nothing


def test_revision_lookups_notice_edits(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([_policy("a")])
    first = store.revision(1)
    assert store.revision(1) == first
    (tmp_path / HISTORY_DIR / revision_file_name(1)).write_text("{", "utf-8")
    with pytest.raises(RevisionCorruptError):
        store.revision(1)


def test_concurrent_loads_while_saving_are_consistent(tmp_path: Path) -> None:
    store = _store(tmp_path)
    sets = [[_policy(f"p{i}")] for i in range(12)]
    expected = {i + 1: policy_set_hash(policies) for i, policies in enumerate(sets)}
    expected[0] = policy_set_hash([])
    seen: list[tuple[str, int, str]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                load = store.load()
                seen.append((load.state, load.revision, load.content_hash))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(6)]
    for thread in threads:
        thread.start()
    writer = _store(tmp_path)
    for policies in sets:
        writer.save(policies)
    done.set()
    for thread in threads:
        thread.join()
    assert not errors
    assert seen
    for state, revision, content_hash in seen:
        assert state in ("ok", "absent"), (state, revision)
        assert expected[revision] == content_hash
    assert store.load().revision == 12


def test_an_unchanged_ok_store_costs_two_stats_per_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.save([_policy("a")])
    store.load()
    seen: list[str] = []
    real = store_module.stat_key

    def counting(path: str, *, follow: bool = False) -> store_module.StatKey:
        seen.append(os.path.relpath(path, tmp_path))
        return real(path, follow=follow)

    monkeypatch.setattr(store_module, "stat_key", counting)
    store.load()
    assert seen == [CURRENT_FILE, f"{HISTORY_DIR}/{revision_file_name(1)}"]


def test_a_store_directory_swapped_for_another_is_noticed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = _store(root)
    store.save([_policy("a")])
    assert store.load().revision == 1
    other = _store(tmp_path / "other")
    other.save([_policy("x")])
    other.save([_policy("x"), _policy("y")])
    root.rename(tmp_path / "old")
    (tmp_path / "other").rename(root)
    load = store.load()
    assert (load.state, load.revision) == ("ok", 2)


def test_a_store_directory_replaced_by_a_file_is_noticed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = _store(root)
    store.save([_policy("a")])
    assert store.load().state == "ok"
    root.rename(tmp_path / "old")
    root.write_text("not a directory", "utf-8")
    load = store.load()
    assert (load.state, load.problem_kind) == ("corrupt", "store-not-a-directory")


def test_a_history_directory_swapped_under_an_ok_store_is_noticed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save([_policy("a")])
    assert store.load().state == "ok"
    (tmp_path / HISTORY_DIR).rename(tmp_path / "old-history")
    (tmp_path / HISTORY_DIR).mkdir()
    load = store.load()
    assert (load.state, load.problem_kind) == ("corrupt", "history-missing")


def test_a_reread_of_the_same_bytes_does_not_decode_the_snapshot_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every re-read inside the racy window after a save decoded the whole snapshot again (in a host's
    # background thread: hundreds of ms and full garbage collections at 8,000 policies). Equal bytes
    # now reuse the document decoded last; any other bytes are decoded and judged as before.
    decoded: list[int] = []
    real = store_module.decode_snapshot

    def counting(data: bytes) -> Any:
        decoded.append(len(data))
        return real(data)

    monkeypatch.setattr(store_module, "decode_snapshot", counting)
    store = RoutingPolicyStore(tmp_path / "store")
    store.racy_window_ns = 10**18  # never cached: every load reads the files again
    store.save([RoutingPolicy.model_validate({"id": "a", "action": {"provider_lock": "zai-harness"}})])
    first, second = store.load(), store.load()
    assert store.full_loads == 2 and len(decoded) == 1
    assert first.state == second.state == "ok" and first.snapshot == second.snapshot
    current = tmp_path / "store" / "current.json"
    data = bytearray(current.read_bytes())
    data[data.index(b"zai-harness")] ^= 0x20  # the same size, one letter's case
    current.write_bytes(bytes(data))
    assert store.load().state == "corrupt" and len(decoded) == 2
