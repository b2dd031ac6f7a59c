"""The log's store, ``<chain>.tlog/`` beside the chain: its paths, and how each of its files is read and
written (docs/chain-format.md section 13.4). :class:`LogStore` is the ``tlog.TileStorage`` the tile
reader reads through (``read_tiles``/``save_tiles``, in the shape of Go's ``tlog.TileReader``), and
holds ``state``, ``checkpoint``, ``checkpoints``, the refusals and the lock; the entry index is
``entries``'.

Everything in it is an input to authenticate, never a fact: ``state`` is a hint the writer checks
against what it signed, tiles are authenticated by ``tlog.TileReader``, checkpoint notes by
``tlog.authenticate``. So every read here is bounded, refuses anything but a regular file
without blocking on it (``files.open_regular``: a FIFO never hangs a reader) and parses JSON with a
depth limit (``strict_json``). Every file is written durably: whole files by ``files.write_atomic``
(file fsync, rename, directory fsync), appends to ``checkpoints`` and ``refusals`` with every byte
checked written (``files.write_all``) and fsynced; a line an earlier append left torn is ended before
the next one, so it stays one line that readers skip (quarantined in place) and the file goes on.

Witnesses' cosignatures are added by :meth:`LogStore.cosign`, under the directory's lock: the
newest entry of ``checkpoints`` of the checkpoint cosigned is appended again with the cosignature
lines that verify added after its own (its text and signature lines byte for byte the same), and
``checkpoint`` is replaced by it when it holds that checkpoint. When a newer checkpoint was published
meanwhile, the cosigned entry is appended followed by the newest entry again, in one write. So ``checkpoints`` stays
append-only and its last entry the newest checkpoint (what the writer resumes from); the newest entry
of a checkpoint is the one with the most cosignatures. A witness's refusal is one line of
``witness-refusals``.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import io
import json
import os
import stat
from collections.abc import Iterator, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from otel_route_shadow.files import (
    FileRefused,
    fsync_directory,
    open_folder_beneath,
    open_regular,
    read_beneath,
    read_newest,
    remove_temporaries,
    write_all,
    write_atomic,
)
from otel_route_shadow.lines import iter_lines_back
from otel_route_shadow.locking import flock_within, release
from otel_route_shadow.logstore.note_file import (
    MAX_NOTE_FILE,
    NoteFile,
    entry_line,
    entry_note,
    file_entries,
    object_line,
    read_note_file,
)
from otel_route_shadow.logstore.pruned import MAX_PRUNED_BYTES, PRUNED_FILE, Pruned
from otel_route_shadow.strict_json import read_model
from otel_route_shadow.tlog import (
    DEFAULT_SKEW_S,
    HASH_SIZE,
    TILE_BYTES,
    TILE_HEIGHT,
    TILE_WIDTH,
    CosignatureError,
    CosignatureVerifier,
    NoteError,
    Tile,
    TileDamaged,
    TileMissing,
    add_cosignatures,
    parse_note,
    tile_path,
)

__all__ = [
    "CHECKPOINTS_FILE",
    "CHECKPOINT_FILE",
    "LOCK_FILE",
    "MAX_CHECKPOINT_FILE",
    "REFUSALS_FILE",
    "STATE_FILE",
    "WITNESS_REFUSALS_FILE",
    "Cosigned",
    "LogStore",
    "NotesPosition",
    "State",
    "StateError",
    "TreeHint",
    "tlog_dir",
]

STATE_FILE: Final = "state"
CHECKPOINT_FILE: Final = "checkpoint"
CHECKPOINTS_FILE: Final = "checkpoints"
REFUSALS_FILE: Final = "refusals"
LOCK_FILE: Final = "lock"
WITNESS_REFUSALS_FILE: Final = "witness-refusals"

_MAX_STATE: Final = 4096
MAX_CHECKPOINT_FILE: Final = 1 << 20
"""The most ``checkpoint`` may hold: one note and its signature lines (C2SP notes are a few hundred bytes)."""
MAX_REFUSALS_FILE: Final = 1 << 20
"""The most of ``refusals`` or ``witness-refusals`` read (:meth:`LogStore.refusals_file`)."""
_TAIL_STEP: Final = 64 * 1024
_LOCK_POLL_S: Final = 0.01
NotesPosition = tuple[int, bytes]
"""Where a reader of ``checkpoints`` is: a line start, and the last bytes it read before it."""
_SEEN: Final = 64


def tlog_dir(chain_path: str | os.PathLike[str]) -> str:
    """``<chain>.tlog``: the directory beside the chain holding checkpoints, tiles and state."""
    return os.fspath(chain_path) + ".tlog"


class StateError(ValueError):
    """A ``state`` file that cannot be used as a hint; the message names it and the problem."""


_HEX64 = r"^[0-9a-f]{64}$"


class TreeHint(BaseModel):
    """Where the tree of ``size`` leaves ends in the chain: line ``size`` starts at byte ``offset``,
    and line ``size - 1`` (leaf hash ``last_leaf``, hex) at ``last_start``, both in the file of the
    segment whose first seq is ``segment`` (absent: the chain's first file, the whole chain when it
    was never cut; docs/chain-format.md section 14)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    size: int = Field(ge=1, le=1 << 62)
    offset: int = Field(ge=1, le=1 << 62)
    last_start: int = Field(ge=0, le=1 << 62)
    last_leaf: str = Field(pattern=_HEX64)
    segment: int | None = Field(default=None, ge=1, le=1 << 62)

    @model_validator(mode="after")
    def _ordered(self) -> TreeHint:
        if self.last_start >= self.offset:
            raise ValueError("last_start must lie before offset")
        return self


