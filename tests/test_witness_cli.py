"""The auditor's side of witnessing on the command line: ``verify --witness-policy`` (three statements, each witness's
largest size, quorum not met is insufficient evidence, exit 3), ``verify-proof --witness-policy``, receipts
(``prove --receipt``, ``verify-proof --receipt``), ``audit --witness-policy`` and ``report --witness-policy``; and bad input
(a malformed policy, witness URL, witness key or cosignature): one line on stderr, exit 2, never a traceback.

The cosignatures are made by test-only cosigners and stored through the log directory's own merge
(``LogStore.cosign``), as the plugin stores its witnesses' answers."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest
from backend_support import FakeBackend, Host
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from witness_support import Cosigner, GrowingLog

from otel_route_shadow.analysis.evidence import note_evidence
from otel_route_shadow.backend.audit import AuditOptions, audit_chain
from otel_route_shadow.backend.verdict import AuditVerdict
from otel_route_shadow.cli import main
from otel_route_shadow.cli.audit import render_text
from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore import Cosigned, LogStore
from otel_route_shadow.tlog import Signer, parse_note, parse_witness_policy

ORIGIN = "example.com/route-shadow/witness-cli"
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([51]) * 32))
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([52]) * 32))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([53]) * 32))
STRANGER = Cosigner("w9.example/w", Ed25519PrivateKey.from_private_bytes(bytes([54]) * 32))
NOW = int(time.time())


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _policy_text(quorum: str = "both", log: Signer = LOG) -> str:
    return (
        f"log {log.verifier()}\nwitness one {W1.verifier} https://w1.example/w\nwitness two {W2.verifier}\n"
        f"group both all one two\ngroup either any one two\nquorum {quorum}\n"
    )


def _cosign(log: GrowingLog, note: str, *cosigners: Cosigner, timestamp: int = NOW) -> None:
    text = parse_note(note).text
    for cosigner in cosigners:
        outcome = LogStore(log.chain).cosign(
            text, [cosigner.line(text, timestamp)], [W1.verifier, W2.verifier, STRANGER.verifier], now=NOW
        )
        assert outcome is Cosigned.ADDED


@pytest.fixture
def witnessed(tmp_path: Path) -> tuple[GrowingLog, Path]:
    """A chain of 70 records: checkpoints 10 and 40 cosigned by both witnesses, 60 by one, 70 by none."""
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    _cosign(log, log.grow(10), W1, W2)
    _cosign(log, log.grow(30), W1, W2)
    _cosign(log, log.grow(20), W1, STRANGER)
    log.grow(10)
    policy = tmp_path / "policy"
    policy.write_text(_policy_text())
    return log, policy


# --- verify --witness-policy ------------------------------------------------------------------------------------------


def test_verify_says_the_three_statements_and_records_beyond_the_attested_size_are_insufficient(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    code, out, err = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert (code, err) == (3, "")
    assert "1. the chain is intact: yes" in out
    assert "2. it is consistent with every checkpoint: yes (4 distinct checkpoint(s)" in out
    assert (
        "3. attested by the quorum up to size 40 (cosigned by one, two); 30 record(s) beyond it not yet witnessed"
        in out
    )
    assert "largest size cosigned, per witness: one 60, two 40" in out  # the stranger's line never counts
    assert "exit 3: insufficient evidence: 30 record(s) not witnessed, more than --max-unwitnessed 0" in out
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy), "--max-unwitnessed", "30"], capsys)
    assert code == 0 and "exit 0: attested" in out
    code, out, _ = run(
        ["verify", str(log.chain), "--witness-policy", str(policy), "--max-unwitnessed", "29", "--json"], capsys
    )
    witnessed_json = json.loads(out)["witnessed"]
    assert code == 3 and witnessed_json["status"] == "insufficient-evidence"
    assert witnessed_json["attested_size"] == 40 and witnessed_json["largest_cosigned"] == {
        "one": 60,
        "two": 40,
    }
    assert witnessed_json["unwitnessed"] == 30 and witnessed_json["attested_by"] == ["one", "two"]


@pytest.mark.parametrize("command", ["verify", "report"])
def test_the_old_option_name_policy_still_works_and_says_it_is_the_old_name_of_witness_policy(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str], command: str
) -> None:
    log, policy = witnessed
    new_code, new_out, new_err = run([command, str(log.chain), "--witness-policy", str(policy), "--json"], capsys)
    old_code, old_out, old_err = run([command, str(log.chain), "--policy", str(policy), "--json"], capsys)
    assert (old_code, new_err) == (new_code, "")
    new, old = json.loads(new_out), json.loads(old_out)
    for answer in (new, old):
        answer.get("evidence", {}).pop("age_seconds", None)  # how old the checkpoint file is, read twice
    assert old == new
    assert old_err == f"otel-route-shadow {command}: --policy is the old name of --witness-policy; it still works\n"


def test_verify_policy_verifies_each_log_signature_once(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain's pass authenticates every checkpoint note with the policy's log key; the policy's
    verdict takes those keys as verified instead of verifying each log signature a second time."""
    from otel_route_shadow.logstore import read_note_file, tlog_dir
    from otel_route_shadow.tlog import note as note_module

    log, policy = witnessed
    notes = read_note_file(str(Path(tlog_dir(str(log.chain))) / "checkpoints")).notes
    calls: list[str] = []
    verify = note_module.Verifier.verify

    def counted(self: note_module.Verifier, message: bytes, signature: bytes) -> bool:
        calls.append(self.name)
        return verify(self, message, signature)

    monkeypatch.setattr(note_module.Verifier, "verify", counted)
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert code == 3 and "attested by the quorum up to size 40" in out
    assert len(calls) == len(notes) > 4


