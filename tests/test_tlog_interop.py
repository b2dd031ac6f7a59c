"""Go interop: this project's checkpoints, signatures and proofs checked by golang.org/x/mod/sumdb.

The Go program in tests/interop/ opens our signed notes with ``sumdb/note`` and checks our inclusion
and consistency proofs with ``sumdb/tlog`` (``CheckRecord``, ``CheckTree``); tampered notes and
proofs must fail there too. It also reads our tiles with ``tlog.TileHashReader`` (which authenticates
every tile) for every published checkpoint, proving records and consistency from the tiles alone: the
partial tiles of every published size must still be there; a damaged tile must be rejected. It runs wherever ``go`` is on the PATH (CI has it); Go's caches stay
outside the repository.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from go_interop import run_go_interop

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import (
    Checkpointer,
    LogStore,
    read_note_file,
    signed_checkpoint_from_note,
    tlog_dir,
)
from otel_route_shadow.tlog import Signer, TileReader, consistency_proof, inclusion_proof, tile_path

ORIGIN = "example.com/route-shadow/interop"


def _flip_last_char(text: str) -> str:
    return text[:-2] + ("A" if text[-2] != "A" else "B") + "\n"


def _build(tmp_path: Path) -> dict[str, object]:
    chain = str(tmp_path / "chain.jsonl")
    signer = Signer.generate(ORIGIN)
    log = DecisionChain(chain)
    checkpointer = Checkpointer(chain, ORIGIN, signer)
    for n in range(700):
        log.append({"kind": "route-shadow", "n": n, "text": "é" * (n % 5)})
        if n % 97 == 96:
            checkpointer.checkpoint()
    checkpointer.checkpoint()
    log.close()
    notes = read_note_file(os.path.join(tlog_dir(chain), "checkpoints")).notes
    latest = signed_checkpoint_from_note(notes[-1])
    store = TileReader(LogStore(chain), latest.size, latest.root)
    bad = tmp_path / "bad.tlog"
    shutil.copytree(tlog_dir(chain), bad)
    damaged = bad / tile_path(0, 0)
    damaged.write_bytes(bytes([damaged.read_bytes()[0] ^ 1]) + damaged.read_bytes()[1:])
    lines = Path(chain).read_bytes().split(b"\n")
    b64 = __import__("base64").b64encode
    inclusion = []
    for seq in (0, 1, 255, 256, 511, 699):
        proof = [b64(h).decode() for h in inclusion_proof(seq, latest.size, store)]
        inclusion.append(
            {"note": latest.note, "seq": seq, "line": lines[seq].decode(), "proof": proof, "expect": True}
        )
    wrong = dict(inclusion[2], line=lines[3].decode(), expect=False)
    consistency = []
    for old_note in notes[:-1]:
        old = signed_checkpoint_from_note(old_note)
        proof = [b64(h).decode() for h in consistency_proof(old.size, latest.size, store)]
        consistency.append({"old_note": old_note, "new_note": latest.note, "proof": proof, "expect": True})
    bad_proof = dict(consistency[0], proof=list(reversed(consistency[0]["proof"])), expect=False)
    tampered = notes[-1].replace(f"\n{latest.size}\n", f"\n{latest.size + 1}\n")
    return {
        "verifier": str(signer.verifier()),
        "notes": notes,
        "bad_notes": [tampered, _flip_last_char(notes[0]), notes[0].split("\n\n")[0] + "\n"],
        "inclusion": [*inclusion, wrong],
        "consistency": [*consistency, bad_proof],
        "chain": chain,
        "tile_dir": tlog_dir(chain),
        "bad_tile_dir": str(bad),
    }


@pytest.mark.skipif(shutil.which("go") is None, reason="the go command is not installed (CI has it)")
def test_go_sumdb_verifies_our_checkpoints_and_proofs(tmp_path: Path) -> None:
    payload = _build(tmp_path)
    output = run_go_interop(payload, tmp_path)
    checks = 2 * len(payload["notes"]) + 1 + 3 + 7 + len(payload["consistency"])  # type: ignore[arg-type]
    assert f"{checks} checks, 0 failed" in output
