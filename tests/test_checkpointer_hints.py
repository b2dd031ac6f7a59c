"""The writer's hints are hints (docs/chain-format.md 13.4, 13.6 and 14.5): a damaged ``state`` or a forged
``pruned`` file makes the checkpointer rebuild or go on from what was signed, never refuse for good, and
never read more than a line for a hint; a chain really cut below what was signed is still refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tlog_support import ORIGIN, append, lines, log_dir

from otel_route_shadow.chain import MAX_LINE_BYTES, SEGMENTS_SUFFIX, DecisionChain, segment_name
from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, PruneOptions, Retention, cut_signed, prune
from otel_route_shadow.logstore import checkpointer as checkpointer_module
from otel_route_shadow.logstore.segment_files import SegmentFiles
from otel_route_shadow.tlog import Signer

SIGNER = Signer.generate(ORIGIN)
HINTS = {
    "offset-far-past-the-end": {"offset": 10**12},
    "missing-segment": {"segment": 77},
    "longer-than-a-line": {"last_start": 0, "offset": MAX_LINE_BYTES + 2},
}


def signed_300(tmp_path: Path) -> Path:
    """A chain of 300 records signed at 100, 200 and 300 (another process's writer, gone)."""
    chain = tmp_path / "chain.jsonl"
    made = append(chain, 300, Checkpointer(str(chain), ORIGIN, SIGNER), every=100)
    assert [c.size for c in made] == [100, 200, 300]
    return chain


def edit_state(chain: Path, **changes: int) -> None:
    path = log_dir(chain) / "state"
    state = json.loads(path.read_text())
    state.update(changes)
    state.pop("previous", None)
    path.write_text(json.dumps(state))


def refusals(chain: Path) -> list[dict[str, Any]]:
    path = log_dir(chain) / "refusals"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def verified(chain: Path) -> bool:
    return main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0


def until_done(writer: Checkpointer, calls: int = 50) -> None:
    """Checkpoint until the writer refused or is caught up."""
    for _ in range(calls):
        writer.checkpoint()
        if writer.refused is not None or not writer.behind:
            return


# -- a damaged state hint: a rebuild, never a refusal (defect 4) ----------------------------------------


def rebuilds_not_refuses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, changes: Callable[[Path], dict[str, int]]
) -> None:
    """The hint changed as ``changes`` (of the chain) says: the next process rebuilds the tree and signs
    on, and so does the one after it (a refusal would be for good: ``truncated`` cannot be acknowledged)."""
    chain = signed_300(tmp_path)
    edit_state(chain, **changes(chain))
    append(chain, 10, start=1_000)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    made = writer.checkpoint()
    assert writer.refused is None and refusals(chain) == []
    assert made is not None and made.size == 310
    assert any("rebuilding the tree" in r.message for r in caplog.records)
    assert verified(chain)
    later = Checkpointer(str(chain), ORIGIN, SIGNER)  # resumes from the state the rebuild wrote
    append(chain, 5, start=2_000)
    assert (made := later.checkpoint()) is not None and made.size == 315 and later.refused is None


@pytest.mark.parametrize("past", [10**6, 10**12])
def test_a_state_hint_past_the_chains_end_rebuilds_not_refuses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, past: int
) -> None:
    rebuilds_not_refuses(tmp_path, caplog, lambda chain: {"offset": chain.stat().st_size + past})


@pytest.mark.parametrize("segment", [77, 300, 1 << 62])
def test_a_state_hint_naming_a_missing_segment_rebuilds_not_refuses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, segment: int
) -> None:
    rebuilds_not_refuses(tmp_path, caplog, lambda _: {"segment": segment})


# -- a hint is never read whole (defect 5) --------------------------------------------------------------


class _Recorded:
    """A chain file handle that records how many bytes each read asked for."""

    def __init__(self, handle: Any, sizes: list[int]) -> None:
        self._handle, self._sizes = handle, sizes

    def read(self, size: int = -1, /) -> bytes | None:
        self._sizes.append(size)
        return self._handle.read(size)  # type: ignore[no-any-return]

    def readinto(self, buffer: memoryview, /) -> int | None:
        self._sizes.append(len(buffer))
        return self._handle.readinto(buffer)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def test_a_state_hint_spanning_more_than_a_line_is_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 30, Checkpointer(str(chain), ORIGIN, SIGNER), every=30)
    with DecisionChain(chain) as log:  # more than MAX_LINE_BYTES of records after the signed tree
        for n in range(110):
            log.append({"kind": "route-shadow", "n": n, "blob": "x" * 40_000})
    assert chain.stat().st_size > MAX_LINE_BYTES + 2
    edit_state(chain, last_start=0, offset=chain.stat().st_size)  # "the last line is the whole chain"
    sizes: list[int] = []

    class Recording(SegmentFiles):
        def open(self, segment: int) -> tuple[Any, int]:
            handle, size = super().open(segment)
            return _Recorded(handle, sizes), size

    monkeypatch.setattr(checkpointer_module, "SegmentFiles", Recording)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    made = writer.checkpoint()
    assert sizes and max(sizes) <= MAX_LINE_BYTES + 2, max(sizes)  # one line (and the LF before) at most
    assert any("rebuilding the tree" in r.message for r in caplog.records)
    assert made is not None and made.size == 140 and writer.refused is None


