"""The ``pruned`` file of a log's store: what retention removed from the chain (docs/chain-format.md
section 14.5). Untrusted like every file of the store: it says what was pruned, when and by which
command; the records it keeps are authenticated from the signed tree, never from this file."""

from __future__ import annotations

import datetime
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from otel_route_shadow.tlog import TILE_HEIGHT, TILE_WIDTH

__all__ = [
    "MAX_COMMAND_CHARS",
    "MAX_PRUNED_BYTES",
    "PRUNED_FILE",
    "Pruned",
    "PrunedSegment",
    "pruned_resource",
    "served_min_index",
]

PRUNED_FILE: Final = "pruned"
MAX_PRUNED_BYTES: Final = 16 * 1024 * 1024
"""The largest ``pruned`` file read (about 60,000 pruned segments)."""
_HEX64 = r"^[0-9a-f]{64}$"
_NAME = r"^[0-9]{16}\.jsonl$"
MAX_COMMAND_CHARS: Final = 4096
"""The longest command a ``pruned`` file records (a longer one is recorded cut short)."""


class PrunedSegment(BaseModel):
    """One closed segment pruned: its file name, records ``[first, end)``, the SHA-256 (hex) and size of
    its file, and its archive's path relative to the chain's folder (None: deleted)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(pattern=_NAME)
    first: int = Field(ge=0, le=1 << 62)
    end: int = Field(ge=0, le=1 << 62)
    sha256: str = Field(pattern=_HEX64)
    bytes: int = Field(ge=0, le=1 << 62)
    archive: str | None = Field(default=None, max_length=4096)

    @model_validator(mode="after")
    def _ordered(self) -> PrunedSegment:
        if self.end <= self.first:
            raise ValueError("a pruned segment ends after it begins")
        return self


class Pruned(BaseModel):
    """The ``pruned`` file: the minimum index (records below it are pruned), when and by which command,
    and every segment ever pruned, oldest first, each beginning where the one before ends."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    min_index: int = Field(ge=0, le=1 << 62)
    time: int = Field(ge=0)
    command: str = Field(max_length=MAX_COMMAND_CHARS)
    segments: list[PrunedSegment]

    def kept_position(self) -> int:
        """The chain-wide position of the first byte kept (docs/chain-format.md 14.4): the recorded sizes of
        every segment pruned, which positions go on counting."""
        return sum(segment.bytes for segment in self.segments)

    def describe(self) -> str:
        """One line: what was pruned, when and by which command, as the file claims."""
        when = datetime.datetime.fromtimestamp(self.time, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        archived = sum(1 for segment in self.segments if segment.archive)
        command = self.command.encode("unicode_escape").decode("ascii")
        return (
            f"pruned below seq {self.min_index} at {when} by `{command}` ({len(self.segments)} segment(s), "
            f"{archived} archived), as the log's pruned file says"
        )

    @model_validator(mode="after")
    def _contiguous(self) -> Pruned:
        end = 0
        for segment in self.segments:
            if segment.first != end:
                raise ValueError(f"segment {segment.name} does not begin where the one before ends ({end})")
            end = segment.end
        if end != self.min_index:
            raise ValueError(f"the pruned segments end at {end}, not at the minimum index {self.min_index}")
        return self


def served_min_index(first_kept: int, size: int) -> int:
    """The log's C2SP tlog-tiles minimum index, as ``serve`` publishes it: ``first_kept`` (the chain's
    ``min_index``, its first kept record) rounded up to an entry bundle boundary, so that no bundle it serves
    holds a pruned record (the one across ``first_kept`` is refused whole, as Tessera's multiple-of-256
    minimum index has it); at most ``size``, the served tree's (the spec keeps the minimum index within
    the checkpoint)."""
    return min(-(-first_kept // TILE_WIDTH) * TILE_WIDTH, size)


def pruned_resource(kind: str, level: int, index: int, width: int, min_index: int) -> bool:
    """Whether C2SP tlog-tiles lets a log whose minimum index is ``min_index`` (``served_min_index``) refuse
    this resource: an entry bundle whose end index is at most ``min_index``, or a full tile whose end index
    (in entries: tile ``index + 1`` of level ``level`` ends at ``(index + 1) * 256 ** (level + 1)``) is.
    Partial tiles are never refused: the right edge of a retained tree size may need one that ends below
    it."""
    if kind == "entries":
        return index * TILE_WIDTH + width <= min_index
    if kind == "tile" and width == TILE_WIDTH:
        return (index + 1) << (TILE_HEIGHT * (level + 1)) <= min_index
    return False
