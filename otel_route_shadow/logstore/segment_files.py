"""The files the checkpointer reads a chain from: the live file ``X.jsonl`` and the closed segments in
``X.jsonl.segments/`` (docs/chain-format.md section 14).

A segment is named by its first seq; the live file's is the seq of its first record (0 for a chain
never cut). Each file is opened once per checkpoint call, refusing anything but a regular file.
Positions are chain-wide (:meth:`SegmentFiles.start`): a file's bytes count after those of every file
before it, the segments a prune removed included, as the ``pruned`` file records their sizes.
"""

from __future__ import annotations

import contextlib
import io
import os

from otel_route_shadow.chain import (
    ANCHOR_KIND,
    SEGMENTS_SUFFIX,
    ChainFormatError,
    chain_segments,
    first_record,
    same_value,
    segment_name,
)
from otel_route_shadow.files import open_regular
from otel_route_shadow.lines import FileHandle
from otel_route_shadow.logstore.catchup import Cursor
from otel_route_shadow.logstore.pruned import Pruned
from otel_route_shadow.logstore.store import LogStore, StateError, TreeHint
from otel_route_shadow.tlog import TileError, TileReader, TreeBuilder

__all__ = ["SegmentFiles"]


class SegmentFiles:
    """The chain's files for one checkpoint call (a context manager closing them); ``live_first`` is
    the first seq of the live file, ``pruned`` what the ``pruned`` file of ``store`` says was pruned
    (None: nothing, or a file that cannot be read). ``FileNotFoundError`` when there is no live file."""

    def __init__(self, chain_path: str, store: LogStore | None = None) -> None:
        self.chain_path = chain_path
        self._store = store
        self.pruned: Pruned | None = None
        if store is not None:
            # One that cannot be read is read as nothing pruned: a pruned segment is then missing.
            with contextlib.suppress(StateError, OSError):
                self.pruned = store.read_pruned()
        self.live = io.FileIO(open_regular(chain_path), "rb")
        fd = self.live.fileno()
        try:
            first = first_record(fd, os.fstat(fd).st_size)
        except ChainFormatError:
            first = None  # the catch-up finds the line broken
        self.live_first = 0 if first is None else first.seq
        self._closed: dict[int, io.FileIO] = {}

    def open(self, segment: int) -> tuple[FileHandle, int]:
        """The file holding the segment that starts at seq ``segment`` and its size
        (``FileNotFoundError`` when it does not exist)."""
        handle = self._file(segment)
        return handle, os.fstat(handle.fileno()).st_size

    def _file(self, segment: int) -> io.FileIO:
        handle = self.live if segment == self.live_first else self._closed.get(segment)
        if handle is None:
            path = os.path.join(self.chain_path + SEGMENTS_SUFFIX, segment_name(segment))
            handle = self._closed[segment] = io.FileIO(open_regular(path), "rb")
        return handle

    def start(self, segment: int) -> int:
        """The chain-wide position of the first byte of the segment that starts at seq ``segment``: the
        sizes of the pruned segments before it (as recorded) and of the closed segments on disk.

        The closed segments are listed before the ``pruned`` file is read again: a prune records a
        segment there before it removes the file, so each one listed is kept or below the minimum
        index read after, and each one gone meanwhile is recorded (neither missed nor counted twice)."""
        sizes: list[tuple[int, int]] = []
        for closed in chain_segments(self.chain_path)[:-1]:
            if closed.first is not None and closed.first < segment:
                with contextlib.suppress(FileNotFoundError):  # pruned since it was listed
                    # a link's own size: segments are opened never following one
                    sizes.append((closed.first, os.lstat(closed.path).st_size))
        pruned = self._pruned_now()
        floor = 0 if pruned is None else pruned.min_index
        total = 0 if pruned is None else sum(s.bytes for s in pruned.segments if s.end <= segment)
        return total + sum(size for first, size in sizes if first >= floor)

    def _pruned_now(self) -> Pruned | None:
        """What the ``pruned`` file says now (what it said when these files were opened, when it cannot
        be read)."""
        with contextlib.suppress(StateError, OSError):
            return self.pruned if self._store is None else self._store.read_pruned()
        return self.pruned

    def pruned_since(self) -> bool:
        """Whether the ``pruned`` file changed since these files were opened (a prune committed)."""
        return self._pruned_now() != self.pruned

    def was_pruned(self, segment: int, end: int) -> int | None:
        """The recorded size of the pruned segment that starts at seq ``segment`` and ends at seq
        ``end``; None when no such segment was pruned."""
        if self.pruned is None:
            return None
        found = [s.bytes for s in self.pruned.segments if s.first == segment and s.end == end]
        return found[0] if found else None

    def link_past_pruned(self, hint: TreeHint) -> bytes | None:
        """The record hash of the last line of a pruned segment the hint ends (at its end; the next
        segment begins at the hint's size), from the anchor that begins the next segment: its
        ``prev_hash``, when the anchor names that segment, its last seq and size, and the SHA-256 the
        ``pruned`` file recorded. None when any of it does not hold."""
        segment = hint.segment or 0
        size = self.was_pruned(segment, hint.size)
        if size != hint.offset or self.pruned is None:
            return None
        recorded = next(s for s in self.pruned.segments if s.first == segment)
        try:
            fd = self._file(hint.size).fileno()
            anchor = first_record(fd, os.fstat(fd).st_size)
        except (FileNotFoundError, ChainFormatError):
            return None
        payload = {} if anchor is None else anchor.payload
        holds = (
            anchor is not None
            and anchor.seq == hint.size
            and payload.get("kind") == ANCHOR_KIND
            and payload.get("segment") == segment_name(segment)
            and same_value(payload.get("last_seq"), hint.size - 1)
            and same_value(payload.get("bytes"), size)
            and same_value(payload.get("sha256"), recorded.sha256)
            and same_value(payload.get("last_record_hash"), anchor.prev_hash)
        )
        return anchor.prev_hash.encode("ascii") if holds and anchor is not None else None

    def first_kept(self, reader: TileReader) -> Cursor:
        """Where a rebuild of the tree from the chain starts: the empty tree, or for a pruned chain the
        tree of its minimum index m, its right edge read from ``reader``'s authenticated tiles (a signed
        tree of at least m leaves) and the link to record m - 1 from the anchor that begins the first file
        kept (:meth:`link_past_pruned`). The empty tree when any of it cannot be had (the first file
        kept is then missing, and the chain is found cut)."""
        pruned = self.pruned
        m = 0 if pruned is None else pruned.min_index
        last = None if pruned is None else next((s for s in pruned.segments if s.end == m), None)
        if last is None or not 0 < m <= reader.size:
            return Cursor(TreeBuilder())
        try:
            edge = reader.edge(m)
            leaf = reader.node(0, m - 1)
        except (TileError, ValueError):
            return Cursor(TreeBuilder())
        hint = TreeHint(
            size=m, offset=last.bytes, last_start=0, last_leaf=leaf.hex(), segment=last.first or None
        )
        prev = self.link_past_pruned(hint)
        if prev is None:
            return Cursor(TreeBuilder())
        return Cursor(TreeBuilder(m, edge), 0, 0, leaf, prev, [], m, hint, self.start(m))

    def __enter__(self) -> SegmentFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.close()
        for handle in self._closed.values():
            handle.close()
        self._closed.clear()
