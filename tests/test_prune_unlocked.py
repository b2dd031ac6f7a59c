"""``prune`` holds the chain's lock only to survey and to commit: writers append while it checks and
archives; a second prune waits on the prune lock instead of racing on the archives; work done for segments
or a ``pruned`` file that changed meanwhile is never committed, and the archives it wrote are removed.

The prune runs in this process and is held inside its unlocked phase by a hook on the functions it calls
there (reading a segment, gzipping it); the other party (a writer, a second prune, a process holding the
chain's lock) is another process. Timeouts are hang guards only: nothing here passes by being fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prune_support import KEY, SegmentedChain, segment_name, segmented_chain
from test_chain_lock import HANG_GUARD_S, lock_held_by_another_process
from test_prune import SIZES, snapshot

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.cli import main
from otel_route_shadow.logstore import LogStore, Pruned, pruning

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
PRUNE_65 = ("--key", str(KEY), "--min-index", "65")
APPEND = """
import sys
from otel_route_shadow.chain import DecisionChain
with DecisionChain(sys.argv[1], lock_timeout=float(sys.argv[2])) as log:
    log.append({"kind": "route-shadow", "appended-during-prune": int(sys.argv[3])})
"""


@pytest.fixture
def log(tmp_path: Path) -> SegmentedChain:
    return segmented_chain(tmp_path / "log", SIZES)


def prune(log: SegmentedChain, *extra: str) -> int:
    return main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "35", *extra])


def hooked(monkeypatch: pytest.MonkeyPatch, name: str, hook: Callable[[], None]) -> list[int]:
    """Call ``hook`` each time the prune calls ``pruning.<name>`` (before it runs); the calls, counted."""
    original = getattr(pruning, name)
    calls: list[int] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(calls))
        hook()
        return original(*args, **kwargs)

    monkeypatch.setattr(pruning, name, wrapped)
    return calls


def append_from_another_process(chain: Path, n: int) -> None:
    """One record appended by another process's ``DecisionChain``, which gives up (exit 1) when the
    chain's lock stays held for the hang guard."""
    done = subprocess.run(
        [sys.executable, "-c", APPEND, str(chain), str(HANG_GUARD_S), str(n)],
        env=ENV,
        capture_output=True,
        timeout=2 * HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr.decode()


def test_appends_are_not_blocked_while_prune_checks_and_archives(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prune checked and gzipped the segments under the chain's lock: every append (every spawn of the
    host) waited for the whole check and gzip of the segments, seconds at 256 MiB segments."""
    appended: list[int] = []

    def append() -> None:
        append_from_another_process(log.chain, len(appended))
        appended.append(len(appended))

    checks = hooked(monkeypatch, "read_segment", append)
    gzips = hooked(monkeypatch, "gzip_blocks", append)
    assert prune(log) == 0
    assert len(checks) == 4 and len(gzips) == 2  # two segments checked, archived and read back
    during = [p["appended-during-prune"] for _, p in iter_payloads(log.chain) if "appended-during-prune" in p]
    assert during == list(range(6))
    record = LogStore(log.chain).read_pruned()
    assert record is not None and record.min_index == 35
    assert sorted(os.listdir(log.segments)) == [segment_name(35), segment_name(65)]
    assert main(["verify", str(log.chain), "--key", str(KEY)]) == 0


def test_a_second_prune_waits_for_the_first_and_never_touches_its_archives(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[tuple[int, str, bool]] = []

    def second_prune() -> None:
        if outcomes:
            return
        before = snapshot(log.chain.parent)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "otel_route_shadow.cli",
                "prune",
                str(log.chain),
                *PRUNE_65,
                "--wait",
                "0",
            ],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=2 * HANG_GUARD_S,
        )
        outcomes.append((done.returncode, done.stderr, snapshot(log.chain.parent) == before))

    hooked(monkeypatch, "gzip_blocks", second_prune)
    assert prune(log) == 0
    [(code, err, unchanged)] = outcomes
    assert code == 7 and "another prune of this chain, or a command reading it, is running" in err and unchanged
    record = LogStore(log.chain).read_pruned()
    assert record is not None and record.min_index == 35
    assert sorted(os.listdir(log.archive)) == [
        "0000000000000000.jsonl.gz",
        "0000000000000000.jsonl.proof",
        "0000000000000020.jsonl.gz",
        "0000000000000020.jsonl.proof",
        "checkpoints.000001.jsonl.gz",
    ]


def _replace_with_a_copy(path: Path) -> None:
    """The same bytes in another file (another inode) at ``path``."""
    shutil.copyfile(path, str(path) + ".copy")
    os.replace(str(path) + ".copy", path)


def _another_prune_committed(log: SegmentedChain) -> None:
    LogStore(log.chain).save_pruned(Pruned(min_index=0, time=1, command="another prune", segments=[]))


@pytest.mark.parametrize(
    ("change", "next_prune"),
    [
        pytest.param(lambda log: _replace_with_a_copy(log.segment(0)), 0, id="a segment replaced"),
        pytest.param(lambda log: log.segment(0).unlink(), 1, id="a segment removed"),  # now missing
        pytest.param(_another_prune_committed, 0, id="pruned written"),
    ],
)
def test_work_done_for_files_that_changed_meanwhile_is_not_committed_and_its_archives_go(
    log: SegmentedChain,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[SegmentedChain], None],
    next_prune: int,
) -> None:
    def change_after_the_first_archive() -> None:
        if len(gzips) == 2:
            change(log)

    gzips = hooked(monkeypatch, "gzip_blocks", change_after_the_first_archive)
    assert prune(log) == 7
    assert "changed while prune" in capsys.readouterr().err
    assert len(gzips) == 2  # both archives were written, then removed
    left = [name for name in snapshot(log.chain.parent) if name.startswith(log.archive.name)]
    if log.segment(0).exists():
        assert left == []
    else:  # the archive of a segment removed meanwhile is its records' only copy: it stays
        assert left == [f"{log.archive.name}/{segment_name(0)}.gz", f"{log.archive.name}/{segment_name(0)}.proof"]
    found = LogStore(log.chain).read_pruned()
    assert found is None or found.min_index == 0
    assert prune(log) == next_prune  # nothing was left that the next prune trips over


def test_a_prune_that_cannot_take_the_chains_lock_back_removes_its_archives_and_changes_nothing(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(log.chain.parent)
    held: list[bool] = []
    with contextlib.ExitStack() as stack:

        def hold_the_chain_lock() -> None:  # from the first archive on, until the commit wants it back
            if not held:
                stack.enter_context(lock_held_by_another_process(log.chain))
                held.append(True)

        hooked(monkeypatch, "gzip_blocks", hold_the_chain_lock)
        assert prune(log, "--wait", "0") == 7
    assert "another process holds the chain's lock" in capsys.readouterr().err
    assert snapshot(log.chain.parent) == before
    assert prune(log) == 0


def test_a_chain_cut_for_the_first_time_as_prune_begins_is_left_to_the_next_prune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chain never cut has no segments folder, so no prune lock: a cut that makes the folder before
    the prune takes the chain's lock must not leave the prune working without it."""
    from otel_route_shadow.chain import DecisionChain

    chain = tmp_path / "plain.jsonl"
    with DecisionChain(chain) as writer:
        writer.append({"kind": "route-shadow", "n": 0})
    locked = pruning._chain_lock

    @contextlib.contextmanager
    def cut_first(chain_path: str, wait: float) -> Iterator[int]:
        os.makedirs(chain_path + ".segments", exist_ok=True)  # what a cut makes first
        with locked(chain_path, wait) as fd:
            yield fd

    monkeypatch.setattr(pruning, "_chain_lock", cut_first)
    assert main(["prune", str(chain), "--key", str(KEY), "--keep-records", "0"]) == 7
    assert "cut for the first time as prune began" in capsys.readouterr().err
    monkeypatch.setattr(pruning, "_chain_lock", locked)
    assert main(["prune", str(chain), "--key", str(KEY), "--keep-records", "0"]) == 0


def test_an_undone_prune_keeps_the_archives_of_earlier_prunes(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Undoing removes what this prune wrote, at or above the minimum index it began from, even when the
    ``pruned`` file on disk (untrusted) now names a lower one."""
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "20"]) == 0
    hooked(monkeypatch, "gzip_blocks", lambda: _another_prune_committed(log))
    assert prune(log) == 7
    assert sorted(os.listdir(log.archive)) == [
        "0000000000000000.jsonl.gz",
        "0000000000000000.jsonl.proof",
        "checkpoints.000001.jsonl.gz",  # the first prune's
    ]


def _lock_is_free(path: str) -> bool:
    """Whether another open file description can take ``path``'s ``flock`` now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@pytest.mark.parametrize("lock", ["chain", "prune"])
def test_a_child_forked_while_a_prune_holds_a_lock_does_not_keep_holding_it(
    log: SegmentedChain, lock: str
) -> None:
    """The locks were given back by closing the descriptor alone; a child forked meanwhile (the host's
    retention prunes in its checkpointing thread) shares the lock through its copy, so the chain's lock
    stayed held for the child's life and every writer's append timed out into its backlog."""
    path = str(log.chain)
    held = pruning._chain_lock(path, 1.0) if lock == "chain" else pruning._prune_lock(path, 1.0)
    locked = path if lock == "chain" else str(pruning.segments_dir(path))
    read, write = os.pipe()
    with held:
        pid = os.fork()
        if pid == 0:  # the child outlives the parent's hold, as a forked worker does
            os.close(write)
            signal.alarm(int(HANG_GUARD_S))
            os.read(read, 1)
            os._exit(0)
    os.close(read)
    try:
        assert _lock_is_free(locked)
    finally:
        os.write(write, b"x")
        os.close(write)
        os.waitpid(pid, 0)
