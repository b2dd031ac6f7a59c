"""Repair hashes what it quarantines under the writers' lock: never more than a snapshot's bound.

A sparse ``current.json`` claiming 16 GiB (no disk used) was hashed whole: 43 s with every save
waiting on the lock. The hash now covers the first ``MAX_SNAPSHOT_BYTES`` bytes, and the evidence
says it was cut.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.store import CURRENT_FILE, RoutingPolicyStore
from otel_route_shadow.store.snapshot_format import MAX_SNAPSHOT_BYTES


def _digest_of(head: bytes, length: int) -> str:
    """SHA-256 of ``head`` followed by zeros up to ``length`` bytes (a file extended by truncate)."""
    hasher = hashlib.sha256(head)
    block = bytes(1 << 20)
    for start in range(len(head), length, len(block)):
        hasher.update(block[: min(len(block), length - start)])
    return hasher.hexdigest()


def test_repair_of_a_huge_sparse_current_file_hashes_only_the_snapshot_bound_and_says_so(
    tmp_path: Path,
) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save([RoutingPolicy.model_validate({"id": "a"})])
    current = tmp_path / CURRENT_FILE
    head = current.read_bytes()
    os.truncate(current, 16 * MAX_SNAPSHOT_BYTES)  # sparse: nothing on disk
    assert store.load().problem_kind == "too-large"
    result = store.repair()
    assert result.repaired and result.quarantine is not None
    evidence = json.loads((result.quarantine / "evidence.json").read_text("utf-8"))
    (record,) = evidence["files"]
    assert record["size"] == 16 * MAX_SNAPSHOT_BYTES
    assert (record["truncated"], record["sha256_bytes"]) == (True, MAX_SNAPSHOT_BYTES)
    # The digest is of exactly the first MAX_SNAPSHOT_BYTES bytes, not of the whole file.
    assert record["sha256"] == _digest_of(head, MAX_SNAPSHOT_BYTES)


def test_repair_evidence_of_a_file_within_the_bound_is_its_whole_digest_and_not_marked_cut(
    tmp_path: Path,
) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save([RoutingPolicy.model_validate({"id": "a"})])
    current = tmp_path / CURRENT_FILE
    os.truncate(current, MAX_SNAPSHOT_BYTES)  # exactly the bound: hashed whole
    current.write_bytes(current.read_bytes()[:-1] + b"x")
    data = current.read_bytes()
    assert store.load().state == "corrupt"
    result = store.repair()
    assert result.quarantine is not None
    (record,) = json.loads((result.quarantine / "evidence.json").read_text("utf-8"))["files"]
    assert record["sha256"] == hashlib.sha256(data).hexdigest()
    assert "truncated" not in record and "sha256_bytes" not in record
