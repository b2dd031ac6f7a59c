"""A record refused because the chain's last complete line is not a record (``ChainCorruptError``: no
head to link to) is not lost silently: ``submit`` counts it, and once the line is repaired the chain
gets a ``records-dropped`` event (reason ``chain-corrupt``) for it, from this writer or, through the
spill file, from the next one.

Also here: an append's lock timeout is one deadline, however often the chain file is reopened while it
waits (measured on a fake clock that advances only by the writer's own sleeps, never timed).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import (
    DROPPED_KIND,
    ChainCorruptError,
    DecisionChain,
    encode_payload,
    iter_payloads,
    sanitize_payload,
    verify_chain,
)

FOREIGN_LINE = b'{"not":"a record"}\n'
"""A complete line that is not a record: not a torn tail, so no quarantine moves it away."""


def _submit(log: DecisionChain, n: object) -> None:
    log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n})))


def _payloads(path: Path) -> list[dict[str, Any]]:
    return [payload for _, payload in iter_payloads(path)]


def _corrupt(path: Path) -> bytes:
    """End the chain with a foreign line; return the bytes it held before (for the repair)."""
    good = path.read_bytes()
    with path.open("ab") as chain:
        chain.write(FOREIGN_LINE)
    return good


def test_records_refused_while_the_last_line_is_corrupt_are_counted_as_dropped(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    _submit(log, 0)
    good = _corrupt(path)
    for n in (1, 2, 3):
        with pytest.raises(ChainCorruptError):
            _submit(log, n)
    assert log.backlog == 1  # the count, waiting to become an event
    assert log.backlog_records == (0, 3)
    path.write_bytes(good)  # the operator removes the foreign line
    _submit(log, 4)
    payloads = _payloads(path)
    assert [p.get("n", p["kind"]) for p in payloads] == [0, DROPPED_KIND, 4]
    assert (payloads[1]["reason"], payloads[1]["count"]) == ("chain-corrupt", 3)
    assert verify_chain(path).intact
    log.close()


def test_records_refused_while_the_last_line_is_corrupt_reach_the_next_writer_through_the_spill_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chain.jsonl"
    first = DecisionChain(path, lock_timeout=1.0)
    _submit(first, 0)
    good = _corrupt(path)
    for n in (1, 2):
        with pytest.raises(ChainCorruptError):
            _submit(first, n)
    with pytest.raises(ChainCorruptError):
        first.flush(1.0)  # still corrupt at exit: the count cannot be written
    assert first.spill(1.0) == 1
    first.close()
    path.write_bytes(good)
    with DecisionChain(path, lock_timeout=1.0) as second:
        _submit(second, 3)
    payloads = _payloads(path)
    assert [p.get("n", p["kind"]) for p in payloads] == [0, DROPPED_KIND, 3]
    assert (payloads[1]["reason"], payloads[1]["count"]) == ("chain-corrupt", 2)
    assert verify_chain(path).intact


def test_append_refused_while_the_last_line_is_corrupt_leaves_the_count_to_its_caller(
    tmp_path: Path,
) -> None:
    """``append`` tells its caller; only ``submit`` (which keeps records for later) counts them."""
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    log.append({"kind": "route-shadow", "n": 0})
    _corrupt(path)
    with pytest.raises(ChainCorruptError):
        log.append({"kind": "route-shadow", "n": 1})
    assert log.backlog == 0
    log.close()


def test_the_lock_timeout_bounds_an_append_in_all_when_the_file_is_replaced_while_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first file lock is waited for 90% of the timeout, then the file is replaced by one that
    is locked too: the second wait gets what is left, not a fresh timeout."""
    timeout = 0.1
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=timeout)
    _submit(log, 0)
    holders = [os.open(path, os.O_RDWR)]
    fcntl.flock(holders[0], fcntl.LOCK_EX)
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds
        if clock[0] >= 0.9 * timeout and len(holders) == 1:  # replace the file, locked, and let go
            replacement = tmp_path / "replacement"
            replacement.write_bytes(path.read_bytes())
            holders.append(os.open(replacement, os.O_RDWR))
            fcntl.flock(holders[1], fcntl.LOCK_EX)
            os.rename(replacement, path)
            fcntl.flock(holders[0], fcntl.LOCK_UN)

    try:
        with monkeypatch.context() as patch:
            patch.setattr(time, "monotonic", lambda: clock[0])
            patch.setattr(time, "sleep", sleep)
            assert log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 1}))) is None
        assert len(holders) == 2  # the writer met the replaced file
        assert clock[0] <= timeout + 1e-9
    finally:
        for fd in holders:
            os.close(fd)
    assert log.flush(None) == 0  # into the file now at the path
    assert [p["n"] for p in _payloads(path)] == [0, 1]
    log.close()
