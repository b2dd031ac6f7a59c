"""The ``--witness-policy`` part of ``verify``, ``verify-proof``, ``prove --receipt`` and ``audit``: which checkpoints
the witnesses of a C2SP tlog-policy attest, and the verdict it gives.

A checkpoint counts as witnessed only when its cosignatures meet the policy's quorum (cosignatures by
keys not in the policy never count, and neither do those timestamped in the future beyond the skew:
``tlog.attest_notes``). The verdict keeps three statements apart:

1. the chain is intact (its own hash links);
2. it is consistent with every checkpoint given;
3. up to which size that is attested by the quorum: the records beyond the largest quorum-attested
   checkpoint the chain matches are not yet witnessed.

"Quorum not met" is insufficient evidence (exit 3), never agreement: with ``--witness-policy`` any record beyond
the largest attested checkpoint makes the exit status 3 unless ``--max-unwitnessed N`` allows N of them.
A malformed policy file, witness URL, witness key or cosignature line is unusable input (exit 2, one line).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from otel_route_shadow.cli.common import CliError
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_INSUFFICIENT, EXIT_OK, EXIT_USAGE
from otel_route_shadow.logstore import CheckpointVerdict, read_witness_policy_file
from otel_route_shadow.tlog import (
    DEFAULT_SKEW_S,
    AttestationError,
    KeyWindow,
    QuorumReport,
    WitnessedCheckpoint,
    WitnessPolicy,
    WitnessPolicyError,
    attest_notes,
)
from otel_route_shadow.witness import WitnessConfigError, endpoints_from_policy

__all__ = [
    "WitnessPolicyVerdict",
    "attestation_problem",
    "log_keys",
    "policy_verdict",
    "read_witness_policy",
    "verdict_lines",
]


def read_witness_policy(path: str) -> WitnessPolicy:
    """The policy at ``path``; a malformed file, witness key or witness URL is a one-line ``CliError``."""
    try:
        policy = read_witness_policy_file(path)
        endpoints_from_policy(policy)  # every witness URL must be one a log can push to
    except (WitnessPolicyError, WitnessConfigError) as exc:
        raise CliError(f"--witness-policy {path}: {exc}") from None
    return policy


def log_keys(policy: WitnessPolicy, keys: Sequence[str], path: str) -> list[str]:
    """The log keys: the ``--key``/``--keys`` strings and the policy's ``log`` lines whose key they do not
    give already; one at least."""
    given = {key.split(" ", 1)[0] for key in keys}
    found = [*keys, *(str(log.verifier) for log in policy.logs if str(log.verifier) not in given)]
    if not found:
        raise CliError(
            f"--witness-policy {path}: no `log` line and no --key: nothing authenticates the log's checkpoints"
        )
    return found


def attestation_problem(exc: AttestationError, source: str) -> CliError:
    """A checkpoint that fails under the policy: unusable input when malformed, else a finding."""
    code = EXIT_USAGE if exc.malformed else EXIT_FINDING
    return CliError(f"{source}: {exc}", exit_code=code)


@dataclasses.dataclass(frozen=True, slots=True)
class WitnessPolicyVerdict:
    """The three statements and the exit status they give (see the module)."""

    policy: str
    quorum: QuorumReport
    intact: bool
    consistent: bool
    chain_size: int
    attested: WitnessedCheckpoint | None
    contradicted: tuple[tuple[WitnessedCheckpoint, CheckpointVerdict], ...]
    max_unwitnessed: int

    @property
    def attested_size(self) -> int:
        return self.attested.checkpoint.size if self.attested is not None else 0

    @property
    def unwitnessed(self) -> int:
        return max(0, self.chain_size - self.attested_size)

    @property
    def bad_cosignatures(self) -> list[str]:
        return [p.detail for p in self.quorum.problems if p.fault == "cosignature"]

    @property
    def exit_code(self) -> int:
        if not self.intact or not self.consistent or self.contradicted or self.bad_cosignatures:
            return EXIT_FINDING
        if self.attested is None or self.unwitnessed > self.max_unwitnessed:
            return EXIT_INSUFFICIENT
        return EXIT_OK

    @property
    def status(self) -> str:
        return {EXIT_OK: "attested", EXIT_FINDING: "disagree", EXIT_INSUFFICIENT: "insufficient-evidence"}[
            self.exit_code
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "quorum": self.quorum.quorum,
            "status": self.status,
            "exit": self.exit_code,
            "intact": self.intact,
            "consistent": self.consistent,
            "attested_size": self.attested_size,
            "attested_by": list(self.attested.cosigned_by) if self.attested is not None else [],
            "unwitnessed": self.unwitnessed,
            "max_unwitnessed": self.max_unwitnessed,
            "largest_cosigned": dict(self.quorum.largest),
            "checkpoints": [_checkpoint_dict(c) for c in self.quorum.checkpoints],
            "contradicted": [
                {
                    "size": c.checkpoint.size,
                    "reason": v.reason.value,
                    "first_bad_seq": v.first_bad_seq,
                    "detail": v.detail,
                }
                for c, v in self.contradicted
            ],
            "problems": [dataclasses.asdict(p) for p in self.quorum.problems],
            "not_checked": list(self.quorum.unchecked),
        }


def _checkpoint_dict(c: WitnessedCheckpoint) -> dict[str, Any]:
    return {
        "size": c.checkpoint.size,
        "cosigned_by": list(c.cosigned_by),
        "future_timestamps": list(c.future),
        "quorum_met": c.quorum.met,
        "missing": list(c.quorum.missing),
    }


def policy_verdict(
    path: str,
    policy: WitnessPolicy,
    notes: Sequence[str],
    verdicts: Sequence[CheckpointVerdict],
    *,
    intact: bool,
    chain_size: int,
    extra_logs: Sequence[str] = (),
    max_unwitnessed: int | None = None,
    all_cosignatures: bool = False,
) -> WitnessPolicyVerdict:
    """The verdict of ``policy`` on ``notes``, whose consistency with the chain ``verdicts`` give (one per
    note, ``logstore.verify_against_checkpoints``). Cosignatures are checked from the newest checkpoint down
    until the attested size and every witness's largest cosigned size are known (``all_cosignatures``:
    every one). A malformed note or cosignature is a ``CliError`` (exit 2)."""
    logs = [KeyWindow.parse(key) for key in extra_logs]
    by_index = {v.index: v for v in verdicts}

    def holds(c: WitnessedCheckpoint) -> bool:
        return any(by_index[i].ok for i in c.notes if i in by_index)

    report = attest_notes(
        notes,
        policy,
        now=int(time.time()),
        skew=DEFAULT_SKEW_S,
        logs=logs,
        log_verified={v.index: v.signed_by for v in verdicts},
        until_known=None if all_cosignatures else holds,
    )
    for problem in report.problems:
        if problem.malformed:
            raise CliError(f"checkpoint #{problem.index + 1}: {problem.detail}")

    contradicted = tuple(
        (c, next(by_index[i] for i in c.notes if i in by_index))
        for c in report.checkpoints
        if c.quorum.met and not holds(c) and any(i in by_index for i in c.notes)
    )
    return WitnessPolicyVerdict(
        policy=path,
        quorum=report,
        intact=intact,
        consistent=all(v.ok for v in verdicts),
        chain_size=chain_size,
        attested=report.attested(holds),
        contradicted=contradicted,
        max_unwitnessed=0 if max_unwitnessed is None else max_unwitnessed,
    )


def verdict_lines(verdict: WitnessPolicyVerdict) -> list[str]:
    """The verdict in sentences: the three statements, each witness's largest size, the exit status."""
    quorum = verdict.quorum.quorum or "none"
    distinct = len(verdict.quorum.checkpoints) + len(verdict.quorum.unchecked)
    lines = [
        f"witnessed (--witness-policy {verdict.policy}, quorum {quorum}):",
        f"  1. the chain is intact: {'yes' if verdict.intact else 'NO'}",
        f"  2. it is consistent with every checkpoint: {'yes' if verdict.consistent else 'NO'} "
        f"({distinct} distinct checkpoint(s) authenticated under the policy)",
        f"  3. {_attested_sentence(verdict)}",
    ]
    for checkpoint, why in verdict.contradicted:
        at = f", first changed seq {why.first_bad_seq}" if why.first_bad_seq is not None else ""
        lines.append(
            f"  CONTRADICTED: the chain contradicts the checkpoint of size {checkpoint.checkpoint.size} that the quorum "
            f"attests (cosigned by {', '.join(checkpoint.cosigned_by)}): {why.reason.value}{at}"
            + (f" ({why.detail})" if why.detail else "")
        )
    sizes = ", ".join(
        f"{name} {size if size is not None else 'none'}" for name, size in verdict.quorum.largest
    )
    lines.append(f"  largest size cosigned, per witness: {sizes or 'the policy names no witness'}")
    newest = verdict.quorum.newest()
    if newest is not None and newest.future:
        lines.append(
            f"  not counted: cosignatures timestamped in the future by {', '.join(newest.future)} "
            f"(checkpoint of size {newest.checkpoint.size})"
        )
    for problem in verdict.quorum.problems:
        if not problem.malformed:
            lines.append(f"  checkpoint #{problem.index + 1} not counted ({problem.fault}): {problem.detail}")
    unchecked = verdict.quorum.unchecked
    if unchecked:
        lines.append(
            f"  cosignatures not checked: {len(unchecked)} older checkpoint(s), sizes {min(unchecked)} to "
            f"{max(unchecked)} (the answer above needs none of them; --all-cosignatures checks every one)"
        )
    lines.append(f"  exit {verdict.exit_code}: {_status_sentence(verdict)}")
    return lines


