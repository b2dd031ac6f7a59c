"""Catching the tree up with the chain: the writer's cursor, extended a bounded slice at a time.

The :class:`Cursor` is what the writer trusts: a right edge it built itself from the chain's lines, or
resumed after authenticating it against a signed checkpoint; the byte offset of the next line; the
start, leaf hash and record hash of the last line (the link the next line must carry). Before a line
becomes a leaf its record hash and its link are checked with the one exact check of ``links``; a line
that fails stops the extension there (``Extension.broken``). :func:`still_holds` checks, before each
extension, that the chain still holds the cursor's last line where it was.

Work is bounded: at most ``max_leaves`` lines and the bytes up to ``end`` per call, and ``pause`` is
called after every slice of ``slice_leaves`` lines, so a host thread waiting for the interpreter lock
waits for one slice at most. Lines the caller appended itself (``chain.WrittenLine``: offset, bytes
and record hash, known where the line was built) are taken as given, never read again: their record
hashes are not checked (the caller computed them), their links are (each must link to the line before,
whoever wrote it), and their leaf hashes are computed here, from memory. A given line that does not link
(one the caller kept from a file a cut closed, at an offset the live file has too) is not used: the
lines from there on are read from the chain and checked.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

from otel_route_shadow.chain import WrittenLine
from otel_route_shadow.lines import FileHandle, iter_blocks
from otel_route_shadow.logstore.links import GENESIS, line_holds, record_hash_of
from otel_route_shadow.logstore.store import TreeHint
from otel_route_shadow.tlog import TILE_WIDTH, TreeBuilder, leaf_hash

__all__ = ["DEFAULT_SLICE_LEAVES", "Cursor", "Extension", "extend", "still_holds"]

DEFAULT_SLICE_LEAVES: Final = 64
"""Lines checked and hashed between two calls of ``pause`` (a line costs two SHA-256 of its bytes)."""
_SLICE_BYTES: Final = 256 * 1024
"""Bytes read at a time."""


@dataclasses.dataclass(slots=True)
class Cursor:
    """The tree the writer trusts and where it ends in the chain (see the module docstring), and the
    offsets of the lines ``256 k`` it passed (``(k, offset)``, for the entries index).

    Offsets are within the file of the segment whose first seq is ``segment`` (0: the chain's first
    file, the whole chain when it was never cut), which begins at chain-wide position ``base``; the
    offsets of ``bundle_starts`` are chain-wide (``base`` + offset). At the start of a segment
    (``offset`` 0, the last line in the segment before) ``boundary`` is the hint of where the tree ended
    in that one."""

    builder: TreeBuilder
    offset: int = 0
    last_start: int = 0
    last_leaf: bytes = b""
    prev: bytes = GENESIS
    bundle_starts: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    segment: int = 0
    boundary: TreeHint | None = None
    base: int = 0

    @property
    def size(self) -> int:
        return self.builder.size

    def hint(self) -> TreeHint | None:
        """The ``state`` hint for this tree (None for the empty tree)."""
        if self.size == 0:
            return None
        if self.offset == 0:
            return self.boundary
        return TreeHint(
            size=self.size,
            offset=self.offset,
            last_start=self.last_start,
            last_leaf=self.last_leaf.hex(),
            segment=self.segment or None,
        )

    def next_segment(self) -> None:
        """The cursor reached the end of a closed segment: the next line is the first of the segment
        that starts at seq ``size``, at its offset 0 (its link to this cursor's last line is checked as
        every line's is)."""
        self.boundary = self.hint()
        self.base += self.offset
        self.segment, self.offset, self.last_start = self.size, 0, 0

    def add(self, leaves: Sequence[bytes], starts: Sequence[int], end: int, prev: bytes) -> None:
        """Append leaves: ``starts`` are their lines' offsets, ``end`` the offset after the last line,
        ``prev`` the last line's record hash."""
        first = self.builder.size
        k = -(-first // TILE_WIDTH)
        while k * TILE_WIDTH < first + len(leaves):
            self.bundle_starts.append((k, self.base + starts[k * TILE_WIDTH - first]))
            k += 1
        self.builder.extend(leaves)
        self.offset, self.last_start, self.last_leaf, self.prev = end, starts[-1], leaves[-1], prev


@dataclasses.dataclass(frozen=True, slots=True)
class Extension:
    """One catch-up: ``more`` when lines were left for the next call; ``broken`` the seq of the first
    line whose record hash or link fails (neither it nor any line after it became a leaf)."""

    more: bool = False
    broken: int | None = None


def still_holds(chain: FileHandle, cursor: Cursor, end: int) -> str | None:
    """None when the chain (``end`` bytes) still holds the cursor's last line where it was; else
    ``truncated`` (shorter than the cursor's offset) or ``rewritten`` (another line there)."""
    if cursor.size == 0 or cursor.offset == 0:
        return None  # nothing of the tree in this file: the first line's link is checked instead
    if end < cursor.offset:
        return "truncated"
    chain.seek(cursor.last_start)
    line = chain.read(cursor.offset - cursor.last_start) or b""
    if not line.endswith(b"\n") or leaf_hash(line[:-1]) != cursor.last_leaf:
        return "rewritten"
    return None


def extend(
    chain: FileHandle,
    cursor: Cursor,
    end: int,
    max_leaves: int,
    *,
    slice_leaves: int = DEFAULT_SLICE_LEAVES,
    pause: Callable[[], None] = lambda: None,
    appended: Sequence[WrittenLine] = (),
) -> Extension:
    """Add the complete lines between the cursor's offset and ``end`` (at most ``max_leaves``) as
    leaves, each after its record hash and link are checked; stop before a line that fails."""
    own = {line.offset: line for line in appended}
    offsets = sorted(own)
    budget = max_leaves
    while budget > 0 and cursor.offset < end:
        mine = own.get(cursor.offset)
        if mine is not None:
            taken = _take_own(cursor, own, end, min(budget, slice_leaves))
            if taken == 0:
                if mine.offset + mine.length > end:
                    break  # beyond what this call may take
                # Not the line there (one kept from a file a cut closed, at the same offset): the
                # chain's lines are read and checked instead.
                own, offsets = {}, []
                continue
            budget -= taken
            pause()
            continue
        after = bisect.bisect_right(offsets, cursor.offset)
        stop = min(end, offsets[after]) if after < len(offsets) else end
        taken, broken = _read(chain, cursor, stop, budget, slice_leaves, pause)
        if broken:
            return Extension(broken=cursor.size)
        if taken == 0:
            break  # no complete line before ``stop``
        budget -= taken
    return Extension(more=budget == 0 and cursor.offset < end)


def _take_own(cursor: Cursor, own: dict[int, WrittenLine], end: int, most: int) -> int:
    """Add up to ``most`` consecutive lines of this process's own, as given, while each links to the
    line before."""
    leaves: list[bytes] = []
    starts: list[int] = []
    offset, prev = cursor.offset, cursor.prev.decode("ascii")
    last = None
    while (
        len(leaves) < most
        and (line := own.get(offset)) is not None
        and offset + line.length <= end
        and line.prev_hash == prev
    ):
        leaves.append(line.leaf_hash())
        starts.append(offset)
        offset, last, prev = offset + line.length, line, line.record_hash
    if last is not None:
        cursor.add(leaves, starts, offset, last.record_hash.encode("ascii"))
    return len(leaves)


def _read(
    chain: FileHandle,
    cursor: Cursor,
    stop: int,
    budget: int,
    slice_leaves: int,
    pause: Callable[[], None],
) -> tuple[int, bool]:
    """Read, check and add lines from the cursor's offset up to ``stop``, a slice at a time; returns
    how many were added and whether a line failed."""
    taken = 0
    for _after, block in iter_blocks(chain, cursor.offset, stop, _SLICE_BYTES):
        lines = block.split(b"\n")
        at = 0
        while at < len(lines):
            piece = lines[at : at + min(slice_leaves, budget - taken)]
            holding = _holding(piece, cursor.prev, cursor.size)
            if holding:
                good = piece[:holding]
                starts = []
                position = cursor.offset
                for line in good:
                    starts.append(position)
                    position += len(line) + 1
                cursor.add([leaf_hash(line) for line in good], starts, position, record_hash_of(good[-1]))
                taken += holding
            if holding < len(piece):
                return taken, True
            at += len(piece)
            pause()
            if taken == budget:
                return taken, False
    return taken, False


def _holding(lines: list[bytes], prev: bytes, seq: int) -> int:
    """How many of ``lines``, in order, are records ``seq``, ``seq + 1``, ... that hold their own record
    hash and link (the first to ``prev``)."""
    for count, line in enumerate(lines):
        if not line_holds(line, prev, seq + count):
            return count
        prev = record_hash_of(line)
    return len(lines)
