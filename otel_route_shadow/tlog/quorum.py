"""Which checkpoints a policy's witnesses attest: many checkpoint notes checked against one ``tlog-policy``.

The rules, one function each:

* notes of one checkpoint (the same text: origin, size and root) are one checkpoint: a writer stores a
  checkpoint again each time a witness cosigns it, so its cosigners are the witnesses whose cosignature
  counts on any of its notes (:func:`_by_text`);
* a checkpoint's notes are checked together, as one note holding each distinct signature line once
  (``attestation.attest_checkpoint``: the log's signature, the policy's witnesses' cosignatures,
  timestamps no later than ``now + skew``), so a line repeated on several notes is verified once; when
  that fails, each note is checked alone, and a note that fails is a :class:`NoteProblem` that counts
  for nothing (:func:`_attest_checkpoint`); the quorum is evaluated over the witnesses counted;
* per witness of the policy, the largest size it cosigned (:func:`_largest`);
* with ``until_known``, checkpoints are checked from the newest down, and the rest are left unchecked once
  one that meets the quorum and that ``until_known`` accepts is found and every witness's largest cosigned
  size is known (:func:`_known`): their sizes are :attr:`QuorumReport.unchecked`.

A quorum that is not met is an answer, never agreement: :meth:`QuorumReport.attested` gives the largest
checkpoint that meets it (and that the caller's ``holds`` accepts, e.g. the chain matches it), and
nothing when none does. Nothing here reads a clock: the caller passes ``now``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence

from otel_route_shadow.tlog.attestation import Attestation, AttestationError, attest_checkpoint
from otel_route_shadow.tlog.checkpoint import Checkpoint
from otel_route_shadow.tlog.cosignature import DEFAULT_SKEW_S
from otel_route_shadow.tlog.keyset import LogKey
from otel_route_shadow.tlog.note import NoteError, parse_note
from otel_route_shadow.tlog.policy import QuorumVerdict, WitnessPolicy

__all__ = ["NoteProblem", "QuorumReport", "WitnessedCheckpoint", "attest_notes"]


@dataclasses.dataclass(frozen=True, slots=True)
class WitnessedCheckpoint:
    """One checkpoint and what the policy's witnesses say of it: ``notes`` are the indexes of the notes
    that hold it, ``cosigned_by`` the witnesses whose cosignature counts (policy names, in the policy's
    order), ``future`` those whose only cosignature lies in the future beyond the skew (not counted)."""

    checkpoint: Checkpoint
    notes: tuple[int, ...]
    cosigned_by: tuple[str, ...]
    future: tuple[str, ...]
    quorum: QuorumVerdict


@dataclasses.dataclass(frozen=True, slots=True)
class NoteProblem:
    """A note that is not authentic under the policy: which one (``index``), the step it failed
    (``fault``, an ``AttestationFault`` value), the witness concerned, and whether it is malformed
    (unusable input) rather than a signature that does not verify."""

    index: int
    fault: str
    detail: str
    witness: str | None = None
    malformed: bool = False
    size: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class QuorumReport:
    """The policy's verdict on a set of notes (see the module)."""

    quorum: str | None
    """The policy's quorum (a witness or group name), None for ``quorum none``."""
    checkpoints: tuple[WitnessedCheckpoint, ...]
    """Every checkpoint an authentic note holds, by size."""
    problems: tuple[NoteProblem, ...]
    largest: tuple[tuple[str, int | None], ...]
    """Per witness of the policy (its order): the largest size it cosigned, None when it cosigned none."""
    unchecked: tuple[int, ...] = ()
    """Sizes of the older checkpoints whose cosignatures were not checked (``until_known``), newest first."""

    def attested(
        self, holds: Callable[[WitnessedCheckpoint], bool] = lambda _: True
    ) -> WitnessedCheckpoint | None:
        """The largest checkpoint that meets the quorum and that ``holds`` accepts; None when none does."""
        met = [c for c in self.checkpoints if c.quorum.met and holds(c)]
        return max(met, key=lambda c: c.checkpoint.size, default=None)

    def newest(self) -> WitnessedCheckpoint | None:
        """The largest checkpoint, quorum met or not."""
        return self.checkpoints[-1] if self.checkpoints else None


