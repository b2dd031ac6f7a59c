"""A host with real C2SP witnesses: torchwood's litewitness (v0.6.1, `make witness`) on loopback, the plugin
with its real seams (the demo factory's), and the auditor's commands.

* two witnesses, quorum 2: every checkpoint after the first push is cosigned by both, ``verify --witness-policy``
  is satisfied, and Go (torchwood's cosignature verifiers, x/mod ``note``, torchwood's ``VerifyProof``)
  verifies the same cosigned notes and a receipt made from them independently;
* one witness stopped: the spawns are unaffected (identical results; every request is made on the
  witness thread), checkpoints carry one cosignature, quorum 2 is insufficient evidence naming the
  missing witness, quorum 1 is satisfied;
* the attack: the chain cut, the log's directory erased and a different history appended by a second
  writer with the log's own key: it asks the witnesses their size first (400), signs nothing and records
  a ``rolled-back`` refusal, and ``verify --witness-policy`` says the chain contradicts the cosigned checkpoint;
* bad answers beside a real witness (garbage, another key's cosignature, a 500, a slow witness): contained,
  logged once, never stored; the real witness's quorum is met.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from go_interop import run_go_interop
from witness_support import Cosigner, FakeWitness, WitnessPool, fake_witness, witness_pool

from otel_route_shadow.cli import main as cli_main
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import checkpointing
from otel_route_shadow.logstore import LogStore, generate_key_file
from otel_route_shadow.tlog import Signer, parse_note, verify_cosignatures
from otel_route_shadow.witness import client
from otel_route_shadow.worker import WorkerName

from .conftest import Harness, make_harness

pytestmark = pytest.mark.witness

ORIGIN = "example.com/route-shadow/e2e-witness"
QUIET = {"checkpoint_records": 10**8, "checkpoint_seconds": 86_400.0, "witness_pushes_per_day": 8_640_000}
"""Checkpoints only when the test makes them (each is then pushed before the next), and at shutdown."""
BATCHES = (10, 290, 1, 99)


@pytest.fixture
def key(tmp_path: Path) -> tuple[Path, Signer]:
    path = tmp_path / "log.key"
    return path, generate_key_file(ORIGIN, str(path))


@pytest.fixture
def pool(tmp_path: Path, key: tuple[Path, Signer]) -> Iterator[WitnessPool]:
    with witness_pool(tmp_path / "witnesses", 2, ORIGIN, key[1].verifier()) as running:
        yield running


@pytest.fixture(autouse=True)
def _witness_dir(tmp_path: Path) -> None:
    (tmp_path / "witnesses").mkdir()


def _policy(path: Path, signer: Signer, pool: WitnessPool, quorum: str) -> Path:
    lines = [f"log {signer.verifier()}"]
    lines += [f"witness w{n} {w.verifier} {w.url}" for n, w in enumerate(pool.witnesses)]
    lines += ["group both all w0 w1", "group either any w0 w1", f"quorum {quorum}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _jobs(total: int) -> list[factory.Job]:
    return factory.plan_jobs(total, factory.FactorySettings())


def _host(tmp_path: Path, key: Path, policy: Path, chain: Path | None = None) -> Harness:
    return make_harness(
        tmp_path, signing_key=key, witness_policy=policy, **QUIET, **({"chain_path": chain} if chain else {})
    )


def _run_batches(h: Harness, jobs: list[factory.Job]) -> list[factory.SpawnResult]:
    """Spawn the jobs in ``BATCHES``, checkpointing (and pushing) after each batch."""
    runtime = h.instrumentor.runtime
    assert runtime is not None
    results, start = [], 0
    for count in BATCHES:
        results += [factory.dispatch(job) for job in jobs[start : start + count]]
        start += count
        runtime.checkpointer.checkpoint_now()  # a checkpoint, pushed to every witness within the bound
    return results


def _close(h: Harness) -> None:
    h.instrumentor.uninstrument()
    h.provider.shutdown()


def _newest_by_checkpoint(chain: Path) -> dict[int, str]:
    """The newest note of each checkpoint size in ``checkpoints``."""
    return {int(parse_note(n).text.split("\n")[1]): n for n in LogStore(chain).notes().notes}


def _verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(["verify", *argv])
    return code, capsys.readouterr().out


def test_two_witnesses_cosign_every_checkpoint_and_go_agrees(
    tmp_path: Path, key: tuple[Path, Signer], pool: WitnessPool, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = _policy(tmp_path / "policy", key[1], pool, "both")
    h = _host(tmp_path, key[0], policy)
    try:
        _run_batches(h, _jobs(sum(BATCHES)))
    finally:
        _close(h)
    newest = _newest_by_checkpoint(h.chain)
    assert sorted(newest) == [10, 300, 301, 400]
    witnesses = [w.verifier for w in pool.witnesses]
    for size, note in newest.items():
        found = verify_cosignatures(note, witnesses, now=int(time.time()))
        assert len(found.verified) == 2, (size, note)
    code, out = _verify(capsys, str(h.chain), "--witness-policy", str(policy))
    assert code == 0, out
    assert "3. attested by the quorum up to size 400 (cosigned by w0, w1); 0 record(s)" in out
    assert "largest size cosigned, per witness: w0 400, w1 400" in out
    # A receipt for one decision, made from the cosigned checkpoint, and checked with nothing else.
    receipt, line = tmp_path / "receipt", tmp_path / "record.line"
    capsys.readouterr()
    assert (
        cli_main(
            [
                "prove",
                str(h.chain),
                "--seq",
                "123",
                "--receipt",
                "--witness-policy",
                str(policy),
                "--record-out",
                str(line),
            ]
        )
        == 0
    )
    receipt.write_text(capsys.readouterr().out)
    assert (
        cli_main(["verify-proof", "--receipt", str(receipt), "--record", str(line), "--witness-policy", str(policy)])
        == 0
    )
    # Go verifies the same cosigned notes and the receipt, with torchwood's verifiers and x/mod's note.
    if shutil.which("go") is None:
        pytest.skip("the go command is not installed (CI has it)")
    payload: dict[str, Any] = {
        "verifier": str(key[1].verifier()),
        "notes": [],
        "bad_notes": [],
        "inclusion": [],
        "consistency": [],
        "witness": {
            "log_verifier": str(key[1].verifier()),
            "witness_verifiers": [str(w) for w in witnesses],
            "cosigned": [
                {"note": n, "verified": [w.name for w in witnesses], "rejected": False}
                for n in newest.values()
            ],
            "policies": [],
            "receipts": [
                {
                    "policy": policy.read_text(),
                    "receipt": receipt.read_text(),
                    "line": line.read_text().rstrip("\n"),
                    "valid": True,
                }
            ],
        },
    }
    output = run_go_interop(payload, tmp_path)
    assert "FAIL" not in output and output.strip(), output


def test_a_stopped_witness_leaves_the_host_alone_and_the_quorum_names_it(
    tmp_path: Path,
    key: tuple[Path, Signer],
    pool: WitnessPool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool.witnesses[1].stop()
    threads: list[str] = []
    post = client.post

    def counted(**kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return post(**kwargs)

    monkeypatch.setattr(client, "post", counted)
    jobs = _jobs(sum(BATCHES))
    baseline = [factory.dispatch(job) for job in jobs]
    both = _policy(tmp_path / "both", key[1], pool, "both")
    h = _host(tmp_path, key[0], both)
    try:
        results = _run_batches(h, jobs)
    finally:
        _close(h)
    assert results == baseline and len(h.records()) == 400
    assert threads and set(threads) == {WorkerName.WITNESS}
    for note in _newest_by_checkpoint(h.chain).values():
        signers = [s.name for s in parse_note(note).signatures]
        assert signers == [ORIGIN, pool.witnesses[0].name]  # the log's signature and w0's cosignature
    code, out = _verify(capsys, str(h.chain), "--witness-policy", str(both))
    assert code == 3, out
    assert (
        "no checkpoint the chain matches meets the quorum (the newest, size 400, is cosigned by w0; missing: w1)"
        in out
    )
    assert "largest size cosigned, per witness: w0 400, w1 none" in out
    either = _policy(tmp_path / "either", key[1], pool, "either")
    code, out = _verify(capsys, str(h.chain), "--witness-policy", str(either))
    assert code == 0, out


def test_a_restarted_writer_whose_log_was_erased_never_signs_over_the_witnesses_cosigned_size(
    tmp_path: Path,
    key: tuple[Path, Signer],
    pool: WitnessPool,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = _policy(tmp_path / "policy", key[1], pool, "both")
    h = _host(tmp_path, key[0], policy)
    try:
        _run_batches(h, _jobs(sum(BATCHES)))
    finally:
        _close(h)
    tlog = Path(LogStore(h.chain).path)
    auditor = tmp_path / "auditor-copy"  # what left the host: the last cosigned checkpoint
    shutil.copy(tlog / "checkpoint", auditor)
    # The compromised host: cut the chain at 200, erase the log's memory, and let a second writer with the
    # same key and the same witnesses append another history over the cut chain.
    kept = h.chain.read_bytes().split(b"\n")[:200]
    h.chain.write_bytes(b"".join(line + b"\n" for line in kept))
    shutil.rmtree(tlog)
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        forger = _host(tmp_path / "forger", key[0], policy, chain=h.chain)
        try:
            for job in _jobs(250):  # new spawns: new trace ids, new records, another history
                factory.dispatch(job)
        finally:
            _close(forger)  # it asked the witnesses first: they hold 400, so it signs nothing
    assert not (tlog / "checkpoints").exists() and not (tlog / "checkpoint").exists()
    refusals = [json.loads(line) for line in (tlog / "refusals").read_text().splitlines()]
    assert [(r["reason"], r["tree_size"]) for r in refusals] == [("rolled-back", 400)]
    assert sum("not signing checkpoints" in r.getMessage() for r in caplog.records) == 1
    code, out = _verify(
        capsys,
        str(h.chain),
        "--witness-policy",
        str(policy),
        "--checkpoint",
        str(auditor),
    )
    assert code == 1, out
    assert (
        "CONTRADICTED: the chain contradicts the checkpoint of size 400 that the quorum attests (cosigned by w0, w1)"
        in out
    )
    assert "no checkpoint the chain matches meets the quorum" in out


def test_bad_answers_beside_a_real_witness_are_contained_and_never_stored(
    tmp_path: Path,
    key: tuple[Path, Signer],
    pool: WitnessPool,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = pool.witnesses[0]
    impostor = Cosigner(real.name, Ed25519PrivateKey.generate())  # the real witness's name, another key
    others = [Cosigner(f"bad{n}.example/w", Ed25519PrivateKey.generate()) for n in range(4)]

    def garbage(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, b"\x00\xff garbage\n"

    def another_key(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        text = body.decode().split("\n\n", 1)[1].split("\n\n", 1)[0] + "\n"
        return 200, {}, impostor.line(text, int(time.time())).encode()

    def failing(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        return 500, {}, b"internal error\n"

    def slow(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        fake.release.wait(60)  # held past the shutdown bound, released when the test ends
        return 503, {}, b"late\n"

    monkeypatch.setattr(checkpointing, "SHUTDOWN_PUSH_S", 2.0)
    with (
        fake_witness(garbage) as g,
        fake_witness(another_key) as k,
        fake_witness(failing) as f,
        fake_witness(slow) as s,
    ):
        policy = tmp_path / "policy"
        fakes = [("garbage", g), ("imposter", k), ("failing", f), ("slow", s)]
        lines = [f"log {key[1].verifier()}", f"witness real {real.verifier} {real.url}"]
        lines += [
            f"witness {name} {c.verifier} {fake.url}" for (name, fake), c in zip(fakes, others, strict=True)
        ]
        policy.write_text("\n".join([*lines, "quorum real"]) + "\n")
        with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
            h = make_harness(tmp_path, signing_key=key[0], witness_policy=policy, **QUIET)
            try:
                results = [factory.dispatch(job) for job in _jobs(40)]
            finally:
                _close(h)
    assert len(results) == 40
    signers = {s.name for n in LogStore(h.chain).notes().notes for s in parse_note(n).signatures}
    assert signers == {ORIGIN, real.name}
    messages = [r.getMessage() for r in caplog.records]
    for name, cause in (("garbage", "bad-answer"), ("imposter", "bad-answer"), ("failing", "server-error")):
        assert sum(f"witness {name} did not cosign checkpoint 40: {cause}" in m for m in messages) == 1, (
            messages
        )
    code, out = _verify(capsys, str(h.chain), "--witness-policy", str(policy))
    assert code == 0, out
