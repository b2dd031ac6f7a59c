"""The pusher against real C2SP witnesses: torchwood's litewitness (v0.6.1, `make witness`) on loopback.

Two witnesses cosign a growing log; a witness that holds another size answers 409 and the pusher proves
from there; a fork of the log (cut and re-grown, re-signed with the log's own key) is refused by the
witnesses with the protocol's codes; a stopped witness leaves the other cosigning and the quorum naming
the missing one; a log the witness does not know, or a key it does not trust, is refused; a restarted
writer whose newest note was edited, or whose ``checkpoints`` is gone, learns the witnesses' size (409 to
``old 0`` with the empty tree) and signs nothing over it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from witness_support import GrowingLog, Litewitness, WitnessPool, size_of, witness_pool

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, empty_tree_note, signed_checkpoint_from_note, tlog_dir
from otel_route_shadow.tlog import Signer, attest_checkpoint, parse_witness_policy
from otel_route_shadow.witness import (
    CheckpointWitnessing,
    PushOutcome,
    WitnessEndpoint,
    WitnessPusher,
    add_checkpoint,
)

pytestmark = pytest.mark.witness

ORIGIN = "example.com/route-shadow/litewitness"
WAIT = 60.0


@pytest.fixture
def signer() -> Signer:
    return Signer.generate(ORIGIN)


@pytest.fixture
def pool(tmp_path: Path, signer: Signer) -> Iterator[WitnessPool]:
    with witness_pool(tmp_path, 2, ORIGIN, signer.verifier()) as running:
        yield running


class Results:
    def __init__(self) -> None:
        self.cosigned: dict[int, list[str]] = {}
        self.refused: list[tuple[str, str, int]] = []

    def on_cosigned(self, size: int, _root: bytes, lines: tuple[str, ...]) -> None:
        self.cosigned.setdefault(size, []).extend(lines)

    def on_refused(self, witness: str, cause: str, size: int) -> None:
        self.refused.append((witness, cause, size))


def _endpoint(witness: Litewitness, name: str) -> WitnessEndpoint:
    return WitnessEndpoint.parse(name, witness.verifier, witness.url)


def _pusher(log: GrowingLog, pool: WitnessPool, results: Results) -> WitnessPusher:
    endpoints = [_endpoint(w, f"w{n}") for n, w in enumerate(pool.witnesses)]
    return WitnessPusher(endpoints, log.prove, results.on_cosigned, on_refused=results.on_refused)


def _policy(signer: Signer, pool: WitnessPool, quorum: str) -> str:
    lines = [f"log {signer.verifier()}"]
    lines += [f"witness w{n} {w.verifier} {w.url}" for n, w in enumerate(pool.witnesses)]
    lines += ["group both all w0 w1", "group either any w0 w1", f"quorum {quorum}"]
    return "\n".join(lines) + "\n"


def _listed_size(pool: WitnessPool, witness: Litewitness) -> int:
    done = subprocess.run(
        [str(pool.witnessctl), "list-logs", "-db", str(witness.db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [entry] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return int(entry["size"])


def _push_directly(
    witness: Litewitness, note: str, old: int = 0, proof: list[bytes] | None = None
) -> PushOutcome:
    answer = add_checkpoint(
        _endpoint(witness, "direct"), old, proof or [], note, now=int(time.time()), skew=300
    )
    return answer.outcome


def test_two_witnesses_cosign_every_checkpoint_and_the_quorum_is_met(
    tmp_path: Path, signer: Signer, pool: WitnessPool
) -> None:
    for witness in pool.witnesses:
        assert witness.logged_vkey() == str(witness.verifier)  # our key string is litewitness's own
    log = GrowingLog(tmp_path / "chain.jsonl", signer)
    results = Results()
    pusher = _pusher(log, pool, results)
    notes = []
    try:
        for count in (10, 290, 1, 399, 330):
            notes.append(log.grow(count))
            pusher.submit(notes[-1])
            assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    sizes = [size_of(note) for note in notes]
    assert sorted(results.cosigned) == sizes == [10, 300, 301, 700, 1030]
    assert results.refused == []
    assert all(_listed_size(pool, w) == 1030 for w in pool.witnesses)
    policy = parse_witness_policy(_policy(signer, pool, "both"))
    for note in notes:
        cosigned = note + "".join(results.cosigned[size_of(note)])
        attestation = attest_checkpoint(cosigned, policy, now=int(time.time()))
        assert attestation.quorum.met and {c.name for c in attestation.cosignatures} == {"w0", "w1"}


def test_a_witness_at_another_size_answers_409_and_the_pusher_proves_from_there(
    tmp_path: Path, signer: Signer, pool: WitnessPool
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", signer)
    n300, n700, n1030 = log.grow(300), log.grow(400), log.grow(330)
    behind, ahead = pool.witnesses
    assert _push_directly(behind, n300) is PushOutcome.COSIGNED  # behind holds 300
    assert _push_directly(ahead, n1030) is PushOutcome.COSIGNED  # ahead holds 1030, more than the next push
    results = Results()
    pusher = _pusher(log, pool, results)
    try:
        pusher.submit(n700)
        assert pusher.flush(WAIT)
        assert sorted(results.cosigned) == [700] and results.refused == [("w1", "witness-ahead", 700)]
        pusher.submit(n1030)
        assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    assert sorted(results.cosigned) == [700, 1030] and len(results.cosigned[1030]) == 2
    assert pusher.stats().requests == {"w0": 3, "w1": 2}  # 409 then retry, then one; 409, then one at 1030


def test_a_fork_signed_with_the_logs_own_key_is_refused_by_the_witnesses(
    tmp_path: Path, signer: Signer, pool: WitnessPool, caplog: pytest.LogCaptureFixture
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", signer)
    results = Results()
    pusher = _pusher(log, pool, results)
    try:
        pusher.submit(log.grow(700))
        assert pusher.flush(WAIT) and sorted(results.cosigned) == [700]
    finally:
        pusher.close(WAIT)
    witnessed_root = signed_checkpoint_from_note(log.notes()[-1]).root
    # The attacker holds the host: cut the chain at 500 and append another history, signed with the log's key.
    for n, extra in enumerate(
        (300, 200, 100)
    ):  # longer than, as long as, shorter than what the witnesses saw
        fork = log.fork(tmp_path / f"fork{n}.jsonl", 500)
        forged = fork.grow(extra, tag="forged")
        assert signed_checkpoint_from_note(forged).root != witnessed_root
        refused = Results()
        attacker = _pusher(fork, pool, refused)
        try:
            attacker.submit(forged)
            assert attacker.flush(WAIT)
        finally:
            attacker.close(WAIT)
        assert refused.cosigned == {}
        causes = {cause for _, cause, _ in refused.refused}
        expected = {"witness-ahead"} if extra < 200 else {"bad-proof", "conflict"}
        assert causes and causes <= expected, refused.refused
        assert {w for w, _, _ in refused.refused} == {"w0", "w1"}
    assert all(_listed_size(pool, w) == 700 for w in pool.witnesses)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("witness w0 did not cosign checkpoint 800: bad-proof" in m for m in messages) == 1
    # The real log goes on being witnessed.
    pusher = _pusher(log, pool, results)
    try:
        pusher.submit(log.grow(200))
        assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    assert sorted(results.cosigned) == [700, 900] and len(results.cosigned[900]) == 2


def test_a_stopped_witness_leaves_the_other_cosigning_and_the_quorum_names_it(
    tmp_path: Path, signer: Signer, pool: WitnessPool
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", signer)
    pool.witnesses[1].stop()
    results = Results()
    pusher = _pusher(log, pool, results)
    try:
        for count in (5, 5):
            pusher.submit(log.grow(count))
            assert pusher.flush(WAIT)
    finally:
        pusher.close(WAIT)
    assert sorted(results.cosigned) == [5, 10]
    assert {(w, cause) for w, cause, _ in results.refused} == {("w1", "unreachable")}
    note = log.notes()[-1] + "".join(results.cosigned[10])
    both = attest_checkpoint(note, parse_witness_policy(_policy(signer, pool, "both")), now=int(time.time()))
    assert not both.quorum.met and both.quorum.missing == ("w1",)
    either = attest_checkpoint(note, parse_witness_policy(_policy(signer, pool, "either")), now=int(time.time()))
    assert either.quorum.met


def test_an_unknown_log_or_an_untrusted_key_is_refused(
    tmp_path: Path, signer: Signer, pool: WitnessPool
) -> None:
    stranger = Signer.generate("example.com/route-shadow/unknown")
    unknown = GrowingLog(tmp_path / "unknown.jsonl", stranger).grow(3)
    assert _push_directly(pool.witnesses[0], unknown) is PushOutcome.FORBIDDEN  # litewitness: 403, not 404
    impostor = Signer.generate(ORIGIN)  # the origin's name, another key
    forged = GrowingLog(tmp_path / "impostor.jsonl", impostor).grow(3)
    assert _push_directly(pool.witnesses[0], forged) is PushOutcome.FORBIDDEN
    log = GrowingLog(tmp_path / "chain.jsonl", signer)
    note = log.grow(20)
    assert _push_directly(pool.witnesses[0], note) is PushOutcome.COSIGNED
    bad_proof = [bytes(32)] * len(log.prove(10, 20))
    note30 = log.grow(10)
    assert _push_directly(pool.witnesses[0], note30, old=20, proof=bad_proof) is PushOutcome.BAD_PROOF
    assert _push_directly(pool.witnesses[0], note30, old=40) is PushOutcome.BAD_REQUEST  # old > new


def test_the_pool_stops_every_process_it_started_even_when_the_test_fails(
    tmp_path: Path, signer: Signer
) -> None:
    with pytest.raises(RuntimeError), witness_pool(tmp_path, 2, ORIGIN, signer.verifier()) as running:
        started = [w.proc for w in running.witnesses] + [running.agent]
        assert all(p is not None and p.poll() is None for p in started)
        raise RuntimeError("the test failed")
    assert all(p is not None and p.poll() is not None for p in started)


def test_a_restarted_writer_with_its_newest_note_edited_and_its_chain_cut_never_signs_over_the_witnesses_size(
    tmp_path: Path, signer: Signer, pool: WitnessPool
) -> None:
    """The probe's regression: the log signed 3,051 and 3,090 over the witness's cosigned 2,950."""
    chain = tmp_path / "chain.jsonl"
    log = GrowingLog(chain, signer)
    results = Results()
    pusher = _pusher(log, pool, results)
    try:
        pusher.submit(log.grow(2950))
        assert pusher.flush(WAIT) and sorted(results.cosigned) == [2950]
    finally:
        pusher.close(WAIT)
    directory = Path(tlog_dir(str(chain)))
    entries = (directory / "checkpoints").read_text().splitlines(keepends=True)
    note = json.loads(entries[-1])["note"]
    at = note.rindex(" ") + 20  # one base64 character of the newest note's signature
    entries[-1] = json.dumps({"note": note[:at] + ("A" if note[at] != "A" else "B") + note[at + 1 :]}) + "\n"
    (directory / "checkpoints").write_text("".join(entries))
    (directory / "checkpoint").unlink()
    log.fork(tmp_path / "cut.jsonl", 2945)
    chain.write_bytes((tmp_path / "cut.jsonl").read_bytes())
    with DecisionChain(chain) as appender:
        for n in range(150):
            appender.append({"kind": "route-shadow", "n": n, "tag": "after the cut"})
    writer = Checkpointer(str(chain), ORIGIN, signer)
    witnessing = CheckpointWitnessing(writer.directory, ORIGIN, parse_witness_policy(_policy(signer, pool, "both")))
    witnessing.learn_sizes(empty_tree_note(ORIGIN, [signer]))
    writer.witness_floor = witnessing.floor
    assert witnessing.wait_learned() and witnessing.floor() == 2950  # litewitness answered 409: 2950
    assert writer.checkpoint() is None and writer.refused == "unverified-checkpoint"
    assert (directory / "checkpoints").read_text() == "".join(entries)  # nothing signed
    assert all(_listed_size(pool, w) == 2950 for w in pool.witnesses)
    (directory / "checkpoints").unlink()  # the other attack: no local evidence left but the witnesses
    (directory / "state").unlink()
    again = Checkpointer(str(chain), ORIGIN, signer)
    again.witness_floor = witnessing.floor
    assert again.checkpoint() is None and again.refused == "rolled-back"
    assert not (directory / "checkpoints").exists()


def test_a_port_taken_after_it_was_chosen_free_starts_litewitness_again_on_a_fresh_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import witness_support

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))  # bound, not listening: a connect is refused, a bind fails
    port = taken.getsockname()[1]
    real = witness_support.free_port
    chosen = iter([port])
    monkeypatch.setattr(witness_support, "free_port", lambda: next(chosen, None) or real())
    log_key = Signer.generate("example.com/ports").verifier()
    try:
        with witness_pool(tmp_path, 1, "example.com/ports", log_key) as pool:
            (witness,) = pool.witnesses
            assert witness.port != port and witness.proc is not None and witness.proc.poll() is None
            assert "address already in use" in witness.log.read_text()  # the first start met the port
    finally:
        taken.close()
