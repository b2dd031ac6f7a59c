"""Cutting a chain into segments (docs/chain-format.md section 14.3): the closed segment is the live file
as it was, the new live file starts with an anchor record naming it, seq, links and the Merkle tree go on
across the boundary, a process killed at any step of a cut leaves a state the next writer finishes or
undoes, and writer processes appending during cuts lose nothing.

Segments are read here straight from the files (each segment's lines, the anchor's fields, the SHA-256
of the previous file), not through the chain's readers."""

from __future__ import annotations

import fcntl
import hashlib
import multiprocessing
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from tlog_support import key_file

from otel_route_shadow.chain import (
    ANCHOR_KIND,
    CUT_SUFFIX,
    SEGMENTS_SUFFIX,
    ChainLockTimeout,
    CutRefused,
    DecisionChain,
    cut_chain,
    encode_payload,
    segment_name,
)
from otel_route_shadow.chain import cut as cut_module
from otel_route_shadow.cli import main
from otel_route_shadow.instrumentation.checkpointing import ScheduledCheckpointer, SegmentSchedule
from otel_route_shadow.instrumentation.config import RouteShadowConfig
from otel_route_shadow.logstore import Checkpointer, cut_signed
from otel_route_shadow.tlog import Signer, TreeBuilder, authenticate, checkpoint_of, leaf_hash

ORIGIN = "example.com/route-shadow/cut"
SIGNER = Signer.generate(ORIGIN)
HANG_GUARD_S = 60.0
STEPS = range(5)
"""``chain.cut.step_reached``: 0 once the lock is held, then after signing, preparing, linking, renaming."""


# -- reading the files directly --------------------------------------------------------------------


def segment_files(chain: Path) -> list[Path]:
    """The closed segments in chain order, then the live file."""
    folder = Path(str(chain) + SEGMENTS_SUFFIX)
    closed = sorted(folder.iterdir()) if folder.is_dir() else []
    return [*closed, chain]


def records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]


def check_segmented(chain: Path, key: Signer | None = None) -> list[dict[str, Any]]:
    """Every record of the chain, in order, after checking: seq continuous from 0, each record linked to
    the one before (across segments too), each closed segment named by its first seq and no longer the
    live file, each anchor naming the segment before it exactly (name, seqs, last hash, SHA-256, size)
    and carrying the checkpoint of its seq (the tree of the leaves before it) when a key is given."""
    found: list[dict[str, Any]] = []
    leaves: list[bytes] = []
    previous: Path | None = None
    assert not Path(str(chain) + CUT_SUFFIX).exists()
    live = os.stat(chain)
    for path in segment_files(chain):
        lines = path.read_bytes().split(b"\n")[:-1]
        assert lines, path
        first = orjson.loads(lines[0])
        if path != chain:
            assert path.name == segment_name(first["seq"])
            assert (os.stat(path).st_dev, os.stat(path).st_ino) != (live.st_dev, live.st_ino)
        if previous is not None:
            anchor = first["payload"]
            assert anchor["kind"] == ANCHOR_KIND
            data = previous.read_bytes()
            last = found[-1]
            assert anchor["segment"] == previous.name
            assert (anchor["first_seq"], anchor["last_seq"]) == (int(previous.stem), last["seq"])
            assert anchor["last_record_hash"] == last["record_hash"]
            assert (anchor["sha256"], anchor["bytes"]) == (hashlib.sha256(data).hexdigest(), len(data))
            if key is None:
                assert anchor["checkpoint"] is None
            else:
                signed = authenticate(anchor["checkpoint"], [key.verifier()]).checkpoint
                assert (signed.size, signed.root) == (first["seq"], root_of(leaves))
        for line in lines:
            record = orjson.loads(line)
            assert record["seq"] == len(found)
            assert record["prev_hash"] == (found[-1]["record_hash"] if found else "0" * 64)
            found.append(record)
            leaves.append(leaf_hash(line))
        previous = path
    return found


def root_of(leaves: list[bytes]) -> bytes:
    builder = TreeBuilder()
    builder.extend(leaves)
    return builder.root()


def every_checkpoint_matches_the_chain(chain: Path) -> int:
    """Each note the log published is the root of the chain's first ``size`` leaves (so each is
    consistent with every other); returns how many there were."""
    leaves = [
        leaf_hash(line) for path in segment_files(chain) for line in path.read_bytes().split(b"\n")[:-1]
    ]
    notes = [
        orjson.loads(line)["note"] for line in Path(str(chain) + ".tlog/checkpoints").read_text().splitlines()
    ]
    for note in notes:
        checkpoint = checkpoint_of(note)
        assert checkpoint.root == root_of(leaves[: checkpoint.size]), checkpoint.size
    return len(notes)