class State(TreeHint):
    """The ``state`` file: the hint for the tree the tiles were last written for, and (``previous``)
    for the tree before it, so a crash between writing ``state`` and publishing its checkpoint leaves a
    hint for the checkpoint that was published. ``checkpointed`` repeats ``size`` (older writers wrote
    the size of the last checkpoint there)."""

    checkpointed: int = Field(default=0, ge=0, le=1 << 62)
    previous: TreeHint | None = None

    def hint_for(self, size: int) -> TreeHint | None:
        """The hint for a tree of ``size`` leaves (its own, or the previous one's), None when neither."""
        if self.size == size:
            return TreeHint(**self.model_dump(exclude={"checkpointed", "previous"}))
        return self.previous if self.previous is not None and self.previous.size == size else None


_SAME_REFUSAL: Final = ("reason", "origin", "tree_size", "seq")


class Cosigned(enum.Enum):
    """What :meth:`LogStore.cosign` did with a witness's cosignature lines."""

    ADDED = "added"
    """The newest entry was appended again with the new lines (and ``checkpoint`` replaced)."""
    UNCHANGED = "unchanged"
    """The newest entry already carries a cosignature by each witness whose line verified."""
    ADDED_SUPERSEDED = "added-superseded"
    """The checkpoint cosigned is an older entry: it was appended again with the new lines, followed by
    the newest entry again (``checkpoint`` is left as it is)."""
    SUPERSEDED = "superseded"
    """``checkpoints`` holds no entry of the checkpoint cosigned: nothing written."""
    REJECTED = "rejected"
    """A line by a given witness key does not verify, or the lines are not signature lines."""
    BUSY = "busy"
    """Another writer holds the directory's lock: nothing written, try again."""


