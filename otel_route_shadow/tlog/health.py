"""The tile store's health, apart from the chain's: are the tiles the published checkpoints need there,
and do they hold the tree the chain gives?

``verify`` has the chain's whole tree in memory (``merkle.TreeLevels``) once the chain matches a signed
checkpoint, so every tile of that tree is checked by comparing bytes, without hashing: each full tile
below the largest checkpoint that holds, and the partial tiles of every checkpoint that holds whose
full tile does not exist (C2SP tlog-tiles keeps them until it does). A partial tile that is gone while
its full tile is there was removed as tlog-tiles allows (the full tile was written for a larger
checkpoint, one the chain may no longer match after a refusal): the full tile's first hashes are
checked in its place. A tile that is missing, not a
regular file or of other bytes is named with its path; ``tiles.REBUILD_HINT`` says what to do. A chain
handed over without its tile store (no ``tile/`` at all) is reported as not checked, not as damaged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from otel_route_shadow.files import FileRefused, read_regular
from otel_route_shadow.tlog.merkle import HASH_SIZE, TreeLevels
from otel_route_shadow.tlog.tiles import TILE_HEIGHT, TILE_WIDTH, tile_path

__all__ = ["TileHealth", "check_tiles"]

_TILE_BYTES = TILE_WIDTH * HASH_SIZE


@dataclasses.dataclass(frozen=True, slots=True)
class TileHealth:
    """What the tiles were checked against (``size`` leaves; 0 when they were not checked, ``note``
    says why), how many tile files were read, and the ones missing or damaged (``path: problem``)."""

    size: int = 0
    read: int = 0
    missing: tuple[str, ...] = ()
    damaged: tuple[str, ...] = ()
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.missing and not self.damaged


def check_tiles(directory: str, tree: TreeLevels, sizes: Iterable[int]) -> TileHealth:
    """Check the tiles under ``directory`` against ``tree`` for checkpoints of ``sizes`` (each at most
    ``tree``'s size, and the chain matching each one's signed root)."""
    published = sorted(set(sizes))
    if not published:
        return TileHealth(note="no checkpoint holds: the tiles were not checked")
    if not os.path.lexists(os.path.join(directory, "tile")):
        return TileHealth(note=f"no tile store in {directory}: the tiles were not checked")
    largest = published[-1]
    checker = _Checker(directory, tree)
    level = 0
    while count := largest >> (TILE_HEIGHT * level):
        for index in range(count // TILE_WIDTH):
            checker.check(level, index, TILE_WIDTH, required=True)
        level += 1
    for size in published:
        level = 0
        while count := size >> (TILE_HEIGHT * level):
            index, width = divmod(count, TILE_WIDTH)
            if width:
                full = (largest >> (TILE_HEIGHT * level)) // TILE_WIDTH > index
                checker.check(level, index, width, required=not full)
            level += 1
    return TileHealth(largest, checker.read, tuple(checker.missing), tuple(checker.damaged))


class _Checker:
    def __init__(self, directory: str, tree: TreeLevels) -> None:
        self.directory = directory
        self.tree = tree
        self.read = 0
        self.missing: list[str] = []
        self.damaged: list[str] = []

    def check(self, level: int, index: int, width: int, *, required: bool) -> None:
        relative = tile_path(level, index, width)
        try:
            data = read_regular(os.path.join(self.directory, relative), _TILE_BYTES)
        except FileNotFoundError:
            if width < TILE_WIDTH and os.path.lexists(os.path.join(self.directory, tile_path(level, index))):
                self._check_prefix(level, index, width)  # a partial tile removed once its full tile exists
            elif required:
                self.missing.append(f"{relative}: missing")
            return
        except FileRefused as exc:
            self.damaged.append(f"{relative}: {exc.problem}")
            return
        self.read += 1
        if data != self._expected(level, index, width):
            self.damaged.append(f"{relative}: does not hold the hashes of the signed tree")

    def _check_prefix(self, level: int, index: int, width: int) -> None:
        """The full tile in place of a removed partial one: its first ``width`` hashes are the partial's."""
        relative = tile_path(level, index)
        try:
            data = read_regular(os.path.join(self.directory, relative), _TILE_BYTES)
        except (FileNotFoundError, FileRefused) as exc:
            self.damaged.append(f"{relative}: {getattr(exc, 'problem', 'missing')}")
            return
        self.read += 1
        if data[: width * HASH_SIZE] != self._expected(level, index, width):
            self.damaged.append(f"{relative}: does not hold the hashes of the signed tree")

    def _expected(self, level: int, index: int, width: int) -> bytes:
        start = index * _TILE_BYTES
        return bytes(self.tree.levels[TILE_HEIGHT * level][start : start + width * HASH_SIZE])
