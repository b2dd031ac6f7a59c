"""The log's evidence status at the top of the report: the last checkpoint beside the chain (size,
age), who signed it (key names on its signature lines), and who cosigned it; verified only when the
caller passes a key, and never claimed verified otherwise. Hostile files on the log's disk (a FIFO,
garbage, a huge file) never block or stop a report."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_analysis_support import build_chain

from otel_route_shadow.analysis import (
    ABSENT,
    FAILED,
    NOT_CHECKED,
    NOT_VERIFIED,
    PRESENT,
    UNREADABLE,
    VERIFIED,
    build_report,
    read_evidence,
)
from otel_route_shadow.cli import main
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.logstore import tlog_dir
from otel_route_shadow.tlog import Checkpoint, Signer, sign_note

ORIGIN = "example.com/route-shadow/test"
NOW = 1_800_000_000 * 10**9


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    return path


def write_checkpoint(chain: Path, size: int, signers: list[Signer], *, mtime_ns: int | None = None) -> Path:
    directory = Path(tlog_dir(str(chain)))
    directory.mkdir(exist_ok=True)
    target = directory / "checkpoint"
    target.write_text(sign_note(Checkpoint(ORIGIN, size, b"\x01" * 32).text(), signers), encoding="utf-8")
    if mtime_ns is not None:
        os.utime(target, ns=(mtime_ns, mtime_ns))
    return target


def test_no_checkpoint_is_said_so(chain: Path) -> None:
    evidence = read_evidence(chain, 17)
    assert evidence.status == ABSENT
    assert "nothing vouches for the chain beyond its own hash links" in format_report(build_report(chain))


def test_signers_are_listed_not_verified(chain: Path) -> None:
    log, witness = Signer.generate(ORIGIN), Signer.generate("witness.example")
    write_checkpoint(chain, 12, [log, witness], mtime_ns=NOW - 90 * 10**9)
    evidence = read_evidence(chain, 17, now_ns=NOW)
    assert evidence.status == PRESENT
    assert (evidence.origin, evidence.size, evidence.records_beyond) == (ORIGIN, 12, 5)
    assert evidence.age_ns == 90 * 10**9
    assert evidence.signed_by == (f"{ORIGIN}+{log.key_id:08x}",)
    assert evidence.cosigned_by == (f"witness.example+{witness.key_id:08x}",)
    assert evidence.verification == NOT_CHECKED and evidence.verified_by == ()
    data = evidence.as_dict()
    assert data["checked_against_chain"] is False
    assert "not verified here" in data["note"]


def test_a_witness_cosignature_is_listed_as_cosigned(chain: Path) -> None:
    from witness_support import Cosigner

    log, witness = Signer.generate(ORIGIN), Cosigner("witness.example/w1")  # a log's key: named for its origin
    target = write_checkpoint(chain, 17, [log])
    note = target.read_text(encoding="utf-8")
    text = note.split("\n\n", 1)[0] + "\n"
    target.write_text(note + witness.line(text, 1_800_000_000), encoding="utf-8")
    evidence = read_evidence(chain, 17)
    assert evidence.signed_by == (f"{ORIGIN}+{log.key_id:08x}",)
    assert evidence.cosigned_by == (f"witness.example/w1+{witness.verifier.key_id:08x}",)
    assert read_evidence(chain, 17, verifiers=[log.verifier()]).verification == VERIFIED


def test_the_first_line_is_the_logs_when_no_key_is_named_after_the_origin(chain: Path) -> None:
    log, other = Signer.generate("route-shadow"), Signer.generate("someone")
    write_checkpoint(chain, 17, [log, other])
    evidence = read_evidence(chain, 17)
    assert evidence.signed_by == (f"route-shadow+{log.key_id:08x}",)
    assert evidence.cosigned_by == (f"someone+{other.key_id:08x}",)


def test_with_a_key_the_signature_is_verified(chain: Path) -> None:
    log, stranger = Signer.generate(ORIGIN), Signer.generate(ORIGIN)
    write_checkpoint(chain, 17, [log])
    assert read_evidence(chain, 17, verifiers=[log.verifier()]).verification == VERIFIED
    assert read_evidence(chain, 17, verifiers=[log.verifier()]).verified_by == (f"{ORIGIN}+{log.key_id:08x}",)
    assert read_evidence(chain, 17, verifiers=[stranger.verifier()]).verification == NOT_VERIFIED
    target = Path(tlog_dir(str(chain))) / "checkpoint"
    note = target.read_text(encoding="utf-8")
    body, _, signature = note.partition("\n\n")
    target.write_text(body.replace("\n17\n", "\n16\n") + "\n\n" + signature, encoding="utf-8")
    assert read_evidence(chain, 17, verifiers=[log.verifier()]).verification == FAILED


def test_an_unsigned_checkpoint(chain: Path) -> None:
    write_checkpoint(chain, 17, [])
    evidence = read_evidence(chain, 17)
    assert evidence.status == PRESENT and evidence.signed_by == () and evidence.records_beyond == 0
    assert "signed by: nobody (an unsigned checkpoint)" in format_report(build_report(chain))


@pytest.mark.parametrize("content", [b"", b"not a note\n", b"\xff\xfe", b"{not json}\n", b"x" * (70 * 1024)])
def test_a_garbled_checkpoint_is_unreadable_not_an_error(chain: Path, content: bytes) -> None:
    directory = Path(tlog_dir(str(chain)))
    directory.mkdir()
    (directory / "checkpoint").write_bytes(content)
    evidence = read_evidence(chain, 17)
    assert evidence.status == UNREADABLE and evidence.problem
    assert build_report(chain).evidence is not None


def test_a_fifo_in_place_of_the_checkpoint_never_blocks(chain: Path) -> None:
    directory = Path(tlog_dir(str(chain)))
    directory.mkdir()
    os.mkfifo(directory / "checkpoint")
    evidence = read_evidence(chain, 17)  # a blocking open would hang here: no writer ever comes
    assert evidence.status == UNREADABLE and "FIFO" in (evidence.problem or "")


def test_evidence_in_every_output(chain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Signer.generate(ORIGIN)
    write_checkpoint(chain, 17, [log])
    report = build_report(chain)
    text = format_report(report)
    assert "last checkpoint: size 17 of 17 records" in text
    assert f"signed by: {ORIGIN}+{log.key_id:08x} (not verified here; run `otel-route-shadow verify" in text
    assert "cosigned by: none" in text
    html = render_html(report)
    assert 'aria-label="log evidence"' in html and "not verified here" in html
    key_file = tmp_path / "log.vkey"
    key_file.write_text(str(log.verifier()) + "\n", encoding="utf-8")
    assert main(["report", str(chain), "--json", "--no-progress", "--key", str(key_file)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evidence"]["verification"] == VERIFIED
    assert data["evidence"]["signed_by"] == [f"{ORIGIN}+{log.key_id:08x}"]
    assert data["evidence"]["note"] is None
    assert main(["report", str(chain), "--no-progress", "--key", "not-a-key"]) == 2
    assert "verifier key" in capsys.readouterr().err
