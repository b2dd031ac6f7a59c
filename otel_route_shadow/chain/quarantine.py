"""The torn-tail policy: bytes after the chain's last newline are moved aside, and the chain says so.

A writer killed mid-``write(2)`` leaves at most one torn final line. The next append neither builds on
those bytes nor hides them (``docs/chain-format.md`` section 9): it copies them to
``<chain>.torn-<offset>-<sha16>`` beside the chain, truncates the chain to its last newline, appends a
``chain-quarantine`` event, and only then its own record. Each step is idempotent and resumable, keyed
by a small marker file (``<chain>.quarantine-pending``) that lives only while the procedure runs, so a
crash *during* the quarantine is finished by whoever appends next. The caller holds the chain's lock
throughout and supplies how an event is written (the writer's own line path).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import orjson

from otel_route_shadow.chain.cut import first_record
from otel_route_shadow.chain.errors import ChainCorruptError, ChainFormatError
from otel_route_shadow.chain.head import BLOCK_BYTES, tail_head
from otel_route_shadow.chain.reader import iter_lines_from
from otel_route_shadow.chain.record import MAX_LINE_BYTES, QUARANTINE_KIND, ChainHead, parse_record_line
from otel_route_shadow.files import FileRefused, fsync_directory, range_blocks, read_regular, write_atomic
from otel_route_shadow.lines import first_line

__all__ = ["CHAIN_FILE_MODE", "EventWriter", "TailQuarantine", "complete_lines", "remove_file"]

CHAIN_FILE_MODE: Final = 0o640
"""Mode of the chain and of the files the writer creates beside it."""

MARKER_BYTES: Final = 1 << 20
"""Largest quarantine marker read (a marker is a few hundred bytes per owed event)."""

EventWriter = Callable[[int, ChainHead | None, int, Mapping[str, Any]], tuple[ChainHead, int]]
"""Appends one chain event (a payload) at ``size`` after ``head`` on the descriptor, durably;
returns the new head and size."""


class TailQuarantine:
    """The torn-tail policy for the chain at ``path``.

    ``write_event`` appends an event and syncs it; ``lower_watermark(offset)`` tells the group commit
    that the file was truncated to ``offset``.
    """

    def __init__(self, path: str, write_event: EventWriter, lower_watermark: Callable[[int], None]) -> None:
        self._dir = os.path.dirname(os.path.abspath(path))
        self._name = os.path.basename(path)
        self.marker = path + ".quarantine-pending"
        self._write_event = write_event
        self._lower_watermark = lower_watermark
        self.quarantines = 0
        """Torn tails moved to quarantine."""

    def pending(self) -> bool:
        """Whether an interrupted quarantine waits to be finished (its marker exists)."""
        return os.path.exists(self.marker)

    def quarantine(
        self, fd: int, head: ChainHead | None, start: int, size: int, owed: list[dict[str, Any]]
    ) -> tuple[ChainHead, int]:
        """Move the torn bytes ``[start, size)`` to a quarantine file and record that in the chain.

        ``owed`` are events of an earlier, interrupted quarantine that the chain does not have yet; the
        marker carries them so that a crash here cannot lose them.
        """
        sha = _digest_range(fd, start, size)
        name = f"{self._name}.torn-{_segment_part(fd, start)}{start}-{sha[:16]}"
        write_atomic(
            os.path.join(self._dir, name), range_blocks(fd, start, size, BLOCK_BYTES), mode=CHAIN_FILE_MODE
        )
        marker = {"offset": start, "length": size - start, "sha256": sha, "file": name, "owed": owed}
        write_atomic(self.marker, orjson.dumps(marker), mode=CHAIN_FILE_MODE)
        self.quarantines += 1
        return self._finish(fd, head, marker)

    def resume(self, fd: int, size: int) -> tuple[list[dict[str, Any]], int]:
        """A previous appender died inside the quarantine procedure: finish it.

        Returns the quarantine events the chain still lacks and that the caller must append (after
        quarantining a torn tail, if there is one, with :meth:`record_owed`), and the current size.
        """
        try:
            marker = orjson.loads(read_regular(self.marker, MARKER_BYTES))
            events = [marker, *marker.get("owed", [])]
            for event in events:
                quarantine_event(event)
            start = int(marker["offset"])
        except FileNotFoundError:
            return [], size
        except (FileRefused, orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ChainCorruptError(f"{self.marker}: unreadable quarantine marker ({exc})") from None
        if size == start:
            # Crashed after the truncation, before the event.
            head, _ = tail_head(fd, start)
            _, size = self._finish(fd, head, marker)
            return [], size
        if size > start and first_line(fd, start, size, MAX_LINE_BYTES) is None:
            if _digest_range(fd, start, size) == marker["sha256"]:
                # Crashed before the truncation: the torn bytes are still in place.
                head, _ = tail_head(fd, start)
                _, size = self._finish(fd, head, marker)
                return [], size
            # Other bytes than the marker describes: an event write was itself torn by a second crash.
            # The caller quarantines those bytes and then appends every event still owed.
            return events, size
        present = _events_since(fd, start, size)
        owed = [event for event in events if event["sha256"] not in present]
        if not owed:
            remove_file(self.marker, self._dir)
        return owed, size

    def record_owed(
        self, fd: int, head: ChainHead | None, size: int, owed: list[dict[str, Any]]
    ) -> tuple[ChainHead | None, int]:
        """Append the events :meth:`resume` found owed, then remove the marker."""
        for event in owed:
            head, size = self._write_event(fd, head, size, quarantine_event(event))
        remove_file(self.marker, self._dir)
        return head, size

    def _finish(self, fd: int, head: ChainHead | None, marker: dict[str, Any]) -> tuple[ChainHead, int]:
        start = int(marker["offset"])
        os.ftruncate(fd, start)
        os.fsync(fd)
        self._lower_watermark(start)
        size = start
        for event in (marker, *marker.get("owed", ())):
            head, size = self._write_event(fd, head, size, quarantine_event(event))
        remove_file(self.marker, self._dir)
        assert head is not None
        return head, size


def _segment_part(fd: int, size: int) -> str:
    """``s<first seq>-`` for a live file that begins a later segment (its first record's seq > 0), so that
    offsets, which start again in each segment, name one torn tail of the chain; "" for the chain's first
    file (the name a chain never cut always had)."""
    try:
        first = first_record(fd, size)
    except ChainFormatError:
        return ""
    return f"s{first.seq}-" if first is not None and first.seq > 0 else ""


def quarantine_event(marker: Mapping[str, Any]) -> dict[str, Any]:
    """The ``chain-quarantine`` event for a marker entry (``docs/chain-format.md`` section 7)."""
    return {
        "kind": QUARANTINE_KIND,
        "reason": "torn-tail",
        "offset": int(marker["offset"]),
        "length": int(marker["length"]),
        "sha256": str(marker["sha256"]),
        "file": str(marker["file"]),
    }


def remove_file(path: str, directory: str) -> None:
    """Remove ``path`` durably (the directory synced); absent is fine."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    fsync_directory(directory)


def complete_lines(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of the complete lines (without LF) of ``[start, end)``, in bounded blocks; a
    line longer than :data:`MAX_LINE_BYTES` is passed over whole, never buffered."""
    with io.FileIO(fd, "rb", closefd=False) as handle:
        for offset, line in iter_lines_from(handle, start, end):
            if line is not None:
                yield offset, line


def _digest_range(fd: int, start: int, end: int) -> str:
    digest = hashlib.sha256()
    for block in range_blocks(fd, start, end, BLOCK_BYTES):
        digest.update(block)
    return digest.hexdigest()


def _events_since(fd: int, start: int, size: int) -> set[str]:
    """``sha256`` of every quarantine event among the complete lines from ``start``: normally a few
    lines, since a marker lives only while a quarantine is in progress."""
    found: set[str] = set()
    for _, line in complete_lines(fd, start, size):
        if QUARANTINE_KIND.encode() not in line:
            continue
        with contextlib.suppress(ChainFormatError):
            payload = parse_record_line(line).payload
            sha = payload.get("sha256")
            if payload.get("kind") == QUARANTINE_KIND and isinstance(sha, str):
                found.add(sha)
    return found
