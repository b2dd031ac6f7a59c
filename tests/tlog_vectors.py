"""Builds tests/vectors/tlog/ (imported by the tests; run ``python tests/tlog_vectors.py`` to rewrite).

A 40-record chain checkpointed every 10 records by a PUBLIC test key (seed = SHA-256 of
``otel-route-shadow tlog test vectors``: never use it for anything else), its tiles, an inclusion and
a consistency proof, and one file per attack with the verdict `verify --checkpoint` must give. The
witness vectors: two PUBLIC test witnesses (seeds = SHA-256 of ``otel-route-shadow witness test vector
1`` and ``... 2``), a tlog-policy naming them with quorum 2, the checkpoint of size 40 cosigned by both
at a fixed time, and a c2sp.org/tlog-proof@v1 receipt for record 7 against it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from test_chain_support import forge, plugin_payload, relink, write_lines

from otel_route_shadow.chain import GENESIS_HASH, DecisionChain
from otel_route_shadow.logstore import Checkpointer, LogStore, signed_checkpoint_from_note
from otel_route_shadow.tlog import (
    CosignatureVerifier,
    Receipt,
    Signer,
    TileReader,
    add_cosignatures,
    format_receipt,
    inclusion_proof,
    parse_note,
    sign_note,
)
from otel_route_shadow.tlog.cosignature import cosignature_message
from otel_route_shadow.tlog.proofs import prove_consistency, prove_inclusion

VECTORS = Path(__file__).parent / "vectors" / "tlog"
ORIGIN = "example.com/route-shadow/vectors"
SIZE = 40
COSIGNED_AT = 1_800_000_000
"""The vector cosignatures' timestamp (POSIX seconds)."""


def vector_signer() -> Signer:
    seed = hashlib.sha256(b"otel-route-shadow tlog test vectors").digest()
    return Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(seed))


def vector_witnesses() -> list[tuple[str, Ed25519PrivateKey]]:
    """The two public test witnesses: (name, private key)."""
    return [
        (
            f"witness{n}.example/vectors",
            Ed25519PrivateKey.from_private_bytes(
                hashlib.sha256(f"otel-route-shadow witness test vector {n}".encode()).digest()
            ),
        )
        for n in (1, 2)
    ]


def _cosignature_line(name: str, key: Ed25519PrivateKey, verifier: CosignatureVerifier, text: str) -> str:
    blob = verifier.key_id.to_bytes(4, "big") + COSIGNED_AT.to_bytes(8, "big")
    blob += key.sign(cosignature_message(COSIGNED_AT, text))
    return f"\u2014 {name} {base64.b64encode(blob).decode('ascii')}\n"


def _witness_vectors(directory: Path, signer: Signer, note: str, store: TileReader) -> dict[str, Any]:
    """The policy, the cosigned note of size 40 and the receipt for record 7 (see the module)."""
    text = parse_note(note).text
    witnesses = []
    for name, key in vector_witnesses():
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        witnesses.append((name, key, CosignatureVerifier.from_public_key(name, public)))
    lines = [_cosignature_line(name, key, verifier, text) for name, key, verifier in witnesses]
    cosigned = add_cosignatures(note, lines, [v for _, _, v in witnesses], now=COSIGNED_AT)
    policy = f"log {signer.verifier()}\n"
    policy += "".join(f"witness w{n} {v}\n" for n, (_, _, v) in enumerate(witnesses, start=1))
    policy += "group both all w1 w2\nquorum both\n"
    (directory / "witness-policy.txt").write_text(policy)
    (directory / "cosigned-note-40.txt").write_text(cosigned)
    receipt = format_receipt(Receipt(7, tuple(inclusion_proof(7, SIZE, store)), cosigned))
    (directory / "receipt-seq7.txt").write_text(receipt)
    return {
        "policy": "witness-policy.txt",
        "cosigned": "cosigned-note-40.txt",
        "receipt": "receipt-seq7.txt",
        "record": "record-seq7.line",
        "cosigned_at": COSIGNED_AT,
        "quorum_met": True,
    }


def _renumber(lines: list[bytes]) -> list[bytes]:
    """Re-link lines as a fresh chain from genesis, seq 0.. (what a forger pruning the head writes)."""
    prev, out = GENESIS_HASH, []
    for index, line in enumerate(lines):
        record = orjson.loads(line)
        new, prev = forge(index, prev, record["payload"], orjson.dumps(record["redactions"]))
        out.append(new)
    return out


