"""``logstore.archives.read_segment``: a segment read in batches (the quick check, each declined line
checked exactly) finds every damage at the record where it is, within a batch or across batches, and the
leaf hashes of a clean segment are those of its lines."""

from __future__ import annotations

import io

import pytest
from prune_support import segmented_chain

from otel_route_shadow.logstore import archives
from otel_route_shadow.logstore.archives import read_segment
from otel_route_shadow.tlog import leaf_hash


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    log = segmented_chain(tmp_path_factory.mktemp("read") / "log", (12, 10))
    return log.segment(12).read_bytes().splitlines(keepends=True)  # records 12..21, the first an anchor


@pytest.fixture(params=[3, 4096], ids=["batches-of-3", "one-batch"])
def batch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(archives, "_BATCH", request.param)
    return int(request.param)


def read(data: list[bytes], first: int = 12) -> archives.SegmentRead:
    return read_segment(io.BytesIO(b"".join(data)), first)


def test_a_clean_segment_gives_the_leaf_hash_of_every_line(lines: list[bytes], batch: int) -> None:
    got = read(lines)
    assert got.problem is None and got.count == 10
    assert got.leaves == b"".join(leaf_hash(line[:-1]) for line in lines)


@pytest.mark.parametrize("at", range(10))
def test_an_edited_record_is_found_where_it_is(lines: list[bytes], batch: int, at: int) -> None:
    edited = [*lines]
    edited[at] = edited[at].replace(b'"kind":', b'"kinD":', 1)
    got = read(edited)
    assert got.problem is not None and got.problem.startswith(f"record {12 + at}:")
    assert got.count == at


@pytest.mark.parametrize("at", range(1, 9))
def test_a_dropped_duplicated_or_swapped_line_is_found(lines: list[bytes], batch: int, at: int) -> None:
    assert (read([*lines[:at], *lines[at + 1 :]]).problem or "").startswith(f"record {12 + at}: seq")
    assert (read([*lines[: at + 1], *lines[at:]]).problem or "").startswith(f"record {12 + at + 1}: seq")
    swapped = [*lines[:at], lines[at + 1], lines[at], *lines[at + 2 :]]
    assert (read(swapped).problem or "").startswith(f"record {12 + at}: seq")


def test_a_torn_tail_and_a_wrong_first_seq_are_found(lines: list[bytes], batch: int) -> None:
    assert "torn" in (read([*lines[:-1], lines[-1][:-1]]).problem or "")
    assert (read(lines, first=13).problem or "").startswith("record 13: seq 12")


def test_a_line_over_the_limit_is_refused_without_holding_the_file(
    lines: list[bytes], batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "MAX_LINE_BYTES", 64)
    got = read(lines)
    assert got.problem is not None and got.problem.startswith("record 12:") and got.count == 0
