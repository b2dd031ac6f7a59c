"""What the witnesses of a C2SP tlog-policy attest about an audited chain (``audit --witness-policy``).

With a policy, a checkpoint counts as witnessed only when its witnesses' cosignatures meet the policy's
quorum (``tlog.attest_notes``): the backend's checkpoint spans carry the notes as the writer signed
them, and the cosigned notes are in the chain's own ``CHAIN.tlog/checkpoints`` (a witness's cosignature
cannot be forged by whoever holds the host, so reading them from its disk is sound: deleting them only
takes evidence away). The quorum-attested notes are held against the chain with the backend's
checkpoints; the witnessed size is the largest of them the chain matches, and a quorum not met is
insufficient evidence, never agreement.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from otel_route_shadow.backend.checkpoints import BackendCheckpoint
from otel_route_shadow.backend.verdict import Consistency, Witnessed
from otel_route_shadow.logstore import LogStore
from otel_route_shadow.tlog import QuorumReport, WitnessedCheckpoint

__all__ = ["LOCAL_SPAN_ID", "attested_checkpoints", "judge_witnesses", "local_notes"]

LOCAL_SPAN_ID = "CHAIN.tlog/checkpoints"
"""Where a checkpoint held against the chain came from when it is not a backend span."""


def local_notes(chain: str, origin: str | None) -> list[str]:
    """The notes of ``origin`` in the chain's own ``checkpoints`` file (none when it cannot be read)."""
    try:
        notes = LogStore(chain).notes().notes
    except (OSError, ValueError):
        return []
    return [note for note in notes if origin is not None and note.split("\n", 1)[0] == origin]


def attested_checkpoints(notes: Sequence[str], first: int, quorum: QuorumReport) -> list[BackendCheckpoint]:
    """The notes from index ``first`` on that hold a quorum-attested checkpoint, as checkpoints to hold
    the chain against (one per checkpoint: its newest note)."""
    found = []
    for witnessed in quorum.checkpoints:
        local = [i for i in witnessed.notes if i >= first]
        if witnessed.quorum.met and local:
            cp = witnessed.checkpoint
            root = base64.b64encode(cp.root).decode("ascii")
            found.append(
                BackendCheckpoint(cp.origin, cp.size, root, notes[local[-1]], True, 0, LOCAL_SPAN_ID)
            )
    return found


def judge_witnesses(policy: str, quorum: QuorumReport, held: Consistency | None) -> Witnessed:
    """The policy's verdict given the chain's consistency with the checkpoints (``held``)."""

    def holds(c: WitnessedCheckpoint) -> bool:
        if held is None or c.checkpoint.size > held.chain_size:
            return False
        return not any(f.size == c.checkpoint.size for f in held.chain_failures)

    attested = quorum.attested(holds)
    newest = quorum.newest()
    return Witnessed(
        policy=policy,
        quorum=quorum.quorum,
        attested_size=attested.checkpoint.size if attested is not None else None,
        attested_by=attested.cosigned_by if attested is not None else (),
        missing=newest.quorum.missing if newest is not None else (),
        largest=quorum.largest,
        bad_cosignatures=tuple(p.detail for p in quorum.problems if p.fault == "cosignature"),
    )
