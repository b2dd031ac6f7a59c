"""Segmented chains made by hand from docs/chain-format.md section 14 (a fixture module; it holds no tests).

The chain is written whole at its live path with the real writer (``DecisionChain``) and signed with the
real ``Checkpointer``; at each cut the tree is signed at the boundary, then an anchor record (a normal
chain record, ``payload.kind`` ``segment-anchor``, naming the previous segment's file, last record, SHA-256,
size and the signed note of exactly that size) is appended. Then the file is split: each closed segment's
lines go to ``X.jsonl.segments/<first seq, 16 digits>.jsonl`` and the live file keeps the last segment's
lines (its first line the last anchor). The log's directory is the whole chain's: one tree, one origin.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, LogStore
from otel_route_shadow.tlog import Signer, Verifier

ORIGIN = "example.com/route-shadow/segments"
SIGNER = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([41]) * 32))
KEY = Verifier.parse(str(SIGNER.verifier()))


def segment_name(first: int) -> str:
    return f"{first:016d}.jsonl"


@dataclasses.dataclass(frozen=True)
class SegmentedChain:
    """The live file, the closed segments' (first, end) in order, and the total number of records."""

    chain: Path
    bounds: list[tuple[int, int]]
    total: int

    @property
    def segments(self) -> Path:
        return Path(str(self.chain) + ".segments")

    @property
    def archive(self) -> Path:
        return Path(str(self.chain) + ".archive")

    def segment(self, first: int) -> Path:
        return self.segments / segment_name(first)


def segmented_chain(
    directory: Path, sizes: Sequence[int], *, tail: int = 5, signer: Signer = SIGNER, every: int = 7
) -> SegmentedChain:
    """A chain cut into closed segments of ``sizes`` records each (an anchor included after the first)
    and a live file of ``tail`` more records after its anchor; checkpoints every ``every`` records, at
    each boundary and at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    chain = directory / "chain.jsonl"
    checkpointer = Checkpointer(str(chain), signer.name, signer)
    bounds: list[tuple[int, int]] = []
    offsets = [0]
    with DecisionChain(chain) as log:
        seq = 0
        for i, size in enumerate([*sizes, tail + 1]):
            first = seq
            if i:
                seq += 1  # the anchor, appended at the cut below
            for _ in range(size - (1 if i else 0)):
                log.append({"kind": "route-shadow", "n": seq})
                seq += 1
                if seq % every == 0:
                    checkpointer.checkpoint()
            if i == len(sizes):
                break
            checkpointer.checkpoint()
            bounds.append((first, seq))
            offsets.append(chain.stat().st_size)
            log.append(_anchor(chain, first, seq, offsets[-2], offsets[-1]))
    checkpointer.checkpoint()
    _split(chain, bounds, offsets)
    return SegmentedChain(chain, bounds, seq)


def copied(log: SegmentedChain, directory: Path) -> SegmentedChain:
    """A copy of ``log``'s folder under ``directory`` (a test's own chain from a module's pristine one)."""
    shutil.copytree(log.chain.parent, directory / "log")
    return SegmentedChain(directory / "log" / "chain.jsonl", log.bounds, log.total)


def _anchor(chain: Path, first: int, end: int, start: int, stop: int) -> dict[str, object]:
    data = chain.read_bytes()[start:stop]
    last = data.rstrip(b"\n").rpartition(b"\n")[2]
    note = next(n for n in LogStore(chain).newest_notes() if n.split("\n")[1] == str(end))
    return {
        "kind": "segment-anchor",
        "segment": segment_name(first),
        "first_seq": first,
        "last_seq": end - 1,
        "last_record_hash": last[-66:-2].decode("ascii"),
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "checkpoint": note,
    }


def _split(chain: Path, bounds: list[tuple[int, int]], offsets: list[int]) -> None:
    data = chain.read_bytes()
    folder = Path(str(chain) + ".segments")
    folder.mkdir()
    for (first, _end), start, stop in zip(bounds, offsets, offsets[1:], strict=False):
        (folder / segment_name(first)).write_bytes(data[start:stop])
    live = chain.with_name(chain.name + ".cut")
    live.write_bytes(data[offsets[len(bounds)] :])
    os.replace(live, chain)
