"""``prune`` (retention by the tlog-tiles pruning rules) and ``verify ARCHIVE``: closed segments below the
new minimum index go to the archive folder with a proof each, ``pruned`` says what, when and how; nothing
changes when the records are not witnessed, the lock is held or a segment does not hold; a SIGKILL at any
step is settled by the next prune; an archive verifies offline, and an edited record, a proof that does not
match or a wrong note are each one clear line and exit 1."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from prune_support import KEY, SegmentedChain, copied, segment_name, segmented_chain
from witness_support import Cosigner

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import MAX_COMMAND_CHARS, LogStore, Pruned
from otel_route_shadow.tlog import Signer, parse_note

REPO = Path(__file__).resolve().parent.parent
WITNESS = Cosigner("w0.example/w")
SIZES = (20, 15, 30, 12)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> SegmentedChain:
    return segmented_chain(tmp_path_factory.mktemp("pristine") / "log", SIZES)


@pytest.fixture
def log(pristine: SegmentedChain, tmp_path: Path) -> SegmentedChain:
    return copied(pristine, tmp_path)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run(*argv: str) -> int:
    return main([*argv])


def prune(log: SegmentedChain, *extra: str) -> int:
    return run("prune", str(log.chain), "--key", str(KEY), *extra)


def pruned(log: SegmentedChain) -> Pruned:
    found = LogStore(log.chain).read_pruned()
    assert found is not None
    return found


def test_keep_records_archives_whole_segments_below_a_boundary_with_a_proof_each(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    live = log.chain.read_bytes()
    assert prune(log, "--keep-records", str(log.total - 36)) == 0  # 36: inside the third segment
    out = capsys.readouterr().out
    assert "pruned records [0, 35) in 2 segment(s)" in out and "minimum index 35" in out
    # The log is smaller than the next bundle boundary: serve publishes its size, not 256 (as said before).
    assert "(serve publishes 256, or the log's size while it is smaller: its entry bundles are whole)" in out
    record = pruned(log)
    assert record.min_index == 35
    assert [(s.name, s.first, s.end) for s in record.segments] == [
        (segment_name(0), 0, 20),
        (segment_name(20), 20, 35),
    ]
    assert record.segments[0].archive == "chain.jsonl.archive/0000000000000000.jsonl.gz"
    assert record.command.startswith("otel-route-shadow prune ") and "--keep-records" in record.command
    assert sorted(os.listdir(log.segments)) == [segment_name(35), segment_name(65)]
    assert sorted(os.listdir(log.archive)) == [
        "0000000000000000.jsonl.gz",
        "0000000000000000.jsonl.proof",
        "0000000000000020.jsonl.gz",
        "0000000000000020.jsonl.proof",
        "checkpoints.000001.jsonl.gz",  # the entries of checkpoints of trees below 35 (test_prune_notes.py)
    ]
    assert log.chain.read_bytes() == live
    for name in ("0000000000000000.jsonl.gz", "0000000000000020.jsonl.gz"):
        assert run("verify", str(log.archive / name), "--key", str(KEY)) == 0
    assert "are exactly leaves [20, 35)" in capsys.readouterr().out


def test_a_second_prune_adds_its_segments_to_the_record_and_nothing_to_prune_is_exit_0(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prune(log, "--min-index", "25", "--no-compress") == 0  # rounded down to 20
    assert pruned(log).min_index == 20
    assert prune(log, "--min-index", "70", "--no-compress") == 0
    record = pruned(log)
    assert record.min_index == 65 and [s.first for s in record.segments] == [0, 20, 35]
    assert (log.archive / "0000000000000035.jsonl").read_bytes().count(b"\n") == 30
    assert run("verify", str(log.archive / "0000000000000035.jsonl"), "--key", str(KEY)) == 0
    capsys.readouterr()
    assert prune(log, "--min-index", "70") == 0
    assert "nothing to prune; minimum index 65" in capsys.readouterr().out


def test_delete_removes_the_segments_and_records_no_archive(log: SegmentedChain) -> None:
    assert prune(log, "--min-index", "35", "--delete") == 0
    assert [s.archive for s in pruned(log).segments] == [None, None]
    assert not log.archive.exists()


def test_keep_days_prunes_the_segments_closed_before_the_cutoff(log: SegmentedChain) -> None:
    old = time.time() - 10 * 86_400
    for first in (0, 20):
        os.utime(log.segment(first), (old, old))
    assert prune(log, "--keep-days", "5") == 0
    assert pruned(log).min_index == 35


def _policy(tmp_path: Path) -> str:
    path = tmp_path / "witnesses.policy"
    path.write_text(f"log {KEY}\nwitness w0 {WITNESS.verifier}\nquorum w0\n")
    return str(path)


def _cosign(log: SegmentedChain, size: int) -> None:
    store = LogStore(log.chain)
    note = next(n for n in store.newest_notes() if parse_note(n).text.split("\n")[1] == str(size))
    text = parse_note(note).text
    now = int(time.time())
    store.cosign(text, [WITNESS.line(text, now)], [WITNESS.verifier], now=now)


def test_records_beyond_the_quorum_attested_checkpoint_are_refused_and_nothing_changes(
    log: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cosign(log, 20)
    before = snapshot(log.chain.parent)
    assert run("prune", str(log.chain), "--witness-policy", _policy(tmp_path), "--min-index", "35") == 3
    assert "pruning up to 35 refused: the covering checkpoint has 20 records" in capsys.readouterr().err
    assert snapshot(log.chain.parent) == before
    assert run("prune", str(log.chain), "--witness-policy", _policy(tmp_path), "--min-index", "20") == 0
    proof = json.loads((log.archive / "0000000000000000.jsonl.proof").read_text())
    assert WITNESS.verifier.name in proof["checkpoint"]  # proven against the witnessed note


def test_a_prune_with_a_policy_checks_cosignatures_from_the_newest_down_not_every_checkpoint(
    log: SegmentedChain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_route_shadow.logstore import pruning

    for size in (20, 35):
        _cosign(log, size)
    reports: list[Any] = []
    attest = pruning.attest_notes

    def counted(*args: Any, **kwargs: Any) -> Any:
        reports.append(attest(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(pruning, "attest_notes", counted)
    assert run("prune", str(log.chain), "--witness-policy", _policy(tmp_path), "--min-index", "35") == 0
    assert pruned(log).min_index == 35
    (report,) = reports
    assert report.attested().checkpoint.size >= 35
    assert 20 in report.unchecked  # found at the newest cosigned checkpoint: the older ones never verified


def test_force_prunes_beyond_the_witnessed_size_without_a_proof(
    log: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cosign(log, 20)
    assert (
        run("prune", str(log.chain), "--witness-policy", _policy(tmp_path), "--min-index", "35", "--force")
        == 0
    )
    assert (
        "forced: no checkpoint covers 0000000000000020.jsonl: archived without a proof"
        in capsys.readouterr().out
    )
    assert (log.archive / "0000000000000000.jsonl.proof").exists()  # the witnessed checkpoint covers it
    assert not (log.archive / "0000000000000020.jsonl.proof").exists()


def test_no_key_and_no_policy_is_refused_unless_forced(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("prune", str(log.chain), "--min-index", "35") == 2
    assert "give --key or --witness-policy" in capsys.readouterr().err
    assert run("prune", str(log.chain), "--keep-records", "3", "--key", str(KEY)) == 0


def test_another_logs_key_is_refused_as_such_not_sent_to_force(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    # A key named for another log was "no checkpoint covers ...; --force prunes anyway", exit 3: the
    # operator was sent to --force, which prunes records no checkpoint of this log's key vouches for.
    other = Signer.generate("other.example/route-shadow")
    assert run("prune", str(log.chain), "--keep-records", "3", "--key", str(other.verifier())) == 2
    out = capsys.readouterr()
    assert "not this log's key" in out.out + out.err and "--force" not in out.out + out.err
    assert LogStore(log.chain).read_pruned() is None


def test_a_segment_that_is_a_symbolic_link_is_a_finding_not_busy_for_ever(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    # Read through the link, checked against the link: "changed while prune checked and archived it ...
    # try again", exit 7, at every try.
    segment = log.segment(0)
    copy = log.chain.parent / "elsewhere.jsonl"
    shutil.copyfile(segment, copy)
    segment.unlink()
    segment.symlink_to(copy)
    assert prune(log, "--min-index", "20") == 1
    out = capsys.readouterr()
    assert "a symbolic link, not a segment's file; nothing changed" in out.out + out.err
    assert LogStore(log.chain).read_pruned() is None and segment.is_symlink()


def test_no_retention_given_is_unusable_input(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prune(log) == 2
    assert "no retention given" in capsys.readouterr().err


def test_prune_while_another_process_holds_the_lock_changes_nothing(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(log.chain.parent)
    with open(log.chain, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert prune(log, "--min-index", "35", "--wait", "0") == 7
    assert "another process holds the chain's lock" in capsys.readouterr().err
    assert snapshot(log.chain.parent) == before


def test_a_segment_with_an_edited_record_is_refused_and_nothing_changes(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = log.segment(20)
    segment.write_bytes(segment.read_bytes().replace(b'"n":22', b'"n":99', 1))
    before = snapshot(log.chain.parent)
    assert prune(log, "--min-index", "35") == 1
    assert "record 22:" in capsys.readouterr().err
    assert snapshot(log.chain.parent) == before


def test_a_segment_rewritten_with_valid_hashes_is_not_what_the_checkpoint_signed(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    first = log.segment(0)
    lines = first.read_bytes().split(b"\n")
    log.segment(0).write_bytes(b"\n".join([lines[1], *lines[1:]]))  # seq 1 twice: no longer links
    assert prune(log, "--min-index", "20") == 1
    swapped = log.segment(20)
    swapped.write_bytes(log.segment(35).read_bytes())
    assert prune(log, "--min-index", "20") == 1
    assert "record" in capsys.readouterr().err


def test_a_missing_first_segment_is_a_finding(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    log.segment(0).unlink()
    assert prune(log, "--min-index", "35") == 1
    assert "a segment is missing" in capsys.readouterr().err


@pytest.mark.parametrize("pruned_file", ["removed", "older"])
def test_a_lost_or_older_pruned_file_never_removes_the_archives_of_pruned_segments(
    log: SegmentedChain, pruned_file: str
) -> None:
    """Settling took every archive at or above ``pruned``'s minimum index for an interrupted prune's: with
    the file removed (or an older one restored) the next prune deleted the archives of segments already
    gone, the only copy of their records, and then said "a segment is missing; nothing changed"."""
    assert prune(log, "--min-index", "20") == 0
    older = (log.chain.parent / "chain.jsonl.tlog" / "pruned").read_bytes()
    assert prune(log, "--min-index", "35") == 0
    archives = snapshot(log.archive)
    if pruned_file == "removed":
        (log.chain.parent / "chain.jsonl.tlog" / "pruned").unlink()
    else:
        (log.chain.parent / "chain.jsonl.tlog" / "pruned").write_bytes(older)
    assert prune(log, "--min-index", "65") == 1
    assert snapshot(log.archive) == archives


# -- verify ARCHIVE ----------------------------------------------------------------------------------------


@pytest.fixture
def archived(log: SegmentedChain) -> SegmentedChain:
    assert prune(log, "--min-index", "35") == 0
    return log


def test_an_archive_with_the_note_of_its_tree_verifies(archived: SegmentedChain) -> None:
    note = json.loads((archived.archive / "0000000000000020.jsonl.proof").read_text())["checkpoint"]
    (archived.chain.parent / "note").write_text(note)
    archive = str(archived.archive / "0000000000000020.jsonl.gz")
    assert run("verify", archive, "--key", str(KEY), "--checkpoint", str(archived.chain.parent / "note")) == 0


def test_an_archive_checked_against_a_note_of_another_tree_is_a_finding(
    archived: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    retired = gzip.decompress((archived.archive / "checkpoints.000001.jsonl.gz").read_bytes())
    other = next(n for line in retired.splitlines() if "\n20\n" in (n := json.loads(line)["note"]))
    (archived.chain.parent / "note").write_text(other)
    archive = str(archived.archive / "0000000000000000.jsonl.gz")
    assert run("verify", archive, "--key", str(KEY), "--checkpoint", str(archived.chain.parent / "note")) == 1
    assert "--checkpoint is the tree of 20 leaves" in capsys.readouterr().out


def test_an_archives_proof_given_as_the_chain_points_to_the_archive(
    archived: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was read as a chain: "not a decision chain", or with --key "<proof>.tlog/checkpoints: no such
    # checkpoint file", neither naming the archive to give instead.
    proof = archived.archive / "0000000000000020.jsonl.proof"
    for extra in ([], ["--key", str(KEY)]):
        assert run("verify", str(proof), *extra) == 2
        err = capsys.readouterr().err
        assert "an archive's proof, not a chain" in err and "0000000000000020.jsonl.gz" in err, err


def test_an_archive_with_an_edited_record_is_a_finding(
    archived: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = archived.archive / "0000000000000020.jsonl.gz"
    archive.write_bytes(gzip.compress(gzip.decompress(archive.read_bytes()).replace(b'"n":30', b'"n":31')))
    assert run("verify", str(archive), "--key", str(KEY)) == 1
    assert "REFUSED" in capsys.readouterr().out and "record 30" in capsys.readouterr().out + "record 30"


def test_an_archive_whose_proof_does_not_match_is_a_finding(
    archived: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    proof = archived.archive / "0000000000000020.jsonl.proof"
    doc = json.loads(proof.read_text())
    doc["proof"][0] = doc["proof"][-1] if doc["proof"][0] != doc["proof"][-1] else "A" * 43 + "="
    proof.write_text(json.dumps(doc))
    assert run("verify", str(archived.archive / "0000000000000020.jsonl.gz"), "--key", str(KEY)) == 1
    assert "do not lead to the checkpoint's root" in capsys.readouterr().out


def test_an_archive_proven_by_another_archives_proof_is_a_finding(archived: SegmentedChain) -> None:
    shutil.copy(
        archived.archive / "0000000000000000.jsonl.proof", archived.archive / "0000000000000020.jsonl.proof"
    )
    assert run("verify", str(archived.archive / "0000000000000020.jsonl.gz"), "--key", str(KEY)) == 1


def test_an_archive_signed_by_another_key_or_without_its_proof(
    archived: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    from tlog_support import ORIGIN

    from otel_route_shadow.tlog import Signer

    stranger = str(Signer.generate(ORIGIN).verifier())
    archive = str(archived.archive / "0000000000000000.jsonl.gz")
    assert run("verify", archive, "--key", stranger) == 1
    (archived.archive / "0000000000000000.jsonl.proof").unlink()
    assert run("verify", archive, "--key", str(KEY)) == 2
    assert "no proof file beside the archive" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option",
    [("--live-segment",), ("--strict",), ("--max-unwitnessed", "3"), ("--all-cosignatures",)],
    ids=["live-segment", "strict", "max-unwitnessed", "all-cosignatures"],
)
def test_an_archive_with_an_option_its_check_cannot_honour_is_refused_not_ignored(
    archived: SegmentedChain, option: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    archive = str(archived.archive / "0000000000000020.jsonl.gz")
    assert run("verify", archive, "--key", str(KEY), *option) == 2
    assert option[0] in capsys.readouterr().err


# -- SIGKILL at each step ---------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from otel_route_shadow import files
    from otel_route_shadow.cli import main
    from otel_route_shadow.logstore import pruning, store

    step, mode = int(sys.argv[1]), sys.argv[2]
    mid = mode == "mid"
    calls = [0]

    def tick():
        calls[0] += 1
        if calls[0] == step:
            os.kill(os.getpid(), signal.SIGKILL)

    def write_atomic(path, data, **kw):
        if mid and not isinstance(data, bytes):
            def blocks():
                for block in data:
                    yield block
                    tick()
            return files.write_atomic(path, blocks(), **kw)
        files.write_atomic(path, data, **kw)
        if mode == "after":
            tick()

    unlink = os.unlink

    def unlink_then_tick(path, *a, **kw):
        unlink(path, *a, **kw)
        if ".segments" in str(path) and mode == "after":
            tick()

    read_segment = pruning.read_segment

    def read_segment_then_tick(stream, first):
        read = read_segment(stream, first)
        if mode == "check":
            tick()
        return read

    pruning.read_segment = read_segment_then_tick
    pruning.write_atomic = store.write_atomic = write_atomic
    os.unlink = unlink_then_tick
    sys.exit(main(sys.argv[3:]))
    """
)
STEPS = 2 * 2 + 1 + 2  # two archives and their proofs, pruned, two segments removed
CHECKS = 2 + 2  # two segments checked, then each archive read back


