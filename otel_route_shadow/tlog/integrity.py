"""Passes over a chain's bytes for the verifiable log: leaf hashes, and record hashes and links.

The leaf pass (:func:`scan_leaves`) hashes each byte once: per line ``SHA-256(0x00 || line)``, fed from
a memoryview of the block (no copy of the line), and remembers where each block starts so that a line's
offset can be found again later. The link pass (:func:`first_broken_seq`) checks, from a given seq on,
each line's own record hash and its link without parsing JSON (the exact check is ``links``; a fast
path checks a whole block at C level and falls back to the exact check line by line when it does not
hold). ``verify_against_checkpoints`` runs the link pass only over the lines no authenticated checkpoint
covers (docs/chain-format.md section 13.7); :func:`scan_chain` runs both over the whole chain.

With ``jobs > 1`` the file is split at line boundaries and the segments are hashed in worker
processes; leaf hashes do not depend on position, so segments need no knowledge of each other until
their results are joined in order.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import io
import operator
import os
import re
from concurrent.futures import Future

from otel_route_shadow.files import open_regular
from otel_route_shadow.lines import BLOCK_BYTES, complete_end, iter_blocks, line_segments, read_line_blocks
from otel_route_shadow.processes import SEGMENTS_PER_JOB, pool, run_segments
from otel_route_shadow.tlog.links import (
    GENESIS,
    HASH_KEY,
    line_holds,
    prev_of,
    record_hash_holds,
    record_hash_of,
)
from otel_route_shadow.tlog.merkle import TreeLevels, parent_row

__all__ = [
    "ChainScan",
    "first_broken_seq",
    "leaf_hashes",
    "scan_chain",
    "scan_leaves",
    "scan_with_tree",
]

_MIN_PARALLEL_BYTES = 4 * BLOCK_BYTES
_CHUNK_LEVELS = 14
"""With ``jobs > 1``, the tree's levels 1 to 14 are built in the workers, over chunks of ``2**14`` leaves."""
_PREV_RE = re.compile(rb',"prev_hash":"([0-9a-f]{64})","redactions":\[')
_HEX = operator.methodcaller("hexdigest")
_LEAF_PREFIX = hashlib.sha256(b"\x00")


@dataclasses.dataclass(frozen=True, slots=True)
class ChainScan:
    """The chain's leaf hashes (``leaves``: 32 bytes each, in order), where the leaf pass's blocks
    start, and, when the links were checked (:func:`scan_chain`), the first broken line."""

    leaves: bytes
    size: int
    first_broken_seq: int | None = None
    block_starts: tuple[tuple[int, int], ...] = ()
    """``(byte offset, seq)`` of the first line of each block read, in order: finds a line's offset."""
    end: int = 0
    """The byte offset just after the last complete line (a torn tail is not scanned)."""

    def leaf(self, index: int) -> bytes:
        return self.leaves[index * 32 : index * 32 + 32]


# --- the leaf pass ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Hashed:
    leaves: bytes
    blocks: list[tuple[int, int]]  # (byte offset, lines) of each block, in order


def _open(path: str) -> io.FileIO:
    """The chain, unbuffered, opened without blocking on a FIFO and refused unless a regular file."""
    return io.FileIO(open_regular(path), "rb")


