"""The witness pusher against fake witnesses: the caller never waits, only the newest checkpoint is pushed,
the cadence holds except at flush, refusals are reported each time and logged once per witness and cause,
callbacks and proof sources that fail are contained, and a forked child gets a working pusher of its own.

Nothing here waits for time to pass: the fakes count requests, and a witness that blocks is released by the
test (a test waits only for an event that must come, bounded by a generous limit)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from witness_support import Cosigner, FakeWitness, GrowingLog, fake_witness, free_port

from otel_route_shadow.tlog import Signer, parse_note
from otel_route_shadow.witness import WitnessEndpoint, WitnessPusher
from otel_route_shadow.worker import WorkerName

ORIGIN = "example.com/route-shadow/pusher"
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([6]) * 32))
W1 = Cosigner("w1.example", Ed25519PrivateKey.from_private_bytes(bytes([10]) * 32))
W2 = Cosigner("w2.example", Ed25519PrivateKey.from_private_bytes(bytes([11]) * 32))
WAIT = 30.0  # the bound on waiting for something that must happen


def _sizes(fake: FakeWitness) -> list[tuple[int, int]]:
    """``(old, new)`` of each request the fake received."""
    found = []
    for body in fake.bodies:
        head, note = body.decode().split("\n\n", 1)
        found.append((int(head.split("\n")[0].removeprefix("old ")), int(note.split("\n")[1])))
    return found


class Witnessing:
    """A fake witness that keeps a size per log like a real one (no proof checks) and cosigns with ``cosigner``."""

    def __init__(self, cosigner: Cosigner) -> None:
        self.cosigner = cosigner
        self.size = 0
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()

    def __call__(self, body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        self.gate.wait(WAIT)
        head, note = body.decode().split("\n\n", 1)
        old, size = int(head.split("\n")[0].removeprefix("old ")), int(note.split("\n")[1])
        with self.lock:
            if old != self.size:
                return 409, {"Content-Type": "text/x.tlog.size"}, f"{self.size}\n".encode()
            self.size = size
        return 200, {}, self.cosigner.line(parse_note(note).text, 1_700_000_000).encode()


class Recorder:
    def __init__(self) -> None:
        self.cosigned: list[tuple[int, bytes, tuple[str, ...]]] = []
        self.refused: list[tuple[str, str, int]] = []
        self.proofs: list[tuple[int, int]] = []
        self.event = threading.Event()

    def on_cosigned(self, size: int, root: bytes, lines: tuple[str, ...]) -> None:
        self.cosigned.append((size, root, lines))
        self.event.set()

    def on_refused(self, witness: str, cause: str, size: int) -> None:
        self.refused.append((witness, cause, size))
        self.event.set()


@pytest.fixture
def log(tmp_path: Path) -> GrowingLog:
    return GrowingLog(tmp_path / "chain.jsonl", LOG)


def _pusher(
    log: GrowingLog, fakes: list[tuple[str, Cosigner, FakeWitness]], recorder: Recorder, **kw: object
):
    def prove(old: int, new: int) -> list[bytes]:
        recorder.proofs.append((old, new))
        return log.prove(old, new)

    endpoints = [WitnessEndpoint.parse(name, c.verifier, fake.url) for name, c, fake in fakes]
    return WitnessPusher(endpoints, prove, recorder.on_cosigned, on_refused=recorder.on_refused, **kw)  # type: ignore[arg-type]


def _push_each(pusher: WitnessPusher, log: GrowingLog, counts: tuple[int, ...]) -> None:
    """Grow the log by each count in turn, submit its checkpoint, and wait (bounded) for every witness's turn."""
    for count in counts:
        pusher.submit(log.grow(count))
        assert pusher.flush(WAIT)


@pytest.fixture
def witnessing() -> Iterator[tuple[Witnessing, FakeWitness]]:
    behaviour = Witnessing(W1)
    with fake_witness(behaviour) as fake:
        yield behaviour, fake
        behaviour.gate.set()


