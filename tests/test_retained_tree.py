"""A pruned chain's tree (``logstore.retained.RetainedTree``): from the retained leaves and the nodes
below the minimum index, every root of a size at or above it, and every proof of a retained entry, is the
whole tree's."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.logstore.retained import RetainedTree
from otel_route_shadow.tlog import TreeLevels, consistency_proof, inclusion_proof, leaf_hash, tree_hash


def leaves(n: int) -> bytes:
    return b"".join(leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(n))


@given(st.integers(1, 300), st.data(), st.integers(0, 4))
def test_every_root_and_proof_at_or_above_the_minimum_index_is_the_whole_trees(
    n: int, data: st.DataObject, align: int
) -> None:
    start = data.draw(st.integers(0, n))
    whole = TreeLevels(leaves(n))
    retained = RetainedTree(start, whole.levels[0][start * 32 :], whole, align=align)
    assert retained.size == n
    for size in range(max(start, 1), n + 1):
        assert tree_hash(retained, size) == tree_hash(whole, size)
    if start < n:
        index = data.draw(st.integers(start, n - 1))
        assert inclusion_proof(index, n, retained) == inclusion_proof(index, n, whole)
        old = data.draw(st.integers(max(start, 1), n))
        assert consistency_proof(old, n, retained) == consistency_proof(old, n, whole)


def test_a_node_below_the_minimum_index_without_tiles_is_a_value_error() -> None:
    whole = TreeLevels(leaves(20))
    retained = RetainedTree(9, whole.levels[0][9 * 32 :], None)
    with pytest.raises(ValueError, match="pruned"):
        tree_hash(retained, 20)
    assert retained.node(0, 9) == whole.node(0, 9)
