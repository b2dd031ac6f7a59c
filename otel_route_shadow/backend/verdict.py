"""The audit's verdict: the chain held against the checkpoints and the spans the backend holds.

Pure logic, no I/O. Three kinds of evidence meet here:

* **checkpoint consistency** - the chain proven consistent with every checkpoint of its origin the
  backend holds (``logstore.verify_against_checkpoints``): catches truncation below a checkpointed size, head
  pruning, rewrites with recomputed hashes, forged inserts and edits of records whose spans were
  sampled out, with the first bad seq;
* **span cross-check** - each record against its span (:mod:`.crosscheck`), reported separately;
* **coverage** - how much of the chain the backend covers: the largest checkpointed size against the chain's
  size (the unwitnessed tail), how old that checkpoint is, the share of records whose span the
  backend holds, and the **dropped-record gap**: the ``records-dropped`` events among the records read
  (a writer's bounded backlog was full while another process held the chain's lock). The gap is
  listed, never judged: the chain is honest about it (the event is hash-linked like any record), so
  it is not a ``disagree``, and records never written have no span to miss, so it is no shortfall.

Verdicts (each with its exit code in ``cli.audit``), decided by the first rule that applies:

``disagree``
    The chain is not consistent with a checkpoint held against the chain (truncated, a record changed, a fork), or
    the span cross-check found spans with no record, records that differ from their span, duplicate or
    malformed records, or the chain's own linkage is broken.
``bad-checkpoint``
    A checkpoint of this origin held against the chain does not verify: a bad signature, a key not given with
    ``--key``, a malformed note, a checkpoint span whose attributes contradict its note, or (``--witness-policy``)
    a witness's cosignature that does not verify. Someone wrote
    into the backend, or the auditor holds the wrong key; the chain itself is not judged.
``insufficient-evidence``
    Nothing to hold the chain against (no checkpoint of the origin and no span matched), a threshold is not met
    (``--max-unwitnessed``, ``--min-span-coverage``), or, with ``--witness-policy``, no checkpoint the chain
    matches meets the policy's quorum of witnesses (only checkpoints that do count as witnessed).
``agree``
    Consistent with every checkpoint held against the chain, no span finding, and the coverage thresholds met.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from otel_route_shadow.backend.base import format_unix_nano
from otel_route_shadow.backend.checkpoints import BackendCheckpoint, BadCheckpointSpan
from otel_route_shadow.backend.crosscheck import CrossCheckReport
from otel_route_shadow.chain import DroppedGap
from otel_route_shadow.logstore import Pruned

__all__ = [
    "CHECKPOINT_REASONS",
    "AuditReport",
    "AuditVerdict",
    "Consistency",
    "Failure",
    "Thresholds",
    "Witnessed",
]


class AuditVerdict(StrEnum):
    AGREE = "agree"
    DISAGREE = "disagree"
    BAD_CHECKPOINT = "bad-checkpoint"
    INSUFFICIENT = "insufficient-evidence"


#: Consistency reasons that judge the checkpoint held against the chain, not the chain (tlog's ``ConsistencyReason``).
CHECKPOINT_REASONS = frozenset(
    {"bad-signature", "unknown-key", "key-outside-window", "unsigned", "malformed"}
)


@dataclass(frozen=True, slots=True)
class Failure:
    """One checkpoint held against the chain that does not hold, as the tlog verifier names it."""

    reason: str  # truncated, record-changed, fork (the chain) or a CHECKPOINT_REASONS one
    size: int | None
    first_bad_seq: int | None
    detail: str

    @property
    def judges_checkpoint(self) -> bool:
        return self.reason in CHECKPOINT_REASONS


@dataclass(frozen=True, slots=True)
class Consistency:
    """What the chain's proof against the checkpoints held against the chain found (from the tlog verifier)."""

    checkpointed_size: int  # the largest checkpoint size the chain was proven consistent with
    chain_size: int
    failures: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def chain_failures(self) -> list[Failure]:
        return [f for f in self.failures if not f.judges_checkpoint]

    @property
    def checkpoint_failures(self) -> list[Failure]:
        return [f for f in self.failures if f.judges_checkpoint]

    @property
    def first_bad_seq(self) -> int | None:
        return min(
            (f.first_bad_seq for f in self.chain_failures if f.first_bad_seq is not None), default=None
        )


@dataclass(frozen=True, slots=True)
class Thresholds:
    max_unwitnessed: int | None = None  # records beyond the last checkpoint held against the chain
    min_span_coverage: float | None = None  # share of records whose span the backend holds


