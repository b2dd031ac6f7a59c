"""The one-pass scan behind `verify --checkpoint`: leaf hashes, record hashes and links, no JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_chain_support import build_chain, forge, relink, write_lines

from otel_route_shadow.chain import GENESIS_HASH
from otel_route_shadow.tlog import TreeLevels, leaf_hash, root_from_leaf_hashes, tree_hash
from otel_route_shadow.tlog.integrity import scan_chain


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
    scan = scan_chain(str(path), jobs, min_parallel_bytes=0)
    hashes = [leaf_hash(line.rstrip(b"\n")) for line in lines]
    assert scan.size == 300 and scan.first_broken_seq is None
    assert scan.leaves == b"".join(hashes)
    tree = TreeLevels(scan.leaves)
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
    assert scan_chain(str(path), jobs, min_parallel_bytes=0).first_broken_seq == 150
    relinked = relink(edited, 150)  # hashes recomputed from 150: the links hold again
    write_lines(path, relinked)
    assert scan_chain(str(path), jobs, min_parallel_bytes=0).first_broken_seq is None
    forged, _ = forge(120, GENESIS_HASH, {"kind": "route-shadow"})
    write_lines(path, [*lines[:120], forged, *lines[121:]])
    assert scan_chain(str(path), jobs, min_parallel_bytes=0).first_broken_seq == 120
