"""A checkpoint note checked against a ``tlog-policy``: whose signature it carries, which witnesses cosigned it,
whether their quorum is met.

The steps, as the ``tlog-policy`` and ``tlog-proof`` drafts state them, one function each:

1. the note is a signed note whose text is a ``tlog-checkpoint`` (:func:`_opened`);
2. its origin is the key name of a log the verifier knows (the policy's ``log`` lines, plus any log
   keys the caller adds, each perhaps with the sizes it is valid for: such a window replaces the policy
   line of the same key), and a signature by that key, valid for the checkpoint's size, verifies; a signature by a known log key that does
   not verify rejects the note (:func:`_log_signature`, through ``authentication.authenticate``);
3. the cosignatures of the policy's witnesses are verified (``tlog-cosignature``: lines by other keys
   are ignored, a timestamp later than ``now + skew`` does not count) (:func:`_cosignatures`);
4. the quorum is evaluated over the witnesses whose cosignature counts.

A note that fails steps 1-3 raises :class:`AttestationError` (``fault`` says which step). A quorum that is
not met is an answer, not an error: :attr:`Attestation.quorum` says so and names the missing witnesses.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Sequence

from otel_route_shadow.tlog.authentication import AuthenticationError, authenticate, key_window
from otel_route_shadow.tlog.checkpoint import Checkpoint, CheckpointError, parse_checkpoint
from otel_route_shadow.tlog.cosignature import (
    DEFAULT_SKEW_S,
    CosignatureError,
    CosignatureFault,
    Cosignatures,
    verify_cosignatures,
)
from otel_route_shadow.tlog.keyset import LogKey
from otel_route_shadow.tlog.note import NoteError, OpenedNote, Verifier, parse_note
from otel_route_shadow.tlog.policy import QuorumVerdict, WitnessPolicy

__all__ = [
    "Attestation",
    "AttestationError",
    "AttestationFault",
    "WitnessCosignature",
    "attest_checkpoint",
]


class AttestationFault(enum.Enum):
    """The step a checkpoint note failed."""

    NOTE = "note"
    CHECKPOINT = "checkpoint"
    UNKNOWN_ORIGIN = "unknown-origin"
    LOG_SIGNATURE = "log-signature"
    COSIGNATURE = "cosignature"


class AttestationError(ValueError):
    """A checkpoint note that is not authentic under the policy; ``fault`` names the step, ``witness``
    the policy's witness whose cosignature did not verify (``COSIGNATURE``). ``malformed`` is True when
    the note or a cosignature line is not well formed (unusable input), False when a signature or
    cosignature is well formed but does not verify, or no log key is named for the origin."""

    def __init__(
        self, fault: AttestationFault, message: str, witness: str | None = None, *, malformed: bool = False
    ) -> None:
        super().__init__(message)
        self.fault = fault
        self.witness = witness
        self.malformed = malformed


@dataclasses.dataclass(frozen=True, slots=True)
class WitnessCosignature:
    """A cosignature by the policy's witness ``name`` at ``timestamp``; ``counted`` is False when
    its timestamp lies in the future beyond the skew."""

    name: str
    timestamp: int
    counted: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Attestation:
    """A checkpoint signed by ``log``, the policy's witnesses' cosignatures on it, and the quorum verdict."""

    checkpoint: Checkpoint
    log: Verifier
    cosignatures: tuple[WitnessCosignature, ...]
    quorum: QuorumVerdict


def attest_checkpoint(
    note: str,
    policy: WitnessPolicy,
    *,
    now: int,
    skew: int = DEFAULT_SKEW_S,
    logs: Sequence[LogKey] = (),
    verified_by: Collection[str] = (),
) -> Attestation:
    """Check ``note`` against ``policy`` (see the module); ``now`` is the verifier's POSIX time.
    ``verified_by``: log keys (as ``str(Verifier)``) whose signature on this very note the caller has
    already verified; step 2 takes such a key as it is instead of verifying its signature again."""
    checkpoint = _opened(note)
    given = {key_window(key).verifier for key in logs}
    known = [*logs, *(entry.verifier for entry in policy.logs if entry.verifier not in given)]
    log = _log_signature(note, checkpoint.origin, known, verified_by)
    found = _cosignatures(note, policy, now, skew)
    names = {w.verifier: w.name for w in policy.witnesses}
    cosignatures = tuple(
        [WitnessCosignature(names[c.verifier], c.timestamp, True) for c in found.verified]
        + [WitnessCosignature(names[c.verifier], c.timestamp, False) for c in found.refused]
    )
    quorum = policy.evaluate(names[c.verifier] for c in found.verified)
    return Attestation(checkpoint, log, cosignatures, quorum)


def _opened(note: str) -> Checkpoint:
    try:
        opened: OpenedNote = parse_note(note)
    except NoteError as exc:
        raise AttestationError(AttestationFault.NOTE, f"not a signed note: {exc}", malformed=True) from None
    try:
        return parse_checkpoint(opened.text)
    except CheckpointError as exc:
        raise AttestationError(
            AttestationFault.CHECKPOINT, f"not a checkpoint: {exc}", malformed=True
        ) from None


def _log_signature(
    note: str, origin: str, known: Sequence[LogKey], verified_by: Collection[str] = ()
) -> Verifier:
    """The log key (named for the origin) whose signature on the note verifies (or was verified)."""
    keys = [window for window in map(key_window, known) if window.verifier.name == origin]
    if not keys:
        raise AttestationError(
            AttestationFault.UNKNOWN_ORIGIN, f"no log key of the policy is named for the origin {origin!r}"
        )
    for key in keys:
        if str(key.verifier) in verified_by:
            return key.verifier
    try:
        signed_by = authenticate(note, keys).signed_by
    except AuthenticationError as exc:
        raise AttestationError(AttestationFault.LOG_SIGNATURE, f"the log {origin!r}: {exc}") from None
    return next(key.verifier for key in keys if str(key.verifier) == signed_by[0])


def _cosignatures(note: str, policy: WitnessPolicy, now: int, skew: int) -> Cosignatures:
    try:
        return verify_cosignatures(note, policy.witness_verifiers(), now=now, skew=skew)
    except CosignatureError as exc:
        names = {str(w.verifier): w.name for w in policy.witnesses}
        witness = names.get(exc.witness or "")
        malformed = exc.fault is not CosignatureFault.BAD_SIGNATURE
        raise AttestationError(AttestationFault.COSIGNATURE, str(exc), witness, malformed=malformed) from None
