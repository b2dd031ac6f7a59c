"""``serve`` of a pruned log: the minimum index at ``/<origin>/min-index`` (the first kept record rounded up
to an entry bundle), 410 Gone for entry bundles and full tiles that end at or below it, every other resource as before (tiles a retained entry's proofs need)."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from prune_support import KEY, ORIGIN, SegmentedChain, copied, segmented_chain

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import PublishedLog, pruned_resource, served_min_index
from otel_route_shadow.server import LogSite, Request
from otel_route_shadow.tlog import TILE_WIDTH


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> SegmentedChain:
    return segmented_chain(tmp_path_factory.mktemp("served") / "log", (300, 300), tail=20, every=100)


@pytest.fixture
def log(pristine: SegmentedChain, tmp_path: Path) -> SegmentedChain:
    return copied(pristine, tmp_path)


def get(site: LogSite, path: str) -> tuple[HTTPStatus, bytes]:
    response = site.respond(Request("GET", f"/{ORIGIN}/{path}", (1, 1), {}))
    return response.status, response.body


def test_a_log_never_pruned_publishes_minimum_index_0(log: SegmentedChain) -> None:
    site = LogSite([PublishedLog(str(log.chain), [KEY])])
    assert get(site, "min-index") == (HTTPStatus.OK, b"0\n")
    assert get(site, "tile/0/000")[0] == HTTPStatus.OK


def test_pruned_bundles_and_full_tiles_are_gone_and_the_rest_is_served(log: SegmentedChain) -> None:
    site = LogSite([PublishedLog(str(log.chain), [KEY])])
    assert get(site, "tile/0/000")[0] == HTTPStatus.OK
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "300"]) == 0
    # Read again (the pruned file changed): the first kept record 300, rounded up to a bundle boundary.
    assert get(site, "min-index") == (HTTPStatus.OK, b"512\n")
    status, body = get(site, "tile/entries/000")
    assert status == HTTPStatus.GONE and b"minimum index is 512" in body
    assert get(site, "tile/0/000")[0] == HTTPStatus.GONE
    assert get(site, "tile/0/001")[0] == HTTPStatus.GONE
    width = PublishedLog(str(log.chain), [KEY]).size - 512
    assert get(site, f"tile/entries/002.p/{width}")[0] == HTTPStatus.OK
    assert get(site, "tile/1/000.p/2")[0] == HTTPStatus.OK  # the level above: a retained proof needs it
    assert get(site, "checkpoint")[0] == HTTPStatus.OK


def test_an_entry_bundle_across_the_first_kept_record_is_gone_whole_not_a_409(log: SegmentedChain) -> None:
    """Pruned below 300, inside bundle [256, 512): that bundle holds pruned records, so it is refused as
    pruned (410) instead of failing as unservable (409), and the minimum index says so."""
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "300"]) == 0
    site = LogSite([PublishedLog(str(log.chain), [KEY])])
    status, body = get(site, "tile/entries/001")
    assert status == HTTPStatus.GONE and b"minimum index is 512" in body


def test_the_served_minimum_index_is_the_first_kept_record_rounded_up_to_a_bundle_within_the_tree() -> None:
    assert served_min_index(0, 0) == 0 and served_min_index(0, 700) == 0
    assert served_min_index(256, 700) == 256 and served_min_index(257, 700) == 512
    assert served_min_index(300, 400) == 400  # never beyond the served tree
    assert served_min_index(300, 200) == 200  # forced past every checkpoint: still within the tree


def test_the_pruned_resources_are_exactly_those_ending_at_or_below_the_minimum_index() -> None:
    assert pruned_resource("entries", 0, 0, TILE_WIDTH, 256)
    assert not pruned_resource("entries", 0, 1, TILE_WIDTH, 256)
    assert pruned_resource("entries", 0, 1, 10, 266) and not pruned_resource("entries", 0, 1, 11, 266)
    assert not pruned_resource("tile", 0, 0, 255, 10_000)  # a partial tile: never
    assert pruned_resource("tile", 1, 0, TILE_WIDTH, 65_536) and not pruned_resource(
        "tile", 1, 0, TILE_WIDTH, 65_535
    )
    assert not pruned_resource("checkpoint", 0, 0, TILE_WIDTH, 1 << 40)


def test_a_damaged_pruned_file_serves_as_if_nothing_were_pruned(
    log: SegmentedChain, caplog: pytest.LogCaptureFixture
) -> None:
    (Path(str(log.chain) + ".tlog") / "pruned").write_text("{not json")
    site = LogSite([PublishedLog(str(log.chain), [KEY])])
    assert get(site, "min-index") == (HTTPStatus.OK, b"0\n")
    assert "serving as if nothing were pruned" in caplog.text


def test_a_bundle_of_a_pruned_log_whose_pruned_file_is_damaged_names_that_file_not_the_chain(
    log: SegmentedChain,
) -> None:
    # Every bundle was a 409 "the chain was changed or cut below a signed checkpoint": the chain was as
    # signed, and its pruned file, which says where the kept records begin, was what could not be read.
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "300"]) == 0
    (Path(str(log.chain) + ".tlog") / "pruned").write_text("{not json")
    status, body = get(LogSite([PublishedLog(str(log.chain), [KEY])]), "tile/entries/000")
    assert status == HTTPStatus.CONFLICT
    assert b"the log's pruned file cannot be used" in body and b"changed or cut" not in body


def test_retained_entries_keep_their_inclusion_proofs_and_retained_sizes_their_consistency(
    log: SegmentedChain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "300"]) == 0
    checkpoint = str(log.chain) + ".tlog/checkpoint"
    for argv in (["--seq", "300"], ["--seq", str(log.total - 1)], ["--from", "300"]):
        capsys.readouterr()
        assert main(["prove", str(log.chain), *argv]) == 0
        proof = tmp_path / "proof.json"
        proof.write_text(capsys.readouterr().out)
        assert (
            main(["verify-proof", "--proof", str(proof), "--checkpoint", checkpoint, "--key", str(KEY)]) == 0
        )


def test_a_segment_an_interrupted_prune_left_below_the_minimum_index_is_not_served_from(
    log: SegmentedChain,
) -> None:
    """A prune killed after saving ``pruned`` and before removing the segment leaves it on disk: the
    served bundles are cut from the files kept, never shifted by the stray file's bytes."""
    first = Path(str(log.chain) + ".segments") / "0000000000000000.jsonl"
    left = first.read_bytes()
    assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "300", "--delete"]) == 0
    width = PublishedLog(str(log.chain), [KEY]).size - 512
    clean = get(LogSite([PublishedLog(str(log.chain), [KEY])]), f"tile/entries/002.p/{width}")
    first.write_bytes(left)
    (Path(str(log.chain) + ".tlog") / "entries-index").unlink(missing_ok=True)  # scanned again
    stray = get(LogSite([PublishedLog(str(log.chain), [KEY])]), f"tile/entries/002.p/{width}")
    assert clean[0] == HTTPStatus.OK and stray == clean


@pytest.mark.parametrize("path", ["tile/entries/000", "tile/entries/001"])
def test_a_bundle_pruned_while_it_is_read_is_gone_not_a_409(
    log: SegmentedChain, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    # The minimum index was read (0), then a prune below 300 committed: the bundle's lines were no longer
    # in the chain and it was answered 409, "pruned records", which a tlog-tiles client takes as final
    # damage and the server logged as a problem.
    site = LogSite([PublishedLog(str(log.chain), [KEY])])
    read = LogSite._min_index
    pruned: list[int] = []

    def read_then_prune(self: LogSite, served: Any) -> int:
        found = read(self, served)
        if not pruned:
            assert main(["prune", str(log.chain), "--key", str(KEY), "--min-index", "300"]) == 0
            pruned.append(found)
        return found

    monkeypatch.setattr(LogSite, "_min_index", read_then_prune)
    status, body = get(site, path)
    assert pruned == [0]
    assert status == HTTPStatus.GONE and b"minimum index is 512" in body
    assert "pruned records" not in caplog.text and "410 Gone" in caplog.text