@pytest.mark.parametrize(
    "step",
    [*(("after", k) for k in range(1, STEPS + 1)), ("mid", 1), *(("check", k) for k in range(1, CHECKS + 1))],
    ids=str,
)
def test_a_prune_killed_at_any_step_is_settled_by_the_next(
    pristine: SegmentedChain, tmp_path: Path, step: tuple[str, int]
) -> None:
    reference = tmp_path / "reference"
    shutil.copytree(pristine.chain.parent, reference)
    ref = SegmentedChain(reference / "chain.jsonl", pristine.bounds, pristine.total)
    assert prune(ref, "--min-index", "35") == 0
    shutil.copytree(pristine.chain.parent, tmp_path / "killed")
    chain = tmp_path / "killed" / "chain.jsonl"
    argv = ["prune", str(chain), "--key", str(KEY), "--min-index", "35"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(step[1]), step[0], *argv], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    found = LogStore(chain).read_pruned()
    present = sorted(os.listdir(str(chain) + ".segments"))
    if found is None:  # not committed: every segment is still there
        assert present == [segment_name(f) for f in (0, 20, 35, 65)]
    else:
        assert found.min_index == 35
    assert main(argv) == 0
    assert snapshot(tmp_path / "killed").keys() == snapshot(reference).keys()
    for name in os.listdir(ref.archive):
        got = (Path(str(chain) + ".archive") / name).read_bytes()
        assert got == (ref.archive / name).read_bytes(), name
    again = LogStore(chain).read_pruned()
    assert again is not None and again.segments == pruned(ref).segments


