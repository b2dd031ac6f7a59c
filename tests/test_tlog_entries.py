"""Entry bundles for clients without storing the records twice (issue 26 item 4): each bundle cut from
the chain through an untrusted offset index and checked entry by entry against the authenticated level-0
tile; a wrong index is detected and rebuilt, never served; lines over 65,535 bytes named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_chain_support import edited, forge_chain, plugin_payload, write_lines
from tlog_support import ORIGIN, append, lines, log_dir

from otel_route_shadow.chain import MAX_LINE_BYTES
from otel_route_shadow.cli import main
from otel_route_shadow.logstore import (
    MAX_ENTRY_BYTES,
    BundleUnservable,
    Checkpointer,
    LogStore,
    LongEntry,
    bundle_path,
    long_entries,
    signed_checkpoint_from_note,
)
from otel_route_shadow.logstore.entries import (
    ENTRIES_INDEX_FILE,
    BundleDamaged,
    EntryIndex,
    append_index_offsets,
    encode_bundle,
    read_bundle,
)
from otel_route_shadow.tlog import Signer, TileReader, decode_bundle

SIGNER = Signer.generate(ORIGIN)


def _log(tmp_path: Path, count: int = 700, every: int = 100) -> Path:
    tmp_path.mkdir(exist_ok=True)
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, count, writer, every=every)
    writer.checkpoint()
    return chain


def _reader(chain: Path) -> TileReader:
    latest = signed_checkpoint_from_note((log_dir(chain) / "checkpoint").read_text(encoding="utf-8"))
    return TileReader(LogStore(str(chain)), latest.size, latest.root)


def _bundle(chain: Path, index: EntryIndex, bundle: int, width: int) -> list[bytes]:
    data = read_bundle(str(chain), index, bundle, width, _reader(chain).tile(0, bundle))
    return decode_bundle(data)


def test_every_bundle_is_the_chain_lines_and_the_index_is_eight_bytes_per_256_lines(tmp_path: Path) -> None:
    chain = _log(tmp_path)
    expected = lines(chain)
    index = EntryIndex(str(chain), str(log_dir(chain)))
    for bundle, width in [(0, 256), (1, 256), (2, 188), (2, 1), (0, 97)]:
        assert _bundle(chain, index, bundle, width) == expected[256 * bundle : 256 * bundle + width]
    assert (log_dir(chain) / ENTRIES_INDEX_FILE).stat().st_size == 8 * 3  # lines 0, 256 and 512
    assert index.rebuilds == 0
    assert bundle_path(1234067, 5) == "tile/entries/x001/x234/067.p/5"


def test_everything_beside_the_chain_costs_under_ten_percent_of_it(tmp_path: Path) -> None:
    """Tiles (with the partial tiles of every checkpoint), checkpoints, state and the entry index, for
    plugin-shaped records checkpointed every 100: the chain stays the one copy of the entries."""
    chain = tmp_path / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    from otel_route_shadow.chain import DecisionChain

    with DecisionChain(chain) as log:
        for n in range(2000):
            log.append(plugin_payload(n))
            if n % 100 == 99:
                writer.checkpoint()
    index = EntryIndex(str(chain), str(log_dir(chain)))
    assert _bundle(chain, index, 7, 208)  # the index written as far as the last bundle
    beside = sum(p.stat().st_size for p in log_dir(chain).rglob("*") if p.is_file())
    assert beside <= 0.10 * chain.stat().st_size, (beside, chain.stat().st_size)


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_encode_and_decode_are_inverse(entries: list[bytes]) -> None:
    assert decode_bundle(encode_bundle(entries)) == entries


def test_an_entry_over_65535_bytes_cannot_be_encoded() -> None:
    assert decode_bundle(encode_bundle([b"x" * MAX_ENTRY_BYTES])) == [b"x" * MAX_ENTRY_BYTES]
    with pytest.raises(ValueError, match="does not fit"):
        encode_bundle([b"x" * (MAX_ENTRY_BYTES + 1)])


@settings(max_examples=25, deadline=None)
@given(slot=st.integers(1, 2), value=st.integers(0, 1 << 20))
def test_a_wrong_index_is_detected_rebuilt_and_never_served(
    tmp_path_factory: pytest.TempPathFactory, slot: int, value: int
) -> None:
    chain = _log(tmp_path_factory.mktemp("wrong"))
    expected = lines(chain)
    EntryIndex(str(chain), str(log_dir(chain))).locate(2)
    path = log_dir(chain) / ENTRIES_INDEX_FILE
    data = bytearray(path.read_bytes())
    data[slot * 8 : slot * 8 + 8] = value.to_bytes(8, "big")
    path.write_bytes(bytes(data))
    index = EntryIndex(str(chain), str(log_dir(chain)))
    assert _bundle(chain, index, 2, 188) == expected[512:700]
    assert _bundle(chain, index, 1, 256) == expected[256:512]
    assert index.rebuilds <= 1
    assert index.offsets[1] == sum(len(line) + 1 for line in expected[:256])


@pytest.mark.parametrize("content", [b"", b"\x00" * 7, b"\x00" * 8 + b"\x00" * 8, b"\xff" * 24, b"junk"])
def test_an_unusable_index_file_is_ignored(tmp_path: Path, content: bytes) -> None:
    chain = _log(tmp_path)
    (log_dir(chain) / ENTRIES_INDEX_FILE).write_bytes(content)
    index = EntryIndex(str(chain), str(log_dir(chain)))
    assert _bundle(chain, index, 1, 256) == lines(chain)[256:512]


def test_an_index_that_is_a_fifo_or_a_link_is_never_followed(tmp_path: Path) -> None:
    chain = _log(tmp_path)
    (log_dir(chain) / ENTRIES_INDEX_FILE).unlink()  # the writer's
    os.mkfifo(log_dir(chain) / ENTRIES_INDEX_FILE)
    index = EntryIndex(str(chain), str(log_dir(chain)))  # never blocks on the FIFO
    assert index.offsets.tolist() == [0]
    os.unlink(log_dir(chain) / ENTRIES_INDEX_FILE)
    outside = tmp_path / "outside"
    outside.write_bytes((12345).to_bytes(8, "big") * 2)
    os.symlink(outside, log_dir(chain) / ENTRIES_INDEX_FILE)
    assert EntryIndex(str(chain), str(log_dir(chain))).offsets.tolist() == [0]


def test_a_chain_changed_below_the_signed_tree_is_a_damaged_bundle_rebuilt_once(tmp_path: Path) -> None:
    chain = _log(tmp_path)
    EntryIndex(str(chain), str(log_dir(chain))).locate(2)  # the index file, as an earlier server wrote it
    write_lines(chain, edited(chain.read_bytes().splitlines(keepends=True), 300))
    index = EntryIndex(str(chain), str(log_dir(chain)))
    leaves = _reader(chain).tile(0, 1)
    for _ in range(3):
        with pytest.raises(BundleDamaged, match="seq 300 of the chain does not hash to its signed leaf"):
            read_bundle(str(chain), index, 1, 256, leaves)
    assert index.rebuilds == 1  # a rebuilt index that still does not match is not rebuilt again
    assert _bundle(chain, index, 0, 256) == lines(chain)[:256]


def test_a_chain_cut_below_the_signed_tree_is_a_damaged_bundle(tmp_path: Path) -> None:
    chain = _log(tmp_path)
    leaves = _reader(chain).tile(0, 2)
    write_lines(chain, chain.read_bytes().splitlines(keepends=True)[:600])
    with pytest.raises(BundleDamaged, match="fewer lines than the signed tree"):
        read_bundle(str(chain), EntryIndex(str(chain), str(log_dir(chain))), 2, 188, leaves)


def _long_chain(tmp_path: Path, long_at: dict[int, int], count: int = 600) -> Path:
    """A self-consistent chain (forged: no writer emits such lines any more) with a line of about the
    given length at each given seq, checkpointed."""
    chain = tmp_path / "chain.jsonl"
    payloads = [{"kind": "route-shadow", "n": n} for n in range(count)]
    for seq, length in long_at.items():
        payloads[seq] = {"kind": "route-shadow", "n": seq, "blob": "x" * length}
    forge_chain(chain, payloads)
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    writer.checkpoint()
    return chain


def test_a_bundle_holding_a_line_over_65535_bytes_is_unservable_and_named(tmp_path: Path) -> None:
    chain = _long_chain(tmp_path, {300: 70_000, 301: 200_000})
    expected = lines(chain)
    index = EntryIndex(str(chain), str(log_dir(chain)))
    with pytest.raises(BundleUnservable) as caught:
        _bundle(chain, index, 1, 256)
    assert caught.value.seq == 300
    assert caught.value.length == len(expected[300]) > MAX_ENTRY_BYTES
    assert str(caught.value).startswith("tile/entries/001: seq 300 is 70,")
    assert _bundle(chain, index, 0, 256) == expected[:256]
    assert _bundle(chain, index, 2, 88) == expected[512:600]
    with pytest.raises(BundleUnservable):
        _bundle(chain, index, 1, 45)  # the partial bundle that holds it too
    assert _bundle(chain, index, 1, 44) == expected[256:300]
    assert index.rebuilds == 0
    assert long_entries(str(chain)) == [
        LongEntry(300, sum(len(line) + 1 for line in expected[:300]), len(expected[300])),
        LongEntry(301, sum(len(line) + 1 for line in expected[:301]), len(expected[301])),
    ]


def test_a_bundle_holding_a_line_over_the_chain_limit_is_unservable_without_holding_it(
    tmp_path: Path,
) -> None:
    # The bundle reader hashed such a line in pieces; it goes through lines.iter_lines_from now, which
    # never holds a line over MAX_LINE_BYTES: no entry can be that long, so the bundle is unservable.
    chain = _long_chain(tmp_path, {300: MAX_LINE_BYTES + 10})
    expected = lines(chain)
    index = EntryIndex(str(chain), str(log_dir(chain)))
    with pytest.raises(BundleUnservable) as caught:
        _bundle(chain, index, 1, 45)
    assert (caught.value.seq, caught.value.length) == (300, len(expected[300]))
    assert _bundle(chain, index, 1, 44) == expected[256:300]


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_long_entries_finds_lines_at_the_bound(tmp_path: Path, extra: int) -> None:
    base = tmp_path / "probe.jsonl"
    forge_chain(base, [{"blob": ""}])
    overhead = len(lines(base)[0])
    chain = tmp_path / "chain.jsonl"
    forge_chain(chain, [{"n": 0}, {"blob": "x" * (MAX_ENTRY_BYTES - overhead + extra)}, {"n": 2}])
    length = len(lines(chain)[1])
    assert length == MAX_ENTRY_BYTES + extra
    found = long_entries(str(chain))
    assert found == ([LongEntry(1, len(lines(chain)[0]) + 1, length)] if extra > 0 else [])


def test_a_long_torn_tail_is_not_an_entry(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    forge_chain(chain, [{"n": n} for n in range(3)])
    with open(chain, "ab") as handle:
        handle.write(b"y" * 300_000)
    assert long_entries(str(chain)) == []


def test_a_torn_tail_of_megabytes_is_read_once_not_once_a_window(tmp_path: Path, pread_bytes: list[int]) -> None:
    # Each 32 KiB window of a torn tail scanned on to the end of the file: the cost grew as the square of
    # the tail (`verify --key` and `serve`'s start and stop), and long lines before it were each looked at
    # again for every window they cover.
    chain = tmp_path / "chain.jsonl"
    forge_chain(chain, [{"n": 0}, {"blob": "x" * (3 * MAX_ENTRY_BYTES)}, {"n": 2}])
    with open(chain, "ab") as handle:
        handle.write(b"y" * 4_000_000)
    size = chain.stat().st_size
    pread_bytes.clear()  # what writing the chain read
    assert [entry.seq for entry in long_entries(str(chain))] == [1]
    assert sum(pread_bytes) < 4 * size, f"{sum(pread_bytes):,} bytes read for a file of {size:,}"


def test_verify_names_the_bundles_that_cannot_be_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older chain's over-long lines are not damage (exit 0), but ``verify`` says which bundles a
    tlog-tiles client cannot have."""
    chain = _long_chain(tmp_path, {300: 70_000})
    key = str(SIGNER.verifier())
    assert main(["verify", str(chain), "--key", key]) == 0
    out = capsys.readouterr().out
    assert "entry bundles: 1 cannot be served to tlog-tiles clients (1 line(s) over 65,535 bytes" in out
    assert "tile/entries/001 (and its partial bundles): seq 300, 70," in out
    assert main(["verify", str(chain), "--key", key, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["unservable_entries"]
    assert found == [{"seq": 300, "bundle": 1, "length": len(lines(chain)[300])}]
    plain = _log(tmp_path / "plain")
    assert main(["verify", str(plain), "--key", key]) == 0
    assert "entry bundles" not in capsys.readouterr().out


# -- the index the writer keeps --------------------------------------------------------------------------


def _scanned_offsets(chain: Path) -> list[int]:
    starts, offset = [], 0
    for seq, line in enumerate(lines(chain)):
        if seq % 256 == 0:
            starts.append(offset)
        offset += len(line) + 1
    return starts


def _index_file(chain: Path) -> list[int]:
    data = (log_dir(chain) / ENTRIES_INDEX_FILE).read_bytes()
    return [int.from_bytes(data[i : i + 8], "big") for i in range(0, len(data), 8)]


def test_the_writer_keeps_the_entries_index_and_a_reader_scans_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # serve built the index on its first request by scanning the chain (2.2 GB for 1M records), although
    # the writer had passed every one of those lines' offsets.
    chain = _log(tmp_path, count=1100, every=100)
    assert _index_file(chain) == _scanned_offsets(chain)  # lines 0, 256, 512, 768 and 1024
    opened: list[str] = []
    real = EntryIndex.chain
    monkeypatch.setattr(EntryIndex, "chain", lambda self: opened.append(self.chain_path) or real(self))
    index = EntryIndex(str(chain), str(log_dir(chain)))
    assert index.locate(4) == _scanned_offsets(chain)[4] and opened == []
    append(chain, 200, Checkpointer(str(chain), ORIGIN, SIGNER), every=200, start=1100)  # a later process
    assert _index_file(chain) == _scanned_offsets(chain)[:6]  # line 1280 added
    assert index.locate(5) == _scanned_offsets(chain)[5] and opened == []  # taken from the file, grown
    assert _bundle(chain, index, 4, 256) == lines(chain)[1024:1280]


def test_offsets_that_do_not_continue_the_index_are_not_appended(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    directory.mkdir()
    path = directory / ENTRIES_INDEX_FILE
    assert not append_index_offsets(str(directory), [(1, 500)])  # a gap: line 0's offset is missing
    assert not append_index_offsets(str(directory), [(0, 7)])  # line 0 starts at 0
    assert append_index_offsets(str(directory), [(0, 0), (1, 500)])
    assert not append_index_offsets(str(directory), [(3, 900)])  # a gap
    assert not append_index_offsets(str(directory), [(1, 500), (2, 400)])  # not after the last offset
    assert append_index_offsets(str(directory), [(0, 0), (1, 500), (2, 800)])  # only k = 2 is new
    assert path.read_bytes() == b"".join(n.to_bytes(8, "big") for n in (0, 500, 800))
    path.write_bytes(path.read_bytes() + b"x")  # torn: left alone
    assert not append_index_offsets(str(directory), [(3, 900)])
    path.unlink()
    os.mkfifo(path)  # never blocks, never written
    assert not append_index_offsets(str(directory), [(0, 0)])
    path.unlink()
    (tmp_path / "outside").write_bytes(b"")
    os.symlink(tmp_path / "outside", path)  # never followed
    assert not append_index_offsets(str(directory), [(0, 0)])
    assert (tmp_path / "outside").read_bytes() == b""


def test_wrong_offsets_appended_to_the_index_are_rebuilt_from_the_chain(tmp_path: Path) -> None:
    chain = _log(tmp_path, count=700)
    path = log_dir(chain) / ENTRIES_INDEX_FILE
    path.write_bytes(path.read_bytes()[:16])
    index = EntryIndex(str(chain), str(log_dir(chain)))  # lines 0 and 256
    wrong = _scanned_offsets(chain)[2] + 1000  # a wrong line 512 appended (it follows line 256's offset)
    path.write_bytes(path.read_bytes() + wrong.to_bytes(8, "big"))
    assert _bundle(chain, index, 2, 188) == lines(chain)[512:700]
    assert index.rebuilds == 1 and index.offsets.tolist() == _scanned_offsets(chain)
