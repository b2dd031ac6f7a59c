"""What the writer knows it signed before it signs again: its own notes, authenticated with its own keys,
and the signed sizes other evidence shows (docs/chain-format.md section 13.6, "Anchors").

The writer of a log signs a new tree only when it extends every checkpoint it signed. On its own disk
it finds them in ``checkpoints`` (the newest entry of its origin, and the one claiming the largest
size: an older note appended again cannot hide it) and in ``checkpoint`` (the published note). None is
taken on trust:

* those two entries of the log's origin in ``checkpoints`` must authenticate with one of the writer's
  own keys (during a key rotation the key file holds the old and the new key, and every checkpoint
  carries both signatures; without a key: parse as a checkpoint): a note edited on disk is an
  ``unverified-checkpoint`` refusal (one at a time), never a reason to fall back to an older note;
* a signed size shown elsewhere (``state``'s ``previous`` tree, which a writer records only after a
  checkpoint was published; the size a witness answered for this log) that is larger than every
  authenticated checkpoint (and than the size an acknowledged unverified newest entry claims) is a
  ``rolled-back`` refusal: ``checkpoints`` lost what was signed.

An operator who knows why (a key replaced without a transition window, a restored backup, a log deliberately started over) runs
``otel-route-shadow acknowledge CHAIN``: it copies the last refusal into ``acknowledged``, and the
writer then signs on from what it can authenticate for that very refusal (same reason and size) only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

from otel_route_shadow.files import FileRefused, read_regular, write_atomic
from otel_route_shadow.logstore.store import (
    LogStore,
    NotesPosition,
    StateError,
)
from otel_route_shadow.strict_json import StrictJSONError, loads_strict
from otel_route_shadow.tlog import (
    AuthenticationError,
    Checkpoint,
    Signer,
    Verifier,
    authenticate,
    checkpoint_of,
    parse_size,
    sign_note,
)

__all__ = [
    "ACKNOWLEDGEABLE",
    "ACKNOWLEDGED_FILE",
    "ANCHOR_REFUSALS",
    "ROLLED_BACK",
    "UNVERIFIED_CHECKPOINT",
    "Acknowledgement",
    "OwnNotes",
    "acknowledge_last_refusal",
    "claimed_size",
    "empty_tree_note",
    "is_acknowledged",
    "newest_of_origin",
    "own_checkpoint",
    "published_note",
    "signed_elsewhere",
]

ACKNOWLEDGED_FILE: Final = "acknowledged"
UNVERIFIED_CHECKPOINT: Final = "unverified-checkpoint"
ROLLED_BACK: Final = "rolled-back"
ACKNOWLEDGEABLE: Final = frozenset({UNVERIFIED_CHECKPOINT, ROLLED_BACK})
"""The refusals an operator may acknowledge (the others say the chain itself lost what was signed)."""
_IF_YOU_KNOW_WHY: Final = " (if you know why: otel-route-shadow acknowledge CHAIN, docs/chain-format.md 13.6)"
ANCHOR_REFUSALS: Final = {
    UNVERIFIED_CHECKPOINT: "the newest checkpoint in `checkpoints` does not verify with the log's own keys"
    + _IF_YOU_KNOW_WHY,
    ROLLED_BACK: "`checkpoints` holds no checkpoint as large as one signed (`state` or a witness shows it)"
    + _IF_YOU_KNOW_WHY,
}
"""What each anchor refusal means, for the one warning the writer logs."""
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()


def own_checkpoint(note: str, origin: str, verifiers: list[Verifier]) -> Checkpoint | None:
    """The checkpoint of ``note`` when it is of ``origin`` and signed by one of ``verifiers`` (parsed
    only when there are none), None otherwise."""
    try:
        checkpoint = authenticate(note, verifiers).checkpoint
    except AuthenticationError:
        return None
    return checkpoint if checkpoint.origin == origin else None


def newest_of_origin(directory: LogStore, origin: str) -> str | None:
    """The newest entry of ``checkpoints`` whose first line is ``origin`` (authenticated or not)."""
    for note in directory.newest_notes():
        if note.split("\n", 1)[0] == origin:
            return note
    return None


class OwnNotes:
    """The notes of ``checkpoints`` as the log's own writer reads them: authenticated with its own keys
    (``verifiers``; none: parsed as checkpoints of its origin). :meth:`largest` and
    :meth:`take_published_sizes` read only what was appended since either last did; :meth:`signed` reads back
    from the file's end."""

    def __init__(self, directory: LogStore, origin: str, verifiers: list[Verifier]) -> None:
        self.directory, self.origin, self.verifiers = directory, origin, verifiers
        self._position: NotesPosition = (0, b"")
        """Where ``checkpoints`` was read up to: the next read starts there."""
        self._largest: tuple[str, int] | None = None
        self._sizes: set[int] | None = set()
        """The size each note of this origin read so far claims, until :meth:`take_published_sizes`."""

    def own(self, note: str) -> Checkpoint | None:
        """The checkpoint of ``note`` when it is this log's own (:func:`own_checkpoint`)."""
        return own_checkpoint(note, self.origin, self.verifiers)

    def all(self) -> list[str]:
        """Every note of ``checkpoints`` (its newest :data:`~otel_route_shadow.logstore.note_file.MAX_NOTE_FILE`
        bytes); none when it cannot be read."""
        try:
            return self.directory.notes().notes
        except (FileRefused, ValueError):
            return []

    def largest(self) -> str | None:
        """The note of this origin that claims the largest size and parses as a checkpoint (the newest of
        equals): ``checkpoints`` only grows, so an older note appended again cannot hide a larger one
        signed before it, by this writer or another."""
        self._read_new()
        return None if self._largest is None else self._largest[0]

    def published(self) -> list[Checkpoint]:
        """Every checkpoint of ``checkpoints`` this writer published (see :meth:`own`), by size."""
        found = {c.size: c for note in self.all() if (c := self.own(note)) is not None}
        return [found[size] for size in sorted(found)]

    def take_published_sizes(self) -> set[int]:
        """The sizes the notes of this origin claim, neither parsed nor authenticated: what a client may
        ask partial tiles for (a size only selects a prefix of an authenticated tile). Once: no size is
        kept after it (the writer asks once per process, and a host runs for months)."""
        self._read_new()
        sizes, self._sizes = self._sizes or set(), None
        return sizes

    def signed(self, size: int) -> str | None:
        """The newest note of this log for a tree of exactly ``size`` leaves (with the cosignatures
        stored with it), None when there is none: read back from the end of ``checkpoints``, since a cut
        asks for the note just signed with the chain's lock held."""
        try:
            for note in self.directory.newest_notes():
                checkpoint = self.own(note) if self._claim(note) == size else None
                if checkpoint is not None and checkpoint.size == size:
                    return note
        except (FileRefused, OSError, ValueError):
            pass
        return None

    def _read_new(self) -> None:
        """Take in the notes appended to ``checkpoints`` since the last call (all of it the first time):
        each one's claimed size, and the largest, newest first, only a claim at least as large as the
        largest so far parsed."""
        try:
            notes, position = self.directory.notes_from(self._position)
        except (OSError, ValueError):
            return
        found: tuple[str, int] | None = None
        floor = -1 if self._largest is None else self._largest[1]
        for note in reversed(notes):
            size = self._claim(note)
            if size < 0:
                continue
            if self._sizes is not None:
                self._sizes.add(size)
            if size >= floor and (found is None or size > found[1]) and self._parses(note, size):
                found = (note, size)
        if found is not None:
            self._largest = found
        self._position = position  # only once every note read is taken in

    def _claim(self, note: str) -> int:
        """The size ``note`` claims when its first line is this origin, else -1 (nothing else read)."""
        return claimed_size(note) if note.split("\n", 1)[0] == self.origin else -1

    @staticmethod
    def _parses(note: str, size: int) -> bool:
        try:
            return checkpoint_of(note).size == size
        except AuthenticationError:
            return False


