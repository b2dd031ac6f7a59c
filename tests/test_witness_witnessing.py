"""The log's side of witnessing (``witness.CheckpointWitnessing``) against fake witnesses that follow the
protocol: every signed checkpoint the writer publishes is pushed with a proof from the log's authenticated
tiles, the cosignatures end up in ``checkpoints`` and ``checkpoint``, refusals are recorded once per witness
and cause, an unsigned checkpoint is never pushed, a flush pushes each checkpoint once, and a merge that
cannot have the writer's lock waits for the next chance instead of making a checkpoint skip its turn.

Nothing here waits for time to pass: flushes wait for the witnesses' answers, bounded."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from tlog_support import append
from witness_support import Cosigner, FakeWitness, ProvingWitness, fake_witness, free_port

from otel_route_shadow.logstore import Checkpointer, LogStore, empty_tree_note
from otel_route_shadow.tlog import Signer, parse_note, parse_witness_policy, verify_cosignatures
from otel_route_shadow.witness import CheckpointWitnessing, WitnessConfigError
from otel_route_shadow.witness import witnessing as witnessing_module
from otel_route_shadow.worker import AFTER_FORK

ORIGIN = "example.com/route-shadow/witnessing"
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([31]) * 32))
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([32]) * 32))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([33]) * 32))
WAIT = 30.0


def _policy(*witnesses: tuple[str, Cosigner, str]) -> str:
    lines = [f"log {LOG.verifier()}"]
    lines += [f"witness {name} {c.verifier} {url}" for name, c, url in witnesses]
    return "\n".join([*lines, "quorum none"]) + "\n"


@pytest.fixture
def two() -> Iterator[tuple[tuple[ProvingWitness, FakeWitness], tuple[ProvingWitness, FakeWitness]]]:
    first, second = ProvingWitness(W1, LOG.verifier()), ProvingWitness(W2, LOG.verifier())
    with fake_witness(first) as a, fake_witness(second) as b:
        yield (first, a), (second, b)


def _writer(
    chain: Path, policy: str, signer: Signer | None = LOG
) -> tuple[Checkpointer, CheckpointWitnessing]:
    checkpointer = Checkpointer(str(chain), ORIGIN, signer)
    witnessing = CheckpointWitnessing(
        checkpointer.directory, ORIGIN, parse_witness_policy(policy), pushes_per_day=8_640_000
    )
    checkpointer.add_listener(witnessing.submit)
    return checkpointer, witnessing


def test_each_signed_checkpoint_is_pushed_with_a_proof_from_the_tiles_and_stored_cosigned(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    (first, a), (second, b) = two
    proofs: list[tuple[int, int]] = []
    prove = witnessing_module.consistency_proof

    def counted(old: int, new: int, reader: object) -> list[bytes]:
        proofs.append((old, new))
        return prove(old, new, reader)  # type: ignore[arg-type]

    monkeypatch.setattr(witnessing_module, "consistency_proof", counted)
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _writer(chain, _policy(("one", W1, a.url), ("two", W2, b.url)))
    try:
        start = 0
        for count in (10, 290, 1, 400):
            append(chain, count, checkpointer, every=count, start=start)
            start += count
            assert witnessing.flush(WAIT)
    finally:
        witnessing.close()
    assert first.size == second.size == 701
    # The first push of each witness is `old 0`; later ones carry a proof the witness verified (no 422).
    assert first.answers == second.answers == {200: 4}
    directory = LogStore(chain)
    notes = directory.notes().notes
    cosigned = {parse_note(n).text: n for n in notes}  # the newest entry of each checkpoint
    assert len(cosigned) == 4 and len(notes) == 12  # each checkpoint: signed, + one, + both
    for note in cosigned.values():
        found = verify_cosignatures(note, [W1.verifier, W2.verifier], now=2**40)
        assert {c.verifier.name for c in found.verified} == {W1.verifier.name, W2.verifier.name}
    assert (Path(directory.path) / "checkpoint").read_text() == notes[-1]
    assert witnessing.merges == {"added": 8}
    assert proofs == [(10, 300), (300, 301), (301, 701)]  # one tile read per push: both witnesses get it
    assert not (Path(directory.path) / "witness-refusals").exists()


def test_an_unsigned_checkpoint_is_never_pushed(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], ...]
) -> None:
    (_first, a), _ = two
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _writer(chain, _policy(("one", W1, a.url)), signer=None)
    append(chain, 5, checkpointer, every=5)
    assert witnessing.flush(WAIT) and witnessing.stats() is None and a.bodies == []


def test_refusals_are_recorded_once_per_witness_and_cause_and_transient_failures_are_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stranger = ProvingWitness(W1, Signer.generate(ORIGIN).verifier())  # knows another key for this origin
    chain = tmp_path / "chain.jsonl"
    with fake_witness(stranger) as fake:
        dead = f"http://127.0.0.1:{free_port()}"
        checkpointer, witnessing = _writer(chain, _policy(("picky", W1, fake.url), ("gone", W2, dead)))
        try:
            for round_ in range(3):
                append(chain, 5, checkpointer, every=5, start=5 * round_)
                witnessing.flush(WAIT)
        finally:
            witnessing.close()
    assert stranger.answers == {403: 3}
    lines = (Path(LogStore(chain).path) / "witness-refusals").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "cause": "forbidden",
            "origin": ORIGIN,
            "size": 5,
            "time": json.loads(lines[0])["time"],
            "witness": "picky",
        }
    ]
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("witness picky did not cosign" in m for m in messages) == 1
    assert sum("witness gone did not cosign" in m and "unreachable" in m for m in messages) == 1
    assert len(LogStore(chain).notes().notes) == 3  # nothing merged


def test_a_flush_pushes_each_checkpoint_once(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], ...]
) -> None:
    (_first, a), _ = two
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _writer(chain, _policy(("one", W1, a.url)))
    try:
        append(chain, 5, checkpointer, every=5)
        assert witnessing.flush(WAIT)
        requests = len(a.bodies)
        assert witnessing.flush(WAIT) and witnessing.flush(WAIT)
        assert len(a.bodies) == requests == 1
    finally:
        witnessing.close()


def test_a_merge_that_cannot_have_the_writers_lock_waits_for_the_next_chance(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], ...]
) -> None:
    (_first, a), _ = two
    chain = tmp_path / "chain.jsonl"
    held = [True]

    @contextlib.contextmanager
    def exclusive(_timeout: float) -> Iterator[bool]:
        yield not held[0]

    checkpointer = Checkpointer(str(chain), ORIGIN, LOG)
    witnessing = CheckpointWitnessing(
        checkpointer.directory, ORIGIN, parse_witness_policy(_policy(("one", W1, a.url))), exclusive=exclusive
    )
    checkpointer.add_listener(witnessing.submit)
    try:
        append(chain, 5, checkpointer, every=5)
        assert witnessing.flush(WAIT)
        assert witnessing.merges == {"kept": 2}  # tried on the answer, and once more at the flush's end
        assert len(LogStore(chain).notes().notes) == 1
        held[0] = False
        requests = len(a.bodies)
        assert witnessing.flush(WAIT)  # the same checkpoint: not pushed again, but the kept merge is done
        assert len(a.bodies) == requests and witnessing.merges == {"kept": 2, "added": 1}
        assert len(parse_note(LogStore(chain).notes().notes[-1]).signatures) == 2
    finally:
        witnessing.close()


def test_a_witness_url_that_cannot_be_pushed_to_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WitnessConfigError, match="user information"):
        CheckpointWitnessing(
            LogStore(tmp_path / "chain.jsonl"),
            ORIGIN,
            parse_witness_policy(_policy(("one", W1, "https://user:pw@example.org/w"))),
        )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_child_forked_while_the_lock_was_held_pushes_and_flushes_on_its_own(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], ...]
) -> None:
    (first, a), _ = two
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _writer(chain, _policy(("one", W1, a.url)))
    append(chain, 5, checkpointer, every=5)
    assert witnessing.flush(WAIT) and first.size == 5
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another thread (the pusher's, say) holds the lock when the host forks
        with witnessing._lock:
            held.set()
            release.wait(WAIT)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(WAIT)
    pid = os.fork()
    if pid == 0:  # the child: a stuck lock would hang its checkpoints and its exit
        done: list[bool] = []

        def work() -> None:
            append(chain, 5, checkpointer, every=5, start=5)
            flushed = witnessing.flush(WAIT)
            newest = LogStore(chain).notes().notes[-1]
            done.append(
                flushed and newest.startswith(f"{ORIGIN}\n10\n") and len(parse_note(newest).signatures) == 2
            )

        try:
            worker = threading.Thread(target=work, daemon=True)
            worker.start()
            worker.join(WAIT)  # bounded: a hang is a failure, never a stuck test
        finally:
            os._exit(0 if done == [True] else 1)
    release.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    witnessing.close()
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_child_forked_while_the_sizes_were_asked_asks_them_again_on_its_own(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's question is held by the witness when the host forks: the child has none of the
    parent's threads, so its reset (``AFTER_FORK``) asks again, and it learns the size itself."""
    monkeypatch.setattr(
        witnessing_module, "LEARN_TIMEOUT_S", WAIT
    )  # only a hang guard: nothing here times out
    (first, a), _ = two
    first.size = 5
    first.gate.clear()
    _, witnessing = _writer(tmp_path / "chain.jsonl", _policy(("one", W1, a.url)))
    witnessing.learn_sizes(empty_tree_note(ORIGIN, [LOG]))
    assert a.arrived.acquire(timeout=WAIT)  # the parent's question is in, and held
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = witnessing.wait_learned() and witnessing.floor() == 5
        finally:
            os._exit(0 if ok else 1)
    first.gate.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert witnessing.wait_learned() and witnessing.floor() == 5
    assert len(a.bodies) == 2  # the parent's question and the child's
    witnessing.close()


