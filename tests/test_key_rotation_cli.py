"""An auditor's key set (``--keys FILE``) for a log that rotated its key: ``verify``, ``report``, ``audit``,
``prove --receipt`` and ``verify-proof`` accept each checkpoint signed by a key valid for its size, and
refuse, by name, one signed only by a key outside its window (an old key used after it was retired)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from backend_support import FakeBackend, Host
from tlog_support import ORIGIN, append, notes

from otel_route_shadow.cli import audit as audit_cli
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_BAD_CHECKPOINT
from otel_route_shadow.logstore import Checkpointer, signed_checkpoint_from_note
from otel_route_shadow.tlog import Signer, parse_note, sign_note

OLD = Signer.generate(ORIGIN)
NEW = Signer.generate(ORIGIN)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@dataclasses.dataclass(frozen=True)
class Rotated:
    chain: Path
    keys: Path
    """The key set: the old key for sizes below 401, the new one from 300 (both signed 300 and 400)."""
    forged: Path
    """A note of the newest checkpoint (600) signed by the old key alone, after it was retired."""


@pytest.fixture
def rotated(tmp_path: Path) -> Rotated:
    chain = tmp_path / "chain.jsonl"
    append(chain, 200, Checkpointer(str(chain), ORIGIN, OLD), every=100)
    append(chain, 200, Checkpointer(str(chain), ORIGIN, (OLD, NEW)), every=100, start=200)
    append(chain, 200, Checkpointer(str(chain), ORIGIN, NEW), every=100, start=400)
    keys = tmp_path / "log.keys"
    keys.write_text(f"# rotated at 300\n{OLD.verifier()} 0 401\n{NEW.verifier()} 300\n")
    forged = tmp_path / "forged.note"
    forged.write_text(sign_note(parse_note(notes(chain)[-1]).text, [OLD]))
    return Rotated(chain, keys, forged)


def test_verify_with_the_key_set_accepts_every_checkpoint_across_the_rotation(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "verify", str(rotated.chain), "--keys", str(rotated.keys))
    assert code == 0, out
    assert "consistent with 6 checkpoint(s), largest size 600" in out


def test_verify_with_the_old_key_alone_does_not_accept_the_new_keys_checkpoints(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "verify", str(rotated.chain), "--key", str(OLD.verifier()))
    assert code == 1 and out.count("): unknown-key") == 2


def test_verify_refuses_by_name_a_checkpoint_signed_only_by_a_retired_key(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", str(rotated.chain), "--checkpoint", str(rotated.forged)]
    code, out, _ = run(capsys, *argv, "--keys", str(rotated.keys))
    assert code == 1
    assert "key-outside-window" in out and f"{ORIGIN}+{OLD.key_id:08x} (valid for sizes 0 to 400)" in out
    code, out, _ = run(capsys, *argv, "--key", str(OLD.verifier()))  # a bare key has no window
    assert code == 0, out


def test_a_key_set_window_overrides_the_same_bare_key(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["verify", str(rotated.chain), "--checkpoint", str(rotated.forged), "--key", str(OLD.verifier())]
    code, out, _ = run(capsys, *argv, "--keys", str(rotated.keys))
    assert code == 1 and "(size 600): key-outside-window" in out, out


def test_report_checks_the_last_checkpoint_with_the_key_set(
    rotated: Rotated, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "report", str(rotated.chain), "--keys", str(rotated.keys))
    assert code == 0, out
    assert f"signature verified with the given key: {ORIGIN}+{NEW.key_id:08x}" in out
    (Path(f"{rotated.chain}.tlog") / "checkpoint").write_text(rotated.forged.read_text())
    code, out, _ = run(capsys, "report", str(rotated.chain), "--keys", str(rotated.keys))
    assert "NOT by any key given: not verified" in out


def test_a_receipt_and_a_proof_verify_with_the_key_set(
    rotated: Rotated, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "witness.policy"
    policy.write_text("quorum none\n")
    record, receipt = tmp_path / "record.line", tmp_path / "receipt.txt"
    code, out, err = run(
        capsys,
        *("prove", str(rotated.chain), "--seq", "350", "--receipt", "--record-out", str(record)),
        *("--witness-policy", str(policy), "--keys", str(rotated.keys)),
    )
    assert code == 0, err
    receipt.write_text(out)
    code, out, _ = run(
        capsys,
        "verify-proof",
        "--receipt",
        str(receipt),
        "--record",
        str(record),
        "--keys",
        str(rotated.keys),
    )
    assert code == 0 and "included: the record is seq 350 of the tree of 600 records" in out
    proof = tmp_path / "proof.json"
    code, out, _ = run(capsys, "prove", str(rotated.chain), "--seq", "350")
    proof.write_text(out)
    check = ["verify-proof", "--proof", str(proof), "--record", str(record), "--keys", str(rotated.keys)]
    latest = str(Path(f"{rotated.chain}.tlog") / "checkpoint")
    code, out, _ = run(capsys, *check, "--checkpoint", latest)
    assert code == 0, out
    code, _, err = run(capsys, *check, "--checkpoint", str(rotated.forged))
    assert code == 1 and "key-outside-window" in err


def test_prove_refuses_keys_without_a_policy(rotated: Rotated, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "prove", str(rotated.chain), "--seq", "1", "--keys", str(rotated.keys))
    assert code == 2 and "--keys goes with --receipt --witness-policy" in err


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{old} 0\n{old} 5\n", "line 2: the key of line 1 again"),
        ("{old} 05\n", "line 1: a size is a decimal number"),
        ("# nothing here\n", "no key"),
    ],
)
def test_a_bad_key_set_is_unusable_input_named_by_line(
    rotated: Rotated, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    rotated.keys.write_text(text.format(old=OLD.verifier()))
    code, _, err = run(capsys, "verify", str(rotated.chain), "--keys", str(rotated.keys))
    assert code == 2 and f"--keys {rotated.keys}: {named}" in err and err.count("\n") == 1


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    fake = FakeBackend()
    monkeypatch.setattr(audit_cli, "build_backend", lambda *_: fake)
    return fake


def test_audit_accepts_the_rotation_with_the_key_set_and_refuses_a_retired_keys_checkpoint(
    tmp_path: Path, backend: FakeBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path / "host", ORIGIN, backend, signer=OLD).run(40, final_checkpoint=False)
    dataclasses.replace(host, signer=(OLD, NEW)).run(20, first=40, final_checkpoint=False)
    dataclasses.replace(host, signer=NEW).run(20, first=60)
    keys = tmp_path / "log.keys"
    keys.write_text(f"{OLD.verifier()} 0 61\n{NEW.verifier()} 50\n")
    audit = ["audit", str(host.chain), "--backend", "http://127.0.0.1:9", "--keys", str(keys)]
    code, out, _ = run(capsys, *audit)
    assert code == 0, out
    newest = parse_note(notes(host.chain)[-1]).text
    backend.add_checkpoint(signed_checkpoint_from_note(sign_note(newest, [OLD])))
    code, out, _ = run(capsys, *audit)
    assert code == EXIT_BAD_CHECKPOINT and "size 80: key-outside-window" in out, out


def test_a_fleet_report_checks_each_logs_newest_checkpoint_with_the_key_set(
    rotated: Rotated, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other_origin = "example.com/route-shadow/other"
    other_key = Signer.generate(other_origin)
    other = tmp_path / "other" / "chain.jsonl"
    other.parent.mkdir()
    append(other, 50, Checkpointer(str(other), other_origin, other_key), every=50)
    with rotated.keys.open("a") as keys:
        keys.write(f"{other_key.verifier()} 0\n")
    code, out, _ = run(
        capsys, "report", str(rotated.chain), str(other), "--keys", str(rotated.keys), "--json"
    )
    assert code == 0, out
    (Path(f"{rotated.chain}.tlog") / "checkpoint").write_text(rotated.forged.read_text())
    code, out, _ = run(capsys, "report", str(rotated.chain), str(other), "--keys", str(rotated.keys))
    assert code == 1 and "EXCLUDED from every figure: its checkpoint is not signed by any given key valid for its size" in out, out
