"""The C2SP ``tlog-checkpoint`` text: origin line, decimal tree size, base64 root hash.

Each line ends in LF. The size has no leading zeros and the root is the standard base64 of exactly 32
bytes, re-encoded and compared so that one checkpoint has exactly one spelling. Extension lines are
neither written nor accepted (the spec discourages them and this log has none).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re

from otel_route_shadow.tlog.merkle import HASH_SIZE

__all__ = ["Checkpoint", "CheckpointError", "parse_checkpoint", "parse_size"]

_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_MAX_LINE = 4096


class CheckpointError(ValueError):
    """A checkpoint text that does not follow C2SP tlog-checkpoint."""


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """One log state: ``origin`` names the log, the tree of its first ``size`` leaves has ``root``."""

    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        """The three-line checkpoint text, each line ending in LF."""
        _check_origin(self.origin)
        if self.size < 0 or len(self.root) != HASH_SIZE:
            raise CheckpointError("a checkpoint needs a size >= 0 and a 32-byte root")
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode('ascii')}\n"


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse a checkpoint text (the body of a signed note); raise ``CheckpointError`` naming the problem."""
    if not text.endswith("\n"):
        raise CheckpointError("the checkpoint text does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) != 3:
        raise CheckpointError(f"a checkpoint has 3 lines (origin, size, root), this one {len(lines)}")
    origin, size_text, root_text = lines
    _check_origin(origin)
    return Checkpoint(origin, _parse_size(size_text), _parse_root(root_text))


def _check_origin(origin: str) -> None:
    if not origin or len(origin) > _MAX_LINE:
        raise CheckpointError("the checkpoint origin is empty or too long")
    if any(ch.isspace() and ch != " " for ch in origin) or not origin.isprintable():
        raise CheckpointError("the checkpoint origin holds a control character")


def parse_size(text: str) -> int | None:
    """``text`` as a tree size (or an index in the tree) is written: a decimal number of at most 19
    digits, without sign, spaces or leading zeros; None for anything else (never a number too long to
    read)."""
    return int(text) if _SIZE.fullmatch(text) else None


def _parse_size(text: str) -> int:
    size = parse_size(text)
    if size is None:
        raise CheckpointError("the checkpoint size is not a decimal number without leading zeros")
    return size


def _parse_root(text: str) -> bytes:
    try:
        root = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CheckpointError("the checkpoint root is not base64") from None
    if len(root) != HASH_SIZE or base64.b64encode(root).decode("ascii") != text:
        raise CheckpointError("the checkpoint root is not the base64 of 32 bytes")
    return root
