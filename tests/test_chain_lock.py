"""A writer with a lock timeout never waits on another process for longer than that, and loses
nothing: what did not get the lock in time is kept in order and written with the next record; what
did not fit in the bounded backlog is counted in a ``records-dropped`` event that ``verify`` reports.

Another process really holds the lock here (``fcntl.flock`` in a child). The wall-clock bound on each
call is a hang guard only, far above the timeout; no assertion depends on how fast anything runs.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from otel_route_shadow import locking
from otel_route_shadow.chain import (
    DROPPED_KIND,
    ChainHead,
    ChainLockTimeout,
    DecisionChain,
    EncodedPayload,
    encode_payload,
    iter_payloads,
    read_head,
    sanitize_payload,
    verify_chain,
)

HANG_GUARD_S = 30.0

_HOLDER = """
import fcntl, sys
fd = open(sys.argv[1], "ab")
fcntl.flock(fd, fcntl.LOCK_{mode})
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def lock_held_by_another_process(path: Path, mode: str = "EX") -> Iterator[None]:
    """A child process holds ``flock`` on ``path`` until the block ends."""
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER.format(mode=mode), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked"
        yield
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(HANG_GUARD_S)


def _encoded(n: int) -> EncodedPayload:
    return encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n}))


def _ns(payloads: list[dict[str, object]]) -> list[object]:
    return [p["n"] if "n" in p else p["kind"] for p in payloads]


def _payloads(path: Path) -> list[dict[str, object]]:
    return [payload for _, payload in iter_payloads(path)]


def _timed(call: object, *args: object) -> object:
    start = time.monotonic()
    result = call(*args)  # type: ignore[operator]
    assert time.monotonic() - start < HANG_GUARD_S
    return result


def test_a_record_that_finds_the_chain_locked_is_kept_and_written_first_next_time(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.05)
    log.submit(_encoded(0))
    with lock_held_by_another_process(path):
        assert _timed(log.submit, _encoded(1)) is None
        assert _timed(log.submit, _encoded(2)) is None
        assert log.backlog == 2
    head = log.submit(_encoded(3))
    assert head is not None and head.seq == 3
    assert log.backlog == 0
    assert _ns(_payloads(path)) == [0, 1, 2, 3]
    assert verify_chain(path).intact


def test_a_shared_lock_held_by_a_reader_delays_no_append_past_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.02)
    log.append({"n": 0})
    with lock_held_by_another_process(path, mode="SH"):
        assert _timed(log.submit, _encoded(1)) is None
    assert log.flush(timeout=None) == 0
    assert _ns(_payloads(path)) == [0, 1]


def test_append_raises_a_lock_timeout_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.02)
    log.append({"n": 0})
    with lock_held_by_another_process(path), pytest.raises(ChainLockTimeout):
        _timed(log.append, {"n": 1})
    assert _ns(_payloads(path)) == [0]


def test_a_full_backlog_counts_what_it_drops_and_the_chain_records_the_gap(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.01, backlog=2)
    log.submit(_encoded(0))
    before = time.time_ns()
    with lock_held_by_another_process(path):
        for n in range(1, 6):
            assert _timed(log.submit, _encoded(n)) is None
    after = time.time_ns()
    log.submit(_encoded(6))
    payloads = _payloads(path)
    assert _ns(payloads) == [0, 1, 2, DROPPED_KIND, 6]
    event = payloads[3]
    assert event["count"] == 3 and event["reason"] == "chain-lock-timeout"
    first, last = int(str(event["first_time_unix_nano"])), int(str(event["last_time_unix_nano"]))
    assert before <= first <= last <= after
    result = verify_chain(path)
    assert result.intact
    assert (result.dropped_events, result.dropped_records) == (1, 3)
    assert "dropped 3 records in 1 gap" in result.describe()
    assert result.to_dict()["dropped_records"] == 3


def test_flush_gives_up_at_its_bound_and_keeps_the_records(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.01)
    log.append({"n": 0})
    with lock_held_by_another_process(path):
        log.submit(_encoded(1))
        assert _timed(log.flush, 0.05) == 1
    assert log.flush(0.05) == 0
    assert _ns(_payloads(path)) == [0, 1]


def test_a_forked_child_leaves_its_parents_backlog_to_the_parent(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.01)
    log.append({"n": 0})
    with lock_held_by_another_process(path):
        log.submit(_encoded(1))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0 if log.backlog == 0 else 1
        log.append({"n": "child"})
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    log.flush(None)
    assert sorted(map(str, _ns(_payloads(path)))) == ["0", "1", "child"]
    assert verify_chain(path).intact