def test_prune_never_waits_for_the_lock_it_holds_itself(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting the records took a shared lock on the live file that prune itself held exclusively: every
    prune waited 5 s and then counted without it."""

    def no_sleep(_seconds: float) -> None:
        raise AssertionError("prune waited for a lock no one else holds")

    monkeypatch.setattr(time, "sleep", no_sleep)
    assert prune(log, "--keep-records", "10") == 0
    assert pruned(log).min_index == 65


def test_a_forged_minimum_index_removes_no_segment(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prune(log, "--min-index", "20") == 0
    record = pruned(log)
    forged = record.model_copy(
        update={
            "min_index": 35,
            "segments": [
                *record.segments,
                record.segments[0].model_copy(update={"name": segment_name(20), "first": 20, "end": 35}),
            ],
        }
    )
    LogStore(log.chain).save_pruned(forged)
    before = snapshot(log.chain.parent)
    assert prune(log, "--min-index", "65") == 1
    assert "the pruned file names another file" in capsys.readouterr().err
    assert snapshot(log.chain.parent) == before


def test_a_chain_never_cut_has_nothing_to_prune_and_gets_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from otel_route_shadow.chain import DecisionChain

    chain = tmp_path / "plain.jsonl"
    with DecisionChain(chain) as writer:
        for n in range(5):
            writer.append({"kind": "route-shadow", "n": n})
    before = snapshot(tmp_path)
    assert run("prune", str(chain), "--key", str(KEY), "--keep-records", "0") == 0
    assert "nothing to prune; minimum index 0" in capsys.readouterr().out
    assert snapshot(tmp_path) == before


def test_a_segment_is_read_in_blocks_never_a_read_per_byte(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``readline`` on the unbuffered file read one byte per system call: 136 s to prune 30,000 records."""
    import io

    from otel_route_shadow.logstore.archives import open_segment, read_segment

    reads: list[int | None] = []

    class Counted(io.FileIO):
        def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
            reads.append(len(buffer))
            return super().readinto(buffer)

        def read(self, size: int | None = -1) -> bytes:
            reads.append(size)
            return super().read(size)

    monkeypatch.setattr(io, "FileIO", Counted)
    with open_segment(str(log.segment(35))) as stream:
        read = read_segment(stream, 35)
    assert read.problem is None and read.count == 30
    assert len(reads) <= 3


WRITER = textwrap.dedent(
    """
    import sys
    from otel_route_shadow.chain import DecisionChain
    with DecisionChain(sys.argv[1]) as log:
        for n in range(int(sys.argv[2])):
            log.append({"kind": "route-shadow", "writer": sys.argv[3], "n": n})
    """
)


def test_prune_beside_four_writer_processes_loses_no_record(log: SegmentedChain) -> None:
    from otel_route_shadow.logstore.archives import open_segment, read_segment

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(log.chain), "40", str(w)], env=env)
        for w in range(4)
    ]
    try:
        assert prune(log, "--min-index", "65", "--wait", "30") == 0
    finally:
        assert all(w.wait(timeout=120) == 0 for w in writers)
    assert pruned(log).min_index == 65
    with open_segment(str(log.chain)) as stream:
        read = read_segment(stream, 77)  # the live file begins after the last closed segment
    assert read.problem is None and read.count == log.total - 77 + 4 * 40


