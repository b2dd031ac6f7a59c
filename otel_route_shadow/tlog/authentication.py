"""Authenticating a checkpoint note: the one rule every reader of checkpoints applies.

A note is opened with the verifier keys given (C2SP signed-note: signatures by other keys are ignored,
a signature by a given key that does not verify rejects the note) and its text parsed as a C2SP
tlog-checkpoint. :func:`authenticate` returns the checkpoint and who signed it, or raises one of the
:class:`AuthenticationError` classes below; each carries the ``reason`` verifiers report
(``logstore.ConsistencyReason`` uses the same words). Only a key named for the checkpoint's origin
authenticates it (C2SP tlog-checkpoint: a log's key is named after its origin), so one log's key never
vouches for another's checkpoint: :class:`UnknownKey`. With no verifier keys nothing can be authenticated:
the checkpoint is returned parsed, with ``signed_by`` empty, for callers that accept unsigned logs.
A key may be given with the tree sizes it is valid for (a ``KeyWindow`` of the log's key set, as a log
that rotated its key has): a checkpoint of size n is authentic iff it carries a valid signature by a
key whose window contains n; one signed only by keys outside their windows is :class:`OutsideWindow`.
:func:`checkpoint_of` is the parse alone (the same parsers, signatures not looked at), for a caller that
authenticates what it does with the checkpoint otherwise (tiles against its root, a proof by its reader).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from otel_route_shadow.tlog.checkpoint import Checkpoint, CheckpointError, parse_checkpoint
from otel_route_shadow.tlog.keyset import KeyWindow, LogKey
from otel_route_shadow.tlog.note import NoteError, SignatureError, check_signatures, parse_note

__all__ = [
    "Authenticated",
    "AuthenticationError",
    "BadSignature",
    "Malformed",
    "OutsideWindow",
    "UnknownKey",
    "Unsigned",
    "authenticate",
    "checkpoint_of",
    "key_window",
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


class OutsideWindow(AuthenticationError):
    """Signed only by keys of the log's key set whose windows do not contain the checkpoint's size."""

    reason = "key-outside-window"


@dataclasses.dataclass(frozen=True, slots=True)
class Authenticated:
    """A checkpoint and the verifier keys (strings) whose signatures on it verified, each valid for its
    size."""

    checkpoint: Checkpoint
    signed_by: tuple[str, ...]


def key_window(key: LogKey) -> KeyWindow:
    """``key`` with its window (a bare verifier key is valid for every size)."""
    return key if isinstance(key, KeyWindow) else KeyWindow(key)


def authenticate(note: str, keys: Sequence[LogKey]) -> Authenticated:
    """The checkpoint ``note`` holds, signed by one of ``keys`` valid for its size (any note, parsed
    only, when none are given; a key given twice counts with its first window, so a caller puts a key
    set before a policy's bare keys). Raises :class:`BadSignature`, :class:`UnknownKey`, :class:`Unsigned`,
    :class:`OutsideWindow` or :class:`Malformed`."""
    try:
        parsed = parse_note(note)
    except NoteError as exc:
        raise Malformed(str(exc)) from None
    named = {(signature.name, signature.key_id) for signature in parsed.signatures}
    windows: dict[str, KeyWindow] = {}
    for key in keys:  # only the keys the note names; the first window of a key given twice
        verifier = key.verifier if isinstance(key, KeyWindow) else key
        if (verifier.name, verifier.key_id) in named:
            windows.setdefault(str(verifier), key_window(key))
    try:
        opened = check_signatures(parsed, [w.verifier for w in windows.values()])
    except SignatureError as exc:
        raise BadSignature(str(exc)) from None
    try:
        checkpoint = parse_checkpoint(opened.text)
    except CheckpointError as exc:
        raise Malformed(str(exc)) from None
    if keys and not opened.verified_by:
        if opened.unknown:
            raise UnknownKey("signed only by keys not given: " + ", ".join(opened.unknown), checkpoint)
        raise Unsigned("no signature", checkpoint)
    # A log's key is named for its origin: another log's key vouches for nothing of this one.
    own = [key for key in opened.verified_by if windows[key].verifier.name == checkpoint.origin]
    if keys and not own:
        foreign = ", ".join(_name(windows[key]) for key in opened.verified_by)
        raise UnknownKey(
            f"signed only by keys named for another origin than {checkpoint.origin!r}: {foreign}", checkpoint
        )
    signed_by = tuple(key for key in own if windows[key].contains(checkpoint.size))
    if keys and not signed_by:
        outside = "; ".join(_outside(windows[key]) for key in own)
        raise OutsideWindow(
            f"size {checkpoint.size}: signed only by keys not valid for it: {outside}", checkpoint
        )
    return Authenticated(checkpoint, signed_by)


def _name(window: KeyWindow) -> str:
    return "+".join(str(window.verifier).split("+", 2)[:2])


def _outside(window: KeyWindow) -> str:
    name = _name(window)
    if window.until_size is None:
        return f"{name} (valid for sizes from {window.from_size})"
    return f"{name} (valid for sizes {window.from_size} to {window.until_size - 1})"


def checkpoint_of(note: str) -> Checkpoint:
    """The checkpoint ``note`` holds, its signatures not checked. Raises :class:`Malformed`."""
    try:
        return parse_checkpoint(parse_note(note).text)
    except (NoteError, CheckpointError) as exc:
        raise Malformed(str(exc)) from None
