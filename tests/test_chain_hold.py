"""Holding the chain's file lock between appends in a burst (``hold_ns``): fewer system calls, never
a different chain, and the lock always comes back: when the writer goes idle, when its time is up,
when another process needs it, when a reader in this process asks, when the file moves, when the
holder dies."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest
from test_chain_support import plugin_payload

from otel_route_shadow.chain import RoutingAuditLog, iter_payloads, verify_chain
from otel_route_shadow.chain import log as chain_log

HOLD_NS = 50_000_000


def _locked_elsewhere(path: Path) -> bool:
    """Whether another open file description holds the lock (flock conflicts across descriptions,
    in this process too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _burst(log: RoutingAuditLog, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        log.append(plugin_payload(i))


def _wait_until(predicate: Any, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_a_burst_holds_the_lock_and_an_idle_writer_gives_it_back(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(path, hold_ns=HOLD_NS)
    _burst(log, 5)
    assert log._held and _locked_elsewhere(path)
    assert _wait_until(lambda: not _locked_elsewhere(path))  # the keeper gave it back
    assert not log._held
    _burst(log, 5, 5)
    assert verify_chain(path).intact and verify_chain(path).records == 10


def test_a_writer_appending_now_and_then_never_holds(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(path, hold_ns=HOLD_NS)
    for i in range(3):
        log.append(plugin_payload(i))
        assert not log._held and not _locked_elsewhere(path)
        time.sleep(2 * chain_log.HOLD_DENSE_NS / 1e9)


def test_held_or_not_the_chain_is_byte_for_byte_the_same(tmp_path: Path) -> None:
    held, plain = (
        RoutingAuditLog(tmp_path / "a.jsonl", hold_ns=HOLD_NS),
        RoutingAuditLog(tmp_path / "b.jsonl"),
    )
    for i in range(200):
        held.append(plugin_payload(i))
        plain.append(plugin_payload(i))
    held.close()
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_reader_in_this_process_takes_the_lock_back_at_once(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(path, hold_ns=10**12)  # a hold that would not end by itself for a long time
    _burst(log, 5)
    assert log._held
    assert verify_chain(path).intact  # would block on the writer's lock without the hand-back
    assert not log._held
    assert log.head() is not None


def test_a_hold_ends_at_its_time_even_in_a_steady_stream(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(path, hold_ns=5_000_000)
    released = 0
    deadline = time.monotonic() + 0.2
    i = 0
    while time.monotonic() < deadline:
        was = log._held
        log.append(plugin_payload(i))
        released += was and not log._held
        i += 1
    assert released >= 2


def _append_one(path: str, queue: Any) -> None:  # pragma: no cover - runs in a child
    start = time.monotonic()
    RoutingAuditLog(path).append({"kind": "route-shadow", "from": "child"})
    queue.put(time.monotonic() - start)


def test_another_process_gets_in_within_the_hold_and_the_holder_backs_off(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(path, hold_ns=HOLD_NS)
    _burst(log, 5)
    assert log._held
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_append_one, args=(str(path), queue))
    child.start()
    waited = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert waited < 5  # bounded by the hold (50 ms) and the idle hand-back; generous for a busy machine
    _burst(log, 5, 100)  # finds the child's record: backs off
    assert not log._held and not _locked_elsewhere(path)
    payloads = [p for _, p in iter_payloads(path)]
    assert {"kind": "route-shadow", "from": "child"} in payloads
    assert len(payloads) == 11 and verify_chain(path).intact


def _hold_then_die(path: str, ready: Any) -> None:  # pragma: no cover - runs in a child
    log = RoutingAuditLog(path, hold_ns=10**12)
    for i in range(5):
        log.append(plugin_payload(i))
    assert log._held
    ready.set()
    time.sleep(60)


def test_a_holder_that_dies_gives_the_lock_back(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_hold_then_die, args=(str(path), ready))
    child.start()
    assert ready.wait(60)
    assert _locked_elsewhere(path)
    child.kill()
    child.join(timeout=60)
    assert not _locked_elsewhere(path)
    RoutingAuditLog(path).append(plugin_payload(9))
    assert verify_chain(path).intact


def test_a_chain_removed_while_held_is_let_go_and_the_next_record_starts_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = RoutingAuditLog(path, hold_ns=10**12)
    _burst(log, 5)
    assert log._held
    path.rename(tmp_path / "moved.jsonl")
    assert _wait_until(lambda: not log._held)  # the keeper saw the file leave the path
    log.append(plugin_payload(50))
    assert verify_chain(path).intact and verify_chain(path).records == 1
    assert verify_chain(tmp_path / "moved.jsonl").records == 5


def test_a_negative_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="hold_ns"):
        RoutingAuditLog("x.jsonl", hold_ns=-1)