def append(chain: Path, count: int, start: int = 0) -> None:
    with DecisionChain(chain) as log:
        for n in range(start, start + count):
            log.append({"kind": "route-shadow", "n": n})


def numbers(found: list[dict[str, Any]]) -> list[int]:
    return [r["payload"]["n"] for r in found if r["payload"].get("kind") == "route-shadow"]


# -- a cut ------------------------------------------------------------------------------------------


def test_a_cut_closes_the_live_file_as_it_was_and_starts_the_next_with_its_anchor(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 5)
    before = chain.read_bytes()
    made = cut_chain(str(chain), sign=None, timeout=1.0)
    assert made is not None and (made.first_seq, made.end, made.bytes) == (0, 5, len(before))
    closed = Path(made.segment)
    assert closed == tmp_path / "chain.jsonl.segments" / "0000000000000000.jsonl"
    assert closed.read_bytes() == before
    assert [r["seq"] for r in records(chain)] == [5]
    append(chain, 4, start=5)
    again = cut_chain(str(chain), sign=None, timeout=1.0)
    assert again is not None and Path(again.segment).name == "0000000000000005.jsonl"
    append(chain, 2, start=9)
    found = check_segmented(chain)
    assert numbers(found) == list(range(11))
    assert len(found) == 13  # 11 records and 2 anchors


