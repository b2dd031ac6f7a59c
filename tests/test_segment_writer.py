"""The writer side of a segmented, pruned chain (docs/chain-format.md sections 14.1 and 14.5): the
checkpointer appends chain-wide positions to ``entries-index`` across cuts and prunes, ``serve`` cuts
every retained bundle through them without rescanning the chain, and a checkpointer whose tree ends in
a segment a prune removed goes on from the signed base."""

from __future__ import annotations

import logging
import os
import struct
import threading
from pathlib import Path

import pytest
from tlog_support import key_file

from otel_route_shadow.chain import (
    SEGMENTS_SUFFIX,
    ChainBytes,
    DecisionChain,
    Segment,
    WrittenLine,
    cut_chain,
    encode_payload,
    segment_name,
)
from otel_route_shadow.chain import cut as cut_module
from otel_route_shadow.cli import main
from otel_route_shadow.instrumentation import checkpointing
from otel_route_shadow.instrumentation import retention as retention_module
from otel_route_shadow.instrumentation.checkpointing import (
    ScheduledCheckpointer,
    SegmentSchedule,
    scheduled_checkpointer,
)
from otel_route_shadow.instrumentation.config import RouteShadowConfig
from otel_route_shadow.instrumentation.retention import HostRetention
from otel_route_shadow.logstore import (
    Checkpointer,
    LogStore,
    PruneOptions,
    PruneResult,
    PublishedLog,
    Retention,
    Unservable,
    cut_signed,
    prune,
    signed_checkpoint_from_note,
)
from otel_route_shadow.logstore import checkpointer as checkpointer_module
from otel_route_shadow.logstore import entries as entries_module
from otel_route_shadow.logstore import segment_files as segment_files_module
from otel_route_shadow.logstore.entries import ENTRIES_INDEX_FILE, encode_bundle
from otel_route_shadow.logstore.note_retirement import RetiredNotes
from otel_route_shadow.logstore.segment_files import SegmentFiles
from otel_route_shadow.tlog import TILE_WIDTH, Signer

ORIGIN = "example.com/route-shadow/writer"
SIGNER = Signer.generate(ORIGIN)


def append(chain: Path, count: int, start: int) -> None:
    with DecisionChain(chain) as log:
        for n in range(start, start + count):
            log.append({"kind": "route-shadow", "n": n, "pad": "x" * (n % 7)})


def caught_up(writer: Checkpointer) -> None:
    for _ in range(100):
        writer.checkpoint()
        if not writer.behind:
            break
    assert writer.refused is None and not writer.behind


def chain_bytes(chain: Path, pruned: bytes = b"") -> bytes:
    """The chain's files one after the other (``pruned``: the bytes of the segments a prune removed)."""
    folder = Path(str(chain) + ".segments")
    closed = sorted(folder.iterdir()) if folder.is_dir() else []
    return pruned + b"".join(path.read_bytes() for path in [*closed, chain])


def line_starts(data: bytes) -> list[int]:
    starts = [0]
    at = data.find(b"\n")
    while at >= 0 and at + 1 < len(data):
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    return starts


def index_offsets(chain: Path) -> list[int]:
    data = (Path(str(chain) + ".tlog") / ENTRIES_INDEX_FILE).read_bytes()
    return [offset for (offset,) in struct.iter_unpack(">Q", data)]


def served_without_a_rebuild(chain: Path, lines: list[bytes], bundles: range) -> None:
    """``serve`` gives each full bundle of ``bundles`` as ``lines`` hold it, its index never rebuilt."""
    served = PublishedLog(str(chain), [SIGNER.verifier()])
    for bundle in bundles:
        expected = encode_bundle(lines[bundle * TILE_WIDTH : (bundle + 1) * TILE_WIDTH])
        assert served.bundle(bundle, TILE_WIDTH) == expected
    assert served.index.rebuilds == 0


def written_cut_twice(chain: Path) -> tuple[Checkpointer, bytes]:
    """A chain of 1,200 records cut after 300 and 700, caught up; returns its writer and every byte."""
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 300, 0)
    assert cut_signed(writer, 1.0) is not None
    append(chain, 399, 300)
    caught_up(writer)
    assert cut_signed(writer, 1.0) is not None
    append(chain, 499, 699)
    caught_up(writer)
    return writer, chain_bytes(chain)


