"""Go interop for the witness formats: what this project concludes about cosignatures, policies and receipts,
checked by filippo.io/torchwood and golang.org/x/mod/sumdb/note (tests/interop/witness.go).

The cosignatures are litewitness's own (two real witnesses cosign a growing log); Go opens the cosigned
notes with torchwood's cosignature/v1 verifiers and must see the same witnesses this project's
``verify_cosignatures`` saw, and reject a tampered cosignature as it does. torchwood's ``ParsePolicy`` must
accept every policy this project accepts (and some it refuses: the documented stricter rules), and its
``VerifyCheckpoint`` must agree with this project's quorum on notes with each subset of cosignatures.
Its ``VerifyProof`` must agree with ``verify_receipt`` on receipts for records of the chain.
"""

from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path

import pytest
from go_interop import run_go_interop
from witness_support import GrowingLog, WitnessPool, size_of, witness_pool

from otel_route_shadow.logstore import LogStore, signed_checkpoint_from_note
from otel_route_shadow.tlog import (
    AttestationError,
    CosignatureError,
    Receipt,
    ReceiptError,
    Signer,
    TileReader,
    WitnessPolicyError,
    attest_checkpoint,
    format_receipt,
    inclusion_proof,
    parse_witness_policy,
    verify_cosignatures,
    verify_receipt,
)
from otel_route_shadow.witness import WitnessEndpoint, WitnessPusher

pytestmark = [
    pytest.mark.witness,
    pytest.mark.skipif(shutil.which("go") is None, reason="the go command is not installed (CI has it)"),
]

ORIGIN = "example.com/route-shadow/witness-interop"
WAIT = 60.0


def _cosigned_notes(log: GrowingLog, pool: WitnessPool) -> list[str]:
    """Checkpoints cosigned by both witnesses of ``pool`` (through the pusher), as merged notes."""
    lines: dict[int, list[str]] = {}
    endpoints = [WitnessEndpoint.parse(f"w{n}", w.verifier, w.url) for n, w in enumerate(pool.witnesses)]
    pusher = WitnessPusher(endpoints, log.prove, lambda size, _r, got: lines.setdefault(size, []).extend(got))
    notes = []
    try:
        for count in (3, 253, 300):
            note = log.grow(count)
            pusher.submit(note)
            assert pusher.flush(WAIT)
            notes.append(note + "".join(lines[size_of(note)]))
    finally:
        pusher.close(WAIT)
    return notes


def _tamper_cosignature(note: str) -> str:
    """Flip one bit of the last cosignature's Ed25519 signature."""
    head, last = note.rstrip("\n").rsplit("\n", 1)
    prefix, blob = last.rsplit(" ", 1)
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    return f"{head}\n{prefix} {base64.b64encode(bytes(raw)).decode()}\n"


def _policy_cases(signer: Signer, pool: WitnessPool, notes: list[str]) -> list[dict[str, object]]:
    w0, w1 = (str(w.verifier) for w in pool.witnesses)
    log = f"log {signer.verifier()}"
    accepted = [
        f"{log}\nwitness A {w0}\nwitness B {w1}\ngroup both all A B\nquorum both\n",
        f"{log}\nwitness A {w0}\nwitness B {w1}\ngroup one any A B\nquorum one\n",
        f"# comments and spaces\n  {log}  \n\twitness A {w0} {pool.witnesses[0].url}\nquorum A\n",
        f"{log}\nwitness B {w1}\nquorum B",
        f"{log}\nquorum none\n",
    ]
    only_torchwood = [  # refused here, accepted by torchwood: the draft's rules it does not enforce
        f"{log}\nquorum A\nwitness A {w0}\n",
        f"{log}\nwitness A {w0}\ngroup g any A A\nquorum g\n",
        f"{log}\nwitness A {w0}\ngroup g 01 A\nquorum g\n",
        f"{log}\nwitness A {w0} # inline comment\nquorum A\n",
        f"{log}\nwitness A {w0} https://a.example/ extra\nquorum A\n",
        f"{log}\nwitness A {w0}\nwitness B {w0}\nquorum A\n",
        f"{log}\nwitness none {w0}\nquorum none\n",
    ]
    refused_by_both = [
        f"{log}\nwitness A {w0}\n",
        f"{log}\nwitness A {w0}\nwitness A {w1}\nquorum A\n",
        f"{log}\nwitness A {w0}\ngroup g 0 A\nquorum g\n",
        f"{log}\nwitness A {w0}\ngroup g any B\nquorum g\n",
        f"{log}\nwitnesses A {w0}\nquorum A\n",
        f"{log}\nwitness A {signer.verifier()}\nquorum A\n",
        f"{log}\nquorum none\nquorum none\n",
    ]
    text, lines = notes[-1].split("\n\n", 1)
    signed, *cosignatures = lines.splitlines(keepends=True)
    subsets = [
        text + "\n\n" + signed + "".join(chosen)
        for chosen in ([], cosignatures[:1], cosignatures[1:], cosignatures)
    ]
    cases: list[dict[str, object]] = []
    for policy_text in accepted:
        policy = parse_witness_policy(policy_text)
        checks = [
            {"note": note, "met": attest_checkpoint(note, policy, now=int(time.time())).quorum.met}
            for note in subsets
        ]
        assert {c["met"] for c in checks} == ({True} if policy.quorum is None else {True, False})
        cases.append({"text": policy_text, "torchwood_accepts": True, "checks": checks})
    for policy_text, torchwood in [(t, True) for t in only_torchwood] + [(t, False) for t in refused_by_both]:
        with pytest.raises(WitnessPolicyError):
            parse_witness_policy(policy_text)
        cases.append({"text": policy_text, "torchwood_accepts": torchwood, "checks": []})
    return cases


