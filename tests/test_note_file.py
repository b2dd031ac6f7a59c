"""``logstore.read_note_file`` of a ``checkpoints`` file: the notes of its entry lines and the numbers of the
lines that are not entries, read without a Python object per line (a file of millions of short lines held
one for each: docs/benchmarks.md, "Hostile files on the log's disk")."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.logstore import read_note_file
from otel_route_shadow.logstore.note_file import MAX_SKIPPED, entry_note

_LINES = st.sampled_from(
    [
        b'{"note": "a\\n\\u2014 k sig\\n"}',  # as the writer writes it
        b'{"note":"b\\n"}',
        b'{"\\u006eote": "c escaped key\\n"}',  # an entry all the same
        b'{"note": 7}',  # names the key, not an entry
        b"{}",
        b"",
        b'torn {"no',
        b'{"other": "note"}',
        b"\\u0000",
    ]
)


def _reference(data: bytes) -> tuple[list[str], tuple[int, ...]]:
    """The notes and skipped line numbers, one line at a time (what the reader did before)."""
    notes: list[str] = []
    skipped: list[int] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines[:-1], start=1):
        note = entry_note(line)
        if note is None:
            skipped.append(number)
        else:
            notes.append(note)
    if lines[-1]:
        skipped.append(len(lines))
    return notes, tuple(skipped[:MAX_SKIPPED])


@given(st.lists(_LINES, max_size=40), st.booleans())
@settings(max_examples=300)
def test_the_notes_and_skipped_lines_are_those_of_reading_line_by_line(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], torn: bool
) -> None:
    data = b"".join(line + b"\n" for line in lines) + (b'{"note": "torn' if torn else b"")
    path = tmp_path_factory.mktemp("notes") / "checkpoints"
    path.write_bytes(b"{}\n" + data)  # a checkpoints file: its first line an object
    read = read_note_file(path)
    assert (read.notes, read.skipped) == _reference(path.read_bytes())


def test_a_file_of_millions_of_short_lines_is_read_in_about_its_own_size(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints"
    entry = json.dumps({"note": "origin\n1\nroot\n\n\u2014 k sig\n"}).encode()
    path.write_bytes(b"{}\n" * 3_000_000 + entry + b"\n")
    tracemalloc.start()
    try:
        read = read_note_file(path, newest=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read.notes == ["origin\n1\nroot\n\n\u2014 k sig\n"]
    assert read.skipped == tuple(range(1, MAX_SKIPPED + 1))
    assert peak < 3 * path.stat().st_size, f"{peak:,} bytes at the peak"  # the file read, and one copy
