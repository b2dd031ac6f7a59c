"""A chain's log as a tlog-tiles client reads it: the checkpoint, tiles and entry bundles, each
authenticated before it is given out (what ``otel-route-shadow serve`` serves; no network here).

:class:`PublishedLog` follows the chain's ``checkpoint`` file (read again when it changes) and
authenticates it: a signed note of the log's origin, signed by one of the verifier keys when keys are
given, never smaller than the last one it gave, and proven consistent with it from the tiles (the log
never goes back, never forks, as far as this reader saw). When witness keys are given, the note is given
without its cosignature lines that claim one of them and do not verify (``tlog.without_false_cosignatures``:
whoever can write the file could add one, and a client holding that witness's key would reject the whole
checkpoint for it); lines by other keys are given as they are. Every resource is then checked against that
checkpoint's tree (``tiles.TileReader``): a tile's bytes, exactly as stored at the path asked for, must
be the authenticated hashes of that tile (a partial tile: a prefix of them; a partial tile whose full
tile exists, which the writer then removes, is given as the full tile's first hashes); an entry bundle is cut
from the chain and each entry checked against the authenticated level-0 tile (``entries``).

A resource that is not part of the checkpoint's tree, or whose file is not there, is
:class:`NotFound`; one that cannot be given as good is :class:`Unservable` (a damaged tile, a tile
another one cannot be authenticated through, a chain that does not hold the signed entries, a
checkpoint that does not authenticate), or ``entries.BundleUnservable`` for a bundle holding a line too
long to be an entry. Each names the path and what to do.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Final

from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore.entries import BundleDamaged, EntryIndex, bundle_path, read_bundle
from otel_route_shadow.logstore.store import CHECKPOINT_FILE, LogStore
from otel_route_shadow.tlog import (
    HASH_SIZE,
    REBUILD_HINT,
    TILE_WIDTH,
    AuthenticationError,
    Checkpoint,
    CosignatureError,
    CosignatureVerifier,
    ProofError,
    Tile,
    TileDamaged,
    TileError,
    TileReader,
    Verifier,
    authenticate,
    consistency_proof,
    tile_path,
    tile_width,
    verify_consistency,
    without_false_cosignatures,
)

__all__ = [
    "MAX_LEVEL",
    "NotFound",
    "PublishedLog",
    "Resource",
    "Unservable",
    "parse_resource",
]

MAX_LEVEL: Final = 63
"""The highest tile level a path may name (C2SP tlog-tiles)."""
_MAX_INDEX_GROUPS: Final = 7
"""``N`` of at most 21 digits: more than any tree of 2**63 leaves needs."""
_CACHED_TILES: Final = 64

_INDEX = rf"((?:x[0-9]{{3}}/){{0,{_MAX_INDEX_GROUPS - 1}}}[0-9]{{3}})"
_WIDTH = r"(?:\.p/([1-9][0-9]{0,2}))?"
_TILE_RE: Final = re.compile(r"tile/(0|[1-9][0-9]?)/" + _INDEX + _WIDTH, re.ASCII)
_ENTRIES_RE: Final = re.compile(r"tile/entries/" + _INDEX + _WIDTH, re.ASCII)


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    """One tlog-tiles resource: ``kind`` ``checkpoint``, ``tile`` (``level``, ``index``, ``width``) or
    ``entries`` (``index``, ``width``); ``width`` 256 for a full tile or bundle."""

    kind: str
    level: int = 0
    index: int = 0
    width: int = TILE_WIDTH

    @property
    def path(self) -> str:
        if self.kind == "checkpoint":
            return CHECKPOINT_FILE
        if self.kind == "entries":
            return bundle_path(self.index, self.width)
        return tile_path(self.level, self.index, self.width)


def parse_resource(relative: str) -> Resource | None:
    """The resource a path below a log's prefix names (``checkpoint``, ``tile/<L>/<N>[.p/<W>]``,
    ``tile/entries/<N>[.p/<W>]``), exactly as C2SP tlog-tiles writes it: ASCII digits, no leading
    zeros, ``L`` at most 63, ``W`` 1 to 255. None for anything else (nothing is decoded or normalized:
    the path is matched as it comes)."""
    resource = _parsed(relative)
    return resource if resource is not None and resource.path == relative else None  # one spelling


def _parsed(relative: str) -> Resource | None:
    if relative == CHECKPOINT_FILE:
        return Resource("checkpoint")
    if match := _ENTRIES_RE.fullmatch(relative):
        index, width = _index(match[1]), _width(match[2])
        return None if width is None else Resource("entries", 0, index, width)
    if match := _TILE_RE.fullmatch(relative):
        level, index, width = int(match[1]), _index(match[2]), _width(match[3])
        if level > MAX_LEVEL or width is None:
            return None
        return Resource("tile", level, index, width)
    return None


def _index(text: str) -> int:
    return int(text.replace("x", "").replace("/", ""))


def _width(text: str | None) -> int | None:
    if text is None:
        return TILE_WIDTH
    width = int(text)
    return width if width < TILE_WIDTH else None


class NotFound(LookupError):
    """A resource that is not part of the checkpoint's tree, or not on disk."""