def attest_notes(
    notes: Sequence[str],
    policy: WitnessPolicy,
    *,
    now: int,
    skew: int = DEFAULT_SKEW_S,
    logs: Sequence[LogKey] = (),
    log_verified: Mapping[int, Collection[str]] | None = None,
    until_known: Callable[[WitnessedCheckpoint], bool] | None = None,
) -> QuorumReport:
    """Check the notes against ``policy`` (see the module); ``logs`` adds log keys to the policy's.
    ``log_verified``: per note index, the log keys (``str(Verifier)``) whose signature on that note the
    caller has already verified (``logstore.verify_against_checkpoints``' ``signed_by``): not verified again.
    A checkpoint's notes checked together skip a key only when it verified every one of them.
    ``until_known``: check from the newest checkpoint down, and stop once the quorum-attested checkpoint
    (one that ``until_known`` accepts) and every witness's largest cosigned size are known; without it,
    every note is checked."""
    verified = log_verified or {}
    groups, problems = _by_text(notes)
    order = sorted(groups, key=lambda text: -1 if (size := _size_of(text)) is None else -size)
    checkpoints: list[WitnessedCheckpoint] = []
    unchecked: list[int] = []
    for text in order:
        if until_known is not None and _known(checkpoints, policy, until_known):
            unchecked.append(_size_of(text) or 0)
            continue
        found = _attest_checkpoint(text, groups[text], notes, policy, now, skew, logs, problems, verified)
        if found is not None:
            checkpoints.append(found)
    checkpoints.sort(key=lambda c: (c.checkpoint.size, c.notes[0]))
    problems.sort(key=lambda p: p.index)
    return QuorumReport(
        policy.quorum, tuple(checkpoints), tuple(problems), _largest(checkpoints, policy), tuple(unchecked)
    )


def _known(
    checkpoints: Sequence[WitnessedCheckpoint],
    policy: WitnessPolicy,
    holds: Callable[[WitnessedCheckpoint], bool],
) -> bool:
    """Whether checkpoints checked from the newest down already give the answer: one meets the quorum and
    ``holds``, and every witness of the policy cosigned one of them (so its largest size is known)."""
    if not any(c.quorum.met and holds(c) for c in checkpoints):
        return False
    seen = {name for c in checkpoints for name in c.cosigned_by}
    return all(w.name in seen for w in policy.witnesses)


def _by_text(notes: Sequence[str]) -> tuple[dict[str, list[int]], list[NoteProblem]]:
    """The indexes of the notes of each checkpoint text, and the notes that are not signed notes."""
    groups: dict[str, list[int]] = {}
    problems: list[NoteProblem] = []
    for index, note in enumerate(notes):
        try:
            text = parse_note(note).text
        except NoteError as exc:
            problems.append(
                NoteProblem(index, "note", f"not a signed note: {exc}", None, True, _size_of(note))
            )
            continue
        groups.setdefault(text, []).append(index)
    return groups, problems


def _attest_checkpoint(
    text: str,
    indexes: list[int],
    notes: Sequence[str],
    policy: WitnessPolicy,
    now: int,
    skew: int,
    logs: Sequence[LogKey],
    problems: list[NoteProblem],
    verified: Mapping[int, Collection[str]],
) -> WitnessedCheckpoint | None:
    """The notes of one checkpoint checked together; alone, each, when that fails."""
    lines = dict.fromkeys(
        line for i in indexes for line in notes[i][len(text) + 1 :].splitlines(keepends=True)
    )
    by_all = set.intersection(*(set(verified.get(i, ())) for i in indexes))
    try:
        merged = attest_checkpoint(
            text + "\n" + "".join(lines), policy, now=now, skew=skew, logs=logs, verified_by=by_all
        )
        return _witnessed(merged, tuple(indexes), policy)
    except AttestationError:
        pass
    good: list[tuple[int, Attestation]] = []
    for index in indexes:
        try:
            attested = attest_checkpoint(
                notes[index], policy, now=now, skew=skew, logs=logs, verified_by=verified.get(index, ())
            )
            good.append((index, attested))
        except AttestationError as exc:
            problems.append(
                NoteProblem(index, exc.fault.value, str(exc), exc.witness, exc.malformed, _size_of(text))
            )
    if not good:
        return None
    counted = {c.name for _, a in good for c in a.cosignatures if c.counted}
    future = {c.name for _, a in good for c in a.cosignatures if not c.counted} - counted
    order = [w.name for w in policy.witnesses]
    return WitnessedCheckpoint(
        good[0][1].checkpoint,
        tuple(index for index, _ in good),
        tuple(name for name in order if name in counted),
        tuple(name for name in order if name in future),
        policy.evaluate(counted),
    )


def _witnessed(
    attestation: Attestation, indexes: tuple[int, ...], policy: WitnessPolicy
) -> WitnessedCheckpoint:
    counted = {c.name for c in attestation.cosignatures if c.counted}
    future = {c.name for c in attestation.cosignatures if not c.counted} - counted
    order = [w.name for w in policy.witnesses]
    return WitnessedCheckpoint(
        attestation.checkpoint,
        indexes,
        tuple(name for name in order if name in counted),
        tuple(name for name in order if name in future),
        attestation.quorum,
    )


def _size_of(note: str) -> int | None:
    lines = note.split("\n", 2)
    size = lines[1] if len(lines) > 2 else ""
    return int(size) if size.isascii() and size.isdigit() and len(size) < 20 else None


def _largest(
    checkpoints: Sequence[WitnessedCheckpoint], policy: WitnessPolicy
) -> tuple[tuple[str, int | None], ...]:
    sizes: dict[str, int] = {}
    for witnessed in checkpoints:
        for name in witnessed.cosigned_by:
            sizes[name] = max(sizes.get(name, 0), witnessed.checkpoint.size)
    return tuple((w.name, sizes.get(w.name)) for w in policy.witnesses)
