"""A record the disk refuses (no space, a file-size limit) is not lost silently: the writer counts it,
and the chain gets a ``records-dropped`` event for it once writing works again, in this process or,
through the spill file, in the next one.

The file-size limit is real (``RLIMIT_FSIZE`` in a child process); a full disk is simulated by making
``os.write`` fail with ``ENOSPC`` for chosen calls (counted, never timed).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import (
    DROPPED_KIND,
    DecisionChain,
    encode_payload,
    iter_payloads,
    sanitize_payload,
    verify_chain,
)

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 60.0
CALLS = 60

_LIMITED_WRITER = """
import json, resource, sys
from otel_route_shadow.chain import DecisionChain, encode_payload, sanitize_payload

path, calls, recover = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "recover"
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
log = DecisionChain(path, lock_timeout=1.0)
refused = 0
for n in range(calls):
    try:
        log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n, "pad": "p" * 100})))
    except OSError:
        refused += 1
if recover:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": "after"})))
else:
    try:
        log.flush(0.01)
    except OSError:
        pass  # still refused: the drop count waits in the backlog
    spilled = log.spill(1.0)
    print(json.dumps({"spilled": spilled}))
print(json.dumps({"refused": refused}))
"""


def _run(path: Path, recover: bool) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _LIMITED_WRITER, str(path), str(CALLS), "recover" if recover else "exit"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    refused: int = json.loads(done.stdout.splitlines()[-1])["refused"]
    return refused


def _payloads(path: Path) -> list[dict[str, Any]]:
    return [payload for _, payload in iter_payloads(path)]


def test_records_lost_to_a_file_size_limit_leave_a_gap_marker_when_writing_works_again(
    tmp_path: Path,
) -> None:
    # Under RLIMIT_FSIZE 480 of 500 records were lost and the chain carried no gap marker (issue 25).
    path = tmp_path / "chain.jsonl"
    refused = _run(path, recover=True)
    assert 0 < refused < CALLS
    payloads = _payloads(path)
    assert [p["n"] for p in payloads[:-2]] == list(range(CALLS - refused))
    event, last = payloads[-2:]
    assert event["kind"] == DROPPED_KIND and event["reason"] == "file-too-large"
    assert event["count"] == refused and int(event["first_time_unix_nano"]) <= int(
        event["last_time_unix_nano"]
    )
    assert last["n"] == "after"
    result = verify_chain(path)
    assert result.intact and (result.dropped_events, result.dropped_records) == (1, refused)


def test_records_lost_to_a_file_size_limit_are_marked_by_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    refused = _run(path, recover=False)
    assert 0 < refused < CALLS
    assert not any(p["kind"] == DROPPED_KIND for p in _payloads(path))  # the limit held to the end
    DecisionChain(path).append({"kind": "route-shadow", "n": "next process"})
    payloads = _payloads(path)
    assert payloads[-2]["kind"] == DROPPED_KIND and payloads[-2]["count"] == refused
    assert payloads[-1]["n"] == "next process"
    result = verify_chain(path)
    assert result.intact and len(payloads) - 2 + result.dropped_records == CALLS


def _failing_writes(monkeypatch: pytest.MonkeyPatch, fail: set[int], code: int) -> list[int]:
    """``os.write`` fails with ``code`` on the chosen calls (0-based), and writes otherwise."""
    calls: list[int] = []
    real = os.write

    def write(fd: int, data: Any) -> int:
        calls.append(fd)
        if len(calls) - 1 in fail:
            raise OSError(code, os.strerror(code))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return calls


def test_records_lost_to_a_full_disk_are_counted_with_their_own_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 0})))
    with monkeypatch.context() as patch:
        _failing_writes(patch, {0, 1, 2}, errno.ENOSPC)
        for n in (1, 2, 3):
            with pytest.raises(OSError):
                log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n})))
        assert log.backlog == 1  # the count, waiting to become an event
        log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 4})))
    payloads = _payloads(path)
    assert [p.get("n", p["kind"]) for p in payloads] == [0, DROPPED_KIND, 4]
    assert (payloads[1]["reason"], payloads[1]["count"]) == ("no-space", 3)
    assert verify_chain(path).intact


def test_a_record_written_before_its_sync_failed_is_not_counted_as_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, durability="fsync")

    def failing_sync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fdatasync", failing_sync)
        with pytest.raises(OSError):
            log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 0})))
    assert log.backlog == 0
    log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 1})))
    assert [p["n"] for p in _payloads(path)] == [0, 1]


def test_append_raises_and_leaves_the_count_to_its_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append`` tells its caller; only ``submit`` (which keeps records for later) counts them."""
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    with monkeypatch.context() as patch:
        _failing_writes(patch, {0}, errno.ENOSPC)
        with pytest.raises(OSError):
            log.append({"kind": "route-shadow", "n": 0})
    assert log.backlog == 0


def test_a_short_write_that_makes_no_progress_is_a_failure_not_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    log.append({"kind": "route-shadow", "n": 0})
    size = path.stat().st_size
    real = os.write
    calls: list[int] = []

    def short(fd: int, data: Any) -> int:
        calls.append(fd)
        return real(fd, bytes(data)[:10]) if len(calls) == 1 else 0

    with monkeypatch.context() as patch:
        patch.setattr(os, "write", short)
        with pytest.raises(OSError) as raised:
            log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 1})))
    assert raised.value.errno == errno.ENOSPC and len(calls) == 2
    assert path.stat().st_size == size  # the partial line was taken back
    log.submit(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 2})))
    assert [p.get("n", p.get("reason")) for p in _payloads(path)] == [0, "no-space", 2]
    assert verify_chain(path).intact