def test_quorum_not_met_is_insufficient_evidence_naming_the_missing_witness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    _cosign(log, log.grow(10), W1)
    policy = tmp_path / "policy"
    policy.write_text(_policy_text("both"))
    code, out, _ = run(
        ["verify", str(log.chain), "--witness-policy", str(policy), "--max-unwitnessed", "1000"], capsys
    )
    assert code == 3
    assert (
        "no checkpoint the chain matches meets the quorum (the newest, size 10, is cosigned by one; missing: two)"
        in out
    )
    policy.write_text(_policy_text("either"))
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert code == 0 and "attested by the quorum up to size 10 (cosigned by one); 0 record(s)" in out


def test_a_cosignature_in_the_future_is_not_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(10)
    text = parse_note(note).text
    late = note + W1.line(text, NOW) + W2.line(text, NOW + 86_400)  # written by hand: the merge refuses it
    directory = LogStore(log.chain)
    directory.append_note(late)
    policy = tmp_path / "policy"
    policy.write_text(_policy_text("both"))
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert code == 3
    assert "not counted: cosignatures timestamped in the future by two (checkpoint of size 10)" in out


def test_a_cosignature_that_does_not_verify_is_a_finding_and_a_malformed_one_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(10)
    text = parse_note(note).text
    policy = tmp_path / "policy"
    policy.write_text(_policy_text("both"))
    forged = note + W1.line(text, NOW) + W2.line(text.replace("\n10\n", "\n11\n"), NOW)
    LogStore(log.chain).append_note(forged)
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert code == 1
    assert "checkpoint #2 not counted (cosignature): the cosignature by w2.example/w" in out
    short = base64.b64encode(W2.verifier.key_id.to_bytes(4, "big") + bytes(9)).decode()
    LogStore(log.chain).append_note(note + f"\u2014 w2.example/w {short}\n")
    code, out, err = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert code == 2 and err.count("\n") == 1 and "checkpoint #3" in err and "72 bytes" in err