def test_an_archive_folder_that_cannot_be_written_is_one_line_and_nothing_pruned(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    log.archive.write_text("a file where the archive folder goes")
    assert prune(log, "--min-index", "35") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert LogStore(log.chain).read_pruned() is None
    assert sorted(os.listdir(log.segments))[:2] == [segment_name(0), segment_name(20)]


def test_a_pruned_file_naming_any_file_as_the_archive_removes_no_segment(
    log: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    """Settling an interrupted prune removed a segment once the ``pruned`` file named an archive that was
    a file at all: naming the segment itself let it delete the only copy of its records."""
    first = log.segment(0)
    kept = first.read_bytes()
    assert prune(log, "--min-index", "20") == 0
    first.write_bytes(kept)  # as a prune killed after saving ``pruned`` and before removing it leaves it
    record = pruned(log)
    itself = os.path.relpath(first, log.chain.parent)
    forged = record.model_copy(
        update={"segments": [record.segments[0].model_copy(update={"archive": itself})]}
    )
    LogStore(log.chain).save_pruned(forged)
    before = snapshot(log.chain.parent)
    assert prune(log, "--min-index", "65") == 1
    assert "names an archive that is not this segment's" in capsys.readouterr().err
    assert snapshot(log.chain.parent) == before and first.read_bytes() == kept


def test_a_prune_command_longer_than_a_pruned_file_records_is_recorded_cut_short(log: SegmentedChain) -> None:
    """The command was recorded word for word; past 4,096 characters the pruned file refused it after the
    archives were written, and prune ended in a traceback."""
    keys = [arg for _ in range(60) for arg in ("--key", str(KEY))]
    assert prune(log, "--min-index", "20", *keys) == 0
    command = pruned(log).command
    assert len(command) == MAX_COMMAND_CHARS and command.endswith(" ...")
    assert command.startswith("otel-route-shadow prune ")
