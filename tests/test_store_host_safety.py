"""The store leaves the host's process alone: no collector settings touched, no FIFO waited on, no
temporary file left behind by a killed writer, no JSON nested past its bound."""

from __future__ import annotations

import ast
import gc
import os
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow import files
from otel_route_shadow.core import EncodedPolicies, PolicyIndex, RoutingPolicy
from otel_route_shadow.store import CURRENT_FILE, HISTORY_DIR, REPAIR_MARKER, RoutingPolicyStore

STORE_PACKAGE = Path(__file__).parent.parent / "otel_route_shadow" / "store"
PREFETCH = Path(__file__).parent.parent / "otel_route_shadow" / "instrumentation" / "prefetch.py"
_COLLECTOR_SETTINGS = ("disable", "enable", "freeze", "unfreeze", "set_threshold", "collect")


def _policies(n: int) -> list[RoutingPolicy]:
    return [
        RoutingPolicy.model_validate(
            {"id": f"p{i}", "match": {"repo_ids": [f"acme/r{i}"]}, "action": {"provider_lock": "zai-harness"}}
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("path", [*sorted(STORE_PACKAGE.glob("*.py")), PREFETCH], ids=lambda p: p.name)
def test_collector_pause_gone_the_store_never_names_the_garbage_collector(path: Path) -> None:
    """Regression: a save paused the process-wide garbage collector (``store/collector.py``)."""
    tree = ast.parse(path.read_text("utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "gc" not in imported


def test_collector_pause_gone_save_and_load_never_change_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a save called gc.disable()/gc.enable() around its bulk build."""
    calls: list[str] = []
    for name in _COLLECTOR_SETTINGS:
        real = getattr(gc, name)

        def recording(*args: Any, _name: str = name, _real: Any = real) -> Any:
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(gc, name, recording)
    store = RoutingPolicyStore(tmp_path / "store")
    store.save(_policies(300))
    store.save(_policies(301))
    assert store.load().revision == 2
    assert store.revision(1).content_hash == store.history()[0].content_hash
    assert calls == []


def test_a_fifo_in_place_of_current_json_is_refused_without_waiting(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    store.save(_policies(2))
    current = tmp_path / "store" / CURRENT_FILE
    current.unlink()
    os.mkfifo(current)
    load = store.load()  # opened O_NONBLOCK: a FIFO with no writer cannot hang the read
    assert (load.state, load.problem_kind) == ("corrupt", "not-a-regular-file")


def test_a_fifo_as_the_repair_marker_is_corrupt_not_a_hang(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    os.mkfifo(root / REPAIR_MARKER)
    load = RoutingPolicyStore(root).load()
    assert (load.state, load.problem_kind) == ("corrupt", "marker-corrupt")


def test_a_deeply_nested_marker_is_corrupt_not_a_recursion_error(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / REPAIR_MARKER).write_text("[" * 50_000 + "]" * 50_000, "utf-8")
    load = RoutingPolicyStore(root).load()
    assert (load.state, load.problem_kind) == ("corrupt", "marker-corrupt")


def test_a_deeply_nested_snapshot_is_corrupt_not_a_recursion_error(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    store.save(_policies(1))
    (tmp_path / "store" / CURRENT_FILE).write_text(
        '{"policies": ' + "[" * 50_000 + "]" * 50_000 + "}", "utf-8"
    )
    load = store.load()
    assert (load.state, load.problem_kind) == ("corrupt", "invalid-json")


def test_temporaries_left_by_a_killed_writer_are_removed_when_the_next_writer_starts(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    store.save(_policies(1))
    dead = 2**22 + 1  # above the default pid_max: never a live process
    left = [
        tmp_path / "store" / f".{CURRENT_FILE}{files.TEMPORARY_MARK}{dead}-0a1b2c3d",
        tmp_path / "store" / HISTORY_DIR / f".0000000002.json{files.TEMPORARY_MARK}{dead}-0a1b2c3d",
    ]
    for path in left:
        path.write_bytes(b"half a snapshot")
    store.save(_policies(2))
    assert [path.exists() for path in left] == [False, False]
    assert store.load().revision == 2


def test_save_stalling_a_seam_a_loaded_snapshot_and_its_index_give_the_collector_nothing_per_policy(
    tmp_path: Path,
) -> None:
    """Regression: after a save, the host's read of a 50,000-policy snapshot stalled a seam call
    231 ms. The set was held as models, about eight tracked objects per policy, and every full
    collection of the host (the read triggered a dozen) traversed them all. Counted, not timed."""
    n = 2_000
    root = tmp_path / "store"
    RoutingPolicyStore(root).save(_policies(n))
    gc.collect()
    before = len(gc.get_objects())
    load = RoutingPolicyStore(root).load()
    index = PolicyIndex(load.snapshot.policies)
    gc.collect()
    added = len(gc.get_objects()) - before
    assert isinstance(load.snapshot.policies, EncodedPolicies)
    assert len(index.ordered) == n
    assert added < n // 20, f"{added} tracked objects for {n} policies"