def test_the_entries_index_holds_chain_wide_positions_after_two_cuts(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    writer, data = written_cut_twice(chain)
    starts = line_starts(data)
    assert writer.size == len(starts) == 1_200
    assert index_offsets(chain) == starts[::TILE_WIDTH]  # every line 256 k, past both cuts
    lines = data.split(b"\n")[:-1]
    served_without_a_rebuild(chain, lines, range(len(lines) // TILE_WIDTH))


@pytest.mark.parametrize("index_kept", [True, False], ids=["index-kept", "index-lost"])
def test_retained_bundles_are_served_through_chain_wide_positions_after_a_prune(
    tmp_path: Path, index_kept: bool
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer, data = written_cut_twice(chain)
    result = prune(str(chain), Retention(min_index=700), PruneOptions([SIGNER.verifier()], command="test"))
    assert result.after == 700
    if not index_kept:
        (Path(str(chain) + ".tlog") / ENTRIES_INDEX_FILE).unlink()
    append(chain, 300, 1_198)
    caught_up(writer)
    lines = data.split(b"\n")[:-1] + chain.read_bytes().split(b"\n")[500:-1]
    assert writer.size == len(lines) == 1_500
    served_without_a_rebuild(chain, lines, range(3, len(lines) // TILE_WIDTH))
    served = PublishedLog(str(chain), [SIGNER.verifier()])
    with pytest.raises(Unservable, match="below the minimum index 700"):
        served.bundle(2, TILE_WIDTH)  # lines 512-767: those below 700 were pruned
    assert served.index.rebuilds == 0  # and the index is kept
    if index_kept:
        assert index_offsets(chain) == line_starts(b"".join(line + b"\n" for line in lines))[::TILE_WIDTH]


def test_serve_reading_the_chain_while_a_prune_commits_finds_its_bundles_without_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # serve read the pruned file, then listed the chain's files: a prune that committed and removed
    # segments between the two left the live file at the position of the first one removed, the lines
    # read there did not hash to their leaves, and the index was thrown away and the chain scanned again.
    chain = tmp_path / "chain.jsonl"
    _, data = written_cut_twice(chain)
    lines = data.split(b"\n")[:-1]
    served = PublishedLog(str(chain), [SIGNER.verifier()])
    assert served.bundle(0, TILE_WIDTH) == encode_bundle(lines[:TILE_WIDTH])  # the pruned file read: none
    opened = entries_module.ChainBytes
    pruned: list[int] = []

    def pruned_then_opened(path: str, start: int = 0, kept_from: int = 0) -> ChainBytes:
        if not pruned:
            pruned.append(prune(path, Retention(min_index=700), PruneOptions([SIGNER.verifier()])).after)
        return opened(path, start, kept_from)

    monkeypatch.setattr(entries_module, "ChainBytes", pruned_then_opened)
    assert served.bundle(3, TILE_WIDTH) == encode_bundle(lines[3 * TILE_WIDTH : 4 * TILE_WIDTH])
    assert pruned == [700] and served.index.rebuilds == 0


@pytest.mark.parametrize("fresh", [False, True], ids=["its-cursor", "from-the-state-hint"])
def test_a_checkpointer_whose_tree_ends_in_a_pruned_segment_goes_on_from_the_signed_base(
    tmp_path: Path, fresh: bool
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer, _ = written_cut_twice(chain)
    append(chain, 1, 1_198)
    assert cut_signed(writer, 1.0) is not None  # the tree ends at the end of the segment just closed
    assert prune(str(chain), Retention(keep_records=1), PruneOptions([SIGNER.verifier()])).after == 1_201
    if fresh:  # another process: the state's hint names the pruned segment
        writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 40, 1_199)
    caught_up(writer)
    assert writer.size == 1_242 and writer.refused is None


def test_a_prune_that_commits_while_a_checkpoint_reads_the_chain_is_not_taken_for_a_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A prune (another process's, or the checkpointing thread's own) that removed the segment the tree
    # ends in after the checkpoint had read the pruned file, before it opened that segment: the
    # checkpointer took the missing segment for the chain cut below what was signed, and never signed again.
    chain = tmp_path / "chain.jsonl"
    writer, _ = written_cut_twice(chain)
    append(chain, 1, 1_198)
    assert cut_signed(writer, 1.0) is not None  # the tree ends at the end of the segment just closed
    append(chain, 3, 1_199)
    pruned: list[int] = []

    class PrunedMeanwhile(SegmentFiles):
        def __init__(self, chain_path: str, store: LogStore | None = None) -> None:
            super().__init__(chain_path, store)
            if not pruned:  # the pruned file is read: now the prune commits
                options = PruneOptions([SIGNER.verifier()])
                pruned.append(prune(chain_path, Retention(keep_records=1), options).after)

    monkeypatch.setattr(checkpointer_module, "SegmentFiles", PrunedMeanwhile)
    made = writer.checkpoint()
    assert pruned == [1_201]
    assert writer.refused is None and made is not None and made.size == 1_205
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


def test_a_writer_resuming_while_a_prune_commits_appends_chain_wide_positions_to_the_entries_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer resuming from the state hint counted its segment's chain-wide start from the pruned file as
    # read when its files were opened and the closed segments listed after: a prune that committed and
    # removed segments between the two was counted in neither, the writer appended offsets short by their
    # bytes to the entries index, and serve threw the index away and scanned the chain again.
    chain = tmp_path / "chain.jsonl"
    _, data = written_cut_twice(chain)
    append(chain, 100, 1_198)  # past line 1,280: the next offset the writer appends
    pruned: list[int] = []

    class PrunedMeanwhile(SegmentFiles):
        def __init__(self, chain_path: str, store: LogStore | None = None) -> None:
            super().__init__(chain_path, store)
            if not pruned:  # the pruned file is read: now the prune commits and removes both segments
                options = PruneOptions([SIGNER.verifier()])
                pruned.append(prune(chain_path, Retention(min_index=700), options).after)

    monkeypatch.setattr(checkpointer_module, "SegmentFiles", PrunedMeanwhile)
    caught_up(Checkpointer(str(chain), ORIGIN, SIGNER))  # another process: it resumes from the hint
    assert pruned == [700]
    lines = data.split(b"\n")[:-1] + chain.read_bytes().split(b"\n")[500:-1]
    assert len(lines) == 1_300
    assert index_offsets(chain) == line_starts(b"".join(line + b"\n" for line in lines))[::TILE_WIDTH]
    served_without_a_rebuild(chain, lines, range(3, 5))


def test_a_segment_pruned_between_its_listing_and_its_size_counts_at_its_recorded_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The live file's chain-wide start read the size of each closed segment listed: one a prune removed
    # after the listing raised FileNotFoundError, and the writer's checkpoint failed.
    chain = tmp_path / "chain.jsonl"
    _, data = written_cut_twice(chain)
    listed = segment_files_module.chain_segments

    def listed_then_pruned(chain_path: str) -> list[Segment]:
        segments = listed(chain_path)
        if os.path.exists(segments[0].path):
            assert prune(chain_path, Retention(min_index=700), PruneOptions([SIGNER.verifier()])).after == 700
        return segments

    monkeypatch.setattr(segment_files_module, "chain_segments", listed_then_pruned)
    with SegmentFiles(str(chain), LogStore(str(chain))) as files:
        assert files.start(files.live_first) == len(data) - chain.stat().st_size


def test_a_cut_that_waited_while_another_cut_closed_the_file_leaves_that_segment_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cut that got the lock of a file another cut had just closed took it for the live file of an
    # interrupted cut and removed its link: the closed segment was lost (seen with four writers cutting).
    chain = tmp_path / "chain.jsonl"
    append(chain, 20, 0)
    real = cut_module.flock_bounded
    calls: list[int] = []

    def another_cut_first(fd: int, operation: int, timeout: float | None, poll: float) -> bool:
        calls.append(fd)
        if len(calls) == 1:  # while this cut waits for the lock, another process cuts
            assert cut_chain(str(chain), sign=None, timeout=1.0) is not None
        return real(fd, operation, timeout, poll)

    monkeypatch.setattr(cut_module, "flock_bounded", another_cut_first)
    assert cut_chain(str(chain), sign=None, timeout=1.0) is None  # nothing after the new anchor
    closed = Path(str(chain) + SEGMENTS_SUFFIX) / segment_name(0)
    assert closed.exists() and closed.read_bytes().count(b"\n") == 20
    assert chain.read_bytes().count(b"\n") == 1  # the anchor, naming that segment


def test_a_line_kept_from_before_a_cut_at_an_offset_the_new_live_file_has_is_not_a_broken_link(
    tmp_path: Path,
) -> None:
    # The plugin keeps the lines it wrote until a checkpoint covers them; after a cut, a kept line of the
    # closed file sat at an offset of the new live file (just after the anchor) and, not linking there,
    # was taken for a broken link: the writer refused to sign ever again (seen with four writers).
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    kept: list[WrittenLine] = []
    with DecisionChain(chain, listener=kept.append) as log:
        for n in range(30):
            log.append({"kind": "route-shadow", "n": n})
    assert cut_signed(writer, 1.0) is not None
    append(chain, 5, 30)
    anchor = len(chain.read_bytes().split(b"\n")[0]) + 1
    stale = [line._replace(offset=anchor + line.offset - kept[1].offset) for line in kept[1:]]
    writer.checkpoint(appended=stale)  # the closed segment is all in the tree: on to the live file
    made = writer.checkpoint(appended=stale)
    assert writer.refused is None and made is not None and made.size == 36


def test_the_retention_settings_come_from_the_environment_and_default_to_off() -> None:
    env = {
        "OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS": "500000",
        "OTEL_PYTHON_ROUTE_SHADOW_RETENTION_DELETE": "true",
    }
    config = RouteShadowConfig.resolve(env)
    assert (config.retention_records, config.retention_delete) == (500_000, True)
    assert RouteShadowConfig.resolve(env, retention_records=0).retention_records == 0
    defaults = RouteShadowConfig.resolve({})
    assert (defaults.retention_records, defaults.retention_delete) == (0, False)
    with pytest.raises(ValueError, match="RETENTION_RECORDS"):
        RouteShadowConfig.resolve({"OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS": "half"})


def test_a_retention_without_a_signing_key_or_with_an_unreadable_policy_is_off_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = str(tmp_path / "chain.jsonl")
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        assert scheduled_checkpointer(chain, retention_records=10).retention is None
        key = key_file(tmp_path / "log.key", SIGNER)
        missing = str(tmp_path / "no.policy")
        unpoliced = scheduled_checkpointer(
            chain, signing_key=key, witness_policy=missing, retention_records=10
        )
        assert unpoliced.retention is None
        kept = scheduled_checkpointer(chain, signing_key=key, retention_records=10)
    assert kept.retention is not None and kept.retention.retention.keep_records == 10
    lines = [r.getMessage() for r in caplog.records if "retention off" in r.getMessage()]
    assert len(lines) == 2 and "no signing key" in lines[0] and "no.policy" in lines[1]
    assert SIGNER.secret_string() not in caplog.text


def test_the_checkpointing_thread_prunes_after_its_cut_and_never_what_no_checkpoint_covers(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.jsonl"
    scheduled = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, SIGNER),
        every_records=5,
        segments=SegmentSchedule(str(chain), 2_000, 0),
        retention=HostRetention(str(chain), 40, [SIGNER.verifier()], delete=True),
    )
    log = DecisionChain(chain, lock_timeout=0.1, listener=scheduled.line_written)
    pruned = Path(str(chain) + ".tlog/pruned")
    n = 0
    while not pruned.exists() and n < 100_000:  # the thread is woken every 5 records
        log.submit(encode_payload({"kind": "route-shadow", "n": n}, []))
        n += 1
    scheduled.close()
    assert log.flush(None) == 0
    log.close()
    # What was pruned is read from the pruned file, not from the retention's last result: a later run
    # (after a later cut, before close) may have had nothing to prune, and the test failed on load.
    store = LogStore(str(chain))
    record = store.read_pruned()
    assert record is not None and record.min_index > 0
    covered = max(signed_checkpoint_from_note(note).size for note in store.notes().notes)
    assert record.min_index <= covered  # covered by a signed checkpoint
    assert not Path(str(chain) + ".archive").exists()  # deleted, as configured
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


def test_the_last_checkpoint_at_shutdown_after_a_cut_covers_the_records_written_since(tmp_path: Path) -> None:
    # One checkpointer call crosses one segment boundary at most: the first after a cut only stepped
    # from the closed segment into the live file, so the checkpoint at shutdown signed nothing new.
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 30, 0)
    assert cut_signed(writer, 1.0) is not None  # what the checkpointing thread does after a checkpoint
    append(chain, 3, 30)  # fewer than a checkpoint's records: the thread is not woken
    final = ScheduledCheckpointer(writer, background=False).checkpoint_now()
    assert final is not None and final.size == 34 and not writer.behind  # 30, the anchor, 3


def test_a_long_retention_prune_does_not_skip_the_last_checkpoint_at_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checkpointing thread pruned holding the schedule's lock: a prune gzips whole segments (6 s
    # measured), the last checkpoint at shutdown gave up after SHUTDOWN_WAIT_S, and the process exited
    # with its last records unsigned; a witness's cosignature could not be stored meanwhile either.
    chain = tmp_path / "chain.jsonl"
    entered, release = threading.Event(), threading.Event()

    def long_prune(chain_path: str, retention: Retention, options: PruneOptions) -> PruneResult:
        entered.set()
        assert release.wait(30)  # a hang guard: the test releases it
        return prune(chain_path, retention, options)

    monkeypatch.setattr(retention_module, "prune", long_prune)
    scheduled = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, SIGNER),
        every_records=5,
        segments=SegmentSchedule(str(chain), 2_000, 0),
        retention=HostRetention(str(chain), 40, [SIGNER.verifier()], delete=True),
    )
    log = DecisionChain(chain, listener=scheduled.line_written)
    try:
        n = 0
        while not entered.is_set() and n < 100_000:  # the thread cuts, then prunes
            log.append({"kind": "route-shadow", "n": n})
            n += 1
        assert entered.wait(30)  # the thread is inside the prune, and stays there
        for more in range(7):
            last = log.append({"kind": "route-shadow", "n": n + more})
        with scheduled.exclusive(0.2) as cosigned:  # where a witness's cosignature is stored
            pass
        with pytest.MonkeyPatch.context() as short:
            short.setattr(checkpointing, "SHUTDOWN_WAIT_S", 0.2)
            final = scheduled.checkpoint_now()
    finally:
        release.set()
        scheduled.close()
        log.close()
    assert final is not None and final.size == last.seq + 1  # every record, signed
    assert cosigned
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


def test_a_torn_tail_in_a_later_segment_is_named_by_its_segment_and_its_offset(tmp_path: Path) -> None:
    # Offsets start again in each segment: the same torn bytes at the same offset of two segments were
    # given one name, and the second quarantine replaced the file the first chain event names.
    chain = tmp_path / "chain.jsonl"
    torn = b'{"payload":{"kind":"route-shadow","n":'

    def torn_then_append(start: int) -> None:
        with chain.open("ab") as out:
            out.write(torn)
        append(chain, 1, start)  # the writer quarantines the torn bytes first

    append(chain, 2, 0)
    torn_then_append(2)
    cut = cut_chain(str(chain), sign=None, timeout=1.0)
    assert cut is not None
    append(chain, 2, 3)
    torn_then_append(5)
    names = sorted(p.name for p in tmp_path.iterdir() if ".torn-" in p.name)
    assert len(names) == 2
    assert names[0].startswith("chain.jsonl.torn-") and not names[0].startswith("chain.jsonl.torn-s")
    assert names[1].startswith(f"chain.jsonl.torn-s{cut.end}-")
    assert all((tmp_path / name).read_bytes() == torn for name in names)
    assert main(["verify", str(chain)]) == 0


def test_a_tree_rebuilt_from_a_pruned_chain_starts_at_its_minimum_index_and_is_the_signed_one(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.jsonl"
    written_cut_twice(chain)
    assert prune(str(chain), Retention(min_index=700), PruneOptions([SIGNER.verifier()])).after == 700
    Path(str(chain) + ".tlog/state").unlink()  # no hint: the tree is rebuilt from the chain
    append(chain, 20, 1_198)
    rebuilt = Checkpointer(str(chain), ORIGIN, SIGNER, max_leaves=100)
    caught_up(rebuilt)  # from line 700 on, the tree below it read from the signed tiles
    assert rebuilt.size == 1_220 and rebuilt.last is not None
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


@pytest.mark.parametrize("damage", ["missing", "empty", "changed"])
def test_a_pruned_chain_whose_newest_right_edge_tile_is_damaged_is_rebuilt_not_refused_as_truncated(
    tmp_path: Path, damage: str
) -> None:
    # The rebuild of a pruned chain read the tree of m leaves only through the newest checkpoint's right
    # edge: one partial tile of retained records lost or damaged, and the writer refused for good as
    # "truncated" (tree_size 0), a refusal no one can acknowledge, though an older signed tree holds m.
    chain = tmp_path / "chain.jsonl"
    written_cut_twice(chain)
    assert prune(str(chain), Retention(min_index=700), PruneOptions([SIGNER.verifier()])).after == 700
    edge = Path(str(chain) + ".tlog/tile/0/004.p/176")  # records 1,024 .. 1,199 of the signed 1,200
    if damage == "missing":
        edge.unlink()
    else:
        edge.write_bytes(b"" if damage == "empty" else b"\xff" * 32 + edge.read_bytes()[32:])
    append(chain, 20, 1_198)
    rebuilt = Checkpointer(str(chain), ORIGIN, SIGNER)
    caught_up(rebuilt)
    assert rebuilt.size == 1_220 and rebuilt.last is not None
    assert not Path(str(chain) + ".tlog/refusals").exists()
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


@pytest.mark.parametrize("max_leaves", [1 << 20, 25], ids=["default", "below-the-signed-size"])
def test_the_last_checkpoint_of_a_fresh_writer_after_another_process_cut_covers_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_leaves: int
) -> None:
    # checkpoint_now's steps shared one budget counted from the tree's size: a writer with no tree yet
    # resumes at the signed size in its first call, which used the budget up once the chain held more
    # records than it (25 stands for 2**20 here), and the records after the cut went unsigned.
    chain = tmp_path / "chain.jsonl"
    append(chain, 30, 0)
    assert cut_signed(Checkpointer(str(chain), ORIGIN, SIGNER), 1.0) is not None  # another process
    append(chain, 3, 30)
    monkeypatch.setattr(checkpointing, "SHUTDOWN_MAX_LEAVES", max_leaves)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    final = ScheduledCheckpointer(writer, background=False).checkpoint_now()
    assert final is not None and final.size == 34 and not writer.behind


def test_a_prune_that_commits_while_a_rebuild_reads_a_segment_it_removes_is_no_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The retry after a prune that committed during a call kept the call's cursor, inside a segment the
    # prune removed, and refused "truncated" for good.
    chain = tmp_path / "chain.jsonl"
    written_cut_twice(chain)
    Path(str(chain) + ".tlog/state").unlink()  # no hint: the next writer rebuilds, a slice per call
    writer = Checkpointer(str(chain), ORIGIN, SIGNER, max_leaves=100)
    writer.checkpoint()
    assert writer.refused is None and writer.behind and writer.size == 100  # its cursor in segment 0
    pruned: list[int] = []

    class PrunedMeanwhile(SegmentFiles):
        def __init__(self, chain_path: str, store: LogStore | None = None) -> None:
            super().__init__(chain_path, store)
            if not pruned:
                options = PruneOptions([SIGNER.verifier()])
                pruned.append(prune(chain_path, Retention(min_index=700), options).after)

    monkeypatch.setattr(checkpointer_module, "SegmentFiles", PrunedMeanwhile)
    for _ in range(30):
        writer.checkpoint()
        if not writer.behind or writer.refused is not None:
            break
    assert pruned == [700] and writer.refused is None and not writer.behind
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


def test_a_cut_made_while_the_retention_prunes_is_pruned_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The prune cleared the retention's flag when it ended: a cut another host thread made meanwhile (the
    # prune no longer holds the schedule's lock) had set it, and its segment waited for yet another cut.
    entered, release = threading.Event(), threading.Event()

    def long_prune(chain_path: str, retention: Retention, options: PruneOptions) -> PruneResult:
        entered.set()
        assert release.wait(30)  # a hang guard: the test releases it
        return PruneResult(0, 0, (), None, (), 0, 0, RetiredNotes())

    monkeypatch.setattr(retention_module, "prune", long_prune)
    retention = HostRetention(str(tmp_path / "chain.jsonl"), 10, [SIGNER.verifier()])
    retention.due = True
    pruning = threading.Thread(target=retention.apply)
    pruning.start()
    try:
        assert entered.wait(30)
        retention.due = True  # what the checkpointing step sets after its cut
    finally:
        release.set()
        pruning.join(30)
    assert retention.due


def test_verify_of_a_pruned_chain_whose_newest_right_edge_tile_is_damaged_proves_its_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # verify read the tree below a pruned chain's minimum index, and the first record kept, only through
    # the newest checkpoint's tiles: one damaged partial tile at its right edge, and every checkpoint was
    # "unprovable", though an older signed tree's tiles give the same nodes. The damage is still named.
    chain = tmp_path / "chain.jsonl"
    written_cut_twice(chain)
    assert prune(str(chain), Retention(min_index=300), PruneOptions([SIGNER.verifier()])).after == 300
    edge = Path(str(chain) + ".tlog/tile/0/004.p/176")
    edge.write_bytes(b"\xff" * 32 + edge.read_bytes()[32:])
    capsys.readouterr()
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 1
    out = capsys.readouterr().out
    assert "seq 300 authenticated from the signed tree of size 700" in out, out
    assert "consistent with 3 checkpoint(s), largest size 1200" in out and "unprovable" not in out
    assert "TILES DAMAGED" in out and "tile/0/004.p/176" in out
