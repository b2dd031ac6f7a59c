"""The plugin and its witnesses, with fake witnesses on loopback (the real ones: tests/test_witness_e2e.py).

The settings (``witness_policy``, ``witness_pushes_per_day`` and their variables); the log's origin is its
key's name and a configured origin that differs is refused at start with one line (the host runs on,
shadowed, unsigned); a policy that cannot be used is one line and nothing is pushed; the host's
checkpoints end up cosigned; a witness that never answers never disturbs the host (counted: every request
is made on the witness thread, every spawn returns while a request is held open, results are identical);
bad answers (garbage, another key's cosignature, a 500, a slow witness) are contained, logged once per
witness and cause, and never stored."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from witness_support import Cosigner, FakeWitness, ProvingWitness, fake_witness

from otel_route_shadow.cli import main as cli_main
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import checkpointing
from otel_route_shadow.instrumentation.config import RouteShadowConfig
from otel_route_shadow.logstore import LogStore, default_origin, generate_key_file
from otel_route_shadow.tlog import Signer, parse_note, verify_cosignatures
from otel_route_shadow.witness import client
from otel_route_shadow.worker import WorkerName

from .conftest import Harness, make_harness

ORIGIN = "example.com/route-shadow/plugin-witness"
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([41]) * 32))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([42]) * 32))
QUIET = {"checkpoint_records": 10**8, "checkpoint_seconds": 86_400.0}
"""No checkpoint but the one at shutdown (the tests that need more make them)."""


@pytest.fixture
def key(tmp_path: Path) -> tuple[Path, Signer]:
    path = tmp_path / "log.key"
    return path, generate_key_file(ORIGIN, str(path))


def _policy(tmp_path: Path, signer: Signer, witnesses: list[tuple[str, Cosigner, str]], quorum: str) -> Path:
    lines = [f"log {signer.verifier()}"]
    lines += [f"witness {name} {c.verifier} {url}" for name, c, url in witnesses]
    path = tmp_path / "policy"
    path.write_text("\n".join([*lines, f"quorum {quorum}"]) + "\n")
    return path


def _spawn(count: int, start: int = 0, total: int | None = None) -> list[factory.SpawnResult]:
    """Jobs ``start`` to ``start + count`` of a plan of ``total`` (default: ``start + count``) jobs."""
    jobs = factory.plan_jobs(total or start + count, factory.FactorySettings())[start : start + count]
    return [factory.dispatch(job) for job in jobs]


def _close(h: Harness) -> None:
    h.instrumentor.uninstrument()
    h.provider.shutdown()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "otel_route_shadow" and r.levelno >= logging.WARNING
    ]


# --- settings, origin, key --------------------------------------------------------------------------------


def test_the_settings_come_from_the_environment_and_the_keywords_win(tmp_path: Path) -> None:
    env = {
        "OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY": str(tmp_path / "p"),
        "OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY": "24",
    }
    config = RouteShadowConfig.resolve(env)
    assert (config.witness_policy, config.witness_pushes_per_day) == (tmp_path / "p", 24.0)
    assert RouteShadowConfig.resolve(env, witness_pushes_per_day=96).witness_pushes_per_day == 96
    assert RouteShadowConfig.resolve({}).witness_pushes_per_day == 1440  # one a minute
    with pytest.raises(ValueError, match="WITNESS_PUSHES_PER_DAY: expected a number per day"):
        RouteShadowConfig.resolve({"OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY": "often"})
    with pytest.raises(ValueError):
        RouteShadowConfig.resolve({"OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY": "0"})


def test_the_keys_name_is_the_logs_origin(tmp_path: Path, key: tuple[Path, Signer]) -> None:
    h = make_harness(tmp_path, signing_key=key[0], **QUIET)
    try:
        _spawn(3)
    finally:
        _close(h)
    note = LogStore(h.chain).notes().notes[-1]
    assert note.startswith(ORIGIN + "\n3\n") and f"\u2014 {ORIGIN} " in note
    assert all(r["attributes"]["route_shadow.origin"] == ORIGIN for r in h.records())


def test_an_origin_that_differs_from_the_keys_name_is_refused_with_one_line_and_the_host_runs_unsigned(
    tmp_path: Path, key: tuple[Path, Signer], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        h = make_harness(tmp_path, signing_key=key[0], origin="example.com/another-name", **QUIET)
        try:
            results = _spawn(4)
        finally:
            _close(h)
    assert len(results) == 4 and len(h.records()) == 4  # shadowed
    [line] = _warnings(caplog)
    assert "checkpoints unsigned" in line and ORIGIN in line and "example.com/another-name" in line
    assert "PRIVATE" not in line
    note = LogStore(h.chain).notes().notes[-1]
    assert note == "example.com/another-name\n4\n" + note.split("\n")[2] + "\n"  # unsigned: the text alone


@pytest.mark.parametrize("origin", ["example.com/tab\there", "example.com/" + "a" * 5000])
def test_an_origin_no_checkpoint_can_hold_is_refused_at_start_and_the_default_origin_is_used(
    tmp_path: Path, origin: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An origin with a control character or over 4,096 characters was taken: every checkpoint then
    # failed ("will retry", forever), so the chain was never checkpointed.
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        h = make_harness(tmp_path, origin=origin, **QUIET)
        try:
            _spawn(2)
        finally:
            _close(h)
    [line] = _warnings(caplog)
    assert "checkpoints unsigned: the origin set cannot be a checkpoint's" in line and origin not in line
    note = LogStore(h.chain).notes().notes[-1]
    assert note.split("\n")[:2] == [default_origin(str(h.chain)), "2"]


@pytest.mark.parametrize(
    ("policy_text", "problem"),
    [
        ("log nonsense\nquorum none\n", "line 1: the log key"),
        ("witness w {w1}\n", "no quorum line"),
        ("witness w {w1} ftp://example.org/w\nquorum w\n", "not http:// or https://"),
        (None, "no such file"),
    ],
)
def test_a_witness_policy_that_cannot_be_used_is_one_line_and_nothing_is_pushed(
    tmp_path: Path,
    key: tuple[Path, Signer],
    caplog: pytest.LogCaptureFixture,
    policy_text: str | None,
    problem: str,
) -> None:
    policy = tmp_path / "policy"
    if policy_text is not None:
        policy.write_text(policy_text.format(w1=W1.verifier))
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        h = make_harness(tmp_path, signing_key=key[0], witness_policy=policy, **QUIET)
        try:
            _spawn(2)
        finally:
            _close(h)
    [line] = _warnings(caplog)
    assert "checkpoints not pushed to witnesses" in line and problem in line
    assert f"\u2014 {ORIGIN} " in LogStore(h.chain).notes().notes[-1]  # still signed


def test_a_witness_policy_without_a_signing_key_is_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = tmp_path / "policy"
    policy.write_text(f"witness w {W1.verifier} http://127.0.0.1:9/\nquorum w\n")
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        h = make_harness(tmp_path, witness_policy=policy, **QUIET)
        _close(h)
    [line] = _warnings(caplog)
    assert "checkpoints unsigned: no signing key; not pushed to the witnesses" in line


# --- the host's checkpoints, cosigned -------------------------------------------------------------------------


@pytest.fixture
def witnesses(key: tuple[Path, Signer]) -> Iterator[list[tuple[ProvingWitness, FakeWitness]]]:
    first, second = ProvingWitness(W1, key[1].verifier()), ProvingWitness(W2, key[1].verifier())
    with fake_witness(first) as a, fake_witness(second) as b:
        yield [(first, a), (second, b)]
        first.gate.set()
        second.gate.set()


def test_the_hosts_checkpoints_are_pushed_and_stored_cosigned(
    tmp_path: Path,
    key: tuple[Path, Signer],
    witnesses: list[tuple[ProvingWitness, FakeWitness]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    (first, a), (second, b) = witnesses
    policy = _policy(tmp_path, key[1], [("one", W1, a.url), ("two", W2, b.url)], "both")
    policy.write_text(policy.read_text().replace("quorum both", "group both all one two\nquorum both"))
    h = make_harness(
        tmp_path,
        signing_key=key[0],
        witness_policy=policy,
        checkpoint_records=25,
        witness_pushes_per_day=8_640_000,
    )
    try:
        _spawn(120)
    finally:
        _close(h)  # the last checkpoint is made and pushed to both within the shutdown bound
    assert first.size == second.size == 120 and 422 not in first.answers and 403 not in second.answers
    checkpoint = (Path(LogStore(h.chain).path) / "checkpoint").read_text()
    found = verify_cosignatures(checkpoint, [W1.verifier, W2.verifier], now=2**40)
    assert {c.verifier.name for c in found.verified} == {W1.verifier.name, W2.verifier.name}
    assert parse_note(checkpoint).text.split("\n")[1] == "120"
    capsys.readouterr()
    assert cli_main(["verify", str(h.chain), "--witness-policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "attested by the quorum up to size 120 (cosigned by one, two); 0 record(s)" in out


def test_a_witness_that_never_answers_never_disturbs_the_host(
    tmp_path: Path,
    key: tuple[Path, Signer],
    witnesses: list[tuple[ProvingWitness, FakeWitness]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (first, a), _ = witnesses
    first.gate.clear()  # it takes every request and never answers
    threads: list[str] = []
    post = client.post

    def counted(**kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return post(**kwargs)

    monkeypatch.setattr(client, "post", counted)
    monkeypatch.setattr(checkpointing, "SHUTDOWN_PUSH_S", 0.2)
    baseline = _spawn(60)
    policy = _policy(tmp_path, key[1], [("mute", W1, a.url)], "mute")
    h = make_harness(
        tmp_path,
        signing_key=key[0],
        witness_policy=policy,
        checkpoint_records=10,
        witness_pushes_per_day=8_640_000,
    )
    try:
        results = _spawn(30, total=60)
        assert a.arrived.acquire(timeout=30)  # a push reached the witness, which holds it open ...
        results += _spawn(30, start=30, total=60)  # ... while the host goes on spawning
        assert first.answers == {}  # not one answer came back during all of that
    finally:
        _close(h)
    assert results == baseline and len(h.records()) == 60
    assert threads and set(threads) == {WorkerName.WITNESS}  # no request ever made on a host's thread
    notes = LogStore(h.chain).notes().notes
    assert notes and all(len(parse_note(n).signatures) == 1 for n in notes)  # signed, never cosigned


def test_bad_witness_answers_are_contained_logged_once_and_never_stored(
    tmp_path: Path,
    key: tuple[Path, Signer],
    witnesses: list[tuple[ProvingWitness, FakeWitness]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (good, a), _ = witnesses
    impostor = Cosigner(W2.verifier.name, Ed25519PrivateKey.from_private_bytes(bytes([43]) * 32))
    W3 = Cosigner("w3.example/w", Ed25519PrivateKey.from_private_bytes(bytes([44]) * 32))
    W4 = Cosigner("w4.example/w", Ed25519PrivateKey.from_private_bytes(bytes([45]) * 32))
    W5 = Cosigner("w5.example/w", Ed25519PrivateKey.from_private_bytes(bytes([46]) * 32))

    def garbage(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, b"\x00\xffnot a cosignature\n"

    def another_key(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        text = body.decode().split("\n\n", 1)[1].split("\n\n", 1)[0] + "\n"
        return 200, {}, impostor.line(text, 1_700_000_000).encode()

    def failing(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        return 500, {}, b"internal error\n"

    def slow(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        fake.release.wait(60)  # held past the shutdown bound, released when the test ends
        return 503, {}, b"late\n"

    monkeypatch.setattr(checkpointing, "SHUTDOWN_PUSH_S", 1.0)
    with (
        fake_witness(garbage) as g,
        fake_witness(another_key) as k,
        fake_witness(failing) as f,
        fake_witness(slow) as s,
    ):
        policy = _policy(
            tmp_path,
            key[1],
            [
                ("good", W1, a.url),
                ("garbage", W3, g.url),
                ("imposter", W2, k.url),
                ("failing", W4, f.url),
                ("slow", W5, s.url),
            ],
            "none",
        )
        with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
            h = make_harness(tmp_path, signing_key=key[0], witness_policy=policy, **QUIET)
            try:
                results = _spawn(12)
            finally:
                _close(h)
        assert len(results) == 12 and good.size == 12
    notes = LogStore(h.chain).notes().notes
    names = {s.name for n in notes for s in parse_note(n).signatures}
    assert names == {ORIGIN, W1.verifier.name}  # only the good witness's cosignature was stored
    messages = _warnings(caplog)
    for name, cause in (("garbage", "bad-answer"), ("imposter", "bad-answer"), ("failing", "server-error")):
        assert sum(f"witness {name} did not cosign checkpoint 12: {cause}" in m for m in messages) == 1, (
            messages
        )
    refusals = (Path(LogStore(h.chain).path) / "witness-refusals").read_text()
    assert '"witness": "garbage"' in refusals and '"witness": "imposter"' in refusals
    assert '"failing"' not in refusals and '"slow"' not in refusals  # transient: logged only
