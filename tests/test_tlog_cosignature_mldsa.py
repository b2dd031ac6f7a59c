"""C2SP tlog-cosignature v1.1.0-rc.1, ML-DSA-44 (key type 0x06): the key id, the verifier key, the
``subtree/v1`` message, cosignatures verified beside Ed25519 ones, in witness policies, against torchwood's
own vector, and both ways against torchwood v0.10.0 built with Go 1.27."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PrivateKey
from go_interop import GO_1_27, TORCHWOOD_V0100, run_go_interop
from hypothesis import given, settings
from hypothesis import strategies as st
from witness_support import Cosigner

from otel_route_shadow.tlog import (
    Checkpoint,
    CosignatureError,
    CosignatureVerifier,
    Signer,
    add_cosignatures,
    parse_witness_policy,
    sign_note,
    verify_cosignatures,
)
from otel_route_shadow.tlog.cosignature import (
    CosignatureAlgorithm,
    CosignatureFault,
    cosignature_key_id,
    split_timestamped_signature,
    subtree_message,
)

VECTORS = Path(__file__).parent / "vectors" / "cosignature"
ORIGIN = "example.com/route-shadow/mldsa"
NOW = 1_800_000_000
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
ROOT = hashlib.sha256(b"root").digest()
TEXT = Checkpoint(ORIGIN, 5, ROOT).text()
NOTE = sign_note(TEXT, [LOG])
PQ_SEED = bytes(32 * [7])
PQ = Cosigner("pq-witness.example", MLDSA44PrivateKey.from_seed_bytes(PQ_SEED))
ED = Cosigner("ed-witness.example", Ed25519PrivateKey.from_private_bytes(bytes(32 * [1])))


def test_the_key_id_is_the_spec_hash_with_type_0x06_over_the_1312_byte_key() -> None:
    public = PQ.verifier.public_key
    assert len(public) == 1312
    expected = hashlib.sha256(b"pq-witness.example\n\x06" + public).digest()[:4]
    assert PQ.verifier.key_id == int.from_bytes(expected, "big")
    assert (
        cosignature_key_id("pq-witness.example", public, CosignatureAlgorithm.ML_DSA_44) == PQ.verifier.key_id
    )


def test_a_verifier_key_is_name_key_id_and_type_0x06_key_and_parses_back() -> None:
    name, hex_id, material = str(PQ.verifier).split("+", 2)
    assert (name, int(hex_id, 16)) == ("pq-witness.example", PQ.verifier.key_id)
    assert base64.b64decode(material) == b"\x06" + PQ.verifier.public_key
    parsed = CosignatureVerifier.parse(str(PQ.verifier))
    assert parsed == PQ.verifier and parsed.algorithm is CosignatureAlgorithm.ML_DSA_44


@pytest.mark.parametrize("size", [0, 32, 1311, 1313])
def test_a_type_0x06_key_of_another_size_is_refused(size: int) -> None:
    material = base64.b64encode(b"\x06" + bytes(size)).decode()
    with pytest.raises(CosignatureError) as caught:
        CosignatureVerifier.parse(f"w+00000000+{material}")
    assert caught.value.fault is CosignatureFault.KEY_TYPE


def test_the_subtree_message_is_the_cosigned_message_structure() -> None:
    message = subtree_message("w.example", 1679315147, "log.example", 0, 5, ROOT)
    assert message == (
        b"subtree/v1\n\x00"
        + b"\x09w.example"
        + (1679315147).to_bytes(8, "big")
        + b"\x0blog.example"
        + (0).to_bytes(8, "big")
        + (5).to_bytes(8, "big")
        + ROOT
    )
    assert len(b"subtree/v1\n\x00") == 12


@pytest.mark.parametrize(
    ("name", "timestamp", "origin", "start", "end", "root"),
    [
        ("", 0, "log", 0, 1, ROOT),  # no cosigner name
        ("w" * 256, 0, "log", 0, 1, ROOT),  # a name of more than 255 bytes
        ("w", 0, "", 0, 1, ROOT),  # no origin
        ("w", 0, "o" * 256, 0, 1, ROOT),
        ("w", 5, "log", 2, 4, ROOT),  # a timestamp on a subtree that does not start at 0
        ("w", 0, "log", 4, 2, ROOT),  # start after end
        ("w", 0, "log", 0, 1, ROOT[:31]),
    ],
)
def test_a_subtree_message_outside_the_structure_is_refused(
    name: str, timestamp: int, origin: str, start: int, end: int, root: bytes
) -> None:
    with pytest.raises(CosignatureError):
        subtree_message(name, timestamp, origin, start, end, root)


def test_the_signature_is_a_timestamp_then_2420_bytes_for_ml_dsa_44() -> None:
    raw = (1234).to_bytes(8, "big") + bytes(2420)
    assert split_timestamped_signature(raw, CosignatureAlgorithm.ML_DSA_44) == (1234, bytes(2420))
    for bad in (raw[:-1], raw + b"\0", raw[:72]):
        with pytest.raises(CosignatureError) as caught:
            split_timestamped_signature(bad, CosignatureAlgorithm.ML_DSA_44)
        assert caught.value.fault is CosignatureFault.MALFORMED_SIGNATURE


def test_ml_dsa_and_ed25519_cosignatures_verify_side_by_side() -> None:
    note = NOTE + PQ.line(TEXT, NOW - 10) + ED.line(TEXT, NOW - 5)
    found = verify_cosignatures(note, [ED.verifier, PQ.verifier], now=NOW)
    assert [(c.verifier, c.timestamp) for c in found.verified] == [
        (ED.verifier, NOW - 5),
        (PQ.verifier, NOW - 10),
    ]
    assert found.ignored == 1 and found.refused == ()
    pq_line = PQ.line(TEXT, NOW)
    merged = add_cosignatures(NOTE, [pq_line, ED.line(TEXT, NOW)], [PQ.verifier], now=NOW)
    assert merged == NOTE + pq_line
    assert verify_cosignatures(merged, [PQ.verifier], now=NOW).verifiers() == {PQ.verifier}
    assert verify_cosignatures(merged, [ED.verifier], now=NOW).verified == ()


def test_an_ml_dsa_cosignature_on_another_checkpoint_does_not_verify() -> None:
    other = Checkpoint(ORIGIN, 6, ROOT).text()
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(NOTE + PQ.line(other, NOW), [PQ.verifier], now=NOW)
    assert caught.value.fault is CosignatureFault.BAD_SIGNATURE


def test_an_ml_dsa_cosignature_commits_to_the_cosigner_name() -> None:
    # The same key under another name: the line claims that name's key id, the message names the first.
    renamed = CosignatureVerifier.from_public_key(
        "other-name.example", PQ.verifier.public_key, CosignatureAlgorithm.ML_DSA_44
    )
    line = PQ.subtree_line(ORIGIN, 0, 5, ROOT, NOW, key_id=renamed.key_id, name=renamed.name)
    assert verify_cosignatures(NOTE + line, [PQ.verifier], now=NOW).verified == ()  # not PQ's line
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(NOTE + line, [renamed], now=NOW)
    assert caught.value.fault is CosignatureFault.BAD_SIGNATURE
    named = PQ.subtree_line(
        ORIGIN, 0, 5, ROOT, NOW, key_id=renamed.key_id, name=renamed.name, signed_name=renamed.name
    )
    assert verify_cosignatures(NOTE + named, [renamed], now=NOW).verifiers() == {renamed}


def test_an_ml_dsa_cosignature_on_a_note_with_extension_lines_does_not_verify() -> None:
    # The subtree message does not cover extension lines: a cosignature would vouch for lines it never saw.
    extended = TEXT + "extension line\n"
    line = PQ.subtree_line(ORIGIN, 0, 5, ROOT, NOW)
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(sign_note(extended, [LOG]) + line, [PQ.verifier], now=NOW)
    assert caught.value.fault is CosignatureFault.BAD_SIGNATURE


def test_an_ml_dsa_cosignature_timestamped_beyond_now_plus_skew_is_refused() -> None:
    found = verify_cosignatures(NOTE + PQ.line(TEXT, NOW + 301), [PQ.verifier], now=NOW)
    assert found.verified == () and [r.fault for r in found.refused] == [CosignatureFault.FUTURE_TIMESTAMP]


@settings(max_examples=30, deadline=None)
@given(st.binary(min_size=0, max_size=2440))
def test_garbage_after_an_ml_dsa_key_id_raises_only_cosignature_errors(blob: bytes) -> None:
    raw = PQ.verifier.key_id.to_bytes(4, "big") + blob
    line = f"\u2014 {PQ.verifier.name} {base64.b64encode(raw).decode()}\n"
    with pytest.raises(CosignatureError):
        verify_cosignatures(NOTE + line, [PQ.verifier], now=NOW)


def test_a_witness_policy_line_takes_an_ml_dsa_key_and_counts_its_cosignature() -> None:
    policy = parse_witness_policy(
        f"log {LOG.verifier()}\nwitness pq {PQ.verifier}\nwitness ed {ED.verifier}\n"
        "group both all pq ed\nquorum both\n"
    )
    assert {w.verifier.algorithm for w in policy.witnesses} == set(CosignatureAlgorithm)
    found = verify_cosignatures(
        NOTE + PQ.line(TEXT, NOW) + ED.line(TEXT, NOW), policy.witness_verifiers(), now=NOW
    )
    names = {w.name for w in policy.witnesses if w.verifier in found.verifiers()}
    assert policy.evaluate(names).met


def test_torchwoods_own_ml_dsa_vector_verifies() -> None:
    vector = json.loads((VECTORS / "torchwood-mldsa44.json").read_text(encoding="utf-8"))
    verifier = CosignatureVerifier.parse(vector["vkey"])
    assert verifier.algorithm is CosignatureAlgorithm.ML_DSA_44
    found = verify_cosignatures(vector["note"], [verifier], now=0)
    assert [(c.verifier, c.timestamp) for c in found.verified] == [(verifier, 0)]
    body, _, line = vector["note"].rpartition("\u2014 ")
    raw = bytearray(base64.b64decode(line.split(" ")[1]))
    raw[-1] ^= 1
    tampered = body + "\u2014 " + verifier.name + " " + base64.b64encode(bytes(raw)).decode() + "\n"
    with pytest.raises(CosignatureError) as caught:
        verify_cosignatures(tampered, [verifier], now=0)
    assert caught.value.fault is CosignatureFault.BAD_SIGNATURE


@pytest.mark.skipif(shutil.which("go") is None, reason="the go command is not installed (CI has it)")
def test_torchwood_v0_10_0_agrees_on_ml_dsa_cosignatures_both_ways(tmp_path: Path) -> None:
    other = Checkpoint(ORIGIN, 6, ROOT).text()
    raw = bytearray(base64.b64decode(PQ.line(TEXT, NOW).split(" ")[2]))
    raw[20] ^= 1
    tampered = f"\u2014 {PQ.verifier.name} {base64.b64encode(bytes(raw)).decode()}\n"
    cosigned = [
        (NOTE + PQ.line(TEXT, NOW), True),
        (NOTE + ED.line(TEXT, NOW) + PQ.line(TEXT, 0), True),
        (NOTE + PQ.line(other, NOW), False),
        (NOTE + tampered, False),
    ]
    for note, counted in cosigned:  # what this package concludes, handed to torchwood to compare
        try:
            verified = PQ.verifier in verify_cosignatures(note, [PQ.verifier], now=NOW).verifiers()
        except CosignatureError:
            verified = False
        assert verified == counted
    subtree_root = hashlib.sha256(b"subtree").digest()
    subtrees = [  # (start, end, hash, our line, does it verify)
        (4, 8, subtree_root, PQ.subtree_line(ORIGIN, 4, 8, subtree_root), True),
        (0, 5, ROOT, PQ.subtree_line(ORIGIN, 0, 5, ROOT, NOW), True),
        (4, 8, subtree_root, PQ.subtree_line(ORIGIN, 4, 8, ROOT), False),  # signed over another hash
        (0, 8, subtree_root, PQ.subtree_line("example.com/other-log", 0, 8, subtree_root), False),
    ]
    other_note = sign_note(other, [LOG])
    payload = {
        "log_verifier": str(LOG.verifier()),
        "seed": PQ_SEED.hex(),
        "name": PQ.verifier.name,
        "vkey": str(PQ.verifier),
        "cosigned": [{"note": note, "verified": counted} for note, counted in cosigned],
        "sign": [NOTE, other_note],
        "subtrees": [
            {
                "origin": ORIGIN,
                "start": s,
                "end": e,
                "hash": base64.b64encode(h).decode(),
                "line": line,
                "valid": v,
            }
            for s, e, h, line, v in subtrees
        ],
    }
    output = run_go_interop(payload, tmp_path, TORCHWOOD_V0100, toolchain=GO_1_27)
    signed = json.loads(output.strip().splitlines()[-1])
    assert signed["vkey"] == str(PQ.verifier)
    later = NOW + 10**9  # torchwood stamps its cosignatures with the real time
    for note, wrong, line in zip([NOTE, other_note], [other_note, NOTE], signed["lines"], strict=True):
        assert verify_cosignatures(note + line, [PQ.verifier], now=later).verifiers() == {PQ.verifier}
        with pytest.raises(CosignatureError):  # torchwood's line is bound to its checkpoint
            verify_cosignatures(wrong + line, [PQ.verifier], now=later)
    public = MLDSA44PrivateKey.from_seed_bytes(PQ_SEED).public_key()
    for (start, end, root, _, _), line in zip(subtrees, signed["subtrees"], strict=True):
        name, blob = line.removeprefix("\u2014 ").rstrip("\n").split(" ")
        raw_line = base64.b64decode(blob)
        assert name == PQ.verifier.name
        assert raw_line[:12] == PQ.verifier.key_id.to_bytes(4, "big") + bytes(8)  # key id, timestamp 0
        public.verify(raw_line[12:], subtree_message(name, 0, ORIGIN, start, end, root))
