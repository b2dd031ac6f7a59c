"""The tree's hashes in the C2SP ``tlog-tiles`` layout: tile arithmetic, an authenticating reader over
a :class:`TileStorage`, and the builder of the tiles to store.

A tile at level ``L`` and index ``N`` holds up to 256 consecutive hashes of tree level ``8 * L``
(level 0: leaf hashes), 32 bytes each, concatenated. A full tile lives at ``tile/<L>/<N>``; an
incomplete one at ``tile/<L>/<N>.p/<W>`` (``W`` hashes, 1..255), kept for every tree size a
checkpoint was published for until the full tile exists. ``N`` is written in groups of three digits,
all but the last prefixed with ``x``: 1234067 is ``x001/x234/067``. Level ``L + 1`` holds the roots of
the full tiles of level ``L``. Entries are not stored as ``tile/entries``: the chain's lines are the
entries (leaf i = line i).

Tiles are an input, never a fact: :class:`TileReader` reads the tree of one signed checkpoint from a
:class:`TileStorage` (in the shape of Go's ``tlog.TileReader``: ``read_tiles``/``save_tiles``; the one on
disk is ``logstore.LogStore``) and authenticates every tile before a hash of it is used (as Go's
``tlog.TileHashReader`` in x/mod v0.41.0 and later): the right edge (the partial tiles of the tree's size) must give the checkpoint's
root, and every other tile, a full one, must hash to the entry its parent tile holds for it. A tile
that is missing or does not authenticate is a :class:`TileError` naming its path, never a wrong hash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from otel_route_shadow.tlog.merkle import HASH_SIZE, parent_row, perfect_root, subtrees, tree_hash

__all__ = [
    "REBUILD_HINT",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "Tile",
    "TileDamaged",
    "TileError",
    "TileMissing",
    "TileReader",
    "TileStorage",
    "TreeBuilder",
    "partial_tiles",
    "tile_path",
    "tile_width",
]

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
TILE_BYTES = TILE_WIDTH * HASH_SIZE

REBUILD_HINT = (
    "to rebuild the tiles, remove the state file beside them: the writer's next checkpoint re-hashes "
    "the chain, checks it against every checkpoint it signed and rewrites the tiles"
)
"""What to do about a tile that is missing or damaged (docs/chain-format.md section 13.5)."""


class TileError(OSError):
    """A tile that cannot be used: ``path`` (relative to the log directory) names it."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class TileMissing(TileError):
    """A tile the tree needs is not on disk (nor a wider one that holds it)."""


class TileDamaged(TileError):
    """A tile that is not a regular file of the right length, or whose hashes do not authenticate."""


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """The relative path of a tile, e.g. ``tile/0/x001/x234/067.p/5``."""
    digits = f"{index:03d}"
    while len(digits) % 3:
        digits = "0" + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    path = "/".join([f"x{g}" for g in groups[:-1]] + [groups[-1]])
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{path}{suffix}"


@dataclasses.dataclass(frozen=True, slots=True)
class Tile:
    """Tile (``level``, ``index``) of ``width`` hashes (Go's ``tlog.Tile`` at height 8)."""

    level: int
    index: int
    width: int = TILE_WIDTH

    @property
    def path(self) -> str:
        return tile_path(self.level, self.index, self.width)


class TileStorage(Protocol):
    """Where tiles are kept, in the shape of Go's ``tlog.TileReader``.

    ``read_tiles`` gives, for each tile, its ``width`` hashes as stored (its own file, or a prefix of
    the full tile or of a wider partial one), unauthenticated, or raises :class:`TileMissing` or
    :class:`TileDamaged` naming it; ``save_tiles`` stores each tile's hashes durably."""

    def read_tiles(self, tiles: Sequence[Tile]) -> list[bytes]: ...

    def save_tiles(self, tiles: Sequence[Tile], data: Sequence[bytes]) -> None: ...


def tile_width(size: int, level: int, index: int) -> int:
    """How many hashes tile (level, index) holds in a tree of ``size`` leaves."""
    return max(0, min(TILE_WIDTH, (size >> (TILE_HEIGHT * level)) - index * TILE_WIDTH))


