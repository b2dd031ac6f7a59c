"""One pass over a chain's bytes for the verifiable log: leaf hashes, record hashes and links.

Without parsing JSON: ``record_hash`` is always the line's last member (docs/chain-format.md section
5), so the record hash is recomputed from the line's bytes (``SHA-256(line[:-82] + "}")``) and
compared with the 64 hex digits it carries, and the link is the ``prev_hash`` member found from the
right (a payload's own strings cannot hold an unescaped quote, so the last ``,"prev_hash":"`` before
the record hash is the record's). A line that fails is reported by seq; the full verifier (``verify``
without checkpoints) names its reason class. With ``jobs > 1`` the file is split at line boundaries
and the segments are hashed in worker processes; leaf hashes do not depend on position, so segments
need no knowledge of each other until their results are joined in order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import multiprocessing
import operator
import os
import re
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from otel_route_shadow.tlog.leaves import BLOCK_BYTES, iter_blocks

__all__ = ["ChainScan", "scan_chain"]

_GENESIS = b"0" * 64
_TAIL = 82
_HASH_KEY = b',"record_hash":"'
_PREV_KEY = b',"prev_hash":"'
_SEGMENTS_PER_JOB = 4
_PREV_RE = re.compile(rb',"prev_hash":"([0-9a-f]{64})","redactions":\[')
_DIGEST = operator.methodcaller("digest")
_HEX = operator.methodcaller("hexdigest")


@dataclasses.dataclass(frozen=True, slots=True)
class ChainScan:
    """The chain's leaf hashes (``leaves``: 32 bytes each, in order) and its first broken line."""

    leaves: bytes
    size: int
    first_broken_seq: int | None

    def leaf(self, index: int) -> bytes:
        return self.leaves[index * 32 : index * 32 + 32]


@dataclasses.dataclass(frozen=True, slots=True)
class _Segment:
    leaves: bytes
    lines: int
    first_bad: int  # local index of the first line whose own hash or link fails, -1 if none
    first_prev: bytes
    last_hash: bytes


def _scan_segment(path: str, start: int, end: int) -> _Segment:
    """Hash the lines in ``[start, end)`` (which begins and ends at line boundaries), block by block."""
    out: list[bytes] = []
    state = _Walk()
    with open(path, "rb") as handle:
        for _after, block in iter_blocks(handle, start, end):
            leaves = _leaf_hashes(block)
            out.append(leaves)
            lines = len(leaves) // 32
            if state.first_bad < 0 and _block_holds(block, lines, state):
                state.first_prev = state.first_prev if state.count else _prev_of(block[: block.find(b"\n")])
                state.count += lines
                continue
            _walk_lines(block, state)
    return _Segment(b"".join(out), state.count, state.first_bad, state.first_prev, state.last_hash)


def _leaf_hashes(block: bytes) -> bytes:
    """Leaf hashes of a block's lines: one rewrite puts 0x00 after every LF, so each piece split off is
    already ``0x00 || line``, and the hashing runs in ``map`` without a Python step per line."""
    pieces = block.replace(b"\n", b"\n\x00").split(b"\n")
    pieces[0] = b"\x00" + pieces[0]  # the one line no LF precedes (copying a line, not the block)
    return b"".join(map(_DIGEST, map(hashlib.sha256, pieces)))


def _block_holds(block: bytes, lines: int, state: _Walk) -> bool:
    """The fast path for a block whose every record hash and link holds (else False: walk it line by line).

    Replacing ``,"record_hash":"`` with ``}\\n`` splits each line into its canonical body and its hash
    (a payload member of that name makes the count differ, and the block takes the slow path); the
    ``prev_hash`` members are the matches of one regular expression (checked by count the same way).
    """
    parts = block.replace(_HASH_KEY, b"}\n").split(b"\n")
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


@dataclasses.dataclass(slots=True)
class _Walk:
    count: int = 0
    first_bad: int = -1
    first_prev: bytes = b""
    last_hash: bytes = b""


def _walk_lines(block: bytes, state: _Walk) -> None:
    """The exact path, one line at a time: finds the first line whose record hash or link fails."""
    for line in block.split(b"\n"):
        ok = (
            line[-_TAIL : -_TAIL + 16] == _HASH_KEY
            and hashlib.sha256(line[:-_TAIL] + b"}").hexdigest().encode("ascii") == line[-66:-2]
        )
        prev = _prev_of(line)
        if state.count == 0:
            state.first_prev = prev
            if not ok:
                state.first_bad = 0
        elif state.first_bad < 0 and (prev != state.last_hash or not ok):
            state.first_bad = state.count
        state.last_hash = line[-66:-2]
        state.count += 1


