"""A running writer's look at the full tiles it stored: a few per checkpoint, in turn over every level,
each authenticated against the tree about to be signed (``tiles.TileReader``). A full tile replaced or
damaged under a running host is thus found within ``full tiles / SWEEP_TILES`` checkpoints, and the
writer repairs it from the chain (it rebuilds the tree, rewriting the tiles, before it signs again).
"""

from __future__ import annotations

from typing import Final

from otel_route_shadow.tlog import TILE_HEIGHT, TILE_WIDTH, TileReader

__all__ = ["SWEEP_TILES", "TileSweep"]

SWEEP_TILES: Final = 8
"""Full tiles authenticated per checkpoint (8 reads of 8 KiB; their parents are the tree's edge, read
for the checkpoint anyway)."""


def _full_tiles(size: int, level: int) -> int:
    return (size >> (TILE_HEIGHT * level)) // TILE_WIDTH


class TileSweep:
    """Where the writer's look at its full tiles goes on from."""

    def __init__(self) -> None:
        self._level = 0
        self._index = 0

    def check(self, reader: TileReader, count: int = SWEEP_TILES) -> None:
        """Authenticate the next ``count`` full tiles of ``reader``'s tree (fewer when it has fewer).
        ``tiles.TileError`` for one that does not authenticate (the look goes on after it)."""
        size = reader.size
        for _ in range(min(count, sum(_full_tiles(size, level) for level in range(0, 8)))):
            if self._index >= _full_tiles(size, self._level):
                self._level = self._level + 1 if _full_tiles(size, self._level + 1) else 0
                self._index = 0
            level, index = self._level, self._index
            self._index += 1
            reader.tile(level, index)
