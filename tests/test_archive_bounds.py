"""``verify ARCHIVE`` reads no more than the proof names: an archive larger on disk than any gzip of the
segment its proof names is a finding before a byte is read (gzip read the zeros padding a member one byte
at a time: 3 GiB of them held ``verify`` for minutes), and one whose records go on past the size the proof
names stops there (forged, linked records were all read and their leaf hashes kept)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from prune_support import KEY, SegmentedChain, copied, segmented_chain

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.cli import main


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> SegmentedChain:
    log = segmented_chain(tmp_path_factory.mktemp("pristine") / "log", (20, 15, 30, 12))
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "35"]) == 0
    return log


@pytest.fixture
def archived(pristine: SegmentedChain, tmp_path: Path) -> SegmentedChain:
    return copied(pristine, tmp_path)


def test_an_archive_padded_with_megabytes_of_zeros_is_refused_by_its_size(
    archived: SegmentedChain, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = archived.archive / "0000000000000020.jsonl.gz"
    with archive.open("r+b") as f:
        f.truncate(64 << 20)  # sparse: zeros after the gzip member (the old code said OK after 12 s)
    began = time.monotonic()
    assert main(["verify", str(archive), "--key", str(KEY)]) == 1
    assert time.monotonic() - began < 10
    out = capsys.readouterr().out
    assert "67108864 bytes, more than" in out and "its proof names" in out, out


def test_an_archive_whose_records_go_on_past_its_proofs_size_stops_there(
    archived: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = archived.archive / "0000000000000020.jsonl.gz"
    size = json.loads((archived.archive / "0000000000000020.jsonl.proof").read_text())["size"]
    data = gzip.decompress(archive.read_bytes())
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(data.splitlines(keepends=True)[-1])
    with DecisionChain(forged) as log:  # records that link on from the archive's last one
        for n in range(3):  # 3 MB that gzip makes a few KiB of: within the bound on the archive's own size
            log.append({"kind": "route-shadow", "n": n, "pad": "x" * 1_000_000})
    archive.write_bytes(gzip.compress(data + forged.read_bytes().split(b"\n", 1)[1], 9))
    assert main(["verify", str(archive), "--key", str(KEY)]) == 1
    out = capsys.readouterr().out
    assert f"more than {size} bytes, the size its proof names" in out, out
