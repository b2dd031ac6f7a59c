"""Tiles are an input (issue 26 items 1 and 2): authenticated before use, kept for every published
checkpoint, their health reported by ``verify`` apart from the chain's; hostile files never hang the writer (the
command line's refusals are in tests/test_hostile_inputs.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_chain_support import edited, write_lines
from tlog_support import ORIGIN, append, lines, log_dir, notes

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, LogStore, parse_resource
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.tlog import (
    TILE_WIDTH,
    Signer,
    Tile,
    TileDamaged,
    TileMissing,
    TileReader,
    TreeBuilder,
    authenticate,
    inclusion_proof,
    leaf_hash,
    tile_path,
    tree_hash,
)
from otel_route_shadow.tlog.merkle import verify_inclusion

SIGNER = Signer.generate(ORIGIN)
KEY = str(SIGNER.verifier())


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _signed(tmp_path: Path, size: int = 300, every: int = 300) -> Path:
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, size, writer, every=every)
    writer.checkpoint()
    return chain


def _set_hash(path: Path, slot: int, digest: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[slot * 32 : slot * 32 + 32] = digest
    path.write_bytes(bytes(data))


def test_one_flipped_leaf_hash_in_tile_0_000_is_a_damaged_tile_for_verify_and_prove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``verify --checkpoint --key`` said intact, and ``prove`` emitted proofs that
    ``verify-proof`` rejects (only the level-1 tile was checked)."""
    chain = _signed(tmp_path)
    tile = log_dir(chain) / tile_path(0, 0)
    _set_hash(tile, 17, bytes(32))
    code, out, _ = run(["verify", str(chain), "--key", KEY], capsys)
    assert code == 1
    assert "intact: 300 records" in out and "consistent with 1 checkpoint(s)" in out  # the chain is fine
    assert "TILES DAMAGED" in out and "tile/0/000: does not hold the hashes of the signed tree" in out
    assert "remove the state file" in out
    code, out, err = run(["prove", str(chain), "--seq", "17"], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert (
        "tile/0/000: does not match its parent tile tile/1/000.p/1" in err and "remove the state file" in err
    )


def test_a_record_and_its_tile_slot_forged_together_is_never_blamed_on_another_seq(tmp_path: Path) -> None:
    """Before: ``verify`` named seq 255 instead of 5: the descent trusted a full tile it never checked
    against its parent."""
    chain = _signed(tmp_path)
    forged = edited([line + b"\n" for line in lines(chain)], 5)
    write_lines(chain, forged)
    _set_hash(log_dir(chain) / tile_path(0, 0), 5, leaf_hash(forged[5].rstrip(b"\n")))
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    verdict = report.verdicts[0]
    assert verdict.reason.value == "record-changed"
    assert verdict.first_bad_seq is None  # not 255: the tiles cannot say more than the range
    assert "seq 0..255" in verdict.detail and "tile/0/000" in verdict.detail
    assert any(d.startswith("tile/0/000: does not match its parent") for d in report.tiles.damaged)


def test_the_descent_still_names_the_changed_record_when_the_tiles_are_sound(tmp_path: Path) -> None:
    chain = _signed(tmp_path)
    write_lines(chain, edited([line + b"\n" for line in lines(chain)], 5))
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    assert report.first_bad_seq == 5 and report.tiles.ok


@pytest.mark.parametrize("where", ["leaf", "edge", "level-1"])
def test_a_tile_reader_never_returns_a_hash_it_did_not_authenticate(tmp_path: Path, where: str) -> None:
    chain = _signed(tmp_path, 70_000 // 100, 700)  # 700 leaves: full tiles 0 and 1, edges .p/188, .p/2
    directory = log_dir(chain)
    checkpoint = authenticate(notes(chain)[-1], [SIGNER.verifier()]).checkpoint
    target = {"leaf": tile_path(0, 1), "edge": tile_path(0, 2, 188), "level-1": tile_path(1, 0, 2)}[where]
    _set_hash(directory / target, 1, bytes(32))
    reader = TileReader(LogStore(str(chain)), checkpoint.size, checkpoint.root)
    with pytest.raises(TileDamaged) as caught:
        for seq in range(checkpoint.size):
            inclusion_proof(seq, checkpoint.size, reader)
            reader.node(0, seq)
    assert target in caught.value.path
    (directory / tile_path(0, 0)).unlink()
    with pytest.raises((TileMissing, TileDamaged)):
        TileReader(LogStore(str(chain)), checkpoint.size, checkpoint.root).node(0, 3)


def test_every_published_checkpoints_partial_tiles_are_kept_until_the_full_tile_exists(
    tmp_path: Path,
) -> None:
    chain = _signed(tmp_path, 700, 97)
    directory = log_dir(chain)
    published = [authenticate(n, [SIGNER.verifier()]).checkpoint for n in notes(chain)]
    assert [c.size for c in published] == [97, 194, 291, 388, 485, 582, 679, 700]
    hashes = [leaf_hash(line) for line in lines(chain)]
    for checkpoint in published:
        reader = TileReader(LogStore(str(chain)), checkpoint.size, checkpoint.root)
        assert tree_hash(reader, checkpoint.size) == checkpoint.root
        last = checkpoint.size - 1
        verify_inclusion(
            last,
            checkpoint.size,
            hashes[last],
            inclusion_proof(last, checkpoint.size, reader),
            checkpoint.root,
        )
    partials = sorted(
        found.width
        for p in directory.rglob("*")
        if p.is_file()
        and (found := parse_resource(p.relative_to(directory).as_posix())) is not None
        and found.kind == "tile"
        and found.width < TILE_WIDTH
    )
    # tile/0/002: 70, 167, 188; tile/1/000: 1, 2. Those of tiles 0/000 and 0/001 went once they were full.
    assert partials == [1, 2, 70, 167, 188]


def test_an_old_log_gets_the_partial_tiles_it_removed_back_at_the_next_checkpoint(tmp_path: Path) -> None:
    chain = _signed(tmp_path, 700, 97)
    directory = log_dir(chain)
    for folder in directory.rglob("*.p"):  # what the earlier writer kept: the widest partial only
        widths = sorted(int(p.name) for p in folder.iterdir())
        for width in widths[:-1]:
            (folder / str(width)).unlink()
    assert verify_against_checkpoints(str(chain), notes(chain), [KEY]).tiles.missing
    append(chain, 10, Checkpointer(str(chain), ORIGIN, SIGNER), every=10, start=700)
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    assert report.ok and report.tiles.ok, report.tiles


def test_a_changed_partial_tile_of_an_older_checkpoint_is_rewritten_by_the_next_process(
    tmp_path: Path,
) -> None:
    chain = _signed(tmp_path, 700, 97)
    _set_hash(log_dir(chain) / tile_path(0, 2, 70), 3, bytes(32))
    assert verify_against_checkpoints(str(chain), notes(chain), [KEY]).tiles.damaged
    append(chain, 10, Checkpointer(str(chain), ORIGIN, SIGNER), every=10, start=700)
    assert verify_against_checkpoints(str(chain), notes(chain), [KEY]).tiles.ok


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("name", ["state", "tile", "checkpoints"])
def test_a_fifo_in_the_log_directory_never_hangs_the_writer(tmp_path: Path, name: str) -> None:
    chain = _signed(tmp_path, 300, 300)
    directory = log_dir(chain)
    path = directory / (tile_path(1, 0, 1) if name == "tile" else name)
    _fifo(path)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 20, writer, every=10, start=300)  # returns: nothing waits on the FIFO
    if name != "checkpoints":
        assert writer.last is not None and writer.last.size == 320 and writer.refused is None


def test_a_chain_handed_over_without_its_tile_store_is_not_a_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = _signed(tmp_path)
    saved = tmp_path / "saved-elsewhere.txt"
    shutil.copy(log_dir(chain) / "checkpoints", saved)
    shutil.rmtree(log_dir(chain))
    code, out, _ = run(["verify", str(chain), "--key", KEY, "--checkpoint", str(saved)], capsys)
    assert code == 0, out
    assert "tiles: no tile store" in out and "not checked" in out


def test_a_tile_that_is_a_symbolic_link_is_damaged_for_verify_as_for_the_tile_reader(tmp_path: Path) -> None:
    """Before: ``verify``'s tile health followed a symbolic link that the tile reader (and ``serve``)
    refused, so the same tile was sound for one and damaged for the other. Tiles are read one way now
    (``LogStore.tile_file``)."""
    chain = _signed(tmp_path, 600, 600)
    directory = log_dir(chain)
    target = directory / tile_path(0, 1)
    copy = tmp_path / "same-bytes"
    copy.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(copy)
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    assert report.first_bad_seq is None
    assert [d.split(":")[0] for d in report.tiles.damaged] == [tile_path(0, 1)]
    checkpoint = authenticate(notes(chain)[-1], [SIGNER.verifier()]).checkpoint
    with pytest.raises(TileDamaged) as caught:
        TileReader(LogStore(str(chain)), checkpoint.size, checkpoint.root).node(0, 300)
    assert caught.value.path == tile_path(0, 1)


class _Memory:
    """Tiles kept in a dict: any ``TileStorage`` will do for the authenticating reader."""

    def __init__(self) -> None:
        self.tiles: dict[Tile, bytes] = {}

    def read_tiles(self, tiles: Sequence[Tile]) -> list[bytes]:
        found = []
        for tile in tiles:
            if tile not in self.tiles:
                raise TileMissing(tile.path, "missing")
            found.append(self.tiles[tile])
        return found

    def save_tiles(self, tiles: Sequence[Tile], data: Sequence[bytes]) -> None:
        self.tiles.update(zip(tiles, data, strict=True))


def _stored_tree(size: int) -> tuple[list[bytes], TreeBuilder, _Memory, TileReader]:
    """A tree of ``size`` leaves, its tiles saved in memory, and a reader of them."""
    leaves = [leaf_hash(b"%d" % i) for i in range(size)]
    builder = TreeBuilder()
    builder.extend(leaves)
    storage = _Memory()
    full, partials = builder.take_full(), builder.partials()
    storage.save_tiles(
        [Tile(level, index) for level, index, _ in full] + [Tile(*p[:3]) for p in partials],
        [data for *_, data in full] + [data for *_, data in partials],
    )
    return leaves, builder, storage, TileReader(storage, size, builder.root())


def test_the_tile_reader_authenticates_tiles_from_any_storage_and_never_returns_a_forged_hash() -> None:
    leaves, builder, storage, reader = _stored_tree(300)
    assert [reader.node(0, i) for i in range(300)] == leaves
    storage.tiles[Tile(0, 0)] = bytes(32) + storage.tiles[Tile(0, 0)][32:]
    with pytest.raises(TileDamaged):
        TileReader(storage, 300, builder.root()).node(0, 0)


def test_a_published_partial_tile_that_is_a_symbolic_link_is_replaced_by_the_next_writer(
    tmp_path: Path,
) -> None:
    """Before: the writer compared a tile with what it would write through the link, found the same
    bytes and kept the link, which the tile reader, ``serve`` and ``verify`` refuse: never repaired."""
    chain = _signed(tmp_path, 300, 300)
    directory = log_dir(chain)
    partial = directory / tile_path(0, 1, 44)
    copy = tmp_path / "same-bytes"
    copy.write_bytes(partial.read_bytes())
    partial.unlink()
    partial.symlink_to(copy)
    assert verify_against_checkpoints(str(chain), notes(chain), [KEY]).tiles.damaged
    append(chain, 10, Checkpointer(str(chain), ORIGIN, SIGNER), every=10, start=300)
    assert not partial.is_symlink() and partial.read_bytes() == copy.read_bytes()
    report = verify_against_checkpoints(str(chain), notes(chain), [KEY])
    assert report.ok and report.tiles.ok, report.tiles


def test_the_edge_of_a_prefix_of_the_tree_resumes_to_the_same_root() -> None:
    leaves, builder, _, reader = _stored_tree(300)
    assert reader.edge() == reader.edge(300)
    for m in (0, 1, 255, 256, 257, 299, 300):
        resumed = TreeBuilder(m, reader.edge(m))
        resumed.extend(leaves[m:])
        assert resumed.root() == builder.root(), m
    with pytest.raises(ValueError):
        reader.edge(301)