def test_witnessings_made_and_dropped_register_no_fork_handler_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One ``os.register_at_fork`` handler an instance (one per instrument cycle) was kept for good; the
    one ``AFTER_FORK`` handler resets them, held weakly."""
    registered: list[object] = []
    monkeypatch.setattr(os, "register_at_fork", lambda **hooks: registered.append(hooks))
    policy = _policy(("one", W1, f"http://127.0.0.1:{free_port()}"))
    made = [_writer(tmp_path / f"chain{n}.jsonl", policy)[1] for n in range(20)]
    assert registered == [] and all(w in AFTER_FORK for w in made)
    gone = weakref.ref(made[0])
    del made
    gc.collect()
    assert gone() is None


def _learning_writer(chain: Path, policy: str) -> tuple[Checkpointer, CheckpointWitnessing]:
    checkpointer, witnessing = _writer(chain, policy)
    witnessing.learn_sizes(empty_tree_note(ORIGIN, [LOG]))
    checkpointer.witness_floor = witnessing.floor
    return checkpointer, witnessing


def test_a_restarted_writer_whose_checkpoints_were_deleted_learns_the_witnesss_size_and_never_signs_below_it(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], tuple[ProvingWitness, FakeWitness]]
) -> None:
    (first, a), (_, b) = two
    policy = _policy(("w1", W1, a.url), ("w2", W2, b.url))
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _learning_writer(chain, policy)
    assert witnessing.wait_learned() and witnessing.floor() == 0
    append(chain, 400, checkpointer, every=400)  # one checkpoint: no merge holds the lock meanwhile
    assert witnessing.flush(WAIT) and first.size == 400
    witnessing.close()
    directory = Path(str(chain) + ".tlog")
    for name in ("checkpoints", "checkpoint", "state"):
        (directory / name).unlink()
    kept = chain.read_bytes().split(b"\n")[:395]
    chain.write_bytes(b"".join(line + b"\n" for line in kept))
    append(chain, 200, start=100_000)  # a fork from 395 on
    restarted, again = _learning_writer(chain, policy)
    assert again.wait_learned() and again.floor() == 400
    assert restarted.checkpoint() is None and restarted.refused == "rolled-back"
    refusals = [json.loads(line) for line in (directory / "refusals").read_text().splitlines()]
    assert [(r["reason"], r["tree_size"]) for r in refusals] == [("rolled-back", 400)]
    assert not (directory / "checkpoints").exists()
    probe = a.bodies[-1].decode()
    assert probe.startswith("old 0\n\n") and probe.split("\n")[3] == "0"  # the empty tree, never a fork
    again.close()


def test_nothing_is_signed_and_nothing_waits_while_a_witness_holds_the_size_question(
    tmp_path: Path,
    two: tuple[tuple[ProvingWitness, FakeWitness], tuple[ProvingWitness, FakeWitness]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (first, a), _ = two
    monkeypatch.setattr(witnessing_module, "LEARN_TIMEOUT_S", WAIT)  # no deadline passes during the test
    first.gate.clear()  # the witness holds every request until released
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _learning_writer(chain, _policy(("w1", W1, a.url)))
    assert a.arrived.acquire(timeout=WAIT)  # the question is being held
    assert append(chain, 50, checkpointer, every=10) == []  # each call returned without waiting
    assert checkpointer.behind and checkpointer.refused is None
    first.gate.set()
    assert witnessing.wait_learned()
    assert [c.size for c in append(chain, 1, checkpointer, start=50)] == [51]
    witnessing.close()


def test_a_witness_found_ahead_by_a_push_stops_a_writer_that_could_not_ask_it_at_start(
    tmp_path: Path, two: tuple[tuple[ProvingWitness, FakeWitness], tuple[ProvingWitness, FakeWitness]]
) -> None:
    (first, a), _ = two
    first.size, first.root = 500, bytes(32)  # it cosigned 500 of this log before the host lost its own
    chain = tmp_path / "chain.jsonl"
    checkpointer, witnessing = _writer(chain, _policy(("w1", W1, a.url)))  # no question at start
    checkpointer.witness_floor = witnessing.floor
    assert [c.size for c in append(chain, 100, checkpointer, every=100)] == [100]
    assert witnessing.flush(WAIT) and witnessing.floor() == 500  # the push's 409 said 500
    assert append(chain, 1, checkpointer, start=100) == [] and checkpointer.refused == "rolled-back"
    witnessing.close()