def _receipt_cases(log: GrowingLog, notes: list[str], policy_text: str) -> list[dict[str, object]]:
    policy = parse_witness_policy(policy_text)
    lines = log.lines()
    note = notes[-1]
    size = size_of(note)
    store = TileReader(LogStore(str(log.chain)), size, signed_checkpoint_from_note(note).root)
    cases = []
    for index, line_index, extra in (
        (0, 0, None),
        (255, 255, b"age"),
        (size - 1, size - 1, None),
        (7, 8, None),
    ):
        receipt = format_receipt(Receipt(index, tuple(inclusion_proof(index, size, store)), note, extra))
        try:
            verdict = verify_receipt(receipt, lines[line_index], policy, now=int(time.time()))
            valid = verdict.attestation.quorum.met
        except (ReceiptError, AttestationError):
            valid = False
        cases.append(
            {"policy": policy_text, "receipt": receipt, "line": lines[line_index].decode(), "valid": valid}
        )
    no_cosignatures = note.split("\u2014")[0] + "\u2014" + note.split("\u2014")[1]
    receipt = format_receipt(Receipt(3, tuple(inclusion_proof(3, size, store)), no_cosignatures))
    verdict = verify_receipt(receipt, lines[3], policy, now=int(time.time()))
    cases.append(
        {
            "policy": policy_text,
            "receipt": receipt,
            "line": lines[3].decode(),
            "valid": verdict.attestation.quorum.met,
        }
    )
    assert [c["valid"] for c in cases] == [True, True, True, False, False]
    return cases


def test_torchwood_agrees_on_litewitness_cosignatures_policies_and_receipts(tmp_path: Path) -> None:
    signer = Signer.generate(ORIGIN)
    log = GrowingLog(tmp_path / "chain.jsonl", signer)
    with witness_pool(tmp_path, 2, ORIGIN, signer.verifier()) as pool:
        notes = _cosigned_notes(log, pool)
    witnesses = [w.verifier for w in pool.witnesses]
    cosigned = []
    for note in notes:
        found = verify_cosignatures(note, witnesses, now=int(time.time()))
        assert len(found.verified) == 2
        cosigned.append(
            {"note": note, "verified": [c.verifier.name for c in found.verified], "rejected": False}
        )
    tampered = _tamper_cosignature(notes[-1])
    with pytest.raises(CosignatureError):
        verify_cosignatures(tampered, witnesses, now=int(time.time()))
    cosigned.append({"note": tampered, "verified": None, "rejected": True})
    both = f"log {signer.verifier()}\nwitness A {witnesses[0]}\nwitness B {witnesses[1]}\ngroup g all A B\nquorum g\n"
    payload = {
        "verifier": str(signer.verifier()),
        "notes": [],
        "bad_notes": [],
        "inclusion": [],
        "consistency": [],
        "witness": {
            "log_verifier": str(signer.verifier()),
            "witness_verifiers": [str(w) for w in witnesses],
            "cosigned": cosigned,
            "policies": _policy_cases(signer, pool, notes),
            "receipts": _receipt_cases(log, notes, both),
        },
    }
    output = run_go_interop(payload, tmp_path)
    witness = payload["witness"]
    checks = (
        len(witness["cosigned"])
        + sum(1 + len(p["checks"]) for p in witness["policies"])
        + len(witness["receipts"])
    )
    assert f"{checks} checks, 0 failed" in output, output