def test_the_backlog_keeps_order_counts_drops_and_puts_back_what_was_not_written() -> None:
    from otel_route_shadow.chain.backlog import Backlog

    backlog = Backlog(2)
    assert [backlog.keep(_encoded(n), 100 + n) for n in range(5)] == [True, True, False, False, False]
    assert len(backlog) == 3  # two records and the drop event to come
    entries, _ = backlog.take(None)
    assert entries[:2] == [_encoded(0), _encoded(1)]
    event = orjson.loads(entries[2].payload)
    assert event == {
        "kind": DROPPED_KIND,
        "reason": "chain-lock-timeout",
        "count": 3,
        "first_time_unix_nano": "102",
        "last_time_unix_nano": "104",
    }
    assert len(backlog) == 0
    backlog.keep(_encoded(9), 200)
    backlog.restore(entries[1:], None)  # the first was written, the rest not: the event back into the count
    assert len(backlog) == 3
    backlog.keep(_encoded(10), 300)
    backlog.keep(_encoded(11), 301)  # full again: counted with the restored three
    assert backlog.take(None)[0][:2] == [entries[1], _encoded(9)]
    backlog.restore(entries[2:], None)
    backlog.restore(entries[2:], None)  # restored twice (two failed writes): the count grows, not the queue
    assert len(backlog) == 1
    assert orjson.loads(backlog.take(None)[0][0].payload)["count"] == 6


def test_the_exporter_keeps_what_waited_and_writes_it_at_shutdown(tmp_path: Path) -> None:
    from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter

    path = tmp_path / "chain.jsonl"
    exporter = RouteShadowChainExporter(path, lock_timeout_ms=10)
    exporter.append(1, 1, 1, {"route_shadow.seam": "first"})
    with lock_held_by_another_process(path):
        _timed(exporter.append, 2, 2, 2, {"route_shadow.seam": "waited"})
        assert _timed(exporter.flush_backlog, 0.02) == 1  # still locked: kept, and said so
    exporter.close()
    seams = [p["attributes"]["route_shadow.seam"] for p in _payloads(path)]  # type: ignore[index]
    assert seams == ["first", "waited"]
    assert verify_chain(path).intact


def test_an_fsync_append_does_not_wait_past_the_timeout_for_a_held_sync_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, durability="fsync", lock_timeout=0.01)
    log.append({"kind": "route-shadow", "n": 0})
    syncs = log.fsyncs
    with lock_held_by_another_process(Path(str(path) + ".sync")):
        for n in (1, 2):
            record = _timed(log.append, {"kind": "route-shadow", "n": n})
            assert record is not None
    assert log.fsyncs == syncs and log.sync_timeouts == 2
    warnings = [r for r in caplog.records if "sync lock stayed taken" in r.getMessage()]
    assert len(warnings) == 1
    assert _ns(_payloads(path)) == [0, 1, 2]
    log.append({"kind": "route-shadow", "n": 3})
    assert log.fsyncs == syncs + 1
    assert verify_chain(path).intact


def test_the_checkpoint_at_uninstrument_covers_records_that_waited_for_the_lock(tmp_path: Path) -> None:
    # The final checkpoint used to be taken before the backlog was written, so it (the one sent to the
    # backend at uninstrument) left out the records that had waited for the lock.
    from opentelemetry.sdk.trace import TracerProvider

    from otel_route_shadow.demo import factory
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

    path = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=TracerProvider(), chain_path=path, seams=(), chain_lock_timeout_ms=10
    )
    jobs = factory.plan_jobs(3, factory.FactorySettings())
    try:
        runtime = instrumentor.runtime
        assert runtime is not None
        with shadow_spawn(factory.context_for(jobs[0], "agentic"), seam="t"):
            pass
        with lock_held_by_another_process(path):
            for job in jobs[1:]:
                with shadow_spawn(factory.context_for(job, "agentic"), seam="t"):
                    pass
        runtime.checkpoint_now()
        last = runtime.checkpointer.last
        assert last is not None and last.size == 3
    finally:
        instrumentor.uninstrument()
    assert verify_chain(path).records == 3


def _watermark(path: Path) -> tuple[int, int, int]:
    dev, ino, durable = struct.unpack("<QQQ", (Path(str(path) + ".sync")).read_bytes()[:24])
    return dev, ino, durable