def _attested_sentence(verdict: WitnessPolicyVerdict) -> str:
    attested = verdict.attested
    if attested is None:
        newest = verdict.quorum.newest()
        if newest is None:
            return f"attested by the quorum: nothing (no checkpoint authenticates under the policy); all {verdict.chain_size} records not witnessed"
        cosigned = ", ".join(newest.cosigned_by) or "no witness"
        missing = ", ".join(newest.quorum.missing) or "-"
        return (
            f"attested by the quorum: nothing: no checkpoint the chain matches meets the quorum (the newest, "
            f"size {newest.checkpoint.size}, is cosigned by {cosigned}; missing: {missing}); "
            f"all {verdict.chain_size} records not witnessed"
        )
    return (
        f"attested by the quorum up to size {attested.checkpoint.size} (cosigned by "
        f"{', '.join(attested.cosigned_by) or 'none required'}); {verdict.unwitnessed} record(s) beyond it "
        "not yet witnessed"
    )


def _status_sentence(verdict: WitnessPolicyVerdict) -> str:
    code = verdict.exit_code
    if code == EXIT_OK:
        return "attested: intact, consistent, and witnessed by the quorum" + (
            f" (up to --max-unwitnessed {verdict.max_unwitnessed} records beyond)"
            if verdict.unwitnessed
            else ""
        )
    if code == EXIT_FINDING:
        return "disagree: the chain, a checkpoint or a cosignature does not hold"
    if verdict.attested is None:
        return "insufficient evidence: no checkpoint the chain matches meets the quorum"
    return (
        f"insufficient evidence: {verdict.unwitnessed} record(s) not witnessed, more than "
        f"--max-unwitnessed {verdict.max_unwitnessed}"
    )
