"""Several processes saving at once: one policy set per revision, no half-written file, ever."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.core import RoutingPolicy, canonical_json, policy_set_hash
from otel_route_shadow.store import CURRENT_FILE, HISTORY_DIR, RoutingPolicyStore, decode_snapshot

WRITERS = 6
SAVES_PER_WRITER = 4


def _policy_set(writer: int, save: int) -> list[RoutingPolicy]:
    return [
        RoutingPolicy.model_validate(
            {"id": f"w{writer}-s{save}", "match": {"principal_ids": [f"loop-{writer}"]}, "priority": save}
        )
    ]


def _writer(root: str, writer: int, go: Any, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    go.wait(30)
    store = RoutingPolicyStore(root)
    for save in range(SAVES_PER_WRITER):
        result = store.save(_policy_set(writer, save))
        out.put((result.revision, result.content_hash, policy_set_hash(_policy_set(writer, save))))


def _reader(root: str, stop: Any, ready: Any, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """Load until stopped; the first load is always made, and announced, before any writer starts."""
    store = RoutingPolicyStore(root)
    store.racy_window_ns = 0
    bad: list[str] = []
    loads = 0
    while True:
        load = store.load()
        loads += 1
        if load.state == "corrupt":
            bad.append(f"{load.problem_kind}: {load.problem}")
        if loads == 1:
            ready.release()
        if stop.is_set():
            break
    out.put((loads, bad))


@pytest.mark.timeout(60)
def test_concurrent_saves_issue_each_revision_once_and_every_file_verifies(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    reads: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    go = context.Event()
    stop = context.Event()
    ready = context.Semaphore(0)
    writers = [context.Process(target=_writer, args=(root, w, go, results)) for w in range(WRITERS)]
    readers = [context.Process(target=_reader, args=(root, stop, ready, reads)) for _ in range(2)]
    for process in writers + readers:
        process.start()
    # Writers start together, and only once every reader has loaded: no reader can miss the race.
    assert all(ready.acquire(timeout=15) for _ in readers)
    go.set()
    saved = [results.get(timeout=15) for _ in range(WRITERS * SAVES_PER_WRITER)]
    stop.set()
    read_reports = [reads.get(timeout=15) for _ in readers]
    for process in writers + readers:
        process.join(timeout=30)
        assert process.exitcode == 0

    # Every save got its own revision, the sequence has no gap and no repeat.
    revisions = sorted(revision for revision, _, _ in saved)
    assert revisions == list(range(1, WRITERS * SAVES_PER_WRITER + 1))
    # Each saver was told the hash of the set it saved.
    assert all(reported == expected for _, reported, expected in saved)
    # Each revision's history file holds exactly the set its saver saved, and verifies.
    by_revision = {revision: expected for revision, _, expected in saved}
    history = Path(root) / HISTORY_DIR
    files = sorted(history.iterdir())
    assert [f.name for f in files] == [f"{n:010d}.json" for n in revisions]
    for path in files:
        document = decode_snapshot(path.read_bytes())
        assert document.content_hash == by_revision[document.revision]
        raw = json.loads(path.read_text("utf-8"))
        assert hashlib.sha256(canonical_json(raw["policies"])).hexdigest() == document.content_hash
    # No temporary file was left behind, and the current snapshot is the last revision.
    assert not [p for p in Path(root).rglob(".tmp-*")]
    final = RoutingPolicyStore(root).load()
    assert (final.state, final.revision) == ("ok", WRITERS * SAVES_PER_WRITER)
    assert decode_snapshot((Path(root) / CURRENT_FILE).read_bytes()).revision == final.revision
    # Readers running alongside never saw a half-written or inconsistent store.
    assert all(loads > 0 for loads, _ in read_reports)
    assert [problem for _, bad in read_reports for problem in bad] == []