def test_nothing_is_cut_from_a_chain_without_records_after_its_anchor(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    assert cut_chain(str(chain), sign=None, timeout=1.0) is None
    append(chain, 2)
    assert cut_chain(str(chain), sign=None, timeout=1.0) is not None
    assert cut_chain(str(chain), sign=None, timeout=1.0) is None
    assert len(segment_files(chain)) == 2


def test_a_chain_ending_in_a_torn_line_is_not_cut(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    with chain.open("ab") as handle:
        handle.write(b'{"payload":')
    with pytest.raises(CutRefused, match="torn"):
        cut_chain(str(chain), sign=None, timeout=1.0)
    assert not Path(str(chain) + SEGMENTS_SUFFIX).exists()
    append(chain, 1, start=3)  # the next append repairs the tail; then the cut goes through
    assert cut_chain(str(chain), sign=None, timeout=1.0) is not None
    check_segmented(chain)


def test_a_cut_waits_only_so_long_for_a_lock_another_process_holds(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    before = chain.read_bytes()
    holder = os.open(chain, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(ChainLockTimeout):
            cut_chain(str(chain), sign=None, timeout=0.05)
    finally:
        os.close(holder)
    assert chain.read_bytes() == before
    assert not Path(str(chain) + SEGMENTS_SUFFIX).exists()
    assert not Path(str(chain) + CUT_SUFFIX).exists()


def test_with_a_log_the_anchor_carries_the_checkpoint_of_its_size_and_the_tree_goes_on(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 7)
    assert cut_signed(writer, 1.0) is not None  # the tree caught up to 7 and signed under the lock
    append(chain, 300, start=7)
    assert writer.checkpoint() is None and writer.behind  # the rest of the closed segment, then on
    made = writer.checkpoint()
    assert made is not None and made.size == 308
    assert cut_signed(writer, 1.0) is not None
    append(chain, 10, start=307)
    found = check_segmented(chain, SIGNER)
    assert numbers(found) == list(range(317))
    other = Checkpointer(str(chain), ORIGIN, SIGNER)  # another process: resumes from the state hint
    while other.checkpoint() is None and other.behind:
        pass
    assert other.size == len(found) and other.refused is None
    assert every_checkpoint_matches_the_chain(chain) >= 3


def test_a_tree_rebuilt_from_a_segmented_chain_is_the_signed_one(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    for round_ in range(3):
        append(chain, 40, start=40 * round_)
        assert cut_signed(writer, 1.0) is not None
    append(chain, 5, start=120)
    writer.checkpoint()
    Path(str(chain) + ".tlog/state").unlink()
    rebuilt = Checkpointer(str(chain), ORIGIN, SIGNER, max_leaves=30)
    for _ in range(50):
        rebuilt.checkpoint()
        if not rebuilt.behind:
            break
    assert rebuilt.refused is None and rebuilt.size == len(check_segmented(chain, SIGNER))


def test_a_rebuild_longer_than_one_call_goes_on_where_it_stopped(tmp_path: Path) -> None:
    """A rebuild started over at every call once it needed more than ``max_leaves`` lines: it never
    finished."""
    chain = tmp_path / "chain.jsonl"
    append(chain, 300)
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    Path(str(chain) + ".tlog/state").unlink()
    rebuilt = Checkpointer(str(chain), ORIGIN, SIGNER, max_leaves=100)
    sizes = []
    for _ in range(4):
        rebuilt.checkpoint()
        sizes.append(rebuilt.size)
    assert sizes == [100, 200, 300, 300] and not rebuilt.behind


# -- a process killed at each step --------------------------------------------------------------------


def _cut_and_die(chain: str, step: int, signed: bool) -> None:  # pragma: no cover - runs in a child
    def die(reached: int) -> None:
        if reached == step:
            os._exit(9)

    cut_module.step_reached = die
    if signed:
        cut_signed(Checkpointer(chain, ORIGIN, SIGNER), 5.0)
    else:
        cut_chain(chain, sign=None, timeout=5.0)
    os._exit(0)


def killed_cut(chain: Path, step: int, *, signed: bool = True) -> bool:
    """Run a cut in a child killed at ``step``; False when the child found nothing to cut."""
    process = multiprocessing.get_context("fork").Process(
        target=_cut_and_die, args=(str(chain), step, signed)
    )
    process.start()
    process.join(HANG_GUARD_S)
    assert process.exitcode in (0, 9)
    return process.exitcode == 9


@pytest.mark.parametrize("step", STEPS)
def test_a_cut_killed_at_each_step_is_finished_or_undone_by_the_next_writer(
    tmp_path: Path, step: int
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 20)
    writer.checkpoint()
    assert killed_cut(chain, step)
    append(chain, 3, start=20)  # the first append finishes the cut (step 3) or removes what it left
    found = check_segmented(chain, SIGNER)
    assert numbers(found) == list(range(23))
    assert len(segment_files(chain)) == (2 if step >= 3 else 1)
    assert cut_signed(writer, 1.0) is not None
    while writer.checkpoint() is None and writer.behind:
        pass
    assert writer.refused is None
    assert numbers(check_segmented(chain, SIGNER)) == list(range(23))
    every_checkpoint_matches_the_chain(chain)


@pytest.mark.parametrize("step", [2, 3])
def test_an_interrupted_cut_the_writer_went_past_is_undone_by_the_next_cut(tmp_path: Path, step: int) -> None:
    """A writer that looked for an unfinished cut less than a second ago appends without looking again:
    into the live file while it is still linked as a segment. The anchor prepared then no longer
    follows the file, so the next cut (or the writer's next look) undoes the link, and nothing is lost."""
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as log:
        for n in range(10):
            log.append({"kind": "route-shadow", "n": n})
        assert killed_cut(chain, step, signed=False)
        for n in range(10, 14):
            log.append({"kind": "route-shadow", "n": n})
    assert cut_chain(str(chain), sign=None, timeout=1.0) is not None
    append(chain, 1, start=14)
    assert numbers(check_segmented(chain)) == list(range(15))


# -- several writer processes ------------------------------------------------------------------------


def _writer(chain: str, process: int, counts: Any, go: Any, stop: Any) -> None:  # pragma: no cover - a child
    log = DecisionChain(chain)
    go.wait()
    n = 0
    while not stop.is_set() or n < 50:
        log.append({"kind": "route-shadow", "n": process * 1_000_000 + n})
        n += 1
    log.close()
    counts[process] = n


@pytest.mark.timeout(300)
def test_four_writers_appending_while_cuts_are_made_and_killed_lose_nothing(tmp_path: Path) -> None:
    """Four processes append without pause while cuts are made, and killed at each step twice over."""
    chain = tmp_path / "chain.jsonl"
    append(chain, 1, start=999_999)
    context = multiprocessing.get_context("fork")
    go, stop, counts = context.Event(), context.Event(), context.Array("q", 4)
    writers = [context.Process(target=_writer, args=(str(chain), p, counts, go, stop)) for p in range(4)]
    for process in writers:
        process.start()
    go.set()
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    try:
        for step in [*STEPS, *STEPS]:
            cut_signed(writer, 5.0)
            for _ in range(100):  # a child that found nothing after the anchor yet cuts again
                if killed_cut(chain, step):
                    break
            else:
                pytest.fail(f"no cut reached step {step}")
            assert all(p.is_alive() for p in writers)  # the kills all came while the four appended
    finally:
        stop.set()
    for process in writers:
        process.join(HANG_GUARD_S)
        assert process.exitcode == 0
    append(chain, 1, start=999_998)  # finishes or undoes the last killed cut
    cut_signed(writer, 5.0)
    while writer.checkpoint() is None and writer.behind:
        pass
    found = check_segmented(chain, SIGNER)
    expected = [999_999, 999_998] + [p * 1_000_000 + n for p in range(4) for n in range(counts[p])]
    assert Counter(numbers(found)) == Counter(expected)
    assert len(segment_files(chain)) > len(STEPS)
    assert writer.refused is None
    assert every_checkpoint_matches_the_chain(chain) >= len(STEPS)


# -- when the plugin cuts ----------------------------------------------------------------------------


def test_the_segment_settings_come_from_the_environment_and_keywords_win() -> None:
    env = {
        "OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES": "4096",
        "OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_SECONDS": "60.5",
    }
    config = RouteShadowConfig.resolve(env)
    assert (config.segment_bytes, config.segment_seconds) == (4096, 60.5)
    assert RouteShadowConfig.resolve(env, segment_bytes=0).segment_bytes == 0
    defaults = RouteShadowConfig.resolve({})
    assert (defaults.segment_bytes, defaults.segment_seconds) == (None, 7 * 86_400.0)  # None: 256 MiB
    with pytest.raises(ValueError, match="SEGMENT_BYTES"):
        RouteShadowConfig.resolve({"OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES": "big"})


def test_a_cut_is_due_by_size_or_by_age_and_never_when_both_are_off(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    assert not SegmentSchedule(str(chain), 1, 1e-9).due()  # no chain yet
    append(chain, 3)
    size = chain.stat().st_size
    assert SegmentSchedule(str(chain), size, 0).due()
    assert not SegmentSchedule(str(chain), size + 1, 0).due()
    assert not SegmentSchedule(str(chain), 0, 0).due()
    assert SegmentSchedule(str(chain), 0, 1e-9).due()
    cut_chain(str(chain), sign=None, timeout=1.0)
    assert not SegmentSchedule(str(chain), 0, 3600).due()  # the live file is as old as the last cut


def test_the_background_checkpointing_thread_cuts_the_chain_once_it_is_due(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, SIGNER),
        every_records=5,
        segments=SegmentSchedule(str(chain), 2_000, 0),
    )
    log = DecisionChain(chain, lock_timeout=0.1, listener=scheduled.line_written)
    folder = Path(str(chain) + SEGMENTS_SUFFIX)
    n = 0
    while not folder.is_dir() and n < 100_000:  # the thread is woken every 5 records
        log.submit(encode_payload({"kind": "route-shadow", "n": n}, []))  # kept while the cut holds the lock
        n += 1
    scheduled.close()
    assert log.flush(None) == 0
    log.close()
    append(chain, 1, start=n)
    found = check_segmented(chain, SIGNER)
    assert numbers(found) == list(range(n + 1))


def test_a_cut_found_due_is_not_made_on_the_live_file_another_process_started_meanwhile(tmp_path: Path) -> None:
    # Every process of a host checkpoints and cuts on its own schedule: one found the live file due, and
    # while it caught up and waited for the lock another process cut it. The first then cut the new live
    # file of a few records: a fork of 20 workers made 531 segments where 130 were due (most of 2 to 20
    # records), and spawns lost records to "the chain file keeps being replaced".
    chain = tmp_path / "chain.jsonl"
    folder = Path(str(chain) + SEGMENTS_SUFFIX)
    append(chain, 30)

    class CutMeanwhile(SegmentSchedule):
        def due(self, tree_records: int = 0, tree_bytes: int = 0) -> bool:
            judged = super().due(tree_records, tree_bytes)
            if judged and not folder.exists():  # another process cuts right after this look
                assert cut_signed(Checkpointer(str(chain), ORIGIN, SIGNER), 1.0) is not None
                append(chain, 2, start=30)
            return judged

    scheduled = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, SIGNER),
        every_records=1,
        background=False,
        segments=CutMeanwhile(str(chain), 2_000, 0),
    )
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        log.append({"kind": "route-shadow", "n": 32})  # due: this thread checkpoints, then looks at the cut
    scheduled.close()
    assert len(list(folder.iterdir())) == 1  # the other process's cut only
    assert numbers(check_segmented(chain, SIGNER)) == [*range(30), 32, 30, 31]  # 32 written before the look


def _cut_in_child(chain: str, prehash: Any) -> None:  # pragma: no cover - runs in a child
    cut_module._prehash = prehash  # this process's own cut, not the test's patched one
    os._exit(0 if cut_chain(chain, sign=None, timeout=5.0) is not None else 1)


def test_a_cut_is_not_made_on_the_live_file_another_process_started_between_its_hash_and_its_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cut read the live file found due (its hash, its identity: still the one found due), then opened
    # the path again to lock it: another process cut in between, and the file opened and locked was the
    # new live file, cut again. 20 forked workers made about 25 segments of 2 to 42 records among 110.
    chain = tmp_path / "chain.jsonl"
    folder = Path(str(chain) + SEGMENTS_SUFFIX)
    append(chain, 30)
    judged = identity(chain)
    prehash = cut_module._prehash

    def another_cut_after(path: str) -> Any:
        hashed = prehash(path)
        process = multiprocessing.get_context("fork").Process(target=_cut_in_child, args=(path, prehash))
        process.start()
        process.join(HANG_GUARD_S)
        assert process.exitcode == 0  # the other process cut the file just hashed
        append(chain, 2, start=30)
        return hashed

    monkeypatch.setattr(cut_module, "_prehash", another_cut_after)
    assert cut_chain(str(chain), sign=None, timeout=1.0, live=judged) is None
    monkeypatch.undo()
    assert [path.name for path in folder.iterdir()] == [segment_name(0)]  # the other process's cut only
    assert numbers(check_segmented(chain)) == list(range(32))


def test_a_writer_whose_first_line_is_not_a_record_still_clears_a_prepared_file(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 2)
    data = chain.read_bytes()
    first = data.index(b"\n")
    chain.write_bytes(
        b"x" * first + data[first:]
    )  # an edited first line: verify's business, not the writer's
    Path(str(chain) + CUT_SUFFIX).write_bytes(b"left by a killed cut\n")
    append(chain, 1, start=2)
    assert not Path(str(chain) + CUT_SUFFIX).exists()
    lines = chain.read_bytes().split(b"\n")[1:-1]
    assert [orjson.loads(line)["payload"]["n"] for line in lines] == [1, 2]


def test_a_writer_that_cannot_clear_a_prepared_file_raises_without_keeping_the_chains_lock(
    tmp_path: Path,
) -> None:
    # A directory at X.jsonl.cut (a hostile disk): the append's look at an unfinished cut raised while it
    # held the chain's lock, and never gave it back: every other writer, rotate and prune timed out for
    # as long as that process lived.
    chain = tmp_path / "chain.jsonl"
    append(chain, 2)
    Path(str(chain) + CUT_SUFFIX).mkdir()
    with DecisionChain(chain) as log:
        with pytest.raises(OSError):
            log.append({"kind": "route-shadow", "n": 2})
        other = os.open(chain, os.O_RDONLY)
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while it is kept
        finally:
            os.close(other)


# -- otel-route-shadow rotate ------------------------------------------------------------------------


def test_rotate_cuts_with_the_logs_key_and_refuses_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 6)
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    key = key_file(tmp_path / "log.key", SIGNER)
    other = key_file(tmp_path / "other.key", Signer.generate("example.com/other"))
    assert main(["rotate", str(chain), "--key", str(other)]) == 2
    assert "the key is named 'example.com/other'" in capsys.readouterr().err
    assert main(["rotate", str(chain)]) == 2
    assert "give its signing key" in capsys.readouterr().err
    assert not Path(str(chain) + SEGMENTS_SUFFIX).exists()
    capsys.readouterr()
    assert main(["rotate", str(chain), "--key", str(key)]) == 0
    assert "closed " in capsys.readouterr().out
    append(chain, 2, start=6)
    assert numbers(check_segmented(chain, SIGNER)) == list(range(8))
    assert main(["rotate", str(chain), "--key", str(key)]) == 0
    assert main(["rotate", str(chain), "--key", str(key)]) == 0  # nothing after the anchor: nothing cut
    assert len(segment_files(chain)) == 3


def test_rotate_of_a_chain_without_a_log_anchors_with_no_checkpoint(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    assert main(["rotate", str(chain)]) == 0
    append(chain, 1, start=3)
    assert numbers(check_segmented(chain)) == list(range(4))


def test_a_cut_the_disk_refuses_midway_leaves_the_chain_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 4)
    before = chain.read_bytes()

    def refused(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cut_module, "fsync_directory", refused)
    with pytest.raises(OSError):
        cut_chain(str(chain), sign=None, timeout=1.0)
    monkeypatch.undo()
    assert chain.read_bytes() == before
    assert not Path(str(chain) + CUT_SUFFIX).exists()
    assert list(Path(str(chain) + SEGMENTS_SUFFIX).iterdir()) == []
    append(chain, 1, start=4)
    assert numbers(check_segmented(chain)) == list(range(5))


def test_the_plugins_cut_never_takes_the_lock_while_its_tree_is_still_behind(tmp_path: Path) -> None:
    """What the bounded catch-up before the lock left was caught up under the chain's lock, however
    much it was, with every appender waiting on that lock."""
    chain = tmp_path / "chain.jsonl"
    append(chain, 40)
    slow = Checkpointer(str(chain), ORIGIN, SIGNER, max_leaves=4)  # 4 leaves a step: 10 steps to catch up
    before = chain.read_bytes()
    assert cut_signed(slow, 1.0, catch_up=3) is None  # behind after 3 steps: not cut, tried again later
    assert chain.read_bytes() == before and not Path(str(chain) + SEGMENTS_SUFFIX).exists()
    assert cut_signed(slow, 1.0, catch_up=None) is not None  # as long as it takes (rotate)


def test_a_rotate_timeout_that_is_not_a_finite_number_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--timeout nan`` (or ``inf``) passed the only check (``< 0``), and the wait for the lock never ended."""
    from otel_route_shadow.cli import main

    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    for value in ("nan", "inf", "-1"):
        with pytest.raises(SystemExit) as exited:
            main(["rotate", str(chain), "--timeout", value])
        assert exited.value.code == 2
        assert "must be at least 0 and at most 3600" in capsys.readouterr().err


def test_a_number_option_given_something_else_is_refused_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal quoted the value given: an option's value may be a key pasted in the wrong place."""
    from otel_route_shadow.cli import main

    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    secret = "PRIVATE+KEY+example.com+1234abcd+AAAAsecretmaterial"
    for argv in (["rotate", str(chain), "--timeout", secret], ["verify", str(chain), "--jobs", secret]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "not a number" in err and "secret" not in err and "PRIVATE" not in err


# -- a long-lived writer's descriptors across cuts --------------------------------------------------


def open_files() -> dict[int, tuple[int, int]]:
    """This process's open descriptors and the file each one holds (device, inode), deleted ones too."""
    found: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        found[int(name)] = (st.st_dev, st.st_ino)
    return found


def identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def test_a_writer_closes_the_descriptor_of_each_segment_a_cut_closes(tmp_path: Path) -> None:
    """A writer kept the descriptor of every file a cut closed as a segment until it was closed itself:
    a host's writer lives as long as the instrumentation, so each cut leaked one descriptor, and a
    retention prune that deleted the segment freed no disk space."""
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as log:
        log.append({"kind": "route-shadow", "n": 0})
        before = len(open_files())
        segments = []
        for n in range(1, 21):
            segments.append(identity(chain))
            log.append({"kind": "route-shadow", "n": n})
            assert cut_chain(str(chain), sign=None, timeout=1.0) is not None
        log.append({"kind": "route-shadow", "n": 21})
        for path in Path(str(chain) + SEGMENTS_SUFFIX).iterdir():
            path.unlink()  # as a prune with --delete does
        held = open_files()
        assert not set(segments) & set(held.values())
        assert list(held.values()).count(identity(chain)) == 1
        assert len(held) == before
    assert numbers(records(chain)) == [21]


def test_an_fsync_writer_closes_a_cut_segment_once_the_commit_still_syncing_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With fsync durability an append's group commit runs after the writer's lock is released, so
    another thread may see the path name a new file while that commit still syncs the old descriptor:
    the descriptor stays open exactly until that commit ends."""
    chain = tmp_path / "chain.jsonl"
    log = DecisionChain(chain, durability="fsync")
    log.append({"kind": "route-shadow", "n": 0})
    real = log._commit.commit
    entered, release = threading.Event(), threading.Event()
    synced: list[int] = []

    def held_commit(fd: int, ident: tuple[int, int], end: int) -> None:
        if threading.current_thread() is holder:
            entered.set()
            assert release.wait(HANG_GUARD_S)
        real(fd, ident, end)
        synced.append(fd)

    monkeypatch.setattr(log._commit, "commit", held_commit)
    holder = threading.Thread(target=log.append, args=({"kind": "route-shadow", "n": 1},))
    try:
        old = identity(chain)
        holder.start()
        assert entered.wait(HANG_GUARD_S)
        assert cut_chain(str(chain), sign=None, timeout=1.0) is not None
        log.append({"kind": "route-shadow", "n": 2})  # sees the new live file: retires the old descriptor
        held = [fd for fd, ident in open_files().items() if ident == old]
        assert len(held) == 1  # the commit in flight still syncs it
    finally:
        release.set()
        holder.join(HANG_GUARD_S)
    assert not holder.is_alive() and len(synced) == 2 and synced[1] == held[0]
    assert old not in open_files().values()
    log.close()
    assert numbers(check_segmented(chain)) == [0, 1, 2]


def test_a_writer_that_cannot_reopen_its_path_writes_nothing_into_a_descriptor_the_host_opened_since(
    tmp_path: Path,
) -> None:
    """The writer closed the descriptor of a replaced file but kept its number while reopening the
    path failed (a folder there now); the host's next file got that number, and the writer's next
    append wrote a chain record into the host's file."""
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as log:
        log.append({"kind": "route-shadow", "n": 1})
        chain.rename(tmp_path / "aside")
        chain.mkdir()
        with pytest.raises(OSError):
            log.append({"kind": "route-shadow", "n": 2})
        with (tmp_path / "host.txt").open("w+") as host:
            chain.rmdir()
            (tmp_path / "aside").rename(chain)
            log.append({"kind": "route-shadow", "n": 3})
            host.write("host data\n")
        assert (tmp_path / "host.txt").read_text(encoding="utf-8") == "host data\n"
    assert numbers(records(chain)) == [1, 3]


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo"])
def test_rotate_of_a_chain_that_is_not_a_file_is_refused_exit_2(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A chain that did not exist was "nothing to cut", exit 0: a cron job with a mistyped path passed for ever.
    chain = tmp_path / "chain.jsonl"
    if kind == "directory":
        chain.mkdir()
    elif kind == "fifo":
        os.mkfifo(chain)
    assert main(["rotate", str(chain)]) == 2
    err = capsys.readouterr().err
    assert str(chain) in err and "will retry" not in err
    assert not Path(str(chain) + ".segments").exists()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_rotate_with_an_unusable_lock_file_exits_2_without_a_retry_line(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # A FIFO or a folder where CHAIN.tlog/lock is: "not cut: a checkpoint failed (...)", exit 1, and the
    # writer's "checkpoint failed (...); will retry" on stderr, though rotate never retries.
    chain = tmp_path / "chain.jsonl"
    append(chain, 6)
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    append(chain, 2, start=6)
    lock = tmp_path / "chain.jsonl.tlog" / "lock"
    lock.unlink()
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    before = chain.read_bytes()
    assert main(["rotate", str(chain), "--key", key_file(tmp_path / "log.key", SIGNER)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and f"{lock}: is a " in out.err, out
    assert "will retry" not in caplog.text
    assert chain.read_bytes() == before and not Path(str(chain) + SEGMENTS_SUFFIX).exists()


@pytest.mark.parametrize("stuck", ["torn-tail", "tile-path-a-directory"])
def test_rotate_of_a_log_whose_tree_cannot_grow_stops_not_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stuck: str
) -> None:
    # rotate caught the tree up "as many steps as it takes": a torn line longer than a step reads, or a
    # directory where a tile is written, left it behind for ever and rotate never returned.
    chain = tmp_path / "chain.jsonl"
    append(chain, 300)
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    append(chain, 20, start=300)
    if stuck == "torn-tail":
        with open(chain, "ab") as handle:
            handle.write(b"y" * (9 * 1024 * 1024))
    else:
        (tmp_path / "chain.jsonl.tlog" / "tile" / "0" / "001.p" / "64").mkdir(parents=True)
    key = key_file(tmp_path / "log.key", SIGNER)
    before = chain.read_bytes()
    if stuck == "torn-tail":
        assert main(["rotate", str(chain), "--key", str(key), "--timeout", "5"]) == 1
        out = capsys.readouterr().out
        assert out.startswith("not cut: ") and "the log's tree stayed at 320 records" in out
    else:  # a file of the log folder it cannot use, as a lock that is a folder is
        assert main(["rotate", str(chain), "--key", str(key), "--timeout", "5"]) == 2
        assert "Is a directory" in capsys.readouterr().err
    assert chain.read_bytes() == before and not Path(str(chain) + SEGMENTS_SUFFIX).exists()


def test_rotate_of_a_log_that_refuses_to_sign_is_not_cut_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The live file emptied below its signed checkpoint: the writer records a refusal ("truncated") and
    # stops signing, yet rotate said "nothing to cut", exit 0.
    chain = tmp_path / "chain.jsonl"
    append(chain, 30)
    assert Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint() is not None
    chain.write_bytes(b"")
    key = key_file(tmp_path / "log.key", SIGNER)
    assert main(["rotate", str(chain), "--key", str(key)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("not cut: the log refuses to sign checkpoints (") and "truncated" in out


def test_rotate_of_a_live_file_that_is_a_symbolic_link_is_refused_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``os.link`` does not follow a symbolic link: the cut closed the link itself as the segment (relative,
    # so dangling in the segments folder) and renamed the new live file over it; every read then failed.
    real = tmp_path / "real.jsonl"
    append(real, 12)
    assert Checkpointer(str(real), ORIGIN, SIGNER).checkpoint() is not None
    chain = tmp_path / "chain.jsonl"
    chain.symlink_to("real.jsonl")
    os.symlink("real.jsonl.tlog", str(chain) + ".tlog")
    key = key_file(tmp_path / "log.key", SIGNER)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["rotate", str(chain), "--key", str(key)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("not cut: ") and "a symbolic link" in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == before and chain.is_symlink()
    assert main(["verify", str(chain)]) == 0


@pytest.mark.parametrize("cut_before", [False, True], ids=["never cut", "cut before"])
def test_rotate_refuses_to_seal_a_tampered_live_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cut_before: bool
) -> None:
    from test_segment_writer import caught_up

    # A record below the signed size edited in the live file: the tree resumed from its hint (only the
    # last signed line is read back), so rotate sealed the edited file and its anchor vouched for it.
    chain = tmp_path / "chain.jsonl"
    key = key_file(tmp_path / "log.key", SIGNER)
    append(chain, 10)
    if cut_before:
        assert main(["rotate", str(chain), "--key", str(key)]) == 0
    append(chain, 20, start=10)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    caught_up(writer)
    assert writer.size == (31 if cut_before else 30)  # the anchor is a record too
    data = chain.read_bytes()
    edited = data.replace(b'"n":15}', b'"n":51}', 1)  # record 15, or 16 after the anchor
    assert edited != data
    chain.write_bytes(edited)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    capsys.readouterr()
    assert main(["rotate", str(chain), "--key", str(key)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("not cut: ") and f"record {16 if cut_before else 15}: hash-mismatch" in out, out
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and chain.read_bytes() == edited


def test_a_live_file_whose_edit_was_relinked_is_not_sealed(tmp_path: Path) -> None:
    from test_chain_support import relink
    from test_segment_writer import caught_up

    from otel_route_shadow.chain import CutRefused
    from otel_route_shadow.logstore.cutting import check_live_signed

    # An edit covered by recomputing every hash after it parses and links: a new writer's resume finds
    # its last line changed ("rewritten"); a writer already caught up finds it by the range proof
    # against the signed root alone.
    chain = tmp_path / "chain.jsonl"
    append(chain, 30)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    caught_up(writer)
    lines = chain.read_bytes().splitlines(keepends=True)
    lines[15] = lines[15].replace(b'"n":15}', b'"n":51}', 1)
    chain.write_bytes(b"".join(relink(lines, 15)))
    with pytest.raises(CutRefused, match=r"its records \[0, 30\) are not those the checkpoint of size 30 signed"):
        check_live_signed(writer)


def test_a_cut_by_another_process_meanwhile_is_not_called_an_edit(tmp_path: Path) -> None:
    from test_segment_writer import caught_up

    from otel_route_shadow.chain import CutRefused
    from otel_route_shadow.logstore.cutting import check_live_signed

    # Regression: the live file was read after another process had cut it, so its first record was
    # the anchor, not the record the check expected, and rotate said a record was not the one signed.
    chain = tmp_path / "chain.jsonl"
    append(chain, 30)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    caught_up(writer)
    assert main(["rotate", str(chain), "--key", str(key_file(tmp_path / "log.key", SIGNER))]) == 0
    with pytest.raises(CutRefused, match="another process cut the chain meanwhile"):
        check_live_signed(writer)


def test_rotate_of_a_cut_log_whose_stored_tile_is_a_directory_stops_not_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tiles unusable, each catch-up step rebuilt the tree from the chain, failed writing the tile
    # and started again: the tree grew at every step, so rotate never returned.
    from test_segment_writer import SIGNER as WRITER
    from test_segment_writer import written_cut_twice

    chain = tmp_path / "chain.jsonl"
    written_cut_twice(chain)
    stored = tmp_path / "chain.jsonl.tlog" / "tile" / "0" / "004.p" / "176"
    stored.unlink()
    stored.mkdir()
    key = key_file(tmp_path / "log.key", WRITER)
    assert main(["rotate", str(chain), "--key", str(key), "--timeout", "3"]) == 2  # a log folder it cannot use
    assert "Is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["\u0663", "3_0", " 3", "+3", "\uff13"])
def test_a_number_option_takes_ascii_digits_only(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``int`` and ``float`` read other scripts' digits (and ``int`` "_", signs and spaces),
    so ``prove --seq`` with an Arabic-Indic three proved record 3; a count on the command line is ASCII
    digits, and a number (seconds) is ASCII."""
    from otel_route_shadow.cli import main

    chain = tmp_path / "chain.jsonl"
    append(chain, 5)
    runs = [["prove", str(chain), "--seq", value]]
    runs += [] if value.isascii() else [["rotate", str(chain), "--timeout", value]]
    for argv in runs:
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        assert "not a number" in capsys.readouterr().err