def partial_tiles(size: int) -> list[Tile]:
    """The partial tiles of a tree of ``size`` leaves, one per level at most."""
    tiles, level = [], 0
    while count := size >> (TILE_HEIGHT * level):
        if count % TILE_WIDTH:
            tiles.append(Tile(level, count // TILE_WIDTH, count % TILE_WIDTH))
        level += 1
    return tiles


def _levels(row: bytes) -> list[bytes]:
    """A tile's hashes and every complete node above them inside the tile, level by level."""
    rows = [row]
    while len(row) >= 2 * HASH_SIZE:
        row = parent_row(row)
        rows.append(row)
    return rows


class TileReader:
    """The tree of a signed checkpoint (``size`` leaves, ``root``) read from ``storage``, each tile
    authenticated before use (see the module docstring).

    A :class:`~otel_route_shadow.tlog.merkle.NodeReader`: the merkle functions compute roots and
    proofs over it. Raises :class:`TileMissing` or :class:`TileDamaged`; ``reads`` counts tiles read
    from the storage. Authenticated tiles are kept for the reader's life; with ``cache`` only the right
    edge and the ``cache`` tiles used last are (a long-lived reader, such as a server's).
    """

    def __init__(self, storage: TileStorage, size: int, root: bytes, *, cache: int | None = None) -> None:
        self.storage = storage
        self.size = size
        self.root = root
        self.reads = 0
        self._tiles: dict[tuple[int, int], list[bytes]] = {}
        self._edge: frozenset[tuple[int, int]] = frozenset()
        self._cache = cache
        self._edge_checked = False

    def node(self, height: int, index: int) -> bytes:
        level, rest = divmod(height, TILE_HEIGHT)
        first = index << rest
        rows = self._authentic(level, first // TILE_WIDTH)
        slot = (first % TILE_WIDTH) >> rest
        node = rows[rest][slot * HASH_SIZE : (slot + 1) * HASH_SIZE] if rest < len(rows) else b""
        if len(node) != HASH_SIZE:
            raise ValueError(f"node ({height}, {index}) is not in a tree of {self.size} leaves")
        return node

    def tile(self, level: int, index: int) -> bytes:
        """The authenticated hashes of tile (level, index) as of this tree's size, concatenated."""
        return self._authentic(level, index)[0]

    def edge(self, size: int | None = None) -> list[bytes]:
        """Per level, the hashes of the incomplete tile of the tree of ``size`` leaves (default: this
        tree's; a smaller one is this tree's prefix) or empty when the level has none: what
        :class:`TreeBuilder` resumes from."""
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise ValueError(f"a tree of {size} leaves is not a prefix of this tree of {self.size}")
        rows: list[bytes] = []
        level = 0
        while count := size >> (TILE_HEIGHT * level):
            width = count % TILE_WIDTH
            rows.append(self.tile(level, count // TILE_WIDTH)[: width * HASH_SIZE] if width else b"")
            level += 1
        return rows

    def _authentic(self, level: int, index: int) -> list[bytes]:
        if not self._edge_checked:
            self._check_edge()
        rows = self._tiles.get((level, index))
        if rows is not None:
            if self._cache is not None and (level, index) not in self._edge:
                self._tiles[(level, index)] = self._tiles.pop((level, index))  # used last
            return rows
        if tile_width(self.size, level, index) != TILE_WIDTH:
            raise ValueError(f"tile {level}/{index} is not in a tree of {self.size} leaves")
        parent_rows = self._authentic(level + 1, index // TILE_WIDTH)
        slot = index % TILE_WIDTH
        expected = parent_rows[0][slot * HASH_SIZE : (slot + 1) * HASH_SIZE]
        relative, data = self._read([Tile(level, index)])[0]
        rows = _levels(data)
        if rows[-1] != expected:
            parent = tile_path(
                level + 1, index // TILE_WIDTH, tile_width(self.size, level + 1, index // TILE_WIDTH)
            )
            raise TileDamaged(relative, f"does not match its parent tile {parent} (damaged or forged)")
        self._tiles[(level, index)] = rows
        if self._cache is not None and len(self._tiles) > len(self._edge) + self._cache:
            oldest = next(key for key in self._tiles if key not in self._edge)
            del self._tiles[oldest]
        return rows

    def _check_edge(self) -> None:
        """Read the tiles the tree's root is made of (one incomplete tile per level) and check that
        they give the signed root."""
        keys: dict[tuple[int, int], None] = {}
        for height, index in subtrees(0, self.size):
            level, rest = divmod(height, TILE_HEIGHT)
            keys[(level, (index << rest) // TILE_WIDTH)] = None
        edge = [Tile(level, index, tile_width(self.size, level, index)) for level, index in keys]
        found = {
            key: (relative, _levels(data))
            for key, (relative, data) in zip(keys, self._read(edge), strict=True)
        }
        self._tiles.update({key: rows for key, (_, rows) in found.items()})
        self._edge = frozenset(found)
        self._edge_checked = True
        try:
            if tree_hash(self, self.size) == self.root:
                return
        except ValueError:
            pass
        self._tiles.clear()
        self._edge = frozenset()
        self._edge_checked = False
        paths = ", ".join(relative for relative, _ in found.values())
        raise TileDamaged(
            paths,
            "the right-edge tiles do not give the checkpoint's root "
            "(damaged or forged tiles, or a checkpoint of another tree)",
        )

    def _read(self, tiles: Sequence[Tile]) -> list[tuple[str, bytes]]:
        """The path and the hashes of each tile, as the storage gives them (checked for length only)."""
        found = self.storage.read_tiles(tiles)
        self.reads += len(tiles)
        for tile, data in zip(tiles, found, strict=True):
            if len(data) != tile.width * HASH_SIZE:
                raise TileDamaged(tile.path, f"{len(data)} bytes, expected {tile.width * HASH_SIZE}")
        return [(tile.path, data) for tile, data in zip(tiles, found, strict=True)]


class TreeBuilder:
    """The writer's right edge at tile granularity: grows the tree a block of leaf hashes at a time
    and knows which tiles to write.

    Per level it keeps the hashes of the incomplete tile; a completed tile is queued in ``full`` and
    its root passed up a level. A :class:`~otel_route_shadow.tlog.merkle.NodeReader` for the nodes of
    the right edge, so its root is :func:`~otel_route_shadow.tlog.merkle.tree_hash` over itself.
    """

    def __init__(self, size: int = 0, edge: Sequence[bytes] = ()) -> None:
        self.size = size
        self.edge: list[list[bytes]] = [
            [row[i : i + HASH_SIZE] for i in range(0, len(row), HASH_SIZE)] for row in edge
        ] or [[]]
        self.full: list[tuple[int, int, bytes]] = []

    def extend(self, leaves: Sequence[bytes]) -> None:
        """Append leaf hashes: each tile they complete is queued in ``full`` and its root (by
        :func:`perfect_root`) goes up a level, and so on up the tree."""
        before = self.size
        self.size += len(leaves)
        digests, level = list(leaves), 0
        while digests:
            if level == len(self.edge):
                self.edge.append([])
            row = self.edge[level]
            first = (before >> (TILE_HEIGHT * level)) // TILE_WIDTH  # the tile ``row`` belongs to
            row.extend(digests)
            complete = len(row) // TILE_WIDTH
            tiles = [b"".join(row[k * TILE_WIDTH : (k + 1) * TILE_WIDTH]) for k in range(complete)]
            self.full.extend((level, first + k, tile) for k, tile in enumerate(tiles))
            self.edge[level] = row[complete * TILE_WIDTH :]
            digests = [perfect_root(tile) for tile in tiles]
            level += 1

    def node(self, height: int, index: int) -> bytes:
        """A node of the right edge (inside the incomplete tile of its level)."""
        level, rest = divmod(height, TILE_HEIGHT)
        row = self.edge[level] if level < len(self.edge) else []
        slot = (index << rest) - ((self.size >> (TILE_HEIGHT * level)) // TILE_WIDTH) * TILE_WIDTH
        if slot < 0 or slot + (1 << rest) > len(row):
            raise ValueError(f"node ({height}, {index}) is not on the right edge of {self.size} leaves")
        return perfect_root(row[slot : slot + (1 << rest)])

    def root(self) -> bytes:
        """The root of the tree so far."""
        return tree_hash(self, self.size)

    def partials(self) -> list[tuple[int, int, int, bytes]]:
        """The incomplete tile of each level: (level, index, width, data)."""
        out = []
        for level, row in enumerate(self.edge):
            if row:
                index = (self.size >> (TILE_HEIGHT * level)) // TILE_WIDTH
                out.append((level, index, len(row), b"".join(row)))
        return out

    def take_full(self) -> list[tuple[int, int, bytes]]:
        """The tiles completed since the last call: (level, index, data)."""
        full, self.full = self.full, []
        return full


def decode_bundle(data: bytes) -> list[bytes]:
    """The entries of a tlog-tiles entry bundle (each a big-endian uint16 length, then its bytes);
    ``ValueError`` naming the byte where an entry is cut short."""
    entries: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise ValueError(f"a length cut short at byte {at}")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise ValueError(f"an entry cut short at byte {at}")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return entries
