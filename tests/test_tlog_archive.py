"""Range proofs (``tlog.archive``): leaves [a, b) are exactly that range of a tree, for every a <= b <= N,
checked against the tree built naively (``tlog_support.root_from_leaf_hashes``), and any change to a leaf,
a proof hash or their order fails."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tlog_support import root_from_leaf_hashes

from otel_route_shadow.tlog import (
    EMPTY_ROOT,
    ProofError,
    TreeLevels,
    range_proof,
)
from otel_route_shadow.tlog.archive import range_root, verify_range


def _leaves(n: int) -> list[bytes]:
    return [hashlib.sha256(b"leaf %d" % i).digest() for i in range(n)]


@st.composite
def _ranges(draw: st.DrawFn, max_size: int = 300) -> tuple[int, int, int]:
    size = draw(st.integers(0, max_size))
    a = draw(st.integers(0, size))
    b = draw(st.integers(a, size))
    return a, b, size


def _proof(a: int, b: int, size: int) -> tuple[list[bytes], list[bytes]]:
    leaves = _leaves(size)
    return leaves, range_proof(a, b, size, TreeLevels(b"".join(leaves)))


def test_every_range_of_small_trees_verifies_against_the_naive_root() -> None:
    for size in range(0, 34):
        leaves = _leaves(size)
        root = root_from_leaf_hashes(leaves)
        reader = TreeLevels(b"".join(leaves))
        for a in range(size + 1):
            for b in range(a, size + 1):
                proof = range_proof(a, b, size, reader)
                assert range_root(a, b, size, b"".join(leaves[a:b]), proof) == root
                assert len(proof) <= 2 * max(size, 1).bit_length()


@given(_ranges(2000))
def test_a_range_proof_gives_the_naive_root(case: tuple[int, int, int]) -> None:
    a, b, size = case
    leaves, proof = _proof(a, b, size)
    verify_range(a, b, size, b"".join(leaves[a:b]), proof, root_from_leaf_hashes(leaves))


@given(_ranges(), st.data())
def test_a_changed_leaf_fails(case: tuple[int, int, int], data: st.DataObject) -> None:
    a, b, size = case
    if a == b:
        return
    leaves, proof = _proof(a, b, size)
    changed = leaves[a:b]
    i = data.draw(st.integers(0, len(changed) - 1))
    changed[i] = hashlib.sha256(changed[i]).digest()
    with pytest.raises(ProofError):
        verify_range(a, b, size, b"".join(changed), proof, root_from_leaf_hashes(leaves))


@given(_ranges(), st.data())
def test_a_changed_proof_hash_fails(case: tuple[int, int, int], data: st.DataObject) -> None:
    a, b, size = case
    leaves, proof = _proof(a, b, size)
    if not proof:
        return
    i = data.draw(st.integers(0, len(proof) - 1))
    proof[i] = hashlib.sha256(proof[i]).digest()
    with pytest.raises(ProofError):
        verify_range(a, b, size, b"".join(leaves[a:b]), proof, root_from_leaf_hashes(leaves))


@given(_ranges(), st.data())
def test_leaves_or_proof_hashes_in_another_order_fail(
    case: tuple[int, int, int], data: st.DataObject
) -> None:
    a, b, size = case
    leaves, proof = _proof(a, b, size)
    part = leaves[a:b]
    root = root_from_leaf_hashes(leaves)
    if len(part) >= 2:
        i = data.draw(st.integers(0, len(part) - 2))
        swapped = [*part[:i], part[i + 1], part[i], *part[i + 2 :]]
        with pytest.raises(ProofError):
            verify_range(a, b, size, b"".join(swapped), proof, root)
    if len(proof) >= 2:
        j = data.draw(st.integers(0, len(proof) - 2))
        reordered = [*proof[:j], proof[j + 1], proof[j], *proof[j + 2 :]]
        with pytest.raises(ProofError):
            verify_range(a, b, size, b"".join(part), reordered, root)


@given(_ranges())
def test_a_proof_too_long_or_too_short_fails(case: tuple[int, int, int]) -> None:
    a, b, size = case
    leaves, proof = _proof(a, b, size)
    part, root = b"".join(leaves[a:b]), root_from_leaf_hashes(leaves)
    with pytest.raises(ProofError, match="too long"):
        verify_range(a, b, size, part, [*proof, EMPTY_ROOT], root)
    if proof:
        with pytest.raises(ProofError, match="too short"):
            verify_range(a, b, size, part, proof[:-1], root)


@given(_ranges(200))
def test_leaves_of_a_shifted_range_fail(case: tuple[int, int, int]) -> None:
    a, b, size = case
    if b == size or a == b:
        return
    leaves, proof = _proof(a, b, size)
    with pytest.raises(ProofError):
        verify_range(a, b, size, b"".join(leaves[a + 1 : b + 1]), proof, root_from_leaf_hashes(leaves))


def test_a_range_outside_the_tree_or_a_wrong_leaf_count_is_refused() -> None:
    leaves = _leaves(5)
    reader = TreeLevels(b"".join(leaves))
    for a, b in ((3, 2), (0, 6), (-1, 2)):
        with pytest.raises(ProofError, match="no range"):
            range_proof(a, b, 5, reader)
    proof = range_proof(1, 3, 5, reader)
    with pytest.raises(ProofError, match="leaves"):
        range_root(1, 3, 5, b"".join(leaves[1:4]), proof)
    with pytest.raises(ProofError, match="bytes"):
        range_root(1, 3, 5, b"".join(leaves[1:3]), [proof[0][:31], *proof[1:]])