def test_a_sequence_of_checkpoints_is_cosigned_with_proofs_from_the_witnesss_size(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    _, fake = witnessing
    recorder = Recorder()
    pusher = _pusher(log, [("one", W1, fake)], recorder)
    try:
        _push_each(pusher, log, (10, 290, 1, 400))
    finally:
        pusher.close(WAIT)
    assert [size for size, _, _ in recorder.cosigned] == [10, 300, 301, 701]
    assert _sizes(fake) == [(0, 10), (10, 300), (300, 301), (301, 701)]
    assert recorder.proofs == [(10, 300), (300, 301), (301, 701)]
    assert all(lines == (lines[0],) and W1.verifier.name in lines[0] for _, _, lines in recorder.cosigned)
    assert pusher.stats().requests == {"one": 4} and pusher.stats().cosigned == {"one": 4}


def test_submit_never_waits_and_only_the_newest_checkpoint_is_pushed(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    behaviour, fake = witnessing
    behaviour.gate.clear()  # the witness holds the first request until the test lets it go
    recorder = Recorder()
    pusher = _pusher(log, [("one", W1, fake)], recorder)
    try:
        pusher.submit(log.grow(5))
        assert fake.arrived.acquire(timeout=WAIT)
        for count in (5, 5, 5):
            pusher.submit(log.grow(count))  # returns while the worker is stuck on the witness
        assert pusher.stats().superseded == 2
        behaviour.gate.set()
        assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    assert _sizes(fake) == [(0, 5), (5, 20)]  # 10 and 15 were superseded before their turn
    assert [size for size, _, _ in recorder.cosigned] == [5, 20]


def test_the_cadence_defers_pushes_and_flush_pushes_the_newest_now(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    _, fake = witnessing
    recorder = Recorder()
    pusher = _pusher(log, [("one", W1, fake)], recorder, pushes_per_day=1)
    try:
        pusher.submit(log.grow(3))
        assert recorder.event.wait(WAIT)
        pusher.submit(log.grow(3))
        pusher.submit(log.grow(3))
        assert fake.arrived.acquire(timeout=WAIT)  # the first push
        assert not fake.arrived.acquire(timeout=0.5)  # no second one: a broken cadence would push at once
        assert _sizes(fake) == [(0, 3)]
        assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    assert _sizes(fake) == [(0, 3), (3, 9)]


def test_a_conflict_is_proved_from_the_witnesss_size_and_retried_once(log: GrowingLog) -> None:
    behaviour = Witnessing(W1)
    behaviour.size = 40  # the witness saw this log before (another process, an earlier run)
    log.grow(40)
    recorder = Recorder()
    with fake_witness(behaviour) as fake:
        pusher = _pusher(log, [("one", W1, fake)], recorder)
        try:
            pusher.submit(log.grow(60))
            assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert _sizes(fake) == [(0, 100), (40, 100)]
    assert recorder.proofs == [(40, 100)] and [s for s, _, _ in recorder.cosigned] == [100]


def test_a_witness_ahead_of_the_log_is_refused_without_retry(
    log: GrowingLog, caplog: pytest.LogCaptureFixture
) -> None:
    behaviour = Witnessing(W1)
    behaviour.size = 500  # more than the log ever signed: the log was cut
    recorder = Recorder()
    with fake_witness(behaviour) as fake:
        pusher = _pusher(log, [("one", W1, fake)], recorder)
        try:
            pusher.submit(log.grow(10))
            assert pusher.flush(WAIT)
            pusher.submit(log.grow(10))
            assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert _sizes(fake) == [(0, 10)]  # the second checkpoint is refused locally: the witness holds 500
    assert recorder.refused == [("one", "witness-ahead", 10), ("one", "witness-ahead", 20)]
    assert recorder.cosigned == [] and recorder.proofs == []
    assert sum("witness-ahead" in r.getMessage() for r in caplog.records) == 1


def test_bad_answers_are_reported_each_time_and_logged_once(
    log: GrowingLog, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    with fake_witness(lambda _b, _f: (200, {}, b"garbage\n")) as fake:
        pusher = _pusher(log, [("one", W1, fake)], recorder)
        try:
            for _ in range(3):
                pusher.submit(log.grow(2))
                assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert recorder.refused == [("one", "bad-answer", 2), ("one", "bad-answer", 4), ("one", "bad-answer", 6)]
    assert recorder.cosigned == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "bad-answer" in r.getMessage()]
    assert len(warnings) == 1 and "witness one" in warnings[0].getMessage()


def test_a_failing_witness_never_stops_the_other(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    _, good = witnessing
    recorder = Recorder()
    with fake_witness(lambda _b, _f: (500, {}, b"down")) as failing:
        pusher = _pusher(log, [("bad", W2, failing), ("good", W1, good)], recorder)
        try:
            pusher.submit(log.grow(4))
            assert pusher.flush(WAIT)
            pusher.submit(log.grow(4))
            assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert [s for s, _, _ in recorder.cosigned] == [4, 8]
    assert ("bad", "server-error", 4) in recorder.refused
    assert pusher.stats().requests["bad"] >= 2  # a 5xx is retried with the newest checkpoint


def test_a_5xx_is_retried_and_a_flush_gets_the_cosignature(log: GrowingLog) -> None:
    answers = iter([(503, {}, b"busy")])
    behaviour = Witnessing(W1)

    def respond(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        return next(answers, None) or behaviour(body, fake)

    recorder = Recorder()
    with fake_witness(respond) as fake:
        pusher = _pusher(log, [("one", W1, fake)], recorder)
        try:
            pusher.submit(log.grow(7))
            assert recorder.event.wait(WAIT)
            assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert recorder.refused == [("one", "server-error", 7)]
    assert [s for s, _, _ in recorder.cosigned] == [7]


def test_an_unreachable_witness_is_contained_and_flush_returns(log: GrowingLog) -> None:
    recorder = Recorder()
    endpoint = WitnessEndpoint.parse("gone", W1.verifier, f"http://127.0.0.1:{free_port()}")
    pusher = WitnessPusher([endpoint], log.prove, recorder.on_cosigned, on_refused=recorder.on_refused)
    try:
        pusher.submit(log.grow(1))
        assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    assert set(recorder.refused) == {("gone", "unreachable", 1)}  # once, or twice if the flush retried it


def test_a_flush_ends_by_its_deadline_when_a_witness_holds_the_request(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    behaviour, fake = witnessing
    behaviour.gate.clear()
    recorder = Recorder()
    pusher = _pusher(log, [("one", W1, fake)], recorder, pushes_per_day=1)
    try:
        pusher.submit(log.grow(1))
        assert fake.arrived.acquire(timeout=WAIT)
        pusher.submit(log.grow(1))
        assert pusher.flush(0.2) is False
    finally:
        behaviour.gate.set()
        pusher.close(WAIT)


def test_failing_callbacks_and_proof_sources_are_contained(
    log: GrowingLog, caplog: pytest.LogCaptureFixture
) -> None:
    behaviour = Witnessing(W1)
    calls: list[int] = []

    def explode(size: int, _root: bytes, _lines: tuple[str, ...]) -> None:
        calls.append(size)
        raise RuntimeError("the caller's bug")

    def no_proof(old: int, new: int) -> list[bytes]:
        raise OSError("tiles missing")

    with fake_witness(behaviour) as fake:
        endpoint = WitnessEndpoint.parse("one", W1.verifier, fake.url)
        pusher = WitnessPusher([endpoint], no_proof, explode)
        try:
            for _ in range(2):
                pusher.submit(log.grow(3))
                assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert calls == [3]  # the second push needed a proof from 3 to 6, which the caller could not give
    assert _sizes(fake) == [(0, 3)]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("callback failed" in m for m in messages) == 1
    assert sum("cannot-prove" in m for m in messages) == 1


def test_close_stops_the_thread_and_later_submits_are_ignored(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    _, fake = witnessing
    recorder = Recorder()
    pusher = _pusher(log, [("one", W1, fake)], recorder)
    pusher.submit(log.grow(2))
    assert any(t.name == WorkerName.WITNESS for t in threading.enumerate())
    assert pusher.close(WAIT) is True
    pusher.submit(log.grow(2))
    assert pusher.flush(1.0) is False
    assert _sizes(fake) == [(0, 2)] and pusher.stats().submitted == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_gets_a_fresh_worker_and_pushes_on_its_own(
    log: GrowingLog, witnessing: tuple[Witnessing, FakeWitness]
) -> None:
    _, fake = witnessing
    recorder = Recorder()
    pusher = _pusher(log, [("one", W1, fake)], recorder)
    pusher.submit(log.grow(2))
    assert pusher.flush(WAIT)
    note = log.grow(2)
    pid = os.fork()
    if pid == 0:  # the child: its pusher must work without the parent's thread
        ok = False
        try:
            ok = pusher.stats().submitted == 0
            pusher.submit(note)
            ok = ok and pusher.flush(WAIT) and [s for s, _, _ in recorder.cosigned] == [2, 4]
            ok = ok and sum(t.name == WorkerName.WITNESS for t in threading.enumerate()) == 1
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    pusher.submit(log.grow(2))  # the parent's pusher still works (and learns the witness's size by 409)
    assert pusher.flush(WAIT)
    pusher.close(WAIT)
    assert [s for s, _, _ in recorder.cosigned] == [2, 6]
    assert _sizes(fake)[-2:] == [(2, 6), (4, 6)]


def test_a_seeded_size_is_the_first_old_size(log: GrowingLog) -> None:
    behaviour = Witnessing(W1)
    log.grow(30)
    behaviour.size = 30
    recorder = Recorder()
    with fake_witness(behaviour) as fake:
        endpoint = WitnessEndpoint.parse("one", W1.verifier, fake.url)
        pusher = WitnessPusher([endpoint], log.prove, recorder.on_cosigned, known_sizes={"one": 30})
        try:
            pusher.submit(log.grow(5))
            assert pusher.flush(WAIT)
        finally:
            pusher.close(WAIT)
    assert _sizes(fake) == [(30, 35)]
    assert hashlib.sha256(b"").digest() not in [root for _, root, _ in recorder.cosigned]


def test_pushes_to_a_witness_reuse_one_connection_and_reconnect_when_it_is_closed(log: GrowingLog) -> None:
    behaviour = Witnessing(W1)
    with fake_witness(behaviour, keep_alive=True) as fake:
        recorder = Recorder()
        pusher = _pusher(log, [("one", W1, fake)], recorder)
        try:
            _push_each(pusher, log, (10, 20, 30))
            assert fake.connections == 1  # keep-alive: every push on the one connection
            fake.close_idle = True  # the witness now closes each connection after its answer, silently
            _push_each(pusher, log, (40, 50, 60))
        finally:
            pusher.close(WAIT)
    assert [size for size, _, _ in recorder.cosigned] == [10, 30, 60, 100, 150, 210]
    assert recorder.refused == []
    assert fake.connections == 3  # the 4th push closed the first; the 5th and 6th each found theirs closed
    assert len(fake.bodies) == 6


def test_close_idle_set_while_an_answer_is_on_its_way_does_not_close_that_connection(log: GrowingLog) -> None:
    """The fake reads ``close_idle`` as a request arrives, so the test above, which sets it as soon as it
    has an answer, never closes a connection one push early (which counted 4 connections): here it is set
    while the first answer is being made, and that connection stays open for the next push."""
    behaviour = Witnessing(W1)

    def respond(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        answer = behaviour(body, fake)
        fake.close_idle = True
        return answer

    with fake_witness(respond, keep_alive=True) as fake:
        recorder = Recorder()
        pusher = _pusher(log, [("one", W1, fake)], recorder)
        try:
            _push_each(pusher, log, (10, 20))
        finally:
            pusher.close(WAIT)
    assert [size for size, _, _ in recorder.cosigned] == [10, 30]
    assert fake.connections == 1  # the second push went on the first connection, which it then closed