@dataclass(frozen=True, slots=True)
class Witnessed:
    """The policy's verdict: the largest quorum-attested checkpoint the chain matches (``attested_size``,
    None: none), who cosigned it, the newest checkpoint's missing witnesses, each witness's largest
    cosigned size, and the cosignatures that do not verify."""

    policy: str
    quorum: str | None
    attested_size: int | None
    attested_by: tuple[str, ...]
    missing: tuple[str, ...]
    largest: tuple[tuple[str, int | None], ...]
    bad_cosignatures: tuple[str, ...] = ()

    def shortfall(self) -> str | None:
        """Why nothing is witnessed under the policy (None when a checkpoint meets the quorum)."""
        if self.attested_size is not None:
            return None
        missing = f" (missing: {', '.join(self.missing)})" if self.missing else ""
        return f"no checkpoint the chain matches meets the quorum {self.quorum} of {self.policy}{missing}"

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "quorum": self.quorum,
            "attested_size": self.attested_size,
            "attested_by": list(self.attested_by),
            "missing": list(self.missing),
            "largest_cosigned": dict(self.largest),
            "bad_cosignatures": list(self.bad_cosignatures),
        }


@dataclass
class AuditReport:
    chain: str
    origin: str | None
    origin_source: str  # where the origin came from: --origin, records, checkpoint file, none
    spans: CrossCheckReport
    now_unix_nano: int
    checkpoints: list[BackendCheckpoint] = field(default_factory=list)
    bad_checkpoint_spans: list[BadCheckpointSpan] = field(default_factory=list)
    consistency: Consistency | None = None  # None: no checkpoint to hold the chain against
    chain_size: int = 0
    signatures_checked: bool = False
    thresholds: Thresholds = field(default_factory=Thresholds)
    trusted_from: int | None = None  # incremental: records below this seq were proven by an earlier audit
    state_fallback: str | None = None  # --state: why the memory was not extended (the chain checked in full)
    dropped: DroppedGap = field(default_factory=DroppedGap)  # records-dropped events among those read
    left_beside: tuple[str, ...] = ()  # files beside the chain holding what a writer left for it
    witnessed: Witnessed | None = None  # --witness-policy: what the quorum of witnesses attests
    pruned: Pruned | None = None  # a pruned chain: audited from its minimum index (the records kept)
    window_from_seq: int | None = (
        None  # the span window asked for began before the first record read (this seq)
    )

    # ---- coverage ------------------------------------------------------------------------------------

    @property
    def witnessed_size(self) -> int:
        """Records the checkpoints held against the chain prove (0 when none holds or the chain contradicts one); with
        a policy, only checkpoints whose cosignatures meet its quorum count."""
        c = self.consistency
        if c is None or c.chain_failures:
            return 0
        if self.witnessed is not None:
            return self.witnessed.attested_size or 0
        return c.checkpointed_size

    @property
    def unwitnessed(self) -> int:
        """Records after the last checkpoint held against the chain: protected by nothing but the spans."""
        return max(self.chain_size - self.witnessed_size, 0)

    @property
    def newest_checkpoint(self) -> BackendCheckpoint | None:
        return max(self.checkpoints, key=lambda c: (c.size, c.seen_unix_nano), default=None)

    @property
    def checkpoint_age_ns(self) -> int | None:
        newest = self.newest_checkpoint
        return None if newest is None else max(self.now_unix_nano - newest.seen_unix_nano, 0)

    @property
    def span_coverage(self) -> float | None:
        """Share of the chain's seam records (in the window) whose span the backend holds."""
        held = self.spans.held_against
        return self.spans.matched / held if held else None

    @property
    def nothing_held(self) -> bool:
        """No span matched, and no checkpoint (of a pruned chain: none covering its first record kept)."""
        return self.spans.matched == 0 and (not self.checkpoints or self.consistency is None)

    def shortfalls(self) -> list[str]:
        """Why the evidence is insufficient, one line each (empty when it suffices)."""
        found: list[str] = []
        if self.nothing_held:
            what = "no checkpoint of this origin" if not self.checkpoints else "no checkpoint covering it"
            found.append(f"nothing to hold the chain against: {what} and no span in the backend")
        policy = self.witnessed.shortfall() if self.witnessed is not None else None
        if policy is not None:
            found.append(policy)
        limit = self.thresholds.max_unwitnessed
        if limit is not None and self.unwitnessed > limit:
            found.append(
                f"{self.unwitnessed} records after the last checkpoint, more than --max-unwitnessed {limit}"
            )
        share = self.thresholds.min_span_coverage
        coverage = self.span_coverage  # None: no record to cover (a window or an incremental audit with none)
        if share is not None and coverage is not None and coverage < share:
            found.append(f"span coverage {coverage:.1%}, below --min-span-coverage {share:g}")
        return found

    # ---- verdict -------------------------------------------------------------------------------------

    @property
    def consistency_holds(self) -> bool:
        """No checkpoint held against the chain contradicts it (true when there is none)."""
        return self.consistency is None or not self.consistency.chain_failures

    @property
    def chain_disagrees(self) -> bool:
        return not self.consistency_holds or self.spans.verdict == "disagree"

    @property
    def checkpoint_unverifiable(self) -> bool:
        c = self.consistency
        bad_cosignatures = self.witnessed is not None and bool(self.witnessed.bad_cosignatures)
        return (
            bool(self.bad_checkpoint_spans)
            or (c is not None and bool(c.checkpoint_failures))
            or bad_cosignatures
        )

    @property
    def verdict(self) -> AuditVerdict:
        if self.chain_disagrees:
            return AuditVerdict.DISAGREE
        if self.checkpoint_unverifiable:
            return AuditVerdict.BAD_CHECKPOINT
        if self.shortfalls():
            return AuditVerdict.INSUFFICIENT
        return AuditVerdict.AGREE

    @property
    def first_bad_seq(self) -> int | None:
        """The first seq the checkpoints or the spans show to be wrong."""
        seqs: list[int] = []
        c = self.consistency
        if c is not None and c.first_bad_seq is not None:
            seqs.append(c.first_bad_seq)
        seqs += [m.seq for m in self.spans.mismatches] + [d.seq for d in self.spans.duplicates]
        seqs += [m.seq for m in self.spans.malformed]
        return min(seqs, default=None)

    def summary_line(self) -> str:
        """One line for the fleet listing."""
        coverage = self.span_coverage
        parts = [
            self.verdict.value.upper(),
            f"origin {self.origin!r}" if self.origin else "no origin",
            f"proven {self.witnessed_size}/{self.chain_size}",
            f"spans {coverage:.0%}" if coverage is not None else "spans -",
        ]
        if self.first_bad_seq is not None:
            parts.append(f"first bad seq {self.first_bad_seq}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        c = self.consistency
        newest = self.newest_checkpoint
        return {
            "verdict": self.verdict.value,
            "chain": self.chain,
            "origin": self.origin,
            "origin_source": self.origin_source,
            "trusted_from": self.trusted_from,
            "state_fallback": self.state_fallback,
            "from_seq": 0 if self.pruned is None else self.pruned.min_index,
            "pruned": None if self.pruned is None else self.pruned.describe(),
            "window_from_seq": self.window_from_seq,
            "first_bad_seq": self.first_bad_seq,
            "checkpoints": {
                "held": len(self.checkpoints),
                "signatures_checked": self.signatures_checked,
                "unreadable_spans": [
                    {"span_id": b.span_id, "reason": b.reason} for b in self.bad_checkpoint_spans
                ],
                "consistency": None
                if c is None
                else {
                    "ok": c.ok,
                    "first_bad_seq": c.first_bad_seq,
                    "checkpointed_size": c.checkpointed_size,
                    "failures": [
                        {
                            "reason": f.reason,
                            "size": f.size,
                            "first_bad_seq": f.first_bad_seq,
                            "detail": f.detail,
                        }
                        for f in c.failures
                    ],
                },
            },
            "coverage": {
                "chain_size": self.chain_size,
                "witnessed_size": self.witnessed_size,
                "unwitnessed": self.unwitnessed,
                "newest_checkpoint_size": newest.size if newest else None,
                "newest_checkpoint_time": format_unix_nano(newest.seen_unix_nano) if newest else None,
                "newest_checkpoint_age_s": None
                if self.checkpoint_age_ns is None
                else round(self.checkpoint_age_ns / 1e9, 3),
                "span_coverage": None if self.span_coverage is None else round(self.span_coverage, 6),
                "dropped": self.dropped.as_dict(),
                "left_beside": list(self.left_beside),
            },
            "witnessed": None if self.witnessed is None else self.witnessed.to_json(),
            "shortfalls": self.shortfalls(),
            "spans": self.spans.to_json(),
        }