def _renumber_from(lines: list[bytes], first: int) -> list[bytes]:
    out = []
    for index, line in enumerate(lines):
        record = orjson.loads(line)
        new, _ = forge(first + index, GENESIS_HASH, record["payload"], orjson.dumps(record["redactions"]))
        out.append(new)
    return out


def _rewrite(lines: list[bytes], at: int) -> list[bytes]:
    out = list(lines)
    out[at] = out[at].replace(b'"route_shadow.outcome":"selected"', b'"route_shadow.outcome":"rejected"')
    return relink(out, at)


def _insert(lines: list[bytes], at: int) -> list[bytes]:
    forged, _ = forge(at, GENESIS_HASH, {"kind": "route-shadow", "forged": True})
    return relink([*lines[:at], forged, *_renumber_from(lines[at:], at + 1)], at)


ATTACKS: dict[str, tuple[Any, dict[str, Any]]] = {
    "truncated.jsonl": (
        lambda ls: ls[:35],
        {"reason": "truncated", "first_bad_seq": None, "checkpointed_size": 30},
    ),
    "head-pruned-relinked.jsonl": (
        lambda ls: _renumber(ls[3:]),
        {"reason": "record-changed", "first_bad_seq": 0, "checkpointed_size": 0},
    ),
    "rewritten-recomputed.jsonl": (
        lambda ls: _rewrite(ls, 25),
        {"reason": "record-changed", "first_bad_seq": 25, "checkpointed_size": 20},
    ),
    "forged-insert.jsonl": (
        lambda ls: _insert(ls, 15),
        {"reason": "record-changed", "first_bad_seq": 15, "checkpointed_size": 10},
    ),
}


def build(directory: Path) -> dict[str, Any]:
    """Write every vector file into ``directory``; return the manifest (also written)."""
    if directory.exists():
        for child in directory.iterdir():
            if child.name not in {"rfc6962.json"}:
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    chain = directory / "chain.jsonl"
    signer = vector_signer()
    checkpointer = Checkpointer(str(chain), ORIGIN, signer)
    with DecisionChain(chain) as log:
        for i in range(SIZE):
            log.append(plugin_payload(i))
            if i % 10 == 9:
                checkpointer.checkpoint()
    lines = chain.read_bytes().splitlines(keepends=True)
    tlog = directory / "chain.jsonl.tlog"
    for name in ("lock", "checkpoint"):
        (tlog / name).unlink()
    (directory / "verifier.txt").write_text(str(signer.verifier()) + "\n")
    notes = [json.loads(line)["note"] for line in (tlog / "checkpoints").read_text().splitlines()]
    latest = signed_checkpoint_from_note(notes[-1])
    from otel_route_shadow.tlog import parse_checkpoint, parse_note

    checkpoint = parse_checkpoint(parse_note(notes[-1]).text)
    store = TileReader(LogStore(str(directory / "chain.jsonl"), str(tlog)), checkpoint.size, checkpoint.root)
    (directory / "inclusion-seq7.json").write_text(
        prove_inclusion(store, checkpoint, 7).model_dump_json(indent=2) + "\n"
    )
    (directory / "consistency-10-40.json").write_text(
        prove_consistency(store, checkpoint, 10, SIZE).model_dump_json(indent=2) + "\n"
    )
    (directory / "record-seq7.line").write_bytes(lines[7])
    manifest: dict[str, Any] = {"origin": ORIGIN, "size": SIZE, "root": latest.root.hex(), "attacks": {}}
    for name, (tamper, expected) in ATTACKS.items():
        write_lines(directory / name, tamper(lines))
        manifest["attacks"][name] = expected
    other = Signer("example.com/someone-else", Ed25519PrivateKey.from_private_bytes(bytes(32)))
    forked = sign_note(f"{ORIGIN}\n20\n{'A' * 43}=\n", [signer])
    (directory / "fork-note.txt").write_text(forked)
    (directory / "unknown-key-note.txt").write_text(sign_note(parse_note(notes[1]).text, [other]))
    bad = notes[2].replace("\n30\n", "\n31\n")
    (directory / "bad-signature-note.txt").write_text(bad)
    manifest["witness"] = _witness_vectors(directory, signer, notes[-1], store)
    manifest["notes"] = {
        "fork-note.txt": "fork",
        "unknown-key-note.txt": "unknown-key",
        "bad-signature-note.txt": "bad-signature",
    }
    (directory / "chain.jsonl.lost").unlink(missing_ok=True)  # the writer's lost-record counter, not a vector
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    build(VECTORS)
