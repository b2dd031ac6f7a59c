"""The append tells its caller what it wrote: for every line, its offset, bytes and record hash, known
where the line is built, never by reading the chain back; the RFC 6962 leaf hash follows from them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from test_chain_lock import lock_held_by_another_process

from otel_route_shadow.chain import (
    DecisionChain,
    WrittenLine,
    encode_payload,
    sanitize_payload,
    verify_chain,
)
from otel_route_shadow.chain.record import parse_record_line


def _expected(path: Path) -> list[WrittenLine]:
    """What the file holds, line by line, hashed independently."""
    data = path.read_bytes()
    lines, offset = [], 0
    for line in data.split(b"\n")[:-1]:
        record = parse_record_line(line)
        lines.append(WrittenLine(offset, line + b"\n", record.record_hash, record.prev_hash))
        offset += len(line) + 1
    return lines


def test_every_line_written_is_reported_with_its_offset_bytes_and_record_hash(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    seen: list[WrittenLine] = []
    # A spilled record, a torn tail (quarantine event), a backlog with a drop event, and own records.
    spiller = DecisionChain(path, lock_timeout=0.01)
    with lock_held_by_another_process(path):
        spiller.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": "spilled"})))
        spiller.spill(5.0)
    with path.open("ab") as handle:
        handle.write(b'{"payload":{"torn')
    log = DecisionChain(path, lock_timeout=0.01, backlog=1, listener=seen.append)
    log.append({"kind": "route-shadow", "n": 0})
    with lock_held_by_another_process(path):
        for n in (1, 2, 3):
            log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n})))
    log.append({"kind": "route-shadow", "n": 4})
    assert seen == _expected(path)
    assert [w.leaf_hash() for w in seen] == [hashlib.sha256(b"\x00" + w.line[:-1]).digest() for w in seen]
    kinds = [
        parse_record_line(path.read_bytes().split(b"\n")[i]).payload.get("kind") for i in range(len(seen))
    ]
    assert kinds == [
        "chain-quarantine",
        "route-shadow",
        "route-shadow",
        "route-shadow",
        "records-dropped",
        "route-shadow",
    ]
    assert verify_chain(path).intact


def test_lines_of_other_writers_show_as_a_gap_between_reported_lines(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    seen: list[WrittenLine] = []
    mine = DecisionChain(path, listener=seen.append)
    other = DecisionChain(path)
    mine.append({"n": 0})
    other.append({"n": 1})
    mine.append({"n": 2})
    everything = _expected(path)
    assert seen == [everything[0], everything[2]]
    assert seen[1].offset != seen[0].offset + seen[0].length


def test_reporting_reads_nothing_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chain.jsonl"
    seen: list[WrittenLine] = []
    log = DecisionChain(path, listener=seen.append)
    log.append({"n": 0})  # the first append reads the tail once to find the head
    reads: list[int] = []
    real_pread, real_read = os.pread, os.read

    def pread(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real_pread(fd, n, offset)

    def read(fd: int, n: int) -> bytes:
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "pread", pread)
    monkeypatch.setattr(os, "read", read)
    for n in range(1, 20):
        log.append({"n": n})
    assert reads == [] and len(seen) == 20


def test_a_listener_that_raises_is_logged_once_and_the_appends_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "chain.jsonl"
    calls: list[Any] = []

    def broken(line: WrittenLine) -> None:
        calls.append(line)
        raise RuntimeError("a bug in the listener")

    log = DecisionChain(path, listener=broken)
    for n in range(3):
        log.append({"n": n})
    assert len(calls) == 3
    assert [r.getMessage() for r in caplog.records].count(
        "route shadow: the chain's line listener raised RuntimeError"
    ) == 1
    assert verify_chain(path).records == 3


def test_a_listener_can_be_set_and_removed_later(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    seen: list[WrittenLine] = []
    log = DecisionChain(path)
    log.append({"n": 0})
    log.listener = seen.append
    log.append({"n": 1})
    log.listener = None
    log.append({"n": 2})
    assert seen == [_expected(path)[1]]
