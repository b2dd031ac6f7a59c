"""Every reader of lines goes through ``lines``: where a copy read differently, the one reader's
behaviour is what each caller gets (a torn tail is never a line; an over-long line is passed over
whole, never in pieces)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.chain import MAX_LINE_BYTES, iter_lines
from otel_route_shadow.chain.quarantine import complete_lines
from otel_route_shadow.logstore.note_file import entry_note, object_line
from otel_route_shadow.logstore.store import CHECKPOINTS_FILE, LogStore


def test_iter_lines_passes_over_a_torn_tail_longer_than_a_record(tmp_path: Path) -> None:
    # The chain reader's own block loop raised "line 2 exceeds" for a torn tail over the limit.
    path = tmp_path / "chain.jsonl"
    path.write_bytes(b"first\n" + b"x" * (MAX_LINE_BYTES + 10))
    assert list(iter_lines(path)) == [(1, b"first")]
    assert list(iter_lines(path, skip_oversize=True)) == [(1, b"first")]


def test_complete_lines_never_yield_the_remainder_of_an_over_long_line(tmp_path: Path) -> None:
    # The quarantine's block loop dropped an over-long line's first 4 MiB and gave its rest as a line,
    # so the spill check's running offsets went wrong after it.
    path = tmp_path / "chain.jsonl"
    long = b"y" * (MAX_LINE_BYTES + (1 << 20) + 10)
    path.write_bytes(b"a\n" + long + b"\nb\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert list(complete_lines(fd, 0, path.stat().st_size)) == [(0, b"a"), (len(long) + 3, b"b")]
    finally:
        os.close(fd)


def test_newest_notes_skip_a_torn_last_line_as_notes_does(tmp_path: Path) -> None:
    # The directory's backward reader gave the bytes after the last LF as an entry when they parsed;
    # the forward reader (notes) counts them as torn.
    chain = tmp_path / "chain.jsonl"
    directory = LogStore(chain)
    os.makedirs(directory.path)
    first, torn = json.dumps({"note": "first\n"}), json.dumps({"note": "torn\n"})
    Path(directory.file(CHECKPOINTS_FILE)).write_text(f"{first}\n{torn}", encoding="utf-8")
    assert directory.notes().notes == ["first\n"]
    assert list(directory.newest_notes()) == ["first\n"]


_LINE_PIECES = [
    b'{"note": ',
    b'"',
    b"\\",
    b"u",
    b"d800",
    b"dc00",
    b"n",
    b", ",
    b'"note"',
    b'"\\u006eote"',  # the key, escaped: the fast path must not pass it over
    b'"\\u006Eo\\u0074e"',
    b": ",
    b"}",
    b" ",
    b"\xff",
    b"\x01",
    b"a",
]


@settings(max_examples=500, deadline=None)
@given(st.text(), st.lists(st.sampled_from(_LINE_PIECES), max_size=12))
def test_a_checkpoints_line_reads_as_the_strict_parser_reads_it(note: str, pieces: list[bytes]) -> None:
    # Lines as the writer writes them are decoded as one JSON string (fast), every other line by the
    # strict parser: both must give the same note, or none, for any line.
    for line in (json.dumps({"note": note}).encode(), b"".join(pieces)):
        strict = object_line(line).get("note")
        assert entry_note(line) == (strict if isinstance(strict, str) else None)


def test_a_checkpoints_line_with_two_notes_or_a_lone_surrogate_gives_no_note() -> None:
    assert entry_note(b'{"note": "a", "note": "b"}') is None
    assert entry_note(b'{"note": "\\ud800"}') is None
    assert entry_note(b'{"note": "a"} ') == "a"  # not as the writer writes it: the strict parser reads it
    assert entry_note(b'{"note": "\\u2014 w\\n"}') == "\u2014 w\n"
