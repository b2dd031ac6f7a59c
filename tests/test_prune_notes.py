"""A prune moves the entries of ``checkpoints`` of trees below the new minimum index out of it, into the
archive folder (``logstore.note_retirement``): the file grew with every checkpoint and cosignature for as
long as the log ran, while the chain stayed at its retention. Nothing is lost: the archive file and the file left are the old file, byte for
byte; the writer goes on from the entries kept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prune_support import KEY, ORIGIN, SIGNER, SegmentedChain, copied, segmented_chain

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, LogStore, note_retirement, tlog_dir
from otel_route_shadow.logstore.anchoring import OwnNotes

SIZES = (20, 15, 30, 12)
MIN_INDEX = 35


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> SegmentedChain:
    return segmented_chain(tmp_path_factory.mktemp("pristine") / "log", SIZES)


@pytest.fixture
def log(pristine: SegmentedChain, tmp_path: Path) -> SegmentedChain:
    return copied(pristine, tmp_path)


def checkpoints(log: SegmentedChain) -> Path:
    return Path(tlog_dir(log.chain)) / "checkpoints"


def claims(data: bytes) -> list[int]:
    """The size each entry of a ``checkpoints`` file's bytes claims."""
    return [int(json.loads(line)["note"].split("\n")[1]) for line in data.splitlines()]


def prune(log: SegmentedChain, *extra: str) -> int:
    return main(["prune", str(log.chain), "--key", str(KEY), "--min-index", str(MIN_INDEX), *extra])


