"""A chain's files: its closed segments, in order, then its live file (docs/chain-format.md section 14).

A chain is named by its live file ``X.jsonl``. After a cut, the records before it are in closed
segments ``X.jsonl.segments/<first seq, 16 digits>.jsonl`` (lexical order is chain order) and the live
file begins with the anchor record. A chain never cut has no folder: it is its live file alone.

Byte positions run over the chain's files as if they were one: a position names the file it falls in
(the one whose range ``[start, start + size)`` holds it) and the offset in that file
(``reader.ChainBytes``). Closed segments are never written again, so a position below the live
file's start keeps naming the same byte.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Final

from otel_route_shadow.chain.errors import ChainPathError

__all__ = [
    "MAX_SEGMENTS",
    "SEGMENTS_SUFFIX",
    "Segment",
    "chain_segments",
    "live_path",
    "segment_name",
]

SEGMENTS_SUFFIX: Final = ".segments"
"""The folder of closed segments is the live file's name with this suffix."""
MAX_SEGMENTS: Final = 1 << 20
"""More entries than this in a segments folder is not a chain this reader lists."""
_SEGMENT_NAME: Final = re.compile(r"[0-9]{16}\.jsonl")


def segment_name(first: int) -> str:
    """The closed segment's file name for the segment that begins at ``first``."""
    return f"{first:016d}.jsonl"


@dataclass(frozen=True, slots=True)
class Segment:
    """One file of a chain: a closed segment (``first`` is the seq its name says it begins with) or the
    live file (``first`` None)."""

    path: str
    first: int | None

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def closed(self) -> bool:
        return self.first is not None


def live_path(path: str | os.PathLike[str]) -> str:
    """The live file of the chain ``path`` names: the path itself, or for a closed segment
    (``X.jsonl.segments/<16 digits>.jsonl``) or the segments folder, the live file ``X.jsonl``."""
    name = os.fspath(path)
    stripped = name.rstrip("/") or name
    if stripped.endswith(SEGMENTS_SUFFIX) and len(stripped) > len(SEGMENTS_SUFFIX):
        live = stripped[: -len(SEGMENTS_SUFFIX)]
        if not live.endswith("/") and os.path.isdir(stripped):
            return live
    folder, base = os.path.split(stripped)
    if folder.endswith(SEGMENTS_SUFFIX) and _SEGMENT_NAME.fullmatch(base):
        live = folder[: -len(SEGMENTS_SUFFIX)]
        if live and not live.endswith("/"):
            return live
    return name


def chain_segments(path: str | os.PathLike[str]) -> list[Segment]:
    """The chain's files in order: its closed segments (from the segments folder, by name), then its
    live file. One file when the chain was never cut.

    Entries of the folder whose names are not segment names (a cut's temporary) are not segments.
    Raises :class:`ChainPathError` when the folder is not a directory (a symlink, a file) or holds
    more than :data:`MAX_SEGMENTS` entries; the files themselves are checked when opened.
    """
    live = live_path(path)
    folder = live + SEGMENTS_SUFFIX
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return [Segment(live, None)]
    if not stat.S_ISDIR(mode):
        raise ChainPathError(f"{folder}: not a directory; a chain's segments folder must be one")
    names: list[str] = []
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_SEGMENTS:
                raise ChainPathError(f"{folder}: more than {MAX_SEGMENTS} entries; not a segments folder")
            if _SEGMENT_NAME.fullmatch(entry.name):
                names.append(entry.name)
    names.sort()
    closed = [Segment(os.path.join(folder, name), int(name[:16])) for name in names]
    return [*closed, Segment(live, None)]
