"""Old entries of ``checkpoints`` moved out of it once retention has raised the minimum index
(docs/chain-format.md sections 13.4 and 14.5).

``checkpoints`` gains an entry at every checkpoint and every cosignature: a log that runs for years would
keep every note it ever signed there while its chain stays at its retention. After a prune has raised
the minimum index to m, :func:`retire_notes` moves the lines at the start of the file out of it, up to the
first entry of the log's origin whose note claims m leaves or more: before it, every entry of that origin
claims a tree of pruned records only. The prune passes the origin of the checkpoint that covers m, an
entry of the file, so the newest entry of the origin (the writer resumes from it, cosignatures are added
to it) and the one claiming the largest size stay, as does every line after the first kept. Lines among
the moved ones that are not entries of the origin (a torn append, a foreign line) move with them. They
go byte for byte into a new file of the chain's archive folder, ``checkpoints.<K, 6 digits>.jsonl``
(``.jsonl.gz``, gzip, when the prune compresses), K one more than the largest there, or nowhere when the
prune deletes.

It works under the log's lock (``LogStore.lock``, waited for at most ``wait`` seconds: a writer catching
up may hold it for long), so no checkpoint or cosignature is appended meanwhile: the archive file is
written durably first, then ``checkpoints`` replaced by the lines kept (temporary file, fsync, rename).
Killed between the two, the lines are in both files (said twice, never lost), and the next prune moves
them again into a file of their own. A reader following the file (``LogStore.notes_from``) starts again
from the beginning of the new one.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
from typing import Final

from otel_route_shadow.files import FileRefused, open_regular, range_blocks, write_atomic
from otel_route_shadow.lines import first_line, iter_lines_from
from otel_route_shadow.logstore.anchoring import claimed_size
from otel_route_shadow.logstore.archives import archive_dir, gzip_blocks
from otel_route_shadow.logstore.note_file import entry_note
from otel_route_shadow.logstore.store import CHECKPOINTS_FILE, LogStore

__all__ = ["RETIRED_NAME", "RetiredNotes", "retire_notes", "retirement_due"]

RETIRED_NAME: Final = re.compile(r"checkpoints\.([0-9]{6,})\.jsonl(\.gz)?")
"""The name of an archive file of retired entries."""
_MAX_LINE: Final = 4 << 20
"""A line longer than this is never held (it is not an entry: a checkpoint note is at most 1 MiB)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RetiredNotes:
    """What :func:`retire_notes` did: ``lines`` moved out of ``checkpoints`` (``bytes`` of it) into
    ``archive`` (None: deleted, or none moved); ``left``: why lines that could move were left (the lock
    is held, or a file cannot be read or written), for the next prune."""

    lines: int = 0
    bytes: int = 0
    archive: str | None = None
    left: str | None = None


def retirement_due(chain_path: str, min_index: int) -> bool:
    """Whether the first line of ``checkpoints`` may be one to move: not an entry claiming ``min_index``
    leaves or more (one line read; a prune asks before it looks for the checkpoint that covers m)."""
    try:
        fd = open_regular(LogStore(chain_path).file(CHECKPOINTS_FILE))
    except (FileNotFoundError, FileRefused):
        return False
    try:
        size = os.fstat(fd).st_size
        line = first_line(fd, 0, size, _MAX_LINE)
    except OSError:
        return False
    finally:
        os.close(fd)
    note = None if line is None else entry_note(line)
    return size > 0 and (note is None or claimed_size(note) < min_index)


def retire_notes(
    chain_path: str, origin: str, min_index: int, *, archive: bool, compress: bool, wait: float
) -> RetiredNotes:
    """Move the lines of ``checkpoints`` before its first entry of ``origin`` claiming ``min_index``
    leaves or more out of it (see the module docstring); none when it has no such entry. Never raises
    for what it finds on disk: ``left`` says it."""
    store = LogStore(chain_path)
    try:
        with store.lock(wait) as held:
            if not held:
                return RetiredNotes(left=f"{store.path}: the log's lock is held (waited {wait:g} s)")
            return _retire(store, chain_path, origin, min_index, archive=archive, compress=compress)
    except FileRefused as exc:
        return RetiredNotes(left=str(exc))
    except OSError as exc:
        return RetiredNotes(left=f"{store.path}: {exc.strerror or exc}")


def _retire(
    store: LogStore, chain_path: str, origin: str, min_index: int, *, archive: bool, compress: bool
) -> RetiredNotes:
    path = store.file(CHECKPOINTS_FILE)
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return RetiredNotes()
    with io.FileIO(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        cut, lines = _cut(handle, size, origin, min_index)
        if cut == 0:
            return RetiredNotes()
        target = None
        if archive:
            target = _next_archive(chain_path, compress)
            blocks = range_blocks(fd, 0, cut)
            write_atomic(target, gzip_blocks(blocks) if compress else blocks, exclusive=True)
        write_atomic(path, range_blocks(fd, cut, size))
    return RetiredNotes(lines, cut, target)


def _cut(handle: io.FileIO, size: int, origin: str, min_index: int) -> tuple[int, int]:
    """Where the lines to move end, and how many there are: before the first entry of ``origin``
    claiming ``min_index`` leaves or more (0, 0: there is none, nothing moves)."""
    for lines, (offset, line) in enumerate(iter_lines_from(handle, 0, size, _MAX_LINE)):
        note = None if line is None else entry_note(line)
        if note is not None and note.split("\n", 1)[0] == origin and claimed_size(note) >= min_index:
            return offset, lines
    return 0, 0


def _next_archive(chain_path: str, compress: bool) -> str:
    """A new archive file's path: K one more than the largest of the folder's retired-entry files."""
    folder = archive_dir(chain_path)
    os.makedirs(folder, exist_ok=True)
    numbers = [int(m[1]) for name in os.listdir(folder) if (m := RETIRED_NAME.fullmatch(name))]
    return os.path.join(
        folder, f"checkpoints.{max(numbers, default=0) + 1:06d}.jsonl" + (".gz" if compress else "")
    )
