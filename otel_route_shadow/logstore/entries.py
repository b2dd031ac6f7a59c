"""Entry bundles (C2SP tlog-tiles ``tile/entries/<N>[.p/<W>]``) made from the chain itself.

A bundle holds the entries of leaves ``256 N`` to ``256 N + W - 1``, each a big-endian uint16 length
followed by the entry: the chain's line without its LF (leaf i is line i). The chain stays the one copy
of the entries: a bundle is cut from it when asked for, found through a small offset index beside the
tiles (``<chain>.tlog/entries-index``: the byte offset of line ``256 k`` for k = 0, 1, ..., 8 bytes
big-endian each, about 0.03 bytes per line). The writer appends to it the offsets its catch-up passed
(:func:`append_index_offsets`), so a reader finds them there instead of scanning the chain.

The index is a hint, never a fact: every bundle is checked, entry by entry, against the leaf hashes of
the authenticated level-0 tile the caller gives (``tiles.TileReader``); a line that does not hash to
its leaf makes the index be rebuilt from the chain and the bundle read again, and a bundle that still
does not match is :class:`BundleDamaged`, never returned. A line longer than :data:`MAX_ENTRY_BYTES`
cannot be a tlog-tiles entry (its length would not fit the uint16): a bundle holding one is
:class:`BundleUnservable`, and :func:`long_entries` lists such lines without reading the whole chain.
(:data:`MAX_ENTRY_BYTES` is the chain's own bound on the lines writers emit, ``chain.MAX_ENTRY_BYTES``.)
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import os
import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Final

from otel_route_shadow.chain import (
    MAX_ENTRY_BYTES,
    MAX_LINE_BYTES,
    ChainBytes,
    each_chain_file,
    leaf_hashes,
    line_seq,
)
from otel_route_shadow.files import (
    FileRefused,
    file_identity,
    open_beneath,
    open_regular,
    range_blocks,
    read_beneath,
    write_atomic,
)
from otel_route_shadow.lines import complete_end, first_line, iter_lines_from, line_after
from otel_route_shadow.logstore.pruned import PRUNED_FILE
from otel_route_shadow.logstore.store import LogStore, StateError
from otel_route_shadow.tlog import HASH_SIZE, TILE_WIDTH, TileError, leaf_hash, tile_path

__all__ = [
    "ENTRIES_INDEX_FILE",
    "MAX_ENTRY_BYTES",
    "BundleDamaged",
    "BundleError",
    "BundleUnservable",
    "EntryIndex",
    "LongEntry",
    "append_index_offsets",
    "bundle_path",
    "encode_bundle",
    "long_entries",
    "read_bundle",
]

ENTRIES_INDEX_FILE: Final = "entries-index"
_OFFSET: Final = struct.Struct(">Q")
_MAX_INDEX_BYTES: Final = 64 * 1024 * 1024
_BLOCK: Final = 1 << 20
_WINDOW: Final = (MAX_ENTRY_BYTES + 1) // 2
"""A line of more than MAX_ENTRY_BYTES bytes covers at least one aligned window this wide whole."""
_PROBE: Final = 4096
_LISTINGS: Final = 3
"""Times the chain's files are listed before one listing is taken as it is (prunes in a row)."""


class BundleError(TileError):
    """An entry bundle that cannot be given: ``path`` (``tile/entries/...``) names it (a data tile, in
    tlog-tiles' words, so a :class:`~otel_route_shadow.tlog.tiles.TileError`)."""


class BundleDamaged(BundleError):
    """The chain's lines do not hash to the authenticated leaves, even through a rebuilt index: the
    chain is shorter than the signed tree, or was changed below it."""


class BundleUnservable(BundleError):
    """The bundle holds a line longer than :data:`MAX_ENTRY_BYTES` (``seq``, ``length``)."""

    def __init__(self, path: str, seq: int, length: int) -> None:
        super().__init__(
            path,
            f"seq {seq} is {length:,} bytes, longer than the {MAX_ENTRY_BYTES:,} bytes a tlog-tiles entry "
            "can hold: this bundle cannot be served (a line an older writer wrote; the other bundles can)",
        )
        self.seq = seq
        self.length = length


def bundle_path(index: int, width: int = TILE_WIDTH) -> str:
    """``tile/entries/<N>[.p/<W>]``, ``N`` written as in tile paths (``x001/x234/067``)."""
    return "tile/entries/" + tile_path(0, index, width).removeprefix("tile/0/")


