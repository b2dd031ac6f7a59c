"""The tile folders of a log (``tile/<L>/<N>[.p/<W>]``) as the writer in the host's process meets them
on a disk it does not trust: a folder that is a symbolic link is never followed (nothing outside the
log's folder is written or removed), and a name in a ``.p`` folder that is not a tile width as C2SP
tlog-tiles spells it (ASCII digits, no leading zero, 1 to 255) is ignored, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tlog_support import ORIGIN, append, log_dir

from otel_route_shadow.cli import main
from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore import Checkpointer, LogStore
from otel_route_shadow.tlog import HASH_SIZE, Tile


def _victim(tmp_path: Path, *names: str) -> Path:
    """A folder outside the log's, holding ``names`` (a name with a ``/`` in a subfolder)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in names:
        (victim / name).parent.mkdir(parents=True, exist_ok=True)
        (victim / name).write_text("keep me\n")
    return victim


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))
    }


def test_removing_partials_never_follows_a_symlinked_partial_folder(tmp_path: Path) -> None:
    """``tile/0/001.p`` a link to another folder: completing tile 0/001 removed every file there."""
    chain = tmp_path / "log" / "chain.jsonl"
    chain.parent.mkdir()
    victim = _victim(tmp_path, "precious.txt", "144", "5")
    before = _tree(victim)
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    assert [c.size for c in append(chain, 400, checkpointer, every=400)] == [400]
    partials = log_dir(chain) / "tile" / "0" / "001.p"
    assert sorted(os.listdir(partials)) == ["144"]
    for name in os.listdir(partials):
        (partials / name).unlink()
    partials.rmdir()
    partials.symlink_to(victim, target_is_directory=True)
    made = append(chain, 200, checkpointer, every=200, start=400)  # completes tile 0/001
    assert [c.size for c in made] == [600] and checkpointer.refused is None
    assert _tree(victim) == before
    # The name is the writer's (its full tile exists): the link is removed as a link, never followed.
    assert not os.path.lexists(partials)
    assert (log_dir(chain) / "tile" / "0" / "001").is_file()


def test_removing_partials_never_follows_a_symlinked_tile_folder(tmp_path: Path) -> None:
    """``tile/0`` a link to a folder that looks like one: its ``001.p`` was emptied and removed."""
    chain = tmp_path / "chain.jsonl"
    victim = _victim(tmp_path, "001", "001.p/5", "001.p/notes.txt")
    before = _tree(victim)
    (log_dir(chain) / "tile").mkdir(parents=True)
    (log_dir(chain) / "tile" / "0").symlink_to(victim, target_is_directory=True)
    LogStore(chain).remove_partials(0, 1)
    assert _tree(victim) == before


def test_removing_partials_removes_only_tile_width_names(tmp_path: Path) -> None:
    """Only the names C2SP tlog-tiles gives partial tiles are removed; a folder with anything else in
    it stays (``rmdir`` never removes more than an empty folder)."""
    chain = tmp_path / "chain.jsonl"
    folder = log_dir(chain) / "tile" / "0"
    folder.mkdir(parents=True)
    (folder / "001").write_bytes(b"\0" * 256 * HASH_SIZE)
    (folder / "001.p").mkdir()
    widths, others = ["1", "44", "255"], ["0", "256", "044", "\u00b2", "\u0663", "notes.txt"]
    for name in widths + others:
        (folder / "001.p" / name).write_bytes(b"")
    LogStore(chain).remove_partials(0, 1)
    assert sorted(os.listdir(folder / "001.p")) == sorted(others)
    for name in others:
        (folder / "001.p" / name).unlink()
    (folder / "001.p" / "7").write_bytes(b"")
    LogStore(chain).remove_partials(0, 1)
    assert not os.path.lexists(folder / "001.p")


@pytest.mark.parametrize("link", ["tile", "tile/0", "tile/0/001.p", "tile/1"])
def test_saving_tiles_never_writes_through_a_symlinked_tile_folder(
    tmp_path: Path, link: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tile folder that is a link to another folder: the writer created tiles there (outside the
    log's folder). Now the tile write fails as any failed write does: contained, logged once, retried,
    and nothing signed until the link is gone."""
    chain = tmp_path / "log" / "chain.jsonl"
    chain.parent.mkdir()
    victim = _victim(tmp_path)
    placed = log_dir(chain) / link
    placed.parent.mkdir(parents=True)
    placed.symlink_to(victim, target_is_directory=True)
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    append(chain, 300)
    assert checkpointer.checkpoint() is None and checkpointer.checkpoint() is None
    assert _tree(victim) == {}
    assert checkpointer.refused is None
    assert sum("checkpoint failed" in r.message for r in caplog.records) == 1
    assert not (log_dir(chain) / "checkpoint").exists()
    with pytest.raises(FileRefused, match="symbolic link"):
        LogStore(chain).save_tiles([Tile(0, 1, 3), Tile(1, 0, 1)], [b"\1" * 3 * HASH_SIZE, b"\2" * HASH_SIZE])
    assert _tree(victim) == {}
    placed.unlink()
    made = checkpointer.checkpoint()
    assert made is not None and made.size == 300
    assert (log_dir(chain) / "tile" / "0" / "001.p" / "44").is_file()


def test_a_non_ascii_digit_tile_name_is_ignored_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A file named ``²`` in a ``.p`` folder (``str.isdigit`` but not ``int``): ``prove`` printed a
    traceback and a restarted writer failed every checkpoint."""
    chain = tmp_path / "chain.jsonl"
    append(chain, 300, Checkpointer(str(chain), ORIGIN, None), every=300)
    partials = log_dir(chain) / "tile" / "0" / "001.p"
    for name in ("\u00b2", "\u0663", "044", "0", "256"):  # superscript two, Arabic-Indic three
        (partials / name).write_bytes(b"\7" * 300 * HASH_SIZE)
    assert main(["prove", str(chain), "--seq", "280"]) == 0
    assert '"checkpoint"' in capsys.readouterr().out
    # A narrower partial tile is read from the wider one C2SP names, whatever else is in the folder.
    wide = (partials / "44").read_bytes()
    assert LogStore(chain).read_tiles([Tile(0, 1, 10)]) == [wide[: 10 * HASH_SIZE]]
    append(chain, 10, start=300)
    restarted = Checkpointer(str(chain), ORIGIN, None)
    made = restarted.checkpoint()
    assert made is not None and made.size == 310 and restarted.refused is None
    assert not any("checkpoint failed" in r.message for r in caplog.records)