def _prev_of(line: bytes) -> bytes:
    at = line.rfind(_PREV_KEY, 0, len(line) - _TAIL)
    return line[at + 14 : at + 78] if at >= 0 else b""


def _complete_end(path: str) -> int:
    """The offset just after the last LF (the torn tail is not scanned)."""
    with open(path, "rb") as handle:
        end = os.fstat(handle.fileno()).st_size
        position = end
        while position > 0:
            step = min(BLOCK_BYTES, position)
            handle.seek(position - step)
            cut = handle.read(step).rfind(b"\n")
            if cut >= 0:
                return position - step + cut + 1
            position -= step
    return 0


def _bounds(path: str, end: int, parts: int) -> list[tuple[int, int]]:
    cuts = [0]
    with open(path, "rb") as handle:
        for k in range(1, parts):
            handle.seek(max(cuts[-1], end * k // parts))
            data = handle.read(4 * 1024 * 1024 + 1)
            cut = data.find(b"\n")
            if cut >= 0 and handle.tell() - len(data) + cut + 1 < end:
                cuts.append(handle.tell() - len(data) + cut + 1)
    cuts.append(end)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def _mp_context() -> Any:
    """``fork`` in a single-threaded process on Linux (nothing re-imported), else ``spawn``."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def scan_chain(path: str, jobs: int = 1, *, min_parallel_bytes: int = 4 * BLOCK_BYTES) -> ChainScan:
    """Leaf hashes of every complete line, and the first seq whose record hash or link fails.

    Chains smaller than ``min_parallel_bytes`` are scanned in this process whatever ``jobs`` says."""
    end = _complete_end(path)
    if jobs <= 1 or end < min_parallel_bytes:
        segments = [_scan_segment(path, 0, end)]
    else:
        bounds = _bounds(path, end, jobs * _SEGMENTS_PER_JOB)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_mp_context()) as pool:
            futures = [pool.submit(_scan_segment, path, a, b) for a, b in bounds]
            segments = [f.result() for f in futures]
    return _join(segments)


def _join(segments: list[_Segment]) -> ChainScan:
    first_broken: int | None = None
    seq, prev = 0, _GENESIS
    for segment in segments:
        if segment.lines == 0:
            continue
        if first_broken is None:
            if segment.first_prev != prev:
                first_broken = seq
            elif segment.first_bad >= 0:
                first_broken = seq + segment.first_bad
        seq += segment.lines
        prev = segment.last_hash
    return ChainScan(b"".join(s.leaves for s in segments), seq, first_broken)


class TreeLevels:
    """Every complete node of the tree over ``leaves``, level by level (level h: nodes of 2**h leaves).

    About n extra hashes of 65 bytes for n leaves, computed level by level in tight loops; then the
    root at any size costs at most log2(n) hashes.
    """

    def __init__(self, leaves: bytes) -> None:
        sha = hashlib.sha256
        self.levels = [leaves]
        row = leaves
        while len(row) >= 64:
            row = b"".join([sha(b"\x01" + row[i : i + 64]).digest() for i in range(0, len(row) - 63, 64)])
            self.levels.append(row)

    def node(self, height: int, index: int) -> bytes:
        return self.levels[height][index * 32 : index * 32 + 32]

    def root(self, size: int) -> bytes:
        """MTH of the first ``size`` leaves."""
        if size == 0:
            return hashlib.sha256(b"").digest()
        parts: list[bytes] = []
        start = 0
        for height in range(size.bit_length() - 1, -1, -1):
            if size >> height & 1:
                parts.append(self.node(height, start >> height))
                start += 1 << height
        digest = parts[-1]
        for left in reversed(parts[:-1]):
            digest = hashlib.sha256(b"\x01" + left + digest).digest()
        return digest

    def range_hash(self, lo: int, hi: int) -> bytes:
        """MTH of leaves ``[lo, hi)`` for the ranges proofs and descents use (aligned left edge)."""
        parts: list[bytes] = []
        while lo < hi:
            height = (lo & -lo).bit_length() - 1 if lo else (hi - lo).bit_length() - 1
            while lo + (1 << height) > hi:
                height -= 1
            parts.append(self.node(height, lo >> height))
            lo += 1 << height
        digest = parts[-1]
        for left in reversed(parts[:-1]):
            digest = hashlib.sha256(b"\x01" + left + digest).digest()
        return digest
