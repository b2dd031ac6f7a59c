"""The tile store's health, apart from the chain's: are the tiles the published checkpoints need there,
and do they hold the tree the chain gives?

``verify`` has the chain's whole tree in memory (``merkle.TreeLevels``) once the chain matches a signed
checkpoint, so every tile of that tree is checked by comparing bytes, without hashing: each full tile
below the largest checkpoint that holds, and the partial tiles of every checkpoint that holds whose
full tile does not exist (C2SP tlog-tiles keeps them until it does). A partial tile that is gone while
its full tile is there was removed as tlog-tiles allows (the full tile was written for a larger
checkpoint, one the chain may no longer match after a refusal): the full tile's first hashes are
checked in its place. A tile that is missing, not a
regular file (a symbolic link included: tiles are read one way, ``LogStore.tile_file``) or of other bytes is named with its path; ``tiles.REBUILD_HINT`` says what to do. A chain
handed over without its tile store (no ``tile/`` at all) is reported as not checked, not as damaged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from otel_route_shadow.logstore.store import LogStore
from otel_route_shadow.tlog import (
    HASH_SIZE,
    TILE_BYTES,
    TILE_HEIGHT,
    TILE_WIDTH,
    Tile,
    TileDamaged,
    TreeLevels,
    partial_tiles,
)

__all__ = ["TileHealth", "check_tiles"]


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


def check_tiles(store: LogStore, tree: TreeLevels, sizes: Iterable[int]) -> TileHealth:
    """Check the tiles of ``store`` against ``tree`` for checkpoints of ``sizes`` (each at most
    ``tree``'s size, and the chain matching each one's signed root)."""
    published = sorted(set(sizes))
    if not published:
        return TileHealth(note="no checkpoint holds: the tiles were not checked")
    if not os.path.lexists(store.file("tile")):
        return TileHealth(note=f"no tile store in {store.path}: the tiles were not checked")
    largest = published[-1]
    checker = _Checker(store, tree)
    level = 0
    while count := largest >> (TILE_HEIGHT * level):
        for index in range(count // TILE_WIDTH):
            checker.check(Tile(level, index), required=True)
        level += 1
    for size in published:
        for tile in partial_tiles(size):
            full = (largest >> (TILE_HEIGHT * tile.level)) // TILE_WIDTH > tile.index
            checker.check(tile, required=not full)
    return TileHealth(largest, checker.read, tuple(checker.missing), tuple(checker.damaged))


class _Checker:
    def __init__(self, store: LogStore, tree: TreeLevels) -> None:
        self.store = store
        self.tree = tree
        self.read = 0
        self.missing: list[str] = []
        self.damaged: list[str] = []

    def check(self, tile: Tile, *, required: bool) -> None:
        full = Tile(tile.level, tile.index)
        removed = tile.width < TILE_WIDTH and not os.path.lexists(self.store.file(tile.path))
        if removed and os.path.lexists(self.store.file(full.path)):
            self._compare(full, tile, required=True)  # a partial tile removed once its full tile exists
        else:
            self._compare(tile, tile, required=required)

    def _compare(self, read: Tile, expected: Tile, *, required: bool) -> None:
        """Tile ``read``'s first ``expected.width`` hashes against the signed tree's for ``expected``."""
        try:
            data = self.store.tile_file(read)
        except FileNotFoundError:
            if required:
                self.missing.append(f"{expected.path}: missing")
            return
        except TileDamaged as exc:
            self.damaged.append(str(exc))
            return
        self.read += 1
        if data[: expected.width * HASH_SIZE] != self._expected(expected) or (
            read == expected and len(data) != expected.width * HASH_SIZE
        ):
            self.damaged.append(f"{read.path}: does not hold the hashes of the signed tree")

    def _expected(self, tile: Tile) -> bytes:
        start = tile.index * TILE_BYTES
        return bytes(self.tree.levels[TILE_HEIGHT * tile.level][start : start + tile.width * HASH_SIZE])