def claimed_size(note: str) -> int:
    """The size a note's second line claims (written as a checkpoint's size is), -1 when it claims none."""
    parts = note.split("\n", 2)
    size = parse_size(parts[1]) if len(parts) > 2 else None
    return -1 if size is None else size


def published_note(directory: LogStore) -> str | None:
    """The note of ``checkpoint`` (the published one), None when there is none to read."""
    try:
        return directory.checkpoint_file().decode("utf-8") or None  # no link followed
    except (OSError, ValueError):
        return None


def signed_elsewhere(directory: LogStore) -> int:
    """The largest size the directory shows was published without a note in ``checkpoints``: the
    ``previous`` tree of ``state`` (0 when it shows none)."""
    try:
        state = directory.read_state()
    except StateError:
        return 0
    return state.previous.size if state is not None and state.previous is not None else 0


def empty_tree_note(origin: str, signers: Sequence[Signer]) -> str:
    """A signed checkpoint of the empty tree: consistent with every tree of the log, so it may be sent to
    a witness (``old 0``) to learn the size it holds without ever signing a fork; signed by each of
    ``signers``, as every checkpoint is."""
    return sign_note(Checkpoint(origin, 0, EMPTY_ROOT).text(), signers)


@dataclasses.dataclass(frozen=True, slots=True)
class Acknowledgement:
    """A refusal the operator acknowledged: its reason, origin and tree size."""

    reason: str
    origin: str
    tree_size: int


def is_acknowledged(directory: LogStore, reason: str, origin: str, tree_size: int) -> bool:
    """Whether ``acknowledged`` holds this very refusal."""
    try:
        value = loads_strict(read_regular(directory.file(ACKNOWLEDGED_FILE), 4096), max_depth=2)
    except (OSError, FileRefused, StrictJSONError, UnicodeDecodeError):
        return False
    return isinstance(value, dict) and (
        value.get("reason"),
        value.get("origin"),
        value.get("tree_size"),
    ) == (reason, origin, tree_size)


def acknowledge_last_refusal(directory: LogStore) -> Acknowledgement | dict[str, Any] | None:
    """Copy the last line of ``refusals`` into ``acknowledged`` when it is an acknowledgeable refusal:
    the acknowledgement; the refusal itself (a dict) when it cannot be acknowledged; None when there is
    none. ``OSError`` and ``files.FileRefused`` pass through."""
    try:
        data = directory.refusals_file()
    except FileNotFoundError:
        return None
    last = data.rstrip(b"\n").rpartition(b"\n")[2]
    try:
        entry = loads_strict(last, max_depth=2) if last else None
    except (StrictJSONError, UnicodeDecodeError):
        entry = None
    if not isinstance(entry, dict):
        return None
    reason, origin, size = entry.get("reason"), entry.get("origin"), entry.get("tree_size")
    if reason not in ACKNOWLEDGEABLE or not isinstance(origin, str) or not isinstance(size, int):
        return entry
    acknowledgement = Acknowledgement(str(reason), origin, size)
    text = json.dumps(dataclasses.asdict(acknowledgement), sort_keys=True)
    write_atomic(directory.file(ACKNOWLEDGED_FILE), text.encode("ascii") + b"\n")
    return acknowledgement