class Unservable(RuntimeError):
    """A resource that exists but cannot be given as good; the message names what is wrong."""


@dataclasses.dataclass(frozen=True, slots=True)
class _View:
    """The checkpoint being served, and a reader of its tree."""

    key: tuple[int, ...]
    note: bytes
    checkpoint: Checkpoint
    reader: TileReader
    dropped: tuple[str, ...]
    """The keys claimed by the cosignature lines left out of ``note`` (each claims a given witness key and
    does not verify)."""


class PublishedLog:
    """The log beside the chain at ``chain_path``, read as a tlog-tiles client reads it (see the
    module docstring). ``verifiers``: the keys one of which must have signed the checkpoint (none: any
    well-formed note of the log's origin is taken, as the writer writes unsigned notes without a key);
    ``witnesses``: the witness keys whose false cosignature lines are left out of the note.

    Raises ``FileNotFoundError`` when the log has no checkpoint yet and :class:`Unservable` when its
    checkpoint does not authenticate. Not thread-safe: one call at a time.
    """

    def __init__(
        self,
        chain_path: str,
        verifiers: Sequence[Verifier] = (),
        witnesses: Sequence[CosignatureVerifier] = (),
    ) -> None:
        self.chain_path = os.fspath(chain_path)
        self.store = LogStore(self.chain_path)
        self.directory = self.store.path
        self.verifiers = list(verifiers)
        self.witnesses = tuple(witnesses)
        self._view: _View | None = None
        self._refused: tuple[tuple[int, ...], str] | None = None
        self.index = EntryIndex(self.chain_path, self.directory)
        view = self._current()
        self.origin = view.checkpoint.origin

    @property
    def size(self) -> int:
        """The size of the checkpoint being served."""
        return self._current().checkpoint.size

    def get(self, resource: Resource) -> bytes:
        """The bytes of ``resource``, authenticated (see the module docstring)."""
        if resource.kind == "checkpoint":
            return self._current().note
        if resource.kind == "entries":
            return self.bundle(resource.index, resource.width)
        return self.tile(resource.level, resource.index, resource.width)

    def checkpoint(self) -> bytes:
        """The checkpoint note being served."""
        return self._current().note

    def dropped_cosignatures(self) -> tuple[str, ...]:
        """The keys claimed by the cosignature lines left out of the checkpoint being served (see the
        module docstring)."""
        return self._current().dropped

    def tile(self, level: int, index: int, width: int) -> bytes:
        """Tile (level, index) of ``width`` hashes, the file's bytes once they are the authenticated
        hashes."""
        view = self._current()
        relative = tile_path(level, index, width)
        if width > tile_width(view.checkpoint.size, level, index):
            raise NotFound(f"{relative}: not in the tree of the checkpoint (size {view.checkpoint.size})")
        try:
            data = self.store.tile_file(Tile(level, index, width))
        except FileNotFoundError:
            if width < TILE_WIDTH and tile_width(view.checkpoint.size, level, index) == TILE_WIDTH:
                # C2SP tlog-tiles lets a log delete a partial tile once the full one exists; clients of an
                # older checkpoint still ask for it, and it is the full tile's first hashes.
                return self.tile(level, index, TILE_WIDTH)[: width * HASH_SIZE]
            raise NotFound(f"{relative}: missing") from None
        except TileDamaged as exc:
            raise Unservable(f"{exc}; {REBUILD_HINT}") from None
        authentic = self._authentic_tile(view, level, index, relative)
        if data != authentic[: width * HASH_SIZE]:
            raise Unservable(
                f"{relative}: does not hold the hashes of the signed tree (damaged or forged); {REBUILD_HINT}"
            )
        return data

    def bundle(self, index: int, width: int) -> bytes:
        """Entry bundle ``index`` of ``width`` entries, cut from the chain and checked entry by entry."""
        view = self._current()
        relative = bundle_path(index, width)
        if index * TILE_WIDTH + width > view.checkpoint.size:
            raise NotFound(f"{relative}: not in the tree of the checkpoint (size {view.checkpoint.size})")
        leaves = self._authentic_tile(view, 0, index, relative)
        try:
            return read_bundle(self.chain_path, self.index, index, width, leaves)
        except BundleDamaged as exc:
            raise Unservable(str(exc)) from None
        except FileRefused as exc:
            raise Unservable(f"{relative}: the chain cannot be read: {exc.problem}") from None

    def _authentic_tile(self, view: _View, level: int, index: int, relative: str) -> bytes:
        try:
            return view.reader.tile(level, index)
        except TileError as exc:
            if exc.path == relative:
                raise Unservable(f"{exc}; {REBUILD_HINT}") from None
            raise Unservable(f"{relative}: cannot be authenticated: {exc}; {REBUILD_HINT}") from None

    # -- the checkpoint ----------------------------------------------------------------------------------

    def _current(self) -> _View:
        """The view of the current ``checkpoint`` file, read and authenticated again when it changed."""
        path = os.path.join(self.directory, CHECKPOINT_FILE)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if self._view is not None:
                return self._view  # keep serving the last one that authenticated
            raise
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if self._view is not None and self._view.key == key:
            return self._view
        if self._refused is not None and self._refused[0] == key:
            raise Unservable(self._refused[1])
        try:
            view = self._authenticated(key)
        except Unservable as exc:
            self._refused = (key, str(exc))
            raise
        self._view, self._refused = view, None
        return view

    def _authenticated(self, key: tuple[int, ...]) -> _View:
        try:
            data = self.store.checkpoint_file()
            note = data.decode("utf-8")
            checkpoint = authenticate(note, self.verifiers).checkpoint
            served, dropped = without_false_cosignatures(note, self.witnesses)
        except FileNotFoundError:
            raise
        except FileRefused as exc:
            raise Unservable(f"{CHECKPOINT_FILE}: {exc.problem}") from None
        except UnicodeDecodeError:
            raise Unservable(f"{CHECKPOINT_FILE}: not UTF-8") from None
        except AuthenticationError as exc:
            raise Unservable(f"{CHECKPOINT_FILE}: does not authenticate: {exc.reason}: {exc}") from None
        except CosignatureError as exc:  # authenticate opened the note: a bug if it is reached
            raise Unservable(f"{CHECKPOINT_FILE}: its signature lines cannot be read: {exc}") from None
        reader = TileReader(self.store, checkpoint.size, checkpoint.root, cache=_CACHED_TILES)
        old = self._view
        if old is not None:
            self._check_follows(old.checkpoint, checkpoint, reader)
        return _View(key, served.encode("utf-8"), checkpoint, reader, dropped)

    @staticmethod
    def _check_follows(old: Checkpoint, new: Checkpoint, reader: TileReader) -> None:
        """The new checkpoint extends the one served before it: same origin, not smaller, consistent."""
        problem = ""
        if new.origin != old.origin:
            problem = f"its origin {new.origin!r} is not the log's {old.origin!r}"
        elif new.size < old.size:
            problem = f"its size {new.size} is below the {old.size} served before (a rollback)"
        else:
            try:
                proof = consistency_proof(old.size, new.size, reader)
                verify_consistency(old.size, new.size, old.root, new.root, proof)
            except ProofError as exc:
                problem = f"it is not consistent with the checkpoint of size {old.size} served before ({exc})"
            except TileError as exc:
                problem = f"its consistency with size {old.size} cannot be proven: {exc}; {REBUILD_HINT}"
        if problem:
            raise Unservable(f"{CHECKPOINT_FILE}: refused: {problem}")
