"""The one-pass scan behind `verify --checkpoint`: leaf hashes, record hashes and links, no JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_chain_support import build_chain, forge, relink, write_lines
from tlog_support import root_from_leaf_hashes

from otel_route_shadow.chain import GENESIS_HASH, Reason, VerifyResult, verify_pass
from otel_route_shadow.chain import parallel as chain_parallel
from otel_route_shadow.logstore.integrity import TreeSink
from otel_route_shadow.tlog import TreeLevels, leaf_hash, tree_hash


@pytest.fixture(autouse=True)
def parallel_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split even small chains between processes when ``jobs > 1``."""
    monkeypatch.setattr(chain_parallel, "PARALLEL_MIN_BYTES", 0)


def _scan(path: Path, jobs: int, unchecked: int = 0) -> tuple[VerifyResult, TreeLevels]:
    """One pass: the chain's verdict and the tree over its leaves."""
    sink = TreeSink(chunk_levels=3)
    result = verify_pass(path, jobs=jobs, unchecked=unchecked, leaves=sink).result
    return result, sink.tree()


def _payload(i: int) -> dict[str, object]:
    # A payload holding its own "prev_hash" member and quotes: the scan must find the record's own.
    return {"kind": "route-shadow", "n": i, "prev_hash": "f" * 64, "note": 'say "prev_hash":"x"'}


def _plain(i: int) -> dict[str, object]:
    return {"kind": "route-shadow", "n": i}


@pytest.mark.parametrize("payload", [_payload, _plain], ids=["tricky-payload-slow-path", "plain-fast-path"])
@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_scan_matches_the_definition_in_one_or_several_processes(
    tmp_path: Path, jobs: int, payload: object
) -> None:
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, 300, payload)
    with open(path, "ab") as handle:
        handle.write(b'{"torn')
    hashes = [leaf_hash(line.rstrip(b"\n")) for line in lines]
    for unchecked in (0, 1, 150, 300, 1000):  # the leaves do not depend on what is checked
        result, tree = _scan(path, jobs, unchecked)
        assert result.records == 300 and result.reason is Reason.TORN_TAIL
        assert tree.levels[0] == b"".join(hashes)
        assert tree.levels == TreeLevels(b"".join(hashes)).levels
        for size in (0, 1, 2, 3, 255, 256, 257, 299, 300):
            assert tree_hash(tree, size) == root_from_leaf_hashes(hashes[:size])


@pytest.mark.parametrize("payload", [_payload, _plain], ids=["tricky-payload", "plain"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_scan_names_the_first_line_whose_hash_or_link_fails(
    tmp_path: Path, jobs: int, payload: object
) -> None:
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, 200, payload)
    edited = list(lines)
    edited[150] = edited[150].replace(b'"n":150', b'"n":151')
    write_lines(path, edited)
    result, tree = _scan(path, jobs)
    assert (result.first_bad_seq, result.reason, tree.size) == (150, Reason.HASH_MISMATCH, 200)
    relinked = relink(edited, 150)  # hashes recomputed from 150: the links hold again
    write_lines(path, relinked)
    assert _scan(path, jobs)[0].intact
    forged, _ = forge(120, GENESIS_HASH, {"kind": "route-shadow"})
    write_lines(path, [*lines[:120], forged, *lines[121:]])
    result, tree = _scan(path, jobs)
    assert (result.first_bad_seq, result.reason, tree.size) == (120, Reason.LINK_BROKEN, 200)
