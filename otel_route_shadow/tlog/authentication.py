"""Authenticating a checkpoint note: the one rule every reader of checkpoints applies.

A note is opened with the verifier keys given (C2SP signed-note: signatures by other keys are ignored,
a signature by a given key that does not verify rejects the note) and its text parsed as a C2SP
tlog-checkpoint. :func:`authenticate` returns the checkpoint and who signed it, or raises one of the
:class:`AuthenticationError` classes below; each carries the ``reason`` verifiers report
(``logstore.ConsistencyReason`` uses the same words). With no verifier keys nothing can be authenticated:
the checkpoint is returned parsed, with ``signed_by`` empty, for callers that accept unsigned logs.
:func:`checkpoint_of` is the parse alone (the same parsers, signatures not looked at), for a caller that
authenticates what it does with the checkpoint otherwise (tiles against its root, a proof by its reader).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from otel_route_shadow.tlog.checkpoint import Checkpoint, CheckpointError, parse_checkpoint
from otel_route_shadow.tlog.note import NoteError, SignatureError, Verifier, open_note, parse_note

__all__ = [
    "Authenticated",
    "AuthenticationError",
    "BadSignature",
    "Malformed",
    "UnknownKey",
    "Unsigned",
    "authenticate",
    "checkpoint_of",
]


class AuthenticationError(ValueError):
    """A note that does not authenticate; ``checkpoint`` is its parsed checkpoint when it has one."""

    reason: ClassVar[str] = "malformed"

    def __init__(self, message: str, checkpoint: Checkpoint | None = None) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


class Malformed(AuthenticationError):
    """Not a signed note holding a C2SP checkpoint."""

    reason = "malformed"


class BadSignature(AuthenticationError):
    """A signature by a given key does not verify: the note was altered or forged."""

    reason = "bad-signature"


class UnknownKey(AuthenticationError):
    """Signed only by keys not among those given: never taken as valid."""

    reason = "unknown-key"


class Unsigned(AuthenticationError):
    """No signature at all, although verifier keys were given."""

    reason = "unsigned"


@dataclasses.dataclass(frozen=True, slots=True)
class Authenticated:
    """A checkpoint and the verifier keys (strings) whose signatures on it verified."""

    checkpoint: Checkpoint
    signed_by: tuple[str, ...]


def authenticate(note: str, verifiers: Sequence[Verifier]) -> Authenticated:
    """The checkpoint ``note`` holds, signed by one of ``verifiers`` (any note, parsed only, when none
    are given). Raises :class:`BadSignature`, :class:`UnknownKey`, :class:`Unsigned` or :class:`Malformed`."""
    try:
        opened = open_note(note, verifiers)
    except SignatureError as exc:
        raise BadSignature(str(exc)) from None
    except NoteError as exc:
        raise Malformed(str(exc)) from None
    try:
        checkpoint = parse_checkpoint(opened.text)
    except CheckpointError as exc:
        raise Malformed(str(exc)) from None
    if verifiers and not opened.verified_by:
        if opened.unknown:
            raise UnknownKey("signed only by keys not given: " + ", ".join(opened.unknown), checkpoint)
        raise Unsigned("no signature", checkpoint)
    return Authenticated(checkpoint, opened.verified_by)


def checkpoint_of(note: str) -> Checkpoint:
    """The checkpoint ``note`` holds, its signatures not checked. Raises :class:`Malformed`."""
    try:
        return parse_checkpoint(parse_note(note).text)
    except (NoteError, CheckpointError) as exc:
        raise Malformed(str(exc)) from None
