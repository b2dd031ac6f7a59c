"""A chain's ``checkpoints`` file read and written line by line: each line a JSON object ``{"note": ...}``
(an entry) or something else (a torn or foreign line, skipped and counted).

Reading is bounded by bytes (:data:`MAX_NOTE_FILE`) and by what it keeps: the lines that cannot be entries
are passed over in one scan of the bytes, never one object each, and the numbers of at most
:data:`MAX_SKIPPED` of them are kept."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from typing import Any, Final

import orjson

from otel_route_shadow.files import read_newest, read_regular
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "MAX_NOTE_FILE",
    "MAX_SKIPPED",
    "NoteFile",
    "entry_line",
    "entry_note",
    "file_entries",
    "object_line",
    "read_note_file",
]

MAX_NOTE_FILE: Final = 64 * 1024 * 1024
"""The largest checkpoint file read (about 200,000 notes)."""
_MAY_BE_ENTRY: Final = re.compile(rb"note|\\u")
"""What a line that is a ``checkpoints`` entry holds: its key, or an escape that could spell it."""
MAX_SKIPPED: Final = 100
"""Line numbers of a checkpoint file's lines that are not entries kept (:class:`NoteFile`)."""
_MAX_LINE_DEPTH: Final = 2


@dataclasses.dataclass(frozen=True, slots=True)
class NoteFile:
    """The notes of a checkpoint file, oldest first, and the numbers (1-based) of the lines skipped
    because they are not checkpoint entries (a line an interrupted append left torn, or a foreign one)."""

    notes: list[str]
    skipped: tuple[int, ...] = ()
    """The first :data:`MAX_SKIPPED` of them."""
    older_bytes: int = 0
    """Bytes at the start of a ``checkpoints`` file longer than the bound, not read (the oldest notes):
    line numbers count from the first line read."""


def read_note_file(
    path: str | os.PathLike[str], max_bytes: int = MAX_NOTE_FILE, *, newest: bool = False
) -> NoteFile:
    """A chain's ``checkpoints`` file (one JSON object ``{"note": ...}`` per line) or a file holding
    one note (the ``checkpoint`` file). With ``newest``, a file longer than ``max_bytes`` is read from
    the first line of its last ``max_bytes`` bytes (``checkpoints`` only grows: its newest notes),
    else it is refused. ``FileNotFoundError`` passes through; a file that cannot be taken is a
    ``files.FileRefused``; one that is not UTF-8 a ``ValueError`` naming it."""
    source = os.fspath(path)
    data, older = read_newest(source, max_bytes) if newest else (read_regular(source, max_bytes), 0)
    if not data.startswith(b"{"):
        try:
            return NoteFile([data.decode("utf-8")] if data else [], older_bytes=older)
        except UnicodeDecodeError:
            raise ValueError(f"{source}: not UTF-8") from None
    notes, skipped = file_entries(data)
    return NoteFile(notes, skipped, older)


def file_entries(data: bytes) -> tuple[list[str], tuple[int, ...]]:
    """The notes of the entry lines of ``checkpoints`` bytes and the numbers of the first
    :data:`MAX_SKIPPED` other lines (a last line without LF among them). Only lines that may be entries
    (:data:`_MAY_BE_ENTRY`) are looked at one by one: a file of millions of short lines costs a few scans
    of its bytes, not an object per line."""
    notes: list[str] = []
    skipped: list[int] = []

    def skip(first: int, end: int) -> None:
        skipped.extend(range(first, min(end, first + MAX_SKIPPED - len(skipped))))

    number = position = 0  # lines before ``position``; only lines that may be entries are looked at
    while (found := _MAY_BE_ENTRY.search(data, position)) is not None:
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        if end < 0:
            break  # the last line, without LF: torn
        line = number + data.count(b"\n", position, start) + 1
        skip(number + 1, line)
        note = entry_note(data[start:end])
        if note is not None:
            notes.append(note)
        else:
            skip(line, line + 1)
        number, position = line, end + 1
    lines = number + data.count(b"\n", position) + (0 if data.endswith(b"\n") or not data else 1)
    skip(number + 1, lines + 1)  # the lines after the last entry, a torn last line among them
    return notes, tuple(skipped)


_ENTRY_HEAD: Final = b'{"note": '
"""How every line the writer appends to ``checkpoints`` begins (``json.dumps`` of ``{"note": ...}``)."""


def object_line(line: bytes) -> dict[str, Any]:
    """One JSON-object line, ``{}`` when it is not one."""
    try:
        value = loads_strict(line, max_depth=_MAX_LINE_DEPTH)
    except (StrictJSONError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def entry_note(line: bytes) -> str | None:
    """The note of one ``checkpoints`` line, None when it is not an entry. A line as the writer writes it
    (``{"note": <one JSON string>}``, :func:`entry_line`) is decoded as that one string; any other line
    that may name the key (``note``, or an escape that could spell it) goes through the strict parser
    (both give the same note)."""
    if _MAY_BE_ENTRY.search(line) is None:
        return None
    if line.startswith(_ENTRY_HEAD) and line.endswith(b"}"):
        with contextlib.suppress(orjson.JSONDecodeError):
            note = orjson.loads(line[len(_ENTRY_HEAD) : -1])
            if isinstance(note, str):
                return note
    note = object_line(line).get("note")
    return note if isinstance(note, str) else None


def entry_line(note: str) -> str:
    """The line the writer appends to ``checkpoints`` for ``note`` (without its LF)."""
    return json.dumps({"note": note}, ensure_ascii=True)
