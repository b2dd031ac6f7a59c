"""A key rotation seen by a real witness (torchwood's litewitness, `make witness`): configured with the
log's old key, it cosigns the dual-signed checkpoints of the transition window (it ignores the signature
by a key it does not know); once the old key stops signing, it refuses the log's checkpoints (403) until
its operator adds the new key (`witnessctl add-key`), and it goes on from the size it holds
(docs/operating.md, "Rotating the log's key")."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from tlog_support import append, notes
from witness_support import GrowingLog, Litewitness, WitnessPool, witness_pool

from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import KeyWindow, Signer, attest_checkpoint, parse_witness_policy
from otel_route_shadow.witness import PushOutcome, WitnessEndpoint, add_checkpoint

pytestmark = pytest.mark.witness

ORIGIN = "example.com/route-shadow/rotating"
OLD = Signer.generate(ORIGIN)
NEW = Signer.generate(ORIGIN)


def push(witness: Litewitness, proofs: GrowingLog, note: str, old: int) -> tuple[PushOutcome, str]:
    """``note`` pushed from ``old`` (the size the witness holds): the outcome and the cosigned note."""
    new = int(note.split("\n")[1])
    proof = proofs.prove(old, new) if old else []
    endpoint = WitnessEndpoint.parse("w0", witness.verifier, witness.url)
    answer = add_checkpoint(endpoint, old, proof, note, now=int(time.time()), skew=300)
    return answer.outcome, note + "".join(answer.cosignatures)


def test_a_witness_of_the_old_key_cosigns_the_transition_window_and_needs_the_new_key_after_it(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.jsonl"
    proofs = GrowingLog(chain, OLD)
    with witness_pool(tmp_path, 1, ORIGIN, OLD.verifier()) as pool:
        [witness] = pool.witnesses
        [before] = append(chain, 100, Checkpointer(str(chain), ORIGIN, OLD), every=100)
        assert push(witness, proofs, before.note, 0)[0] is PushOutcome.COSIGNED
        [during] = append(chain, 100, Checkpointer(str(chain), ORIGIN, (OLD, NEW)), every=100, start=100)
        outcome, cosigned = push(witness, proofs, during.note, 100)
        assert outcome is PushOutcome.COSIGNED
        policy = parse_witness_policy(f"log {NEW.verifier()}\nwitness w0 {witness.verifier}\nquorum w0\n")
        assert attest_checkpoint(
            cosigned, policy, now=int(time.time())
        ).quorum.met  # an auditor of the new key
        [after] = append(chain, 100, Checkpointer(str(chain), ORIGIN, NEW), every=100, start=200)
        assert push(witness, proofs, after.note, 200)[0] is PushOutcome.FORBIDDEN  # the old key stopped signing
        _add_key(pool, witness, NEW)
        outcome, cosigned = push(witness, proofs, after.note, 200)
        assert outcome is PushOutcome.COSIGNED
    key_set = [KeyWindow(OLD.verifier(), 0, 201), KeyWindow(NEW.verifier(), 200)]
    assert attest_checkpoint(cosigned, policy, now=int(time.time()), logs=key_set).quorum.met
    assert [int(n.split("\n")[1]) for n in notes(chain)] == [100, 200, 300]


def _add_key(pool: WitnessPool, witness: Litewitness, signer: Signer) -> None:
    """The witness operator's step: ``witnessctl add-key`` for the log's new key (litewitness reads its
    database per request: no restart)."""
    argv = [
        str(pool.witnessctl),
        "add-key",
        "-db",
        str(witness.db),
        "-origin",
        ORIGIN,
        "-key",
        str(signer.verifier()),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