def test_torn_tail_repair_does_not_wait_without_bound_for_a_held_sync_lock(tmp_path: Path) -> None:
    # _lower_watermark took the .sync flock with no bound: a torn-tail repair in fsync mode stalled the
    # spawn for as long as anyone held that lock. Now it gives up at the lock timeout, owes the
    # lowering, and the next sync of the same writer settles it: chain intact, watermark exact.
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, durability="fsync", lock_timeout=0.01)
    log.append({"kind": "route-shadow", "n": 0})
    log.append({"kind": "route-shadow", "n": 1})
    intact = path.stat().st_size
    with path.open("ab") as chain:  # a writer killed mid-line, after a leader synced the torn bytes
        chain.write(b'{"seq": 2, "payload": ' + b"x" * 4000)
    st = path.stat()
    (Path(str(path) + ".sync")).write_bytes(struct.pack("<QQQ", st.st_dev, st.st_ino, st.st_size))
    syncs = log.fsyncs
    with lock_held_by_another_process(Path(str(path) + ".sync")):
        record = _timed(log.append, {"kind": "route-shadow", "n": 2})
        assert record is not None and log.quarantines == 1
        assert log.fsyncs == syncs and log.sync_timeouts >= 1
        assert _watermark(path)[2] == st.st_size  # still stale: nothing could touch it
    log.append({"kind": "route-shadow", "n": 3})  # the next sync does not trust it and settles it
    after = path.stat()
    assert log.fsyncs == syncs + 1
    assert _watermark(path) == (after.st_dev, after.st_ino, after.st_size)
    assert intact < after.st_size
    assert _ns(_payloads(path)) == [0, 1, "chain-quarantine", 2, 3]
    assert verify_chain(path).intact


def test_torn_tail_repair_lowers_the_watermark_when_the_sync_lock_is_free(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, durability="fsync", lock_timeout=0.01)
    log.append({"kind": "route-shadow", "n": 0})
    intact = path.stat().st_size
    with path.open("ab") as chain:
        chain.write(b'{"seq": 1, "payload": ' + b"x" * 4000)
    st = path.stat()
    (Path(str(path) + ".sync")).write_bytes(struct.pack("<QQQ", st.st_dev, st.st_ino, st.st_size))
    log.append({"kind": "route-shadow", "n": 1})
    assert log.sync_timeouts == 0
    after = path.stat()
    assert intact < after.st_size < st.st_size  # the record and the event fit in the torn bytes
    assert _watermark(path) == (after.st_dev, after.st_ino, after.st_size)
    assert verify_chain(path).intact


def test_readers_of_the_head_and_the_size_wait_for_a_hung_writer_a_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read_head and verify each took a blocking shared flock: a writer that hung holding the chain's
    # lock held them forever. They go through locking.settled_size, which waits SETTLE_WAIT_S at most.
    path = tmp_path / "chain.jsonl"
    written = DecisionChain(path).append({"n": 0})
    monkeypatch.setattr(locking, "SETTLE_WAIT_S", 0.05)
    with lock_held_by_another_process(path):
        assert _timed(read_head, path) == ChainHead(0, written.record_hash)
        assert _timed(verify_chain, path).intact  # type: ignore[attr-defined]


def test_read_head_on_a_filesystem_without_flock_reads_the_head_as_verify_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify took the size without the lock where flock fails (ENOLCK: some network filesystems);
    # read_head raised. Both take it from locking.settled_size now.
    path = tmp_path / "chain.jsonl"
    written = DecisionChain(path).append({"n": 0})
    real_flock = fcntl.flock

    def no_shared_locks(fd: int, operation: int) -> None:
        if operation & fcntl.LOCK_SH:
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", no_shared_locks)
    assert read_head(path) == ChainHead(0, written.record_hash)
    assert verify_chain(path).intact


def test_uninstrument_with_the_lock_held_waits_for_the_backlog_once_then_spills_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The way out flushed the backlog twice, each wait bounded alone (the last checkpoint's, then the
    exporter's close), and warned twice: once that the records still waited, once that they were spilled."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_route_shadow.demo import factory
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

    path = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=TracerProvider(), chain_path=path, seams=(), chain_lock_timeout_ms=10
    )
    jobs = factory.plan_jobs(3, factory.FactorySettings())
    with lock_held_by_another_process(path):
        for job in jobs:
            with shadow_spawn(factory.context_for(job, "agentic"), seam="t"):
                pass
        caplog.clear()
        with caplog.at_level("WARNING"):
            instrumentor.uninstrument()
    said = [record.getMessage() for record in caplog.records]
    assert not any("chain records still wait" in line for line in said), said
    assert Path(str(path) + ".spill").exists()
