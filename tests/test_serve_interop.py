"""Third-party conformance of ``otel-route-shadow serve`` (issue 26 item 6): against a live server of a demo
log with eight signed checkpoints, filippo.io/torchwood's ``Client`` (over its ``TileFetcher``), both
v0.9.0's ``AllEntries`` (tests/interop/serve.go) and v0.6.1's ``Entries``
(tests/interop/torchwood-v0.6.1/, the release litewitness is built from), authenticates every entry of
every published checkpoint, and golang.org/x/mod/sumdb/tlog's ``TileHashReader`` over an HTTP tile reader
proves every entry included and every published tree consistent with the latest and the one before it
(tests/interop/serve.go). A corrupted full tile and a deleted partial tile (one a published checkpoint
needs and whose full tile does not exist yet), each in a copy of the log served by its own server, make
exactly the checkpoints that need them fail there, while the server answers 409 (naming the tile in its
log; a status torchwood does not retry, so they fail at once) and 404. The partial tiles the writer removed
once their full tile existed are served as the full tile's first hashes, so every older checkpoint stays
readable by clients that do not fall back to the full tile themselves (neither of these does).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from go_interop import TORCHWOOD_V061, run_go_interop
from segment_support import segmented_chain, segments_folder, sign, whole_copy
from serve_support import get, serving
from tlog_support import append, lines, notes

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, signed_checkpoint_from_note, tlog_dir
from otel_route_shadow.tlog import Signer, tile_path

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None, reason="the go command is not installed (CI has it)"
)

ORIGIN = "example.com/route-shadow/serve-interop"
SIGNER = Signer.generate(ORIGIN)


def _demo(directory: Path) -> Path:
    directory.mkdir()
    chain = directory / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, SIGNER)
    append(chain, 700, writer, every=97)
    writer.checkpoint()
    return chain


def _copy(chain: Path, name: str) -> Path:
    target = chain.parent.parent / name
    target.mkdir()
    shutil.copy(chain, target / chain.name)
    shutil.copytree(tlog_dir(chain), tlog_dir(target / chain.name))
    return target / chain.name


def test_torchwood_and_xmod_read_every_checkpoint_over_http_and_fail_on_damage(tmp_path: Path) -> None:
    chain = _demo(tmp_path / "intact")
    published = notes(chain)
    sizes = [signed_checkpoint_from_note(note).size for note in published]
    assert sizes == [97, 194, 291, 388, 485, 582, 679, 700]
    assert len(lines(chain)) == 700

    corrupt = _copy(chain, "corrupt")
    # A full tile: trees of 512 leaves or more use it, and so do those of 257 to 511 (their partial tiles
    # tile/0/001.p/W were removed once it existed, and are served as its first hashes).
    tile = Path(tlog_dir(corrupt)) / tile_path(0, 1)
    data = bytearray(tile.read_bytes())
    data[100] ^= 1
    tile.write_bytes(bytes(data))

    deleted = _copy(chain, "partial")
    (Path(tlog_dir(deleted)) / tile_path(0, 2, 582 - 512)).unlink()  # only the checkpoint of 582 needs it

    key = str(SIGNER.verifier())
    with (
        serving([chain], "--key", key, workdir=tmp_path) as intact_server,
        serving([corrupt], "--key", key, workdir=tmp_path) as corrupt_server,
        serving([deleted], "--key", key, workdir=tmp_path) as partial_server,
    ):
        urls = [s.urls[ORIGIN] for s in (intact_server, corrupt_server, partial_server)]
        cases = [
            {"name": "intact", "url": urls[0], "chain": str(chain), "notes": published, "expect": [True] * 8},
            {
                "name": "corrupted tile/0/001",
                "url": urls[1],
                "chain": str(corrupt),
                "notes": published,
                "expect": [size < 256 for size in sizes],
            },
            {
                "name": "deleted tile/0/002.p/70",
                "url": urls[2],
                "chain": str(deleted),
                "notes": published,
                "expect": [size != 582 for size in sizes],
            },
        ]
        output = run_go_interop({"verifier": key, "serve": cases}, tmp_path)
        v061 = run_go_interop({"verifier": key, "serve": cases}, tmp_path, TORCHWOOD_V061)
        assert get(urls[1] + tile_path(0, 1))[0] == 409
        assert get(urls[2] + tile_path(0, 2, 70))[0] == 404
        assert get(urls[0] + tile_path(0, 2, 70))[0] == 200
    assert f"{3 * (1 + 2 * 8)} checks, 0 failed" in output
    # The damaged tile is a 409, which torchwood's TileFetcher does not retry: it fails at once, within
    # its Client's 3 s timeout, and names the status (a 5xx it retries for 156 s, past that timeout).
    corrupted = [line for line in output.splitlines() if "corrupted tile/0/001: torchwood" in line]
    failed = [line for line in corrupted if "ok=false" in line]
    assert failed and all(
        re.search(r"tile/(0|entries)/001(\.p/[0-9]+)?: unexpected status code 409", line) for line in failed
    ), corrupted
    assert f"{3 * 8} checks, 0 failed" in v061
    assert (
        "ok   intact: torchwood v0.6.1 Client authenticates all 700 entries of checkpoint 7: ok=true" in v061
    )
    assert (
        "tile/0/001: does not match its parent tile tile/1/000.p/2 (damaged or forged)"
        in corrupt_server.log()
    )
    assert "Traceback" not in intact_server.log() + corrupt_server.log() + partial_server.log()


def test_torchwood_and_xmod_read_a_segmented_chain_through_serve(tmp_path: Path) -> None:
    """A chain cut twice, each boundary inside an entry bundle (seq 300 and 550): torchwood's Client
    authenticates every entry of every published checkpoint through ``serve``, and x/mod proves every
    entry included (in both segments and the live file) and every published tree consistent."""
    chain = tmp_path / "segmented" / "chain.jsonl"
    chain.parent.mkdir()
    segmented_chain(chain, [300, 250, 151], signer=SIGNER, origin=ORIGIN)
    sign(chain, SIGNER, ORIGIN)
    whole = whole_copy(chain)
    assert len(list(segments_folder(chain).iterdir())) == 2
    published = notes(chain)
    assert [signed_checkpoint_from_note(note).size for note in published] == [300, 550, 701]
    key = str(SIGNER.verifier())
    with serving([segments_folder(chain)], "--key", key, workdir=tmp_path) as server:
        case = {
            "name": "segmented",
            "url": server.urls[ORIGIN],
            "chain": str(whole),
            "notes": published,
            "expect": [True] * 3,
        }
        output = run_go_interop({"verifier": key, "serve": [case]}, tmp_path)
    assert f"{1 + 2 * 3} checks, 0 failed" in output
    assert "Traceback" not in server.log()


def _pruned_case(tmp_path: Path, sizes: list[int], min_index: int) -> tuple[dict[str, object], Path]:
    """A chain cut at ``sizes`` and pruned below ``min_index`` by ``prune`` (the segments deleted), its
    whole copy, and the serve case of its published notes (sizes >= the minimum index, all of them)."""
    chain = tmp_path / "pruned" / "chain.jsonl"
    chain.parent.mkdir()
    segmented_chain(chain, sizes, signer=SIGNER, origin=ORIGIN)
    sign(chain, SIGNER, ORIGIN)
    whole = whole_copy(chain)
    key = str(SIGNER.verifier())
    assert main(["prune", str(chain), "--key", key, "--min-index", str(min_index), "--delete"]) == 0
    published = notes(chain)
    assert signed_checkpoint_from_note(published[0]).size == min_index
    case = {"name": "pruned", "chain": str(whole), "notes": published, "expect": [True] * len(published)}
    return {**case, "min_index": min_index}, chain


def test_torchwood_and_xmod_read_a_pruned_segmented_chain_through_serve(tmp_path: Path) -> None:
    """A chain cut at seq 256 and 550, pruned below 256 by ``prune``: torchwood's Client authenticates
    every entry from the minimum index on, of every published checkpoint; x/mod proves each retained entry
    included and every retained size consistent with the next and the latest; the entry bundle wholly
    below the minimum index is 410 Gone."""
    case, chain = _pruned_case(tmp_path, [256, 294, 151], 256)
    key = str(SIGNER.verifier())
    with serving([chain], "--key", key, workdir=tmp_path) as server:
        assert get(server.urls[ORIGIN] + "min-index")[2].strip() == b"256"
        output = run_go_interop({"verifier": key, "serve": [{**case, "url": server.urls[ORIGIN]}]}, tmp_path)
    assert f"{2 + 2 * 3} checks, 0 failed" in output
    assert "the entry bundle wholly below the minimum index 256 is 410 Gone: <nil>" in output
    assert "authenticates all 445 entries of checkpoint 2 from 256: ok=true" in output
    assert "Traceback" not in server.log()


def test_a_chain_pruned_inside_an_entry_bundle_serves_whole_bundles_from_the_next_bundle_boundary(
    tmp_path: Path,
) -> None:
    """Pruned below seq 300 (inside entry bundle 1, [256, 512)): serve publishes the minimum index 512, the
    bundle across the first kept record is 410 Gone whole (it used to be a 409: its first entries were
    pruned), and torchwood's Client authenticates every entry from 512 of every published checkpoint of a
    size >= 512, x/mod proves them included and those sizes consistent."""
    case, chain = _pruned_case(tmp_path, [300, 250, 151], 300)
    notes_kept = [note for note in case["notes"] if signed_checkpoint_from_note(note).size >= 512]  # type: ignore[attr-defined]
    case = {**case, "min_index": 512, "notes": notes_kept, "expect": [True] * len(notes_kept)}
    key = str(SIGNER.verifier())
    with serving([chain], "--key", key, workdir=tmp_path) as server:
        url = server.urls[ORIGIN]
        assert get(url + "min-index")[2].strip() == b"512"
        assert get(url + "tile/entries/001")[0] == 410
        assert get(url + "tile/entries/002.p/189")[0] == 200
        output = run_go_interop({"verifier": key, "serve": [{**case, "url": url}]}, tmp_path)
    assert f"{2 + 2 * 2} checks, 0 failed" in output
    assert "authenticates all 189 entries of checkpoint 1 from 512: ok=true" in output
    assert "Traceback" not in server.log()