def test_the_entries_below_the_minimum_index_move_to_the_archive_byte_for_byte(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    before = checkpoints(log).read_bytes()
    assert prune(log) == 0
    assert "line(s) of" in capsys.readouterr().out
    moved = gzip.decompress((log.archive / "checkpoints.000001.jsonl.gz").read_bytes())
    kept = checkpoints(log).read_bytes()
    assert moved + kept == before
    assert max(claims(moved)) < MIN_INDEX <= claims(kept)[0]
    assert kept.splitlines()[-1] == before.splitlines()[-1]  # the newest entry stays last
    assert main(["verify", str(log.chain), "--key", str(KEY)]) == 0


def test_with_delete_they_are_removed_and_the_rest_kept(log: SegmentedChain) -> None:
    before = checkpoints(log).read_bytes()
    assert prune(log, "--delete") == 0
    kept = checkpoints(log).read_bytes()
    assert before.endswith(kept) and len(kept) < len(before) and claims(kept)[0] >= MIN_INDEX
    assert not log.archive.exists()


def test_entries_left_while_the_logs_lock_is_held_are_moved_by_the_next_prune(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    before = checkpoints(log).read_bytes()
    with LogStore(log.chain).lock() as held:  # a writer checkpointing: its catch-up holds the log's lock
        assert held
        assert prune(log, "--wait", "0.1") == 0
    assert "left for the next prune" in capsys.readouterr().out
    assert checkpoints(log).read_bytes() == before and not list(log.archive.glob("checkpoints.*"))
    assert prune(log) == 0  # nothing more to prune: the minimum index is already 35
    out = capsys.readouterr().out
    assert "nothing to prune" in out and "line(s) of" in out
    moved = gzip.decompress((log.archive / "checkpoints.000001.jsonl.gz").read_bytes())
    assert moved + checkpoints(log).read_bytes() == before
    assert prune(log) == 0 and len(list(log.archive.glob("checkpoints.*"))) == 1  # once only


def test_stopped_between_the_archive_and_checkpoints_the_lines_are_in_both_then_moved_again(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = checkpoints(log).read_bytes()
    write_atomic = note_retirement.write_atomic
    writes: list[str] = []

    def fail_on_checkpoints(path: str, data: object, **kwargs: object) -> None:
        writes.append(path)
        if path.endswith("/checkpoints"):
            raise OSError(28, "No space left on device")
        write_atomic(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(note_retirement, "write_atomic", fail_on_checkpoints)
    assert prune(log) == 0  # the prune committed; the old lines wait
    assert checkpoints(log).read_bytes() == before
    first = gzip.decompress((log.archive / "checkpoints.000001.jsonl.gz").read_bytes())
    monkeypatch.setattr(note_retirement, "write_atomic", write_atomic)
    assert prune(log) == 0
    second = gzip.decompress((log.archive / "checkpoints.000002.jsonl.gz").read_bytes())
    assert first == second and second + checkpoints(log).read_bytes() == before


def test_nothing_moves_when_no_entry_of_the_origin_claims_the_minimum_index(log: SegmentedChain) -> None:
    """A prune forced past every checkpoint asks for none (no checkpoint covers its minimum index); asked,
    the file is left as it is."""
    before = checkpoints(log).read_bytes()
    done = note_retirement.retire_notes(str(log.chain), ORIGIN, 10**6, archive=True, compress=True, wait=0)
    assert done == note_retirement.RetiredNotes() and checkpoints(log).read_bytes() == before
    done = note_retirement.retire_notes(
        str(log.chain), "example.com/another", 1, archive=True, compress=True, wait=0
    )
    assert done.lines == 0 and checkpoints(log).read_bytes() == before


def test_a_line_of_another_origin_is_never_taken_as_the_first_kept(log: SegmentedChain) -> None:
    """The cut is before the first entry of the covering checkpoint's origin claiming the minimum index:
    a foreign line claiming more among the old entries moves with them."""
    lines = checkpoints(log).read_bytes().splitlines(keepends=True)
    foreign = json.dumps({"note": f"example.com/another\n999\n{'A' * 43}=\n"}).encode() + b"\n"
    checkpoints(log).write_bytes(b"".join([lines[0], foreign, *lines[1:]]))
    assert prune(log) == 0
    moved = gzip.decompress((log.archive / "checkpoints.000001.jsonl.gz").read_bytes())
    assert foreign in moved.splitlines(keepends=True)
    first_kept = LogStore(log.chain).notes().notes[0].split("\n")
    assert first_kept[0] == ORIGIN and int(first_kept[1]) >= MIN_INDEX


def test_the_writer_goes_on_from_the_entries_kept(log: SegmentedChain) -> None:
    assert prune(log) == 0
    writer = Checkpointer(str(log.chain), ORIGIN, SIGNER)
    with DecisionChain(log.chain) as chain:
        for n in range(10):
            chain.append({"kind": "route-shadow", "after-prune": n})
    made = next((m for _ in range(10) if (m := writer.checkpoint()) is not None), None)  # a rebuild first
    assert made is not None and made.checkpoint().size == log.total + 10
    assert main(["verify", str(log.chain), "--key", str(KEY)]) == 0


def test_a_reader_following_checkpoints_reads_a_replaced_file_from_its_start(log: SegmentedChain) -> None:
    """Regression: ``notes_from`` went on at its byte offset in whatever file was there. Once a prune had
    replaced ``checkpoints`` and the writer had appended past that offset, the writer's reader started
    mid-line in the new file and skipped entries it had never read."""
    store = LogStore(log.chain)
    own = OwnNotes(store, ORIGIN, [KEY])
    assert own.largest() is not None
    _, position = store.notes_from()
    kept = checkpoints(log).read_bytes().splitlines(keepends=True)[3:]
    padded = b"".join(kept * 3)  # longer than the old file: its old offset falls inside a line
    assert len(padded) > position[0]
    checkpoints(log).unlink()
    checkpoints(log).write_bytes(padded)
    notes, _ = store.notes_from(position)
    assert len(notes) == len(kept) * 3


_LINES = st.one_of(
    st.tuples(st.sampled_from([ORIGIN, "example.com/another"]), st.integers(0, 100)).map(
        lambda e: json.dumps({"note": f"{e[0]}\n{e[1]}\n{'A' * 43}=\n"}).encode() + b"\n"
    ),
    st.sampled_from([b'{"note": torn\n', b"\n", b"not json\n"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINES, max_size=12), min_index=st.integers(0, 101), compress=st.booleans())
def test_what_moves_is_the_prefix_before_the_first_entry_of_the_origin_at_the_minimum_index(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], min_index: int, compress: bool
) -> None:
    chain = tmp_path_factory.mktemp("notes") / "chain.jsonl"
    Path(tlog_dir(chain)).mkdir()
    before = b"".join(lines)
    (Path(tlog_dir(chain)) / "checkpoints").write_bytes(before)
    done = note_retirement.retire_notes(
        str(chain), ORIGIN, min_index, archive=True, compress=compress, wait=0
    )
    kept = (Path(tlog_dir(chain)) / "checkpoints").read_bytes()
    first = next((i for i, line in enumerate(lines) if _claims(line, min_index)), None)
    if first is None or first == 0:
        assert done.lines == 0 and done.archive is None and kept == before
        return
    assert done.archive is not None and done.left is None
    moved = Path(done.archive).read_bytes()
    assert (gzip.decompress(moved) if compress else moved) + kept == before
    assert (done.lines, kept) == (first, b"".join(lines[first:]))


def _claims(line: bytes, min_index: int) -> bool:
    """Whether ``line`` is an entry of the log's origin claiming ``min_index`` leaves or more."""
    try:
        origin, size, _ = json.loads(line)["note"].split("\n", 2)
    except (ValueError, KeyError, TypeError):
        return False
    return origin == ORIGIN and int(size) >= min_index
