"""RFC 6962 hashing and proofs: known answers (transparency-dev/merkle test data) and invariants."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tlog_support import root_from_leaf_hashes

from otel_route_shadow.tlog import (
    EMPTY_ROOT,
    CompactRange,
    ProofError,
    TreeBuilder,
    TreeLevels,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    range_hash,
    verify_consistency,
)
from otel_route_shadow.tlog.merkle import perfect_root, subtrees, verify_inclusion

VECTORS = json.loads(
    (Path(__file__).parent / "vectors" / "tlog" / "rfc6962.json").read_text(encoding="utf-8")
)
LEAVES = [bytes.fromhex(h) for h in VECTORS["leaves_hex"]]
HASHES = [leaf_hash(leaf) for leaf in LEAVES]


def _b(text: str) -> bytes:
    return base64.b64decode(text)


def _range(hashes: list[bytes]) -> TreeLevels:
    """A node reader over the leaf hashes (every level in memory)."""
    return TreeLevels(b"".join(hashes))


def test_empty_root_is_sha256_of_nothing() -> None:
    assert EMPTY_ROOT.hex() == VECTORS["empty_root_hex"]
    assert root_from_leaf_hashes([]) == EMPTY_ROOT


@pytest.mark.parametrize("size", range(1, 9))
def test_known_roots(size: int) -> None:
    expected = VECTORS["roots_hex"][size - 1]
    assert root_from_leaf_hashes(HASHES[:size]).hex() == expected
    builder, compact = TreeBuilder(), CompactRange()
    for h in HASHES[:size]:
        builder.extend([h])
        compact.append(h)
    assert builder.root().hex() == expected
    assert compact.root().hex() == expected


@pytest.mark.parametrize("case", VECTORS["inclusion"], ids=lambda c: c["source"])
def test_known_inclusion_proofs(case: dict[str, object]) -> None:
    args = (
        case["leafIdx"],
        case["treeSize"],
        _b(case["leafHash"]),
        [_b(p) for p in case["proof"]],
        _b(case["root"]),
    )  # type: ignore[index, union-attr, arg-type]
    if case["wantErr"]:
        with pytest.raises(ProofError):
            verify_inclusion(*args)  # type: ignore[arg-type]
        return
    verify_inclusion(*args)  # type: ignore[arg-type]
    made = inclusion_proof(case["leafIdx"], case["treeSize"], _range(HASHES))  # type: ignore[arg-type]
    assert [base64.b64encode(h).decode() for h in made] == case["proof"]


@pytest.mark.parametrize("case", VECTORS["consistency"], ids=lambda c: c["source"])
def test_known_consistency_proofs(case: dict[str, object]) -> None:
    args = (
        case["size1"],
        case["size2"],
        _b(case["root1"]),
        _b(case["root2"]),
        [_b(p) for p in case["proof"]],
    )  # type: ignore[index, union-attr, arg-type]
    if case["wantErr"]:
        with pytest.raises(ProofError):
            verify_consistency(*args)  # type: ignore[arg-type]
        return
    verify_consistency(*args)  # type: ignore[arg-type]
    made = consistency_proof(case["size1"], case["size2"], _range(HASHES))  # type: ignore[arg-type]
    assert [base64.b64encode(h).decode() for h in made] == case["proof"]


@given(st.integers(min_value=1, max_value=600), st.data())
def test_every_proof_we_make_verifies_and_a_flipped_bit_does_not(size: int, data: st.DataObject) -> None:
    hashes = [leaf_hash(i.to_bytes(4, "big")) for i in range(size)]
    rh = _range(hashes)
    root = range_hash(rh, 0, size)
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    proof = inclusion_proof(index, size, rh)
    verify_inclusion(index, size, hashes[index], proof, root)
    if proof:
        bad = [bytes([proof[0][0] ^ 1]) + proof[0][1:], *proof[1:]]
        with pytest.raises(ProofError):
            verify_inclusion(index, size, hashes[index], bad, root)
    with pytest.raises(ProofError):
        verify_inclusion(index, size, leaf_hash(b"other"), proof, root)
    old = data.draw(st.integers(min_value=0, max_value=size))
    cproof = consistency_proof(old, size, rh)
    old_root = range_hash(rh, 0, old)
    verify_consistency(old, size, old_root, root, cproof)
    if 0 < old < size:
        with pytest.raises(ProofError):
            verify_consistency(old, size, leaf_hash(b"x"), root, cproof)


@given(st.lists(st.binary(max_size=8), max_size=700))
def test_builder_and_compact_range_agree_with_the_definition(leaves: list[bytes]) -> None:
    hashes = [leaf_hash(leaf) for leaf in leaves]
    builder, compact = TreeBuilder(), CompactRange()
    for h in hashes:
        builder.extend([h])
        compact.append(h)
    assert builder.root() == compact.root() == root_from_leaf_hashes(hashes)


def test_proofs_for_impossible_arguments_are_refused() -> None:
    with pytest.raises(ProofError):
        inclusion_proof(5, 5, _range(HASHES))
    with pytest.raises(ProofError):
        consistency_proof(6, 5, _range(HASHES))
    with pytest.raises(ProofError):
        verify_inclusion(0, 1, b"short", [], EMPTY_ROOT)


def _tiles_by_definition(leaves: list[bytes]) -> tuple[list[tuple[int, int, bytes]], list[list[bytes]]]:
    """Every full tile and the right edge, straight from the tlog-tiles definition: level L holds
    the roots of the perfect subtrees of 256**L leaves, 256 per tile."""
    full: list[tuple[int, int, bytes]] = []
    edge: list[list[bytes]] = []
    nodes, level = leaves, 0
    while nodes or level == 0:
        count = len(nodes) // 256
        full += [(level, i, b"".join(nodes[i * 256 : (i + 1) * 256])) for i in range(count)]
        edge.append(nodes[count * 256 :])
        nodes = [root_from_leaf_hashes(nodes[i * 256 : (i + 1) * 256]) for i in range(count)]
        level += 1
    return full, edge


@given(st.integers(0, 1100), st.lists(st.integers(1, 600), min_size=1, max_size=12))
def test_extending_the_builder_in_any_chunks_gives_the_tiles_of_the_definition(
    size: int, chunks: list[int]
) -> None:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(size)]
    builder = TreeBuilder()
    start = 0
    while start < size:
        for count in chunks:
            builder.extend(leaves[start : start + count])
            start += count
    full, edge = _tiles_by_definition(leaves)
    assert builder.size == size
    assert builder.root() == root_from_leaf_hashes(leaves)
    assert sorted(builder.full) == sorted(full)
    assert [row for row in builder.edge if row] == [row for row in edge if row]


def test_extending_past_a_second_level_tile_matches_the_definition() -> None:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(TILE_SIZE_2 + 3)]
    builder = TreeBuilder()
    builder.extend(leaves[:1000])
    builder.extend(leaves[1000:])
    assert builder.root() == root_from_leaf_hashes(leaves)
    assert (1, 0) in {(level, index) for level, index, _ in builder.full}


def test_perfect_root_is_the_root_of_a_power_of_two_leaves() -> None:
    for k in range(0, 9):
        hashes = [leaf_hash(bytes([i % 256, i // 256])) for i in range(1 << k)]
        assert perfect_root(hashes) == root_from_leaf_hashes(hashes)


TILE_SIZE_2 = 256 * 256


@given(st.integers(0, 1 << 20), st.integers(0, 1 << 20))
def test_a_range_splits_into_maximal_aligned_perfect_subtrees(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    parts = list(subtrees(lo, hi))
    start = lo
    for height, index in parts:
        assert index << height == start  # aligned, and in order with no gap
        start += 1 << height
    assert start == hi
    heights = [h for h, _ in parts]  # maximal: rising then falling, each height at most twice
    assert all(heights.count(h) <= 2 for h in heights)


@given(st.lists(st.binary(max_size=4), min_size=1, max_size=300), st.data())
def test_the_range_hash_of_any_range_is_the_root_of_its_leaves(
    leaves: list[bytes], data: st.DataObject
) -> None:
    """For the ranges proofs use (Go's ``subTreeHash``): ``lo`` a multiple of a power of two at least
    ``hi - lo``, as every subtree of an RFC 6962 tree is."""
    hashes = [leaf_hash(leaf) for leaf in leaves]
    height = data.draw(st.integers(0, (len(hashes) - 1).bit_length()))
    lo = data.draw(st.integers(0, (len(hashes) - 1) >> height)) << height
    hi = data.draw(st.integers(lo + 1, min(len(hashes), lo + (1 << height))))
    assert range_hash(_range(hashes), lo, hi) == root_from_leaf_hashes(hashes[lo:hi])
    builder = TreeBuilder()
    builder.extend(hashes)
    assert builder.root() == root_from_leaf_hashes(hashes)
