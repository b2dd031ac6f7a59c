"""C2SP tlog-cosignature (v1.1.0-rc.1), Ed25519: key ids, verifier keys, the signed message, and verifying a note's
cosignature lines (exactly, per rule; garbage never raises anything but CosignatureError)."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from witness_support import Cosigner

from otel_route_shadow.tlog import (
    Checkpoint,
    CosignatureError,
    CosignatureVerifier,
    Signer,
    sign_note,
    verify_cosignatures,
)
from otel_route_shadow.tlog.cosignature import (
    MAX_TIMESTAMP,
    CosignatureFault,
    cosignature_key_id,
    cosignature_message,
    split_timestamped_signature,
)

ORIGIN = "example.com/route-shadow/cosign"
NOW = 1_800_000_000
SEED = bytes(range(32))
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(SEED))
TEXT = Checkpoint(ORIGIN, 5, hashlib.sha256(b"root").digest()).text()
NOTE = sign_note(TEXT, [LOG])
W1 = Cosigner("witness1.example", Ed25519PrivateKey.from_private_bytes(bytes(32 * [1])))
W2 = Cosigner("witness2.example", Ed25519PrivateKey.from_private_bytes(bytes(32 * [2])))


def test_the_key_id_is_the_spec_hash_with_type_0x04() -> None:
    public = W1.verifier.public_key
    expected = hashlib.sha256(b"witness1.example\n\x04" + public).digest()[:4]
    assert cosignature_key_id("witness1.example", public) == int.from_bytes(expected, "big")
    assert W1.verifier.key_id == int.from_bytes(expected, "big")


def test_a_verifier_key_is_name_key_id_and_type_0x04_key() -> None:
    vkey = str(W1.verifier)
    name, hex_id, material = vkey.split("+")
    assert (name, int(hex_id, 16)) == ("witness1.example", W1.verifier.key_id)
    assert base64.b64decode(material) == b"\x04" + W1.verifier.public_key
    assert CosignatureVerifier.parse(vkey) == W1.verifier


@pytest.mark.parametrize(
    ("vkey", "fault"),
    [
        (str(LOG.verifier()), CosignatureFault.KEY_TYPE),  # the log's own key: type 0x01
        ("witness1.example+00000000+" + str(W1.verifier).split("+")[2], CosignatureFault.KEY_ID),
        ("witness1.example+ABCDEF01+" + str(W1.verifier).split("+")[2], CosignatureFault.MALFORMED_KEY),
        ("witness1.example+" + str(W1.verifier).split("+")[1] + "+!!", CosignatureFault.MALFORMED_KEY),
        ("no key at all", CosignatureFault.MALFORMED_KEY),
        ("a b+00000000+BA==", CosignatureFault.MALFORMED_KEY),
        ("w+00000000+BAAA", CosignatureFault.KEY_TYPE),  # type 0x04, two bytes of key
        ("w+00000000+" + base64.b64encode(b"\x06" + bytes(32)).decode(), CosignatureFault.KEY_TYPE),
    ],
)
def test_a_bad_verifier_key_is_refused_with_its_fault(vkey: str, fault: CosignatureFault) -> None:
    with pytest.raises(CosignatureError) as caught:
        CosignatureVerifier.parse(vkey)
    assert caught.value.fault is fault


def test_the_signed_message_is_header_time_line_and_note_text() -> None:
    assert cosignature_message(1679315147, TEXT) == (b"cosignature/v1\ntime 1679315147\n" + TEXT.encode())
    with pytest.raises(CosignatureError) as caught:
        cosignature_message(MAX_TIMESTAMP + 1, TEXT)
    assert caught.value.fault is CosignatureFault.TIMESTAMP_RANGE


def test_the_signature_is_a_big_endian_timestamp_then_64_bytes() -> None:
    raw = (1234).to_bytes(8, "big") + bytes(64)
    assert split_timestamped_signature(raw) == (1234, bytes(64))
    for bad in (raw[:-1], raw + b"\0", b""):
        with pytest.raises(CosignatureError) as caught:
            split_timestamped_signature(bad)
        assert caught.value.fault is CosignatureFault.MALFORMED_SIGNATURE
    with pytest.raises(CosignatureError) as caught:
        split_timestamped_signature((2**63).to_bytes(8, "big") + bytes(64))
    assert caught.value.fault is CosignatureFault.TIMESTAMP_RANGE


def test_cosignatures_by_the_given_witnesses_verify_and_others_are_ignored() -> None:
    other = Cosigner("stranger.example")
    note = NOTE + W1.line(TEXT, NOW - 10) + other.line(TEXT, NOW) + W2.line(TEXT, NOW - 5)
    found = verify_cosignatures(note, [W1.verifier, W2.verifier], now=NOW)
    assert [(c.verifier, c.timestamp) for c in found.verified] == [
        (W1.verifier, NOW - 10),
        (W2.verifier, NOW - 5),
    ]
    assert found.ignored == 2  # the log's own signature and the stranger's
    assert found.refused == ()
    assert verify_cosignatures(note, [W2.verifier], now=NOW).verifiers() == {W2.verifier}


def test_a_cosignature_by_a_key_not_given_never_counts() -> None:
    impostor = Cosigner("witness1.example")  # W1's name, another key: another key id
    note = NOTE + impostor.line(TEXT, NOW)
    found = verify_cosignatures(note, [W1.verifier], now=NOW)
    assert found.verified == () and found.ignored == 2


def test_a_known_key_whose_cosignature_does_not_verify_rejects_the_note() -> None:
    impostor = Cosigner("witness1.example")
    forged = impostor.line(TEXT, NOW, key_id=W1.verifier.key_id)  # W1's name and key id, wrong key
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(NOTE + W2.line(TEXT, NOW) + forged, [W1.verifier, W2.verifier], now=NOW)
    assert caught.value.fault is CosignatureFault.BAD_SIGNATURE
    assert caught.value.witness == str(W1.verifier)


def test_a_cosignature_on_another_checkpoint_does_not_verify() -> None:
    other = Checkpoint(ORIGIN, 6, hashlib.sha256(b"root").digest()).text()
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(NOTE + W1.line(other, NOW), [W1.verifier], now=NOW)
    assert caught.value.fault is CosignatureFault.BAD_SIGNATURE


def test_a_timestamp_beyond_now_plus_skew_is_refused_not_counted() -> None:
    note = NOTE + W1.line(TEXT, NOW + 301) + W2.line(TEXT, NOW + 300)
    found = verify_cosignatures(note, [W1.verifier, W2.verifier], now=NOW, skew=300)
    assert found.verifiers() == {W2.verifier}
    assert [(r.verifier, r.fault) for r in found.refused] == [
        (W1.verifier, CosignatureFault.FUTURE_TIMESTAMP)
    ]
    assert verify_cosignatures(note, [W1.verifier], now=NOW + 1, skew=300).verifiers() == {W1.verifier}


def test_a_witness_that_cosigned_twice_counts_once_with_its_earliest_time() -> None:
    note = NOTE + W1.line(TEXT, NOW) + W1.line(TEXT, NOW - 60)
    found = verify_cosignatures(note, [W1.verifier, W1.verifier], now=NOW)
    assert [(c.verifier, c.timestamp) for c in found.verified] == [(W1.verifier, NOW - 60)]


def test_a_malformed_note_is_a_cosignature_error() -> None:
    for note in ("", "no newline", TEXT + "\n" + "— x\n", TEXT + "\nnot a signature line\n"):
        with pytest.raises(CosignatureError) as caught:
            verify_cosignatures(note, [W1.verifier], now=NOW)
        assert caught.value.fault is CosignatureFault.MALFORMED_NOTE


def test_a_cosignature_of_the_wrong_length_by_a_known_key_rejects_the_note() -> None:
    blob = base64.b64encode(W1.verifier.key_id.to_bytes(4, "big") + bytes(71)).decode()
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(NOTE + f"— {W1.verifier.name} {blob}\n", [W1.verifier], now=NOW)
    assert caught.value.fault is CosignatureFault.MALFORMED_SIGNATURE


@given(st.text(max_size=80))
def test_parsing_any_verifier_key_raises_only_cosignature_error(text: str) -> None:
    try:
        verifier = CosignatureVerifier.parse(text)
    except CosignatureError:
        return
    assert str(verifier) == text


@given(st.binary(min_size=32, max_size=32), st.from_regex(r"[a-z0-9./-]{1,30}", fullmatch=True))
def test_verifier_keys_round_trip(public: bytes, name: str) -> None:
    verifier = CosignatureVerifier.from_public_key(name, public)
    assert CosignatureVerifier.parse(str(verifier)) == verifier


@given(st.integers(min_value=0, max_value=MAX_TIMESTAMP), st.integers(min_value=0, max_value=2**40))
def test_every_timestamp_up_to_now_plus_skew_verifies(timestamp: int, slack: int) -> None:
    found = verify_cosignatures(NOTE + W1.line(TEXT, timestamp), [W1.verifier], now=timestamp + slack, skew=0)
    assert [(c.verifier, c.timestamp) for c in found.verified] == [(W1.verifier, timestamp)]


@given(st.text(max_size=300), st.binary(max_size=90))
def test_verifying_any_note_raises_only_cosignature_error(garbage: str, blob: bytes) -> None:
    encoded = base64.b64encode(W1.verifier.key_id.to_bytes(4, "big") + blob).decode()
    for note in (garbage, NOTE + garbage, NOTE + f"— {W1.verifier.name} {encoded}\n"):
        try:
            found = verify_cosignatures(note, [W1.verifier, W2.verifier], now=NOW)
        except CosignatureError:
            continue
        assert all(c.verifier in (W1.verifier, W2.verifier) for c in found.verified)


def test_a_verifier_key_whose_base64_holds_a_plus_parses() -> None:
    # Regression: the key string was split at every '+', and base64 holds '+' about once in two keys.
    cosigner = next(
        c
        for c in (
            Cosigner("w.example", Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32)) for n in range(64)
        )
        if "+" in str(c.verifier).split("+", 2)[2]
    )
    assert CosignatureVerifier.parse(str(cosigner.verifier)) == cosigner.verifier