def test_verify_names_the_cosigned_checkpoint_a_cut_chain_contradicts(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    lines = log.chain.read_bytes().split(b"\n")[:25]
    log.chain.write_bytes(b"".join(line + b"\n" for line in lines))
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert code == 1
    assert (
        "CONTRADICTED: the chain contradicts the checkpoint of size 40 that the quorum attests (cosigned by one, two): truncated"
        in out
    )
    assert "3. attested by the quorum up to size 10" in out


# --- verify-proof --witness-policy, receipts -------------------------------------------------------------------------------


def test_verify_proof_with_a_policy_counts_the_checkpoints_cosignatures(
    witnessed: tuple[GrowingLog, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    tlog = Path(LogStore(log.chain).path)
    notes = LogStore(log.chain).notes().notes
    cosigned40, signed70 = tmp_path / "c40", tmp_path / "c70"
    cosigned40.write_text(next(n for n in reversed(notes) if n.startswith(f"{ORIGIN}\n40\n")))
    signed70.write_text((tlog / "checkpoint").read_text())
    record = tmp_path / "record.line"
    record.write_bytes(log.lines()[7] + b"\n")
    for checkpoint, expected in ((cosigned40, 0), (signed70, 3)):
        code, out, _ = run(["prove", str(log.chain), "--seq", "7", "--checkpoint", str(checkpoint)], capsys)
        proof = tmp_path / "proof.json"
        proof.write_text(out)
        code, out, _ = run(
            [
                "verify-proof",
                "--proof",
                str(proof),
                "--checkpoint",
                str(checkpoint),
                "--record",
                str(record),
                "--witness-policy",
                str(policy),
            ],
            capsys,
        )
        assert code == expected, out
        assert "included: the given record is seq 7" in out


def test_a_receipt_carries_every_cosignature_of_its_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two notes of one checkpoint, each cosigned by one witness (as a hand-assembled file may hold
    them): the receipt's note holds both cosignatures, so it meets the quorum alone."""
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(10)
    text = parse_note(note).text
    directory = LogStore(log.chain)
    directory.append_note(note + W1.line(text, NOW))
    directory.append_note(note + W2.line(text, NOW))
    policy = tmp_path / "policy"
    policy.write_text(_policy_text("both"))
    line, receipt = tmp_path / "line", tmp_path / "receipt"
    code, out, _ = run(
        [
            "prove",
            str(log.chain),
            "--seq",
            "3",
            "--receipt",
            "--witness-policy",
            str(policy),
            "--record-out",
            str(line),
        ],
        capsys,
    )
    assert code == 0 and out.endswith(note.split("\n\n")[1] + W1.line(text, NOW) + W2.line(text, NOW))
    receipt.write_text(out)
    code, _, _ = run(
        ["verify-proof", "--receipt", str(receipt), "--record", str(line), "--witness-policy", str(policy)], capsys
    )
    assert code == 0


def test_a_receipt_proves_one_decision_with_nothing_else(
    witnessed: tuple[GrowingLog, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    receipt, line = tmp_path / "receipt", tmp_path / "record.line"
    code, out, err = run(
        [
            "prove",
            str(log.chain),
            "--seq",
            "33",
            "--receipt",
            "--witness-policy",
            str(policy),
            "--record-out",
            str(line),
        ],
        capsys,
    )
    assert code == 0 and err == ""
    assert (
        out.startswith("c2sp.org/tlog-proof@v1\nindex 33\n") and f"\n\n{ORIGIN}\n40\n" in out
    )  # the attested one
    assert line.read_bytes() == log.lines()[33] + b"\n"
    receipt.write_text(out)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    log.chain.rename(
        moved / "chain.jsonl"
    )  # the auditor has the receipt, the line and the policy: nothing else
    code, out, _ = run(
        ["verify-proof", "--receipt", str(receipt), "--record", str(line), "--witness-policy", str(policy)], capsys
    )
    assert code == 0 and "witnessed: the quorum both is met (cosigned by one, two)" in out
    other = tmp_path / "other.line"
    other.write_bytes((moved / "chain.jsonl").read_bytes().split(b"\n")[34])
    code, out, _ = run(
        ["verify-proof", "--receipt", str(receipt), "--record", str(other), "--witness-policy", str(policy)], capsys
    )
    assert code == 1 and "does NOT hold" in out
    policy.write_text(_policy_text("both").replace("quorum both", "quorum one"))
    code, _, _ = run(
        ["verify-proof", "--receipt", str(receipt), "--record", str(line), "--witness-policy", str(policy)], capsys
    )
    assert code == 0


def test_a_receipt_against_an_unwitnessed_checkpoint_is_insufficient_evidence(
    witnessed: tuple[GrowingLog, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    code, _, err = run(["prove", str(log.chain), "--seq", "65", "--receipt", "--witness-policy", str(policy)], capsys)
    assert code == 3 and "covers seq 65 and meets the quorum" in err
    receipt, line = tmp_path / "receipt", tmp_path / "record.line"
    code, out, _ = run(
        ["prove", str(log.chain), "--seq", "65", "--receipt", "--record-out", str(line)], capsys
    )
    assert code == 0 and f"\n\n{ORIGIN}\n70\n" in out  # the latest checkpoint, cosigned by nobody
    receipt.write_text(out)
    code, out, _ = run(
        ["verify-proof", "--receipt", str(receipt), "--record", str(line), "--witness-policy", str(policy)], capsys
    )
    assert (
        code == 3
        and "INSUFFICIENT EVIDENCE: the quorum both is not met (cosigned by no witness; missing: one, two)"
        in out
    )
    code, out, _ = run(
        ["verify-proof", "--receipt", str(receipt), "--record", str(line), "--key", str(LOG.verifier())],
        capsys,
    )
    assert code == 0 and "requires no witness" in out


# --- audit --witness-policy and report --witness-policy ---------------------------------------------------------------------------


def test_audit_with_a_policy_counts_only_quorum_attested_checkpoints(tmp_path: Path) -> None:
    backend = FakeBackend()
    host = Host(tmp_path / "host", ORIGIN, backend, LOG).run(50, every=10)
    directory = LogStore(host.chain)
    newest = directory.notes().notes[
        -1
    ]  # 50: the backend has the signed note, the host's disk the cosigned one
    text = parse_note(newest).text
    for cosigner in (W1, W2):
        directory.cosign(text, [cosigner.line(text, NOW)], [W1.verifier, W2.verifier], now=NOW)
    options = AuditOptions(
        verifier_keys=(str(LOG.verifier()),), policy=parse_witness_policy(_policy_text()), policy_source="P"
    )
    report = audit_chain(str(host.chain), backend, options)
    assert report.verdict is AuditVerdict.AGREE and report.witnessed_size == 50
    assert report.witnessed is not None and report.witnessed.largest == (("one", 50), ("two", 50))
    assert (
        "witnesses (--witness-policy P, quorum both): attested up to size 50 (cosigned by one, two)"
        in render_text(report)
    )
    other = _policy_text().replace(f"witness two {W2.verifier}", f"witness three {STRANGER.verifier}")
    only_one = AuditOptions(
        verifier_keys=(str(LOG.verifier()),),
        policy=parse_witness_policy(other.replace("one two", "one three")),
        policy_source="P",
    )
    thin = audit_chain(str(host.chain), backend, only_one)
    assert thin.verdict is AuditVerdict.INSUFFICIENT and thin.witnessed_size == 0
    assert any("meets the quorum both of P (missing: three)" in line for line in thin.shortfalls())


def test_report_with_a_policy_verifies_the_cosigners(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    text = parse_note(log.notes()[-1]).text
    LogStore(log.chain).cosign(
        text, [W1.line(text, NOW), W2.line(text, NOW)], [W1.verifier, W2.verifier], now=NOW
    )
    _, out, _ = run(["report", str(log.chain), "--allow-unverified"], capsys)
    assert "cosigned by: w1.example/w+" in out and "not verified here" in out
    _, out, _ = run(["report", str(log.chain), "--allow-unverified", "--witness-policy", str(policy)], capsys)
    assert "cosigned by: one, two (cosignatures verified with the policy; quorum both met)" in out
    assert "signature verified with the given key" in out
    page = log.chain.parent / "report.html"
    run(
        ["report", str(log.chain), "--allow-unverified", "--witness-policy", str(policy), "--html", str(page)], capsys
    )
    assert (
        "cosigned by: one, two (cosignatures verified with the policy; quorum both met)" in page.read_text()
    )


# --- bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy_text", "needle"),
    [
        ("log nonsense\nquorum none\n", "line 1: the log key"),
        ("witness w {w1} ftp://example.org/\nquorum w\n", "witness w: the URL is not http:// or https://"),
        ("witness w {w1} https://user:secret@example.org/\nquorum w\n", "holds user information"),
        ("witness w {log_key}\nquorum w\n", "not a cosignature key (type 0x04 Ed25519 or 0x06 ML-DSA-44)"),
        ("witness w {w1}\n", "no quorum line"),
        ("log {log_key}\nquorum none\n\x00", "control character"),
    ],
)
def test_a_malformed_policy_is_one_line_and_exit_2(
    witnessed: tuple[GrowingLog, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    policy_text: str,
    needle: str,
) -> None:
    log, _ = witnessed
    bad = tmp_path / "bad.policy"
    bad.write_text(policy_text.format(w1=W1.verifier, log_key=LOG.verifier()))
    for argv in (
        ["verify", str(log.chain), "--witness-policy", str(bad)],
        ["verify-proof", "--receipt", str(bad), "--record", str(bad), "--witness-policy", str(bad)],
        ["report", str(log.chain), "--witness-policy", str(bad)],
        ["prove", str(log.chain), "--seq", "1", "--receipt", "--witness-policy", str(bad)],
        ["audit", str(log.chain), "--backend", "http://127.0.0.1:9", "--witness-policy", str(bad)],
    ):
        code, _, err = run(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        assert needle in err and "secret" not in err, err


def test_usage_errors_around_the_policy_are_one_line(
    witnessed: tuple[GrowingLog, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, policy = witnessed
    no_log = tmp_path / "nolog"
    no_log.write_text(f"witness w {W1.verifier}\nquorum w\n")
    for argv, needle in (
        (["verify", str(log.chain), "--max-unwitnessed", "3"], "--max-unwitnessed goes with --witness-policy"),
        (["verify", str(log.chain), "--witness-policy", str(no_log)], "no `log` line and no --key"),
        (["verify", str(log.chain), "--witness-policy", str(tmp_path / "missing")], "no such file"),
        (["verify-proof", "--receipt", str(policy), "--witness-policy", str(policy)], "--receipt needs --record"),
        (["verify-proof", "--receipt", str(policy), "--record", str(policy)], "--receipt needs --witness-policy"),
        (["prove", str(log.chain), "--from", "3", "--receipt"], "--receipt goes with --seq"),
        (["prove", str(log.chain), "--seq", "3", "--record-out", "x"], "go with --receipt"),
    ):
        code, _, err = run(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and needle in err, (argv, err)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_policy_file_is_read_or_refused_in_one_line(
    witnessed: tuple[GrowingLog, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    log, _ = witnessed
    path = tmp_path / "fuzzed.policy"
    path.write_bytes(data)
    code, _, err = run(["verify", str(log.chain), "--witness-policy", str(path)], capsys)
    assert code in (0, 1, 2, 3) and "Traceback" not in err
    if code == 2:
        assert err.count("\n") == 1


# --- verify and report read the same evidence, and name refusals ---------------------------------------------


@pytest.mark.parametrize("stored_in", ["checkpoints", "checkpoint"])
def test_report_and_verify_agree_on_a_cosignature_stored_in_either_file(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str], stored_in: str
) -> None:
    """``report --witness-policy`` read only ``checkpoint`` and ``verify --witness-policy`` only ``checkpoints``: one valid
    extra cosignature in one of them made them disagree. Both read both now."""
    log, policy = witnessed
    note = log.notes()[-1]  # size 70, cosigned by nobody yet
    text = parse_note(note).text
    _cosign(log, note, W1)
    directory = LogStore(log.chain)
    both = log.notes()[-1] + W2.line(text, NOW)
    if stored_in == "checkpoints":
        with open(directory.file("checkpoints"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"note": both}) + "\n")
    else:
        Path(directory.file("checkpoint")).write_text(both, encoding="utf-8")
    code, out, err = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert (code, err) == (0, ""), out
    assert "attested by the quorum up to size 70" in out
    _, out, _ = run(["report", str(log.chain), "--allow-unverified", "--witness-policy", str(policy)], capsys)
    assert "cosigned by: one, two (cosignatures verified with the policy; quorum both met)" in out, out


def test_verify_and_report_name_the_refusals_recorded_beside_the_chain(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``verify`` never named a refusal, in text or ``--json``: the writer's and the witnesses' are named."""
    log, policy = witnessed
    directory = LogStore(log.chain)
    directory.append_refusal({"reason": "fork", "origin": ORIGIN, "tree_size": 70, "expected_offset": 1})
    directory.append_witness_refusal({"witness": "one", "cause": "conflict", "origin": ORIGIN, "size": 75})
    with open(directory.file("witness-refusals"), "a", encoding="utf-8") as handle:
        handle.write("not json\n")
        handle.write(json.dumps({"witness": "\x1b[2Jtwo", "cause": "conflict"}) + "\n")
    _, out, _ = run(["verify", str(log.chain)], capsys)
    assert "REFUSED: the writer refused to sign: fork (signed size 70)" in out
    assert "REFUSED: witness one refused the checkpoint of size 75: conflict" in out
    assert "2 line(s) that are not refusals (line 2 first)" in out and "\x1b" not in out
    _, out, _ = run(["verify", str(log.chain), "--json", "--witness-policy", str(policy)], capsys)
    refusals = json.loads(out)["refusals"]
    assert [r["reason"] for r in refusals["writer"]] == ["fork"]
    assert [(r["witness"], r["cause"], r["size"]) for r in refusals["witnesses"]] == [("one", "conflict", 75)]
    _, out, _ = run(["report", str(log.chain), "--allow-unverified"], capsys)
    assert "REFUSED: the writer refused to sign: fork (signed size 70)" in out
    _, out, _ = run(["report", str(log.chain), "--allow-unverified", "--json"], capsys)
    assert "fork" in out and "conflict" in out


def test_a_refusals_file_that_is_a_link_is_named_not_followed(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Regression: ``verify`` and ``report`` read ``refusals`` and ``witness-refusals`` by path,
    following a link planted in their place; the store reads them the one way, as it reads
    ``checkpoint`` and the tiles (no link below the log's folder followed)."""
    log, _policy = witnessed
    directory = LogStore(log.chain)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(json.dumps({"reason": "fork", "origin": ORIGIN, "tree_size": 70}) + "\n", encoding="utf-8")
    os.symlink(elsewhere, directory.file("refusals"))
    _, out, _ = run(["verify", str(log.chain)], capsys)
    assert "REFUSED: the writer refused to sign" not in out
    assert f"{directory.file('refusals')}: not read:" in out
    with pytest.raises(FileRefused):
        directory.refusals_file()
    with pytest.raises(ValueError, match="not a refusals file"):
        directory.refusals_file("checkpoint")


def test_a_remote_checkpoints_quorum_never_counts_a_local_file_named_after_its_url(
    witnessed: tuple[GrowingLog, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the quorum of a checkpoint gathered cosignatures from ``checkpoints`` beside the
    path it was read from, so for a remote log's ``http://h/log/checkpoint`` it read the auditor's own
    relative file ``http:/h/log/checkpoints``. The notes a quorum may count are now passed in."""
    log, policy_file = witnessed
    policy = parse_witness_policy(policy_file.read_text(encoding="utf-8"))
    note = log.notes()[-1]  # size 70, cosigned by nobody
    text = parse_note(note).text
    both = note + W1.line(text, NOW) + W2.line(text, NOW)
    planted = tmp_path / "http:" / "h" / "log" / "checkpoints"
    planted.parent.mkdir(parents=True)
    planted.write_text(json.dumps({"note": both}) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    remote = note_evidence("http://h/log/checkpoint", note, 0, 0, policy=policy)
    assert remote.witnesses is not None and not remote.witnesses.met
    given = note_evidence("http://h/log/checkpoint", note, 0, 0, policy=policy, stored_notes=[both])
    assert given.witnesses is not None and given.witnesses.met


def test_verify_policy_checks_cosignatures_from_the_newest_down_until_the_answer_is_known(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Checkpoints 70 (no cosigner), 60 (one) and 40 (both: the quorum) give the attested size and every
    witness's largest cosigned size; checkpoint 10's cosignatures are not checked unless asked."""
    log, policy = witnessed
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy), "--json"], capsys)
    quick = json.loads(out)["witnessed"]
    code_all, out_all, _ = run(
        ["verify", str(log.chain), "--witness-policy", str(policy), "--json", "--all-cosignatures"], capsys
    )
    full = json.loads(out_all)["witnessed"]
    assert (code, code_all) == (3, 3)
    assert quick["not_checked"] == [10] and full["not_checked"] == []
    for key in ("attested_size", "largest_cosigned", "status", "unwitnessed"):
        assert quick[key] == full[key], key
    code, out, _ = run(["verify", str(log.chain), "--witness-policy", str(policy)], capsys)
    assert "cosignatures not checked: 1 older checkpoint(s), sizes 10 to 10" in out


def test_all_cosignatures_goes_with_a_policy(
    witnessed: tuple[GrowingLog, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    log, _ = witnessed
    code, _, err = run(["verify", str(log.chain), "--all-cosignatures"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--all-cosignatures goes with --witness-policy" in err
