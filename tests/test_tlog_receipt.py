"""c2sp.org/tlog-proof@v1 receipts: format and parse (round trip, totality, each refusal), and verifying one
record of a real chain against a cosigned checkpoint and a policy."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from witness_support import Cosigner, GrowingLog

from otel_route_shadow.logstore import LogStore, signed_checkpoint_from_note
from otel_route_shadow.tlog import (
    AttestationError,
    Receipt,
    ReceiptError,
    ReceiptFault,
    Signer,
    TileReader,
    format_receipt,
    inclusion_proof,
    parse_witness_policy,
    sign_note,
    verify_receipt,
)
from otel_route_shadow.tlog.attestation import AttestationFault
from otel_route_shadow.tlog.receipt import parse_receipt

ORIGIN = "example.com/route-shadow/receipt"
NOW = 1_800_000_000
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([7]) * 32))
W1 = Cosigner("w1.example", Ed25519PrivateKey.from_private_bytes(bytes([8]) * 32))
W2 = Cosigner("w2.example", Ed25519PrivateKey.from_private_bytes(bytes([9]) * 32))
POLICY = parse_witness_policy(
    f"log {LOG.verifier()}\nwitness one {W1.verifier}\nwitness two {W2.verifier}\ngroup g 2 one two\nquorum g\n"
)
HASH = bytes(range(32))


def test_the_format_is_header_extra_index_proof_blank_note() -> None:
    text = format_receipt(Receipt(73894, (HASH, HASH[::-1]), "note\n", b"age"))
    b64 = base64.b64encode
    assert text == (
        "c2sp.org/tlog-proof@v1\nextra YWdl\nindex 73894\n"
        f"{b64(HASH).decode()}\n{b64(HASH[::-1]).decode()}\n\nnote\n"
    )
    assert format_receipt(Receipt(0, (), "n\n")) == "c2sp.org/tlog-proof@v1\nindex 0\n\nn\n"


@given(
    st.integers(0, 2**63 - 1),
    st.lists(st.binary(min_size=32, max_size=32), max_size=63),
    st.text(max_size=200),
    st.none() | st.binary(max_size=40),
)
def test_format_and_parse_round_trip(index: int, proof: list[bytes], note: str, extra: bytes | None) -> None:
    receipt = Receipt(index, tuple(proof), note, extra)
    assert parse_receipt(format_receipt(receipt)) == receipt


@given(st.text(max_size=300))
def test_parsing_any_text_raises_only_receipt_error(text: str) -> None:
    for candidate in (text, "c2sp.org/tlog-proof@v1\n" + text):
        try:
            parse_receipt(candidate)
        except ReceiptError as exc:
            assert exc.fault is ReceiptFault.MALFORMED


H64 = base64.b64encode(HASH).decode()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("c2sp.org/tlog-proof@v2\nindex 0\n\nn\n", "not a tlog proof"),
        ("c2sp.org/tlog-proof@v1\nindex 0\n", "no blank line"),
        ("c2sp.org/tlog-proof@v1\n\nn\n", "no index line"),
        ("c2sp.org/tlog-proof@v1\nextra YWdl\n\nn\n", "no index line"),
        ("c2sp.org/tlog-proof@v1\nindex 01\n\nn\n", "index line"),
        ("c2sp.org/tlog-proof@v1\nindex -1\n\nn\n", "index line"),
        ("c2sp.org/tlog-proof@v1\nindex 9223372036854775808\n\nn\n", "index line"),
        ("c2sp.org/tlog-proof@v1\nextra !!\nindex 0\n\nn\n", "not base64"),
        ("c2sp.org/tlog-proof@v1\nextra YWdl=\nindex 0\n\nn\n", "base64"),
        ("c2sp.org/tlog-proof@v1\nindex 0\nAAAA\n\nn\n", "32-byte"),
        (f"c2sp.org/tlog-proof@v1\nindex 0\n{H64[:-2]}B=\n\nn\n", "canonical"),
        ("c2sp.org/tlog-proof@v1\nindex 0\n" + f"{H64}\n" * 64 + "\nn\n", "more than 63"),
        ("c2sp.org/tlog-proof@v1\nextra YWdl\nextra YWdl\nindex 0\n\nn\n", "index line"),
    ],
)
def test_each_malformed_receipt_is_refused(text: str, problem: str) -> None:
    with pytest.raises(ReceiptError, match=problem) as caught:
        parse_receipt(text)
    assert caught.value.fault is ReceiptFault.MALFORMED


def _cosigned_receipts(tmp_path: Path) -> tuple[GrowingLog, str, list[bytes]]:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(300)
    text = note.split("\n\n")[0] + "\n"
    cosigned = note + W1.line(text, NOW - 5) + W2.line(text, NOW - 4)
    return log, cosigned, log.lines()


def _receipt(log: GrowingLog, note: str, index: int) -> str:
    size = signed_checkpoint_from_note(note).size
    store = TileReader(LogStore(str(log.chain)), size, signed_checkpoint_from_note(note).root)
    return format_receipt(Receipt(index, tuple(inclusion_proof(index, size, store)), note))


@pytest.mark.parametrize("index", [0, 1, 255, 256, 299])
def test_a_record_of_the_chain_is_verified_with_its_receipt(tmp_path: Path, index: int) -> None:
    log, note, lines = _cosigned_receipts(tmp_path)
    verdict = verify_receipt(_receipt(log, note, index), lines[index], POLICY, now=NOW)
    assert verdict.index == index and verdict.attestation.quorum.met
    assert verify_receipt(_receipt(log, note, index), lines[index] + b"\n", POLICY, now=NOW).index == index


def test_another_record_or_a_tampered_proof_fails_the_inclusion_check(tmp_path: Path) -> None:
    log, note, lines = _cosigned_receipts(tmp_path)
    receipt = _receipt(log, note, 7)
    with pytest.raises(ReceiptError) as caught:
        verify_receipt(receipt, lines[8], POLICY, now=NOW)
    assert caught.value.fault is ReceiptFault.INCLUSION
    parsed = parse_receipt(receipt)
    for tampered in (
        Receipt(8, parsed.proof, parsed.note),
        Receipt(7, parsed.proof[:-1], parsed.note),
        Receipt(7, (bytes(32), *parsed.proof[1:]), parsed.note),
    ):
        with pytest.raises(ReceiptError) as caught:
            verify_receipt(format_receipt(tampered), lines[7], POLICY, now=NOW)
        assert caught.value.fault is ReceiptFault.INCLUSION


def test_a_receipt_without_the_quorum_says_so_and_a_forged_log_signature_is_refused(tmp_path: Path) -> None:
    log, note, lines = _cosigned_receipts(tmp_path)
    one_witness = note.rsplit("\u2014", 1)[0]
    verdict = verify_receipt(_receipt(log, one_witness, 3), lines[3], POLICY, now=NOW)
    assert not verdict.attestation.quorum.met and verdict.attestation.quorum.missing == ("two",)
    stranger = Signer.generate(ORIGIN)  # the origin's name, another key: whoever holds the host
    text = note.split("\n\n")[0] + "\n"
    forged = _receipt(log, sign_note(text, [stranger]) + W1.line(text, NOW) + W2.line(text, NOW), 3)
    with pytest.raises(AttestationError) as caught:
        verify_receipt(forged, lines[3], POLICY, now=NOW)
    assert caught.value.fault is AttestationFault.LOG_SIGNATURE
    other_policy = parse_witness_policy(f"log {stranger.verifier()}\nquorum none\n")
    with pytest.raises(AttestationError) as caught:
        verify_receipt(_receipt(log, note, 3), lines[3], other_policy, now=NOW)
    assert caught.value.fault is AttestationFault.LOG_SIGNATURE