# -- a real cut of the chain is still refused ------------------------------------------------------------


@pytest.mark.parametrize("hint", ["intact", *HINTS])
def test_a_chain_cut_below_the_signed_size_is_still_refused_truncated_whatever_the_state_says(
    tmp_path: Path, hint: str
) -> None:
    chain = signed_300(tmp_path)
    if hint != "intact":
        edit_state(chain, **HINTS[hint])
    chain.write_bytes(b"".join(line + b"\n" for line in lines(chain)[:250]))
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    until_done(writer)
    assert writer.refused == "truncated"
    assert [(r["reason"], r["tree_size"]) for r in refusals(chain)] == [("truncated", 300)]
    assert main(["acknowledge", str(chain)]) == 2  # a real cut: not acknowledgeable


# -- a forged pruned claim (defect 6) --------------------------------------------------------------------


def forge_pruned(chain: Path, bounds: list[tuple[int, int]], data: bytes) -> None:
    """A ``pruned`` file saying the segments ``bounds`` were pruned (sizes and SHA-256 of ``data``, the
    bytes of the last one, so that they look right)."""
    segments = [
        {
            "name": segment_name(first),
            "first": first,
            "end": end,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "archive": None,
        }
        for first, end in bounds
    ]
    pruned = {"min_index": bounds[-1][1], "time": 0, "command": "forged", "segments": segments}
    (log_dir(chain) / "pruned").write_text(json.dumps(pruned))


@pytest.mark.parametrize("fresh", [False, True], ids=["its-cursor", "from-the-state-hint"])
def test_a_forged_pruned_claim_for_the_live_segment_is_not_believed(
    tmp_path: Path, fresh: bool, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 300, writer, every=100)
    forge_pruned(chain, [(0, 300)], chain.read_bytes())  # the live file, never cut, "pruned"
    if fresh:
        writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 10, start=1_000)
    made = writer.checkpoint()
    assert writer.refused is None and refusals(chain) == []
    assert made is not None and made.size == 310
    told = [r for r in caplog.records if "not believing" in r.getMessage()]
    assert len(told) == 1 and told[0].name == "otel_route_shadow" and "PRIVATE" not in told[0].getMessage()
    assert "/pruned" in told[0].getMessage() and not Path(str(chain) + SEGMENTS_SUFFIX).exists()
    (log_dir(chain) / "pruned").unlink()  # `verify` takes the file as it says; without it: all signed
    assert verified(chain)


def cut_three_times(chain: Path) -> Checkpointer:
    """Segments [0, 300), [300, 700), [700, 1201) and a live file from 1201 (its anchor); the writer's
    tree ends at the end of the last segment closed."""
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 300, writer, every=100)
    for start, count in ((300, 399), (700, 500)):
        assert cut_signed(writer, 1.0) is not None
        append(chain, count, start=start)
        until_done(writer)
    assert cut_signed(writer, 1.0) is not None
    assert writer.size == 1_201 and not writer.behind and writer.refused is None
    return writer


def test_a_forged_pruned_claim_for_a_segment_still_on_disk_is_not_believed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = cut_three_times(chain)
    folder = Path(str(chain) + SEGMENTS_SUFFIX)
    last = (folder / segment_name(700)).read_bytes()
    forge_pruned(chain, [(0, 300), (300, 700), (700, 1_201)], last)
    append(chain, 40, start=5_000)
    until_done(writer)
    assert writer.refused is None and writer.size == 1_242
    assert not any("not believing" in r.message for r in caplog.records)  # a prune between commit and unlink
    assert sorted(p.name for p in folder.iterdir()) == [segment_name(f) for f in (0, 300, 700)]


@pytest.mark.parametrize("fresh", [False, True], ids=["its-cursor", "from-the-state-hint"])
def test_a_genuine_prune_of_the_segment_the_tree_ends_in_is_still_gone_on_from(
    tmp_path: Path, fresh: bool, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = cut_three_times(chain)
    assert prune(str(chain), Retention(keep_records=1), PruneOptions([SIGNER.verifier()])).after == 1_201
    assert not (Path(str(chain) + SEGMENTS_SUFFIX) / segment_name(700)).exists()
    if fresh:
        writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 40, start=5_000)
    until_done(writer)
    assert writer.refused is None and writer.size == 1_242 and refusals(chain) == []
    assert not any("not believing" in r.message for r in caplog.records)
    assert verified(chain)


@pytest.mark.parametrize("fresh", [False, True], ids=["its-cursor", "from-the-state-hint"])
def test_a_segment_removed_without_a_prune_is_still_refused_truncated(tmp_path: Path, fresh: bool) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = cut_three_times(chain)
    (Path(str(chain) + SEGMENTS_SUFFIX) / segment_name(700)).unlink()
    if fresh:
        writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 40, start=5_000)
    until_done(writer)
    assert writer.refused == "truncated"
    assert [(r["reason"], r["segment"]) for r in refusals(chain)] == [("truncated", 700)]