class LogStore:
    """``<chain>.tlog/`` of one chain (or the log directory ``path``): paths and the reads and writes
    of its files."""

    def __init__(self, chain_path: str | os.PathLike[str], path: str | None = None) -> None:
        self.chain_path = os.fspath(chain_path)
        self.path = tlog_dir(self.chain_path) if path is None else path

    def file(self, name: str) -> str:
        """The path of one of the directory's files (``STATE_FILE`` ...) or of a relative tile path."""
        return os.path.join(self.path, name)

    # -- state ---------------------------------------------------------------------------------------

    def read_state(self) -> State | None:
        """The ``state`` hint, None when there is none; :class:`StateError` when it cannot be used."""
        return read_model(self.file(STATE_FILE), State, _MAX_STATE, StateError, "a tree state", max_depth=2)

    def write_state(self, state: State) -> None:
        write_atomic(self.file(STATE_FILE), state.model_dump_json(exclude_none=True).encode("ascii"))

    # -- tiles (``tlog.TileStorage``) ----------------------------------------------------------------

    def tile_file(self, tile: Tile) -> bytes:
        """The bytes of the file at ``tile.path``, as stored: the one way a tile is read. Bounded, and no
        symbolic link below the directory is followed (``files.read_beneath``): a tile that is one, or
        not a regular file, is :class:`~otel_route_shadow.tlog.TileDamaged`. ``FileNotFoundError`` when
        there is none."""
        try:
            return read_beneath(self.path, tile.path, TILE_BYTES)
        except FileRefused as exc:
            raise TileDamaged(tile.path, exc.problem) from None

    def read_tiles(self, tiles: Sequence[Tile]) -> list[bytes]:
        """The first ``width`` hashes of each tile: its own file, else the full tile or a wider partial
        one (a prefix is the same hashes); unauthenticated (``tlog.TileReader`` authenticates them)."""
        return [self._read_tile(tile) for tile in tiles]

    def _read_tile(self, tile: Tile) -> bytes:
        for candidate in self._candidates(tile):
            try:
                data = self.tile_file(candidate)
            except FileNotFoundError:
                continue
            if len(data) < tile.width * HASH_SIZE or len(data) % HASH_SIZE:
                raise TileDamaged(candidate.path, f"{len(data)} bytes, expected {tile.width * HASH_SIZE}")
            return data[: tile.width * HASH_SIZE]
        raise TileMissing(tile.path, "missing")

    def _candidates(self, tile: Tile) -> Iterator[Tile]:
        """The files that may hold a tile's hashes, in order: its own, then (for a partial tile) the full
        tile, then the wider partial ones, its folder listed only when neither of the others exists."""
        yield tile
        if tile.width < TILE_WIDTH:
            yield Tile(tile.level, tile.index)
            yield from self._wider_partials(tile)

    def _wider_partials(self, tile: Tile) -> list[Tile]:
        """The partial tiles of (level, index) wider than ``tile``, narrowest first: the names of its
        ``.p`` folder (opened following no link below the directory) that are tile widths."""
        try:
            fd = open_folder_beneath(self.path, tile_path(tile.level, tile.index) + ".p")
        except OSError:
            return []
        try:
            names = os.listdir(fd)
        except OSError:
            return []
        finally:
            os.close(fd)
        widths = sorted(w for w in map(_partial_width, names) if w is not None and w > tile.width)
        return [Tile(tile.level, tile.index, width) for width in widths]

    def save_tiles(self, tiles: Sequence[Tile], data: Sequence[bytes]) -> None:
        """Write each tile durably unless its file, read as every tile is (:meth:`tile_file`), already
        holds exactly its bytes: a link at its name is replaced by a regular file. Its folders are made
        and opened following no link below the directory (``files.open_folder_beneath``), and the file is
        written in the folder so opened: a link or a non-folder on the way is a ``files.FileRefused``
        (an ``OSError``, which the writer contains as any failed write: logged, retried) and nothing is
        written."""
        for tile, hashes in zip(tiles, data, strict=True):
            try:
                if self.tile_file(tile) == hashes:
                    continue
            except (FileNotFoundError, TileDamaged):
                pass
            folder = open_folder_beneath(self.path, tile.path.rpartition("/")[0], create=True)
            try:
                write_atomic(self.file(tile.path), hashes, dir_fd=folder)
            finally:
                os.close(folder)

    def remove_partials(self, level: int, index: int) -> None:
        """Remove the partial tiles of tile (level, index) once its full tile exists as a regular file
        (C2SP tlog-tiles keeps them until then). No link below the directory is followed: the
        ``.p`` folder is opened with ``O_NOFOLLOW`` and only its files named as tile widths are
        removed (then the folder, when that left it empty); a link at the ``.p`` name is removed as a
        link (the name is the writer's; what it points to is never touched). Never raises."""
        folder, _, name = tile_path(level, index).rpartition("/")
        try:
            parent = open_folder_beneath(self.path, folder)
        except OSError:
            return
        try:
            if stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                _remove_partial_folder(parent, name + ".p")
        except OSError:
            pass
        finally:
            os.close(parent)

    # -- checkpoints ---------------------------------------------------------------------------------

    def notes(self) -> NoteFile:
        """Every note of ``checkpoints`` (an empty file when there is none), the newest ones only when it is
        longer than :data:`MAX_NOTE_FILE` (``older_bytes`` says how much was not read)."""
        try:
            return read_note_file(self.file(CHECKPOINTS_FILE), newest=True)
        except FileNotFoundError:
            return NoteFile([])

    def notes_from(self, position: NotesPosition = (0, b"")) -> tuple[list[str], NotesPosition]:
        """The notes of the complete lines of ``checkpoints`` from ``position`` (a line start and the bytes
        read before it) on, at most its newest :data:`MAX_NOTE_FILE` bytes, and the position after the
        last complete line read, where the next call goes on. From the file's start when it no longer
        holds those bytes there (a prune moved old entries out: ``note_retirement``) or is shorter."""
        offset, seen = position
        try:
            data, begin = read_newest(self.file(CHECKPOINTS_FILE), MAX_NOTE_FILE, offset, seen)
        except FileNotFoundError:
            return [], (0, b"")
        end = data.rfind(b"\n") + 1
        if end == 0:
            return [], position if begin == offset else (begin, b"")
        return file_entries(data[:end])[0], (begin + end, data[max(0, end - _SEEN) : end])

    def newest_notes(self) -> Iterator[str]:
        """The notes of ``checkpoints``, newest first, reading back from its end (at most
        :data:`MAX_NOTE_FILE` bytes, as much as any reader of the file reads)."""
        try:
            fd = open_regular(self.file(CHECKPOINTS_FILE))
        except FileNotFoundError:
            return
        with io.FileIO(fd, "rb") as handle:
            for line in iter_lines_back(handle, os.fstat(fd).st_size, MAX_NOTE_FILE, _TAIL_STEP):
                note = entry_note(line)
                if note is not None:
                    yield note

    def append_note(self, note: str) -> None:
        """Append ``{"note": ...}`` as one line of ``checkpoints`` and fsync it."""
        self._append(CHECKPOINTS_FILE, entry_line(note))

    def checkpoint_file(self) -> bytes:
        """The bytes of ``checkpoint`` (at most :data:`MAX_CHECKPOINT_FILE`, no symbolic link below the
        directory followed): the one way it is read. ``FileNotFoundError`` when there is none,
        ``files.FileRefused`` when it cannot be taken."""
        return read_beneath(self.path, CHECKPOINT_FILE, MAX_CHECKPOINT_FILE)

    def checkpoint_written_ns(self) -> int:
        """When ``checkpoint`` was last written (its mtime; of the link itself, never followed, when it is
        one: :meth:`checkpoint_file` refuses it). ``FileNotFoundError`` when there is none."""
        return os.stat(self.file(CHECKPOINT_FILE), follow_symlinks=False).st_mtime_ns

    def publish(self, note: str) -> None:
        """Replace ``checkpoint`` (the tlog-tiles resource) with ``note``, durably."""
        write_atomic(self.file(CHECKPOINT_FILE), note.encode("utf-8"))

    def cosign(
        self,
        text: str,
        lines: Sequence[str],
        witnesses: Sequence[CosignatureVerifier],
        *,
        now: int,
        skew: int = DEFAULT_SKEW_S,
    ) -> Cosigned:
        """Add the cosignature lines by ``witnesses`` that verify on the checkpoint ``text`` to its
        stored note, under the lock (never waiting for it): see the module docstring. ``now`` (POSIX
        seconds) bounds the cosignatures' timestamps."""
        with self.lock() as held:
            if not held:
                return Cosigned.BUSY
            newest = next(self.newest_notes(), None)
            if newest is None:
                return Cosigned.SUPERSEDED
            stored = newest if _text_of(newest) == text else self._newestobject_line(text)
            if stored is None:
                return Cosigned.SUPERSEDED
            try:
                merged = add_cosignatures(stored, lines, witnesses, now=now, skew=skew)
            except CosignatureError:
                return Cosigned.REJECTED
            if merged == stored:
                return Cosigned.UNCHANGED
            if stored is not newest:
                # An older checkpoint's entry, appended with the newest entry after it in one write, so
                # the last entry stays the newest checkpoint.
                self._append(CHECKPOINTS_FILE, entry_line(merged) + "\n" + entry_line(newest))
                return Cosigned.ADDED_SUPERSEDED
            self.append_note(merged)
            if self._published_text() == text:
                self.publish(merged)
            return Cosigned.ADDED

    def _newestobject_line(self, text: str) -> str | None:
        """The newest entry of ``checkpoints`` whose checkpoint text is ``text`` (None: there is none)."""
        return next((note for note in self.newest_notes() if _text_of(note) == text), None)

    def _published_text(self) -> str | None:
        """The checkpoint text of the ``checkpoint`` file, None when there is none to read."""
        try:
            return _text_of(self.checkpoint_file().decode("utf-8"))
        except (OSError, ValueError):
            return None

    # -- pruning -------------------------------------------------------------------------------------

    def read_pruned(self) -> Pruned | None:
        """The ``pruned`` file, None when the log was never pruned; :class:`StateError` naming the file
        when it cannot be used."""
        return read_model(
            self.file(PRUNED_FILE), Pruned, MAX_PRUNED_BYTES, StateError, "a pruned-records file", max_depth=4
        )

    def save_pruned(self, pruned: Pruned) -> None:
        """Replace ``pruned`` with ``pruned``, whole and durably (``files.write_atomic``)."""
        os.makedirs(self.path, exist_ok=True)
        write_atomic(self.file(PRUNED_FILE), pruned.model_dump_json().encode("utf-8"))

    # -- refusals ------------------------------------------------------------------------------------

    def refusals_file(self, name: str = REFUSALS_FILE) -> bytes:
        """The bytes of ``refusals`` (or, named, ``witness-refusals``), the one way they are read: at most
        :data:`MAX_REFUSALS_FILE`, no symbolic link below the directory followed. ``FileNotFoundError``
        when there is none, ``files.FileRefused`` when it cannot be taken."""
        if name not in (REFUSALS_FILE, WITNESS_REFUSALS_FILE):
            raise ValueError(f"{name!r} is not a refusals file")
        return read_beneath(self.path, name, MAX_REFUSALS_FILE)

    def append_refusal(self, entry: dict[str, Any]) -> None:
        """Append one JSON line to ``refusals``, unless its last line records the same refusal (the
        same reason, origin, tree size and seq: a later process refusing the same state again)."""
        try:
            last = object_line(self.refusals_file().rstrip(b"\n").rpartition(b"\n")[2])
        except (FileNotFoundError, FileRefused):
            last = {}
        if all(last.get(key) == entry.get(key) for key in _SAME_REFUSAL) and last:
            return
        self._append(REFUSALS_FILE, json.dumps(entry, sort_keys=True))

    def append_witness_refusal(self, entry: dict[str, Any]) -> None:
        """Append one JSON line to ``witness-refusals`` (the caller records each witness and cause once)."""
        self._append(WITNESS_REFUSALS_FILE, json.dumps(entry, sort_keys=True))

    def _append(self, name: str, text: str) -> None:
        path = self.file(name)
        created = not os.path.lexists(path)
        fd = open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644, follow_symlinks=False)
        try:
            data = text.encode("utf-8") + b"\n"
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end the line an interrupted append left torn
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_directory(self.path)

    # -- the lock and the start ----------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, wait: float = 0.0) -> Iterator[bool]:
        """Hold ``lock`` (``flock``, waited for at most ``wait`` seconds: never, by default): yields False
        when another process holds it. Given back unlocked (``locking.release``): a child forked while it
        is held shares the flock through its copy of the descriptor."""
        fd = open_regular(self.file(LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644, follow_symlinks=False)
        try:
            yield flock_within(fd, fcntl.LOCK_EX, wait, min(wait, _LOCK_POLL_S))
        finally:
            release(fd)

    def _partial_tiles_folder(self, level: int, index: int) -> str:
        return self.file(tile_path(level, index, 1).rsplit("/", 1)[0])

    def remove_temporaries(self, size: int) -> int:
        """Remove what a killed writer left half-written: the temporary files of ``files.write_atomic``
        in the directory and where tiles of a tree of ``size`` leaves or more are written: on each level
        that has a folder, from the tile the tree of ``size`` ends in, every tile a killed writer of a
        larger tree went on to write (tiles are written in order, so they stop at the first tile with
        neither a file nor a folder of partial tiles), with their partial tiles. Returns how many were
        removed."""
        removed = remove_temporaries(self.path)
        level = 0
        while level == 0 or os.path.isdir(self.file(f"tile/{level}")):
            index = (size >> (TILE_HEIGHT * level)) // TILE_WIDTH
            while True:
                removed += remove_temporaries(os.path.dirname(self.file(tile_path(level, index))))
                removed += remove_temporaries(self._partial_tiles_folder(level, index))
                index += 1
                if not os.path.lexists(self.file(tile_path(level, index))) and not os.path.isdir(
                    self._partial_tiles_folder(level, index)
                ):
                    removed += remove_temporaries(os.path.dirname(self.file(tile_path(level, index))))
                    break
            level += 1
        return removed


def _partial_width(name: str) -> int | None:
    """The width a name in a ``.p`` folder of partial tiles stands for, as C2SP tlog-tiles names it
    (``tlog.tile_path``): ASCII digits without a leading zero, 1 to 255. None for any other name."""
    if not (name.isascii() and name.isdigit()) or name[0] == "0" or len(name) > 3:
        return None
    width = int(name)
    return width if width < TILE_WIDTH else None


def _remove_partial_folder(parent: int, name: str) -> None:
    """Remove the partial tiles in the folder ``name`` of the folder open as ``parent``, then the folder
    (an ``rmdir``: it never removes a link, nor a folder something else is left in); a link there is
    removed as a link, anything else that is not a folder is left. ``OSError`` passes through."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except FileNotFoundError:
        return
    except OSError:
        if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=parent)
        return
    try:
        for width in os.listdir(fd):
            if _partial_width(width) is not None:
                with contextlib.suppress(OSError):
                    os.unlink(width, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _text_of(note: str) -> str | None:
    try:
        return parse_note(note).text
    except NoteError:
        return None