def _hash_segment(path: str, start: int, end: int) -> _Hashed:
    """Leaf hashes of the lines in ``[start, end)`` (which begins and ends at line boundaries)."""
    out: list[bytes] = []
    blocks: list[tuple[int, int]] = []
    with _open(path) as handle:
        for offset, buffer, stop in read_line_blocks(handle, start, end):
            leaves = leaf_hashes(buffer, stop)
            out.append(leaves)
            blocks.append((offset, len(leaves) // 32))
    return _Hashed(b"".join(out), blocks)


def _complete_end(path: str) -> int:
    with _open(path) as handle:
        return complete_end(handle)


def leaf_hashes(block: bytes | bytearray, stop: int | None = None) -> bytes:
    """``SHA-256(0x00 || line)`` of each line of ``block[:stop]`` (lines joined by LF), concatenated.

    Each line is fed to a copy of a hash already holding ``0x00`` through a memoryview, so no line is
    copied: about 2x the cost of hashing the block's bytes once, where splitting the block (which
    copies every line) cost about 3.5x.
    """
    stop = len(block) if stop is None else stop
    view = memoryview(block)
    find, fresh = block.find, _LEAF_PREFIX.copy
    out: list[bytes] = []
    append = out.append
    start, end = 0, find(b"\n", 0, stop)
    while end >= 0:
        digest = fresh()
        digest.update(view[start:end])
        append(digest.digest())
        start, end = end + 1, find(b"\n", end + 1, stop)
    digest = fresh()
    digest.update(view[start:stop])
    append(digest.digest())
    return b"".join(out)


def scan_leaves(path: str, jobs: int = 1, *, min_parallel_bytes: int = _MIN_PARALLEL_BYTES) -> ChainScan:
    """Leaf hashes of every complete line (record hashes and links are not checked here).

    Chains smaller than ``min_parallel_bytes`` are scanned in this process whatever ``jobs`` says."""
    end = _complete_end(path)
    return _joined(
        run_segments(_hash_segment, path, 0, end, jobs, min_parallel_bytes=min_parallel_bytes), end
    )


def scan_with_tree(
    path: str,
    jobs: int = 1,
    *,
    min_parallel_bytes: int = _MIN_PARALLEL_BYTES,
    chunk_levels: int = _CHUNK_LEVELS,
) -> tuple[ChainScan, TreeLevels]:
    """:func:`scan_leaves` and the :class:`TreeLevels` over its leaves.

    With ``jobs > 1`` one pool of worker processes does both: as the leaf segments come back, in order,
    each chunk of ``2**chunk_levels`` leaves (aligned, so its nodes are nodes of the whole tree) is
    queued for its lower ``chunk_levels`` levels behind the segments still to hash; the few levels
    above are built here. What it buys: the tree is about a fifth of a one-process verify once each
    byte is hashed only once; left serial it capped ``jobs=2`` at about 1.5x of one, built in a second
    pool after the leaves at about 1.75x (bench row 6b); overlapping it with the leaf pass's tail
    removes that barrier and the second pool."""
    end = _complete_end(path)
    if jobs <= 1 or end < min_parallel_bytes:
        scan = _joined([_hash_segment(path, 0, end)], end)
        return scan, TreeLevels(scan.leaves)
    unit = 1 << chunk_levels
    parts: list[_Hashed] = []
    leaves = bytearray()
    chunks: list[Future[list[bytes]]] = []
    with _open(path) as handle:
        bounds = line_segments(handle, 0, end, jobs * SEGMENTS_PER_JOB)
    with pool(jobs) as executor:
        for future in [executor.submit(_hash_segment, path, a, b) for a, b in bounds]:
            parts.append(future.result())
            leaves += parts[-1].leaves
            while len(leaves) // 32 >= (len(chunks) + 1) * unit:
                at = len(chunks) * unit * 32
                chunks.append(executor.submit(_chunk_levels, leaves[at : at + unit * 32], chunk_levels))
        if len(leaves) > len(chunks) * unit * 32:  # the short last chunk
            chunks.append(executor.submit(_chunk_levels, leaves[len(chunks) * unit * 32 :], chunk_levels))
        rows = [future.result() for future in chunks]
    scan = _joined(parts, end)
    lower = [b"".join(r[h] for r in rows if h < len(r)) for h in range(chunk_levels)]
    return scan, TreeLevels(scan.leaves, lower)


def _joined(parts: list[_Hashed], end: int) -> ChainScan:
    starts: list[tuple[int, int]] = []
    seq = 0
    for part in parts:
        for offset, lines in part.blocks:
            starts.append((offset, seq))
            seq += lines
    return ChainScan(b"".join(p.leaves for p in parts), seq, None, tuple(starts), end)


def scan_chain(path: str, jobs: int = 1, *, min_parallel_bytes: int = _MIN_PARALLEL_BYTES) -> ChainScan:
    """Leaf hashes of every complete line, and the first seq whose record hash or link fails."""
    scan = scan_leaves(path, jobs, min_parallel_bytes=min_parallel_bytes)
    broken = first_broken_seq(path, scan, 0, jobs, min_parallel_bytes=min_parallel_bytes)
    return dataclasses.replace(scan, first_broken_seq=broken)


# --- the link pass ------------------------------------------------------------------------------------


def first_broken_seq(
    path: str,
    scan: ChainScan,
    start_seq: int = 0,
    jobs: int = 1,
    *,
    min_parallel_bytes: int = _MIN_PARALLEL_BYTES,
) -> int | None:
    """The first seq at or after ``start_seq`` whose record hash or link fails (None when all hold).

    Line ``start_seq``'s link is checked against the record hash line ``start_seq - 1`` carries (that
    line itself is not checked), or against ``GENESIS`` for seq 0."""
    if start_seq >= scan.size:
        return None
    offset, prev = _line_start_and_prev(path, scan, start_seq)
    segments = run_segments(
        _check_segment, path, offset, scan.end, jobs, min_parallel_bytes=min_parallel_bytes
    )
    return _first_broken(segments, start_seq, prev)


def _line_start_and_prev(path: str, scan: ChainScan, seq: int) -> tuple[int, bytes]:
    """The byte offset of line ``seq`` and the record hash of the line before it."""
    if seq == 0:
        return 0, GENESIS
    index = bisect.bisect_right(scan.block_starts, seq - 1, key=operator.itemgetter(1)) - 1
    offset, first = scan.block_starts[index]
    with os.fdopen(open_regular(path), "rb") as handle:
        handle.seek(offset)
        for _ in range(seq - 1 - first):
            handle.readline()
        line = handle.readline()
        return handle.tell(), record_hash_of(line[:-1])


@dataclasses.dataclass(frozen=True, slots=True)
class _Segment:
    lines: int
    first_bad: int  # local index of the first line whose own hash or link fails, -1 if none
    first_prev: bytes
    last_hash: bytes


@dataclasses.dataclass(slots=True)
class _Walk:
    count: int = 0
    first_bad: int = -1
    first_prev: bytes = b""
    last_hash: bytes = b""


def _check_segment(path: str, start: int, end: int) -> _Segment:
    """Record hashes and links of the lines in ``[start, end)``, block by block (the first line's
    link is reported as ``first_prev``, for the join to check)."""
    state = _Walk()
    with _open(path) as handle:
        for _after, block in iter_blocks(handle, start, end):
            lines = block.count(b"\n") + 1
            if state.first_bad < 0 and _block_holds(block, lines, state):
                if not state.count:
                    state.first_prev = prev_of(block.partition(b"\n")[0])
                state.count += lines
                continue
            _walk_lines(block, state)
    return _Segment(state.count, state.first_bad, state.first_prev, state.last_hash)


def _block_holds(block: bytes, lines: int, state: _Walk) -> bool:
    """The fast path for a block whose every record hash and link holds (else False: walk it line by line).

    Replacing ``,"record_hash":"`` with ``}\\n`` splits each line into its canonical body and its hash
    (a payload member of that name makes the count differ, and the block takes the slow path); the
    ``prev_hash`` members are the matches of one regular expression (checked by count the same way).
    """
    parts = block.replace(HASH_KEY, b"}\n").split(b"\n")
    if len(parts) != 2 * lines:
        return False
    tails = parts[1::2]
    computed = map(str.encode, map(_HEX, map(hashlib.sha256, parts[0::2])))
    if b'"}\n'.join(computed) + b'"}' != b"\n".join(tails):
        return False
    prevs = _PREV_RE.findall(block)
    hashes = [tail[:64] for tail in tails]
    if len(prevs) != lines or prevs[1:] != hashes[:-1]:
        return False
    if state.count and prevs[0] != state.last_hash:
        return False
    state.last_hash = hashes[-1]
    return True


def _walk_lines(block: bytes, state: _Walk) -> None:
    """The exact path, one line at a time: finds the first line whose record hash or link fails."""
    for line in block.split(b"\n"):
        if state.count == 0:
            state.first_prev = prev_of(line)
            if not record_hash_holds(line):
                state.first_bad = 0
        elif state.first_bad < 0 and not line_holds(line, state.last_hash):
            state.first_bad = state.count
        state.last_hash = record_hash_of(line)
        state.count += 1


def _first_broken(segments: list[_Segment], seq: int, prev: bytes) -> int | None:
    """Join the segments in order: the first line of each must link to the last of the one before."""
    for segment in segments:
        if segment.lines == 0:
            continue
        if segment.first_prev != prev:
            return seq
        if segment.first_bad >= 0:
            return seq + segment.first_bad
        seq += segment.lines
        prev = segment.last_hash
    return None


# --- the tree -----------------------------------------------------------------------------------------


def _chunk_levels(leaves: bytes | bytearray, levels: int) -> list[bytes]:
    """Levels 1 to ``levels`` over one aligned chunk of leaves (fewer for a short last chunk: the
    levels it has no complete node in)."""
    rows: list[bytes] = []
    row: bytes | bytearray = leaves
    while len(row) >= 64 and len(rows) < levels:
        row = parent_row(row)
        rows.append(row)
    return rows
