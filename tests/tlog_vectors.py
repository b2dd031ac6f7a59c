"""Builds tests/vectors/tlog/ (imported by the tests; run ``python tests/tlog_vectors.py`` to rewrite).

A 40-record chain checkpointed every 10 records by a PUBLIC test key (seed = SHA-256 of
``otel-route-shadow tlog test vectors``: never use it for anything else), its tiles, an inclusion and
a consistency proof, and one file per attack with the verdict `verify --checkpoint` must give.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_chain_support import forge, plugin_payload, relink, write_lines

from otel_route_shadow.chain import GENESIS_HASH, RoutingAuditLog
from otel_route_shadow.tlog import Checkpointer, Signer, TileReader, sign_note, signed_checkpoint_from_note
from otel_route_shadow.tlog.proofs import prove_consistency, prove_inclusion

VECTORS = Path(__file__).parent / "vectors" / "tlog"
ORIGIN = "example.com/route-shadow/vectors"
SIZE = 40


def vector_signer() -> Signer:
    seed = hashlib.sha256(b"otel-route-shadow tlog test vectors").digest()
    return Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(seed))


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
    with RoutingAuditLog(chain) as log:
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
    store = TileReader(str(tlog), checkpoint.size, checkpoint.root)
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
    manifest["notes"] = {
        "fork-note.txt": "fork",
        "unknown-key-note.txt": "unknown-key",
        "bad-signature-note.txt": "bad-signature",
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    build(VECTORS)
