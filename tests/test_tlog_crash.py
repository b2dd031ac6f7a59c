"""Crash safety of the log's directory (issue 26 item 3): a writer killed at any durable write of a
checkpoint, or a power cut that leaves a file empty, leaves a log the next start repairs alone.

The kill is simulated in-process, deterministically: the n-th durable write (``files.write_atomic``
of a tile, ``state`` or ``checkpoint``; the append to ``checkpoints``) writes half its bytes, as a
process killed in the middle would leave them, and raises an exception no handler catches; the
``Checkpointer`` is then dropped like the dead process. One test kills a real process with SIGKILL.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tlog_support import ORIGIN, append, lines, log_dir, notes, root_from_leaf_hashes

from otel_route_shadow import files
from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, LogStore
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.tlog import Signer, TileReader, authenticate, leaf_hash, tile_path, tree_hash

SIGNER = Signer.generate(ORIGIN)


class _Killed(BaseException):
    """The process died here."""


class _Killer:
    """Counts durable writes; the ``at``-th one is left half done and kills the caller."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.count = 0

    def _due(self) -> bool:
        self.count += 1
        return self.count == self.at

    def write_atomic(self, path: str | os.PathLike[str], data: bytes, **kwargs: Any) -> None:
        if self._due():
            directory, name = os.path.split(os.fspath(path))
            with open(os.path.join(directory, f".{name}{files.TEMPORARY_MARK}{os.getpid()}-dead"), "wb") as h:
                h.write(data[: len(data) // 2])
            raise _Killed
        files.write_atomic(path, data, **kwargs)

    def write_all(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        if self._due():
            os.write(fd, bytes(data)[: len(data) // 2])
            raise _Killed
        files.write_all(fd, data)


def _install(monkeypatch: pytest.MonkeyPatch, killer: _Killer) -> None:
    monkeypatch.setattr("otel_route_shadow.logstore.store.write_atomic", killer.write_atomic)
    monkeypatch.setattr("otel_route_shadow.logstore.store.write_all", killer.write_all)


def _log(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    chain = tmp_path / "chain.jsonl"
    append(chain, 600, Checkpointer(str(chain), ORIGIN, SIGNER), every=200)
    append(chain, 150, start=600)
    return chain


def _assert_repaired(chain: Path) -> None:
    """No refusal, every checkpoint signed and consistent with the chain, every published checkpoint's
    tiles readable, the tile store intact, no temporary file left."""
    directory = log_dir(chain)
    assert not (directory / "refusals").exists()
    hashes = [leaf_hash(line) for line in lines(chain)]
    found = notes(chain)
    assert found
    for note in found:
        checkpoint = authenticate(note, [SIGNER.verifier()]).checkpoint
        assert checkpoint.root == root_from_leaf_hashes(hashes[: checkpoint.size])
        reader = TileReader(LogStore(str(chain)), checkpoint.size, checkpoint.root)
        assert tree_hash(reader, checkpoint.size) == checkpoint.root
    report = verify_against_checkpoints(str(chain), found, [str(SIGNER.verifier())])
    assert report.ok and report.tiles.ok, report
    leftovers = [p for p in directory.rglob("*") if files.TEMPORARY_MARK in p.name]
    assert leftovers == []


def _writes_in_one_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    chain = _log(tmp_path / "count")
    counter = _Killer(None)
    _install(monkeypatch, counter)
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    monkeypatch.undo()
    return counter.count


@pytest.mark.parametrize("power_cut", [None, "state", "checkpoint", "checkpoints", "edge-tile"])
def test_a_writer_killed_at_any_durable_write_leaves_a_log_the_next_start_repairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, power_cut: str | None
) -> None:
    total = _writes_in_one_checkpoint(tmp_path, monkeypatch)
    assert total >= 4  # a tile, state, the checkpoints line, checkpoint
    for at in range(1, total + 1):
        chain = _log(tmp_path / f"at-{at}")
        _install(monkeypatch, _Killer(at))
        with pytest.raises(_Killed):
            Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint()
        monkeypatch.undo()
        if power_cut == "edge-tile":
            os.truncate(log_dir(chain) / tile_path(0, 2, 88), 0)  # a tile of the published 600
        elif power_cut is not None:
            os.truncate(log_dir(chain) / power_cut, 0)
        restarted = Checkpointer(str(chain), ORIGIN, SIGNER)
        for _ in range(3):  # a rebuild may take more than one bounded call
            restarted.checkpoint()
        append(chain, 20, restarted, every=20, start=750)
        assert restarted.last is not None and restarted.last.size == 770, (at, power_cut)
        _assert_repaired(chain)


def _host(chain: str, key: str) -> None:
    checkpointer = Checkpointer(chain, ORIGIN, Signer.parse(key))
    with DecisionChain(chain) as log:
        n = 0
        while True:
            log.append({"kind": "route-shadow", "n": n})
            n += 1
            if n % 25 == 0:
                checkpointer.checkpoint()


def test_a_host_killed_with_sigkill_leaves_a_log_the_next_start_repairs(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    process = multiprocessing.get_context("spawn").Process(
        target=_host, args=(str(chain), SIGNER.secret_string())
    )
    process.start()
    checkpoints = log_dir(chain) / "checkpoints"
    deadline = time.monotonic() + 120  # a hang guard, not a speed assertion
    while time.monotonic() < deadline and (
        not checkpoints.exists() or checkpoints.read_bytes().count(b"\n") < 20
    ):
        time.sleep(0.05)
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(30)
    restarted = Checkpointer(str(chain), ORIGIN, SIGNER)
    for _ in range(3):
        restarted.checkpoint()
    append(chain, 10, restarted, every=10, start=1_000_000)
    assert restarted.last is not None and restarted.last.size == len(lines(chain))
    _assert_repaired(chain)


def test_a_torn_line_in_checkpoints_is_ended_and_skipped_and_the_file_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_route_shadow.cli import main

    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 100, writer, every=50)
    with open(log_dir(chain) / "checkpoints", "ab") as handle:
        handle.write(b'{"note": "example.com/route-shadow/test\\n1')  # a disk-full append
    append(chain, 50, Checkpointer(str(chain), ORIGIN, SIGNER), every=50, start=100)
    assert [authenticate(n, []).checkpoint.size for n in notes(chain)] == [50, 100, 150]
    code = main(["verify", str(chain), "--key", str(SIGNER.verifier())])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "line(s) 3 not checkpoint entries (torn or foreign): skipped" in captured.err
    assert "consistent with 3 checkpoint(s)" in captured.out


def test_temporary_files_a_killed_writer_left_are_removed_at_start(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 600, Checkpointer(str(chain), ORIGIN, SIGNER), every=600)
    directory = log_dir(chain)
    dead = 2**22 + 12345  # above pid_max on most systems: no live process has it
    planted = [
        directory / f".state{files.TEMPORARY_MARK}{dead}-0a0b",
        directory / "tile" / "0" / f".002{files.TEMPORARY_MARK}{dead}-0c0d",
        directory / "tile" / "0" / "002.p" / f".88{files.TEMPORARY_MARK}{dead}-0e0f",
    ]
    for path in planted:
        path.write_bytes(b"half")
    append(chain, 10, Checkpointer(str(chain), ORIGIN, SIGNER), every=10, start=600)
    assert [p for p in planted if p.exists()] == []


def test_temporaries_a_killed_writer_left_beyond_its_last_checkpoint_are_removed_at_start(
    tmp_path: Path,
) -> None:
    """A writer killed while it wrote the tiles of a tree larger than its last signed checkpoint left
    temporary files in partial-tile folders past that checkpoint's last tile (``tile/0/002.p/`` over a
    checkpoint of 300); the next start cleaned only the folders of the signed size's own last tiles."""
    chain = tmp_path / "chain.jsonl"
    append(chain, 300, Checkpointer(str(chain), ORIGIN, SIGNER), every=300)
    append(chain, 700, start=300)
    directory = log_dir(chain)
    dead = 2**22 + 12345  # above pid_max on most systems: no live process has it
    planted = [
        directory / "tile" / "0" / "002.p" / f".88{files.TEMPORARY_MARK}{dead}-0a0b",
        directory / "tile" / "0" / "003.p" / f".16{files.TEMPORARY_MARK}{dead}-0c0d",
        directory / "tile" / "0" / f".004{files.TEMPORARY_MARK}{dead}-0e0f",
    ]
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    assert [p for p in planted if p.exists()] == []
