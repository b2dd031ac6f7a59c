"""The tlog vectors are reproducible from their generator, and the proofs in them verify."""

from __future__ import annotations

import filecmp
import json
import sys
from pathlib import Path

from otel_route_shadow.logstore import read_note_file
from otel_route_shadow.tlog import (
    Verifier,
    attest_checkpoint,
    parse_checkpoint,
    parse_witness_policy,
    verify_receipt,
)
from otel_route_shadow.tlog.note import check_signatures, parse_note
from otel_route_shadow.tlog.proofs import (
    ConsistencyProofDoc,
    InclusionProofDoc,
    check_consistency_doc,
    check_inclusion_doc,
)

sys.path.insert(0, str(Path(__file__).parent))
import tlog_vectors

VECTORS = tlog_vectors.VECTORS


def test_the_generator_reproduces_every_vector_byte_for_byte(tmp_path: Path) -> None:
    tlog_vectors.build(tmp_path)
    ours = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    stored = sorted(
        p.relative_to(VECTORS) for p in VECTORS.rglob("*") if p.is_file() and p.name != "rfc6962.json"
    )
    assert ours == stored
    for relative in ours:
        assert filecmp.cmp(tmp_path / relative, VECTORS / relative, shallow=False), relative


def test_the_stored_proofs_verify_offline() -> None:
    verifier = Verifier.parse((VECTORS / "verifier.txt").read_text())
    notes = read_note_file(str(VECTORS / "chain.jsonl.tlog" / "checkpoints")).notes
    checkpoints = [parse_checkpoint(check_signatures(parse_note(note), [verifier]).text) for note in notes]
    inclusion = InclusionProofDoc.model_validate_json((VECTORS / "inclusion-seq7.json").read_text())
    check_inclusion_doc(inclusion, checkpoints[-1], (VECTORS / "record-seq7.line").read_bytes())
    consistency = ConsistencyProofDoc.model_validate_json((VECTORS / "consistency-10-40.json").read_text())
    assert check_consistency_doc(consistency, checkpoints) == [10, 40]


def test_the_witness_vectors_verify_offline() -> None:
    manifest = json.loads((VECTORS / "manifest.json").read_text())["witness"]
    policy = parse_witness_policy((VECTORS / manifest["policy"]).read_text())
    now = manifest["cosigned_at"]
    cosigned = (VECTORS / manifest["cosigned"]).read_text()
    attestation = attest_checkpoint(cosigned, policy, now=now)
    assert attestation.quorum.met is manifest["quorum_met"] and [
        c.name for c in attestation.cosignatures
    ] == ["w1", "w2"]
    record = (VECTORS / manifest["record"]).read_bytes()
    verdict = verify_receipt((VECTORS / manifest["receipt"]).read_text(), record, policy, now=now)
    assert verdict.index == 7 and verdict.attestation.checkpoint.size == 40