def encode_bundle(entries: Sequence[bytes | memoryview]) -> bytes:
    """Each entry as a big-endian uint16 length and its bytes, concatenated."""
    if any(len(entry) > MAX_ENTRY_BYTES for entry in entries):
        raise ValueError(f"an entry of more than {MAX_ENTRY_BYTES} bytes does not fit a tlog-tiles bundle")
    parts: list[bytes | memoryview] = [b""] * (2 * len(entries))
    parts[0::2] = [len(entry).to_bytes(2, "big") for entry in entries]
    parts[1::2] = entries
    return b"".join(parts)


# --- the offset index --------------------------------------------------------------------------------


class EntryIndex:
    """The byte offset of line ``256 k`` of the chain, for k = 0, 1, ...: read from ``entries-index``
    in the log directory (a hint: :func:`read_bundle` checks every line it finds through it), extended
    by scanning the chain as bundles further on are asked for, and written back when it grew
    (``files.write_atomic``; a directory this process may not write to keeps it in memory only).

    Offsets the writer appended to the file since (:func:`append_index_offsets`) are taken before the
    chain is scanned, until the index is rebuilt: a rebuilt index is the chain's own. ``rebuilds``
    counts the times it was thrown away and scanned again from the chain's start.

    Offsets are chain-wide positions (``chain.ChainBytes``): after a prune they count the bytes of the
    segments removed, as the log's ``pruned`` file records them (:meth:`kept`), so the offsets of lines
    the prune kept do not change. A scan of a pruned chain starts at its first kept line; the offsets
    of the pruned lines it cannot know are held as placeholders (increasing, below the first kept
    byte): their bundles are pruned, and one that is asked for anyway does not match its leaves.
    """

    def __init__(self, chain_path: str, directory: str) -> None:
        self.chain_path = os.fspath(chain_path)
        self.directory = os.fspath(directory)
        self.offsets = array("Q", [0])
        self.rebuilds = 0
        self.save_error: str | None = None
        """Why the index could not be written back (None once it was, or before)."""
        self._scanned: tuple[int, int] | None = None  # (st_dev, st_ino) of the chain this process scanned
        self._written_taken = True
        """Whether offsets appended to the file are taken (until a rebuild)."""
        self._kept: tuple[tuple[int, ...] | None, tuple[int, int]] = (None, (0, 0))
        self.pruned_error: str | None = None
        """Why the ``pruned`` file could not be read when :meth:`kept` last read it (None: it was, or is none)."""
        self._load()

    def _load(self) -> None:
        try:
            data = read_beneath(self.directory, ENTRIES_INDEX_FILE, _MAX_INDEX_BYTES)
        except (FileNotFoundError, FileRefused):
            return
        if not data or len(data) % _OFFSET.size:
            return
        offsets = array("Q", data)
        if sys.byteorder == "little":  # the file is big-endian
            offsets.byteswap()
        if offsets[0] != 0 or any(b <= a for a, b in itertools.pairwise(offsets)):
            return
        self.offsets = offsets

    def locate(self, bundle: int) -> int | None:
        """The offset of line ``256 * bundle``, scanning the chain as far as needed; None when the
        chain has fewer complete lines."""
        if bundle >= len(self.offsets):
            self._extend(bundle)
        return self.offsets[bundle] if bundle < len(self.offsets) else None

    def may_rebuild(self) -> bool:
        """Whether a rebuild could change anything: the offsets were not all found by this process in
        the chain file now at the path (a rebuilt index that still does not match is not rebuilt
        again for the same file)."""
        return self._scanned is None or self._scanned != file_identity(self.chain_path)

    def rebuild(self) -> None:
        """Forget every offset but line 0's; the next :meth:`locate` scans from the chain's start."""
        self.offsets = array("Q", [0])
        self.rebuilds += 1
        self._scanned = file_identity(self.chain_path)
        self._written_taken = False

    def _take_written(self) -> None:
        """Take the offsets appended to the file after the ones held, when the file still holds the
        last one held where it was (the same index, grown)."""
        held = len(self.offsets) * _OFFSET.size
        try:
            fd = open_beneath(self.directory, ENTRIES_INDEX_FILE)
        except (FileNotFoundError, FileRefused):
            return
        try:
            size = os.fstat(fd).st_size
            if size <= held or size % _OFFSET.size or size > _MAX_INDEX_BYTES:
                return
            data = os.pread(fd, size - held + _OFFSET.size, held - _OFFSET.size)
        finally:
            os.close(fd)
        grown = array("Q", data)
        if sys.byteorder == "little":
            grown.byteswap()
        if len(data) % _OFFSET.size or not grown or grown[0] != self.offsets[-1]:
            return
        if all(b > a for a, b in itertools.pairwise(grown)):
            self.offsets.extend(grown[1:])

    def kept(self) -> tuple[int, int]:
        """The minimum index and the chain-wide position of the first byte kept, as the log's ``pruned``
        file says (read again when its stat changed); (0, 0) when it is missing or cannot be read."""
        store = LogStore(self.chain_path, self.directory)
        try:
            st = os.stat(store.file(PRUNED_FILE))
            key: tuple[int, ...] | None = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            key = None
        if key != self._kept[0]:
            try:
                pruned, self.pruned_error = store.read_pruned(), None
            except (StateError, OSError) as exc:
                pruned, self.pruned_error = None, str(exc)
            found = (0, 0) if pruned is None else (pruned.min_index, pruned.kept_position())
            self._kept = (key, found)
        return self._kept[1]

    def chain(self) -> ChainBytes:
        """The chain's bytes, positions chain-wide (see the class docstring), its files listed while the
        ``pruned`` file said the same before and after: a prune that committed meanwhile removes
        segments the listing may have missed, and they are listed again (a few times at most)."""
        kept = self.kept()
        for _attempt in range(_LISTINGS - 1):
            try:
                chain: ChainBytes | None = ChainBytes(self.chain_path, kept[1], kept[0])
            except FileNotFoundError:  # a segment removed between its listing and its size
                chain = None
            now = self.kept()
            if chain is not None and now == kept:
                return chain
            if chain is not None:
                chain.close()
            kept = now
        return ChainBytes(self.chain_path, kept[1], kept[0])

    def _skip_pruned(self, min_index: int, start: int) -> int:
        """Hold placeholders for the offsets of pruned lines ``256 k`` (those below ``min_index``) and,
        when ``min_index`` is one, ``start``; return the lines between the last offset held and the
        first kept line (-1: the placeholders do not fit below ``start``, nothing changed)."""
        first = -(-min_index // TILE_WIDTH)
        missing = first - len(self.offsets)
        if missing > 0 and self.offsets[-1] + missing >= start:
            return -1
        self.offsets.extend(range(self.offsets[-1] + 1, self.offsets[-1] + 1 + max(0, missing)))
        if min_index % TILE_WIDTH == 0:
            self.offsets.append(start)
            return 0
        return min_index - (first - 1) * TILE_WIDTH

    def _extend(self, bundle: int) -> None:
        if self._written_taken:
            self._take_written()
            if bundle < len(self.offsets):
                return
        before = len(self.offsets)
        with self.chain() as chain:
            position = self.offsets[-1]
            since = 0  # complete lines since the last offset
            if position < chain.start:
                since = self._skip_pruned(self.kept()[0], chain.start)
                position = chain.start
                if since < 0:
                    return
            while len(self.offsets) <= bundle:
                block = chain.pread(_BLOCK, position)
                if not block:
                    break
                found = block.count(b"\n")
                if since + found < TILE_WIDTH:
                    since += found
                    position += len(block)
                    continue
                at = 0
                while since + block.count(b"\n", at) >= TILE_WIDTH and len(self.offsets) <= bundle:
                    for _ in range(TILE_WIDTH - since):
                        at = block.index(b"\n", at) + 1
                    self.offsets.append(position + at)
                    since = 0
                since += block.count(b"\n", at)
                position += len(block)
        if self._scanned is None and before == 1:
            self._scanned = file_identity(self.chain_path)
        if len(self.offsets) > before:
            self._save()

    def _save(self) -> None:
        data = array("Q", self.offsets)
        if sys.byteorder == "little":
            data.byteswap()
        try:
            write_atomic(os.path.join(self.directory, ENTRIES_INDEX_FILE), data.tobytes())
            self.save_error = None
        except OSError as exc:
            self.save_error = exc.strerror or type(exc).__name__


def append_index_offsets(directory: str, starts: Sequence[tuple[int, int]]) -> bool:
    """Append to ``entries-index`` in ``directory`` the offsets of lines ``256 k`` a writer passed,
    ``starts`` being ``(k, offset)`` pairs, k ascending: those the file does not hold yet, when they
    continue it (the first of them is the file's next k, and follows its last offset). No chain byte is
    read. The file is a hint like any index (:class:`EntryIndex` checks every line it finds through
    it), so it is not synced; a gap, a file that is not an index, or a failure leaves it as it was and
    returns False."""
    try:
        fd = open_regular(
            os.path.join(directory, ENTRIES_INDEX_FILE), os.O_RDWR | os.O_CREAT, follow_symlinks=False
        )
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        count, torn = divmod(size, _OFFSET.size)
        new = [(k, offset) for k, offset in starts if k >= count]
        if torn or size > _MAX_INDEX_BYTES or not new or new[0][0] != count:
            return False
        last = _OFFSET.unpack(os.pread(fd, _OFFSET.size, size - _OFFSET.size))[0] if count else -1
        offsets = [offset for _, offset in new]
        if (count == 0 and offsets[0] != 0) or any(b <= a for a, b in itertools.pairwise([last, *offsets])):
            return False
        os.pwrite(fd, b"".join(_OFFSET.pack(offset) for offset in offsets), size)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# --- bundles -----------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Lines:
    entries: list[bytes | memoryview]  # views of one read when the bundle was read whole
    leaves: bytes  # their leaf hashes, concatenated
    long: list[tuple[int, int]]  # (position in the bundle, length) of lines over MAX_ENTRY_BYTES
    unhashed: tuple[int, int] | None = None  # (position, length) of a line over MAX_LINE_BYTES


def read_bundle(chain_path: str, index: EntryIndex, bundle: int, width: int, leaves: bytes) -> bytes:
    """The encoded bundle ``bundle`` of ``width`` entries (lines ``256 * bundle`` on), each checked
    against ``leaves``: the authenticated leaf hashes of level-0 tile ``bundle`` (at least ``width``).

    Raises :class:`BundleUnservable` for a bundle that holds a line longer than :data:`MAX_ENTRY_BYTES`
    (only once every line matched its leaf; a line over the chain's own limit, ``MAX_LINE_BYTES``, is
    never held, so its bundle is unservable unchecked), :class:`BundleDamaged` when the lines do not
    match, or when the bundle begins below the chain's minimum index (its first lines were pruned: the
    index is not rebuilt for it).
    """
    path = bundle_path(bundle, width)
    min_index = index.kept()[0]
    if bundle * TILE_WIDTH < min_index:
        raise BundleDamaged(
            path,
            f"it begins at seq {bundle * TILE_WIDTH}, below the minimum index {min_index}: pruned records",
        )
    wanted = leaves[: width * HASH_SIZE]
    lines = None
    for _attempt in range(2):
        lines = _lines(chain_path, index, bundle, width)
        if lines is not None and lines.unhashed is not None:
            at, length = lines.unhashed
            raise BundleUnservable(path, bundle * TILE_WIDTH + at, length)
        if lines is not None and lines.leaves == wanted:
            if lines.long:
                at, length = lines.long[0]
                raise BundleUnservable(path, bundle * TILE_WIDTH + at, length)
            return encode_bundle(lines.entries)
        if not index.may_rebuild():
            break
        index.rebuild()
    if lines is None:
        problem = "the chain holds fewer lines than the signed tree"
    else:
        first = next(
            i
            for i in range(width)
            if lines.leaves[i * HASH_SIZE : (i + 1) * HASH_SIZE]
            != wanted[i * HASH_SIZE : (i + 1) * HASH_SIZE]
        )
        problem = f"seq {bundle * TILE_WIDTH + first} of the chain does not hash to its signed leaf"
    raise BundleDamaged(path, f"{problem} (the chain was changed or cut below a signed checkpoint)")


def _lines(chain_path: str, index: EntryIndex, bundle: int, width: int) -> _Lines | None:
    """The bundle's lines found through the index: a full bundle whose end the index knows is read in
    one piece; any other one line by line."""
    start = index.locate(bundle)
    if start is None:
        return None
    with index.chain() as chain:
        if start > chain.start and chain.pread(1, start - 1) != b"\n":
            return None
        end = index.locate(bundle + 1) if width == TILE_WIDTH else None
        if end is not None and end - start <= width * (MAX_ENTRY_BYTES + 1):
            return _whole_lines(chain, start, end, width)
        return _read_lines(chain, start, width)


def _whole_lines(chain: ChainBytes, start: int, end: int, count: int) -> _Lines | None:
    """The ``count`` lines that fill ``[start, end)`` exactly (None when they do not)."""
    data = chain.pread(end - start, start)
    if len(data) != end - start or not data.endswith(b"\n"):
        return None
    starts: list[int] = []
    leaves = leaf_hashes(data, len(data) - 1, noted=starts)  # every line begins with b""
    if len(starts) != count:
        return None
    view = memoryview(data)
    entries: list[bytes | memoryview] = [view[a : b - 1] for a, b in itertools.pairwise([*starts, len(data)])]
    long = [(i, len(e)) for i, e in enumerate(entries) if len(e) > MAX_ENTRY_BYTES]
    return _Lines(entries, leaves, long)


def _read_lines(chain: ChainBytes, start: int, count: int) -> _Lines | None:
    """``count`` complete lines from byte ``start`` (``lines.iter_lines_from``): their bytes (those
    over :data:`MAX_ENTRY_BYTES` replaced by b"") and leaf hashes. None when the file ends first. A
    line over the chain's own limit (:data:`MAX_LINE_BYTES`, which no writer writes) is not read: the
    bundle cannot be served whatever it hashes to, and ``unhashed`` says where."""
    entries: list[bytes | memoryview] = []
    leaves: list[bytes] = []
    long: list[tuple[int, int]] = []
    size = chain.size
    for offset, line in iter_lines_from(chain, start, size, MAX_LINE_BYTES, _BLOCK):
        if line is None:
            length = line_after(chain, offset, size) - offset - 1
            return _Lines(entries, b"".join(leaves), long, (len(entries), length))
        leaves.append(leaf_hash(line))
        if len(line) > MAX_ENTRY_BYTES:
            long.append((len(entries), len(line)))
        entries.append(line if len(line) <= MAX_ENTRY_BYTES else b"")
        if len(entries) == count:
            return _Lines(entries, b"".join(leaves), long)
    return None


# --- lines too long to be entries ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class LongEntry:
    """A complete line of the chain longer than :data:`MAX_ENTRY_BYTES`: its seq (line number from
    0), byte offset and length (without its LF)."""

    seq: int
    offset: int
    length: int

    @property
    def bundle(self) -> int:
        """The index of the entry bundles (full and partial) that cannot be served."""
        return self.seq // TILE_WIDTH


def long_entries(chain_path: str) -> list[LongEntry]:
    """Every complete line of the chain longer than :data:`MAX_ENTRY_BYTES`, in order (over a
    segmented chain's files: each file's lines counted from the seq its name, or for the live file its
    first record, says it begins with; positions over the files as over one).

    Such a line covers a whole aligned window of ``(MAX_ENTRY_BYTES + 1) / 2`` bytes, so only windows
    whose first few KB hold no LF are looked at closer: a chain of short lines costs one small read per
    window (about 1/8 of the file), not a read of the whole file; seqs are counted only when a long line
    was found."""
    out: list[LongEntry] = []
    base = 0
    for segment, chain in each_chain_file(chain_path):
        size = os.fstat(chain.fileno()).st_size
        found = _long_in_file(chain, size)
        if found:
            first = _first_seq(chain, segment.first, base)
            out.extend(LongEntry(e.seq + first, base + e.offset, e.length) for e in found)
        base += size
    return out


def _first_seq(chain: io.FileIO, first: int | None, base: int) -> int:
    """The seq a chain file begins with: its name's, 0 for the only file, else its first record's."""
    if first is not None or base == 0:
        return first or 0
    fd = chain.fileno()
    line = first_line(fd, 0, os.fstat(fd).st_size, MAX_LINE_BYTES)
    return 0 if line is None else max(0, line_seq(line))


def _long_in_file(chain: io.FileIO, size: int) -> list[LongEntry]:
    """:func:`long_entries` in one file, seqs and offsets from its start."""
    found: list[tuple[int, int]] = []
    fd = chain.fileno()
    window = looked_at = 0  # each line looked at closer once: past its end, windows are probed again
    while window < size:
        if (
            window >= looked_at
            and b"\n" not in os.pread(fd, _PROBE, window)
            and b"\n" not in os.pread(fd, _WINDOW, window)
        ):
            line = _line_around(chain, window, size)
            if line is None:
                break  # no LF from here to the end (a torn tail): no complete line is left
            if line[1] > MAX_ENTRY_BYTES:
                found.append(line)
            looked_at = line[0] + line[1]
        window += _WINDOW
    return _with_seqs(fd, found)


def _line_around(chain: io.FileIO, position: int, size: int) -> tuple[int, int] | None:
    """(start, length) of the line holding byte ``position``; None when it has no LF (a torn tail)."""
    start = complete_end(chain, position)
    after = line_after(chain, position, size)
    if os.pread(chain.fileno(), 1, after - 1) != b"\n":
        return None
    return start, after - 1 - start


def _with_seqs(fd: int, found: list[tuple[int, int]]) -> list[LongEntry]:
    out: list[LongEntry] = []
    seq = position = 0
    for start, length in found:
        for block in range_blocks(fd, position, start, _BLOCK * 8):
            seq += block.count(b"\n")
            position += len(block)
        out.append(LongEntry(seq, start, length))
    return out
