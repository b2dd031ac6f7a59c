"""What-if replay: zero changes against the cited snapshot, integrity findings for forged records, and
exactly the project-x decisions changing under a "project-x uses z.ai" candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_analysis_gaps import defied_context
from test_analysis_support import (
    EXPECTED,
    PROJECT_X_ZAI,
    RECORDED_POLICIES,
    append_observations,
    build_chain,
    rewrite_chain,
    snapshot_of,
)

from otel_route_shadow.analysis.source import ChainStatus, UnverifiedChainError
from otel_route_shadow.analysis.whatif import replay, replay_payloads
from otel_route_shadow.cli.whatif_text import format_whatif
from otel_route_shadow.core import PolicySnapshot, RoutingPolicy
from otel_route_shadow.store import RoutingPolicyStore


def test_replay_against_the_cited_snapshot_changes_nothing(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    result = replay(chain, snapshot_of(RECORDED_POLICIES))
    assert result.replayed == EXPECTED["spawns"]
    assert result.changed == 0
    assert result.integrity_findings == 0
    assert result.integrity.checked == EXPECTED["spawns"]
    assert result.integrity.passed == EXPECTED["spawns"]
    assert result.integrity.unchecked == 0
    # Six distinct contexts, each explained once however many records share it.
    assert result.distinct_contexts == 6
    assert result.total.agreed_before == result.total.agreed_after == EXPECTED["agreed"]


def _tamper_id(target_seq: int) -> Any:
    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        if seq == target_seq:
            attributes = dict(payload["attributes"])
            attributes["route_shadow.decision_id"] = "0" * 64
            return {**payload, "attributes": attributes}
        return payload

    return edit


def test_forged_decision_id_in_a_rehashed_chain_is_an_integrity_finding(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    forged = tmp_path / "forged.jsonl"
    seqs = []

    def remember(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        seqs.append(seq)
        return payload

    rewrite_chain(chain, tmp_path / "copy.jsonl", remember)
    target = seqs[5]
    rewrite_chain(chain, forged, _tamper_id(target))
    result = replay(forged, snapshot_of(RECORDED_POLICIES))
    assert result.chain.verified  # re-hashed: the chain itself verifies
    assert result.integrity.findings == {"decision-id-mismatch": 1}
    assert result.integrity.examples[0]["seq"] == target
    # An integrity finding is not a difference.
    assert result.changed == 0
    assert result.replayed == EXPECTED["spawns"] - 1
    assert "INTEGRITY" in format_whatif(result)


def test_forged_decision_fields_with_the_original_id_are_an_integrity_finding(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    forged = tmp_path / "forged.jsonl"

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        attributes = payload["attributes"]
        if attributes.get("route_shadow.outcome") == "held":
            attributes = {**attributes, "route_shadow.outcome": "selected"}
            return {**payload, "attributes": attributes}
        return payload

    rewrite_chain(chain, forged, edit)
    result = replay(forged, snapshot_of(RECORDED_POLICIES))
    assert result.integrity.findings == {"decision-fields-mismatch": 1}
    assert "outcome" in result.integrity.examples[0]["detail"]
    assert result.changed == 0


def test_unparseable_or_missing_context_is_an_integrity_finding() -> None:
    status = ChainStatus(path="mem", records=2, verified=True, checked=True)
    payloads = [
        (1, {"kind": "route-shadow", "attributes": {"route_shadow.outcome": "selected"}}),
        (
            2,
            {
                "kind": "route-shadow",
                "attributes": {"route_shadow.outcome": "selected", "route_shadow.context": "{not json"},
            },
        ),
    ]
    result = replay_payloads(payloads, PolicySnapshot(), chain=status)
    assert result.integrity.findings == {"record-incomplete": 1, "context-unparseable": 1}
    assert result.replayed == 0


ALSO = ("policy_source", "rung", "policy_id")


def test_project_x_uses_zai_changes_exactly_the_project_x_decisions(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    written = build_chain(chain, snapshot=PolicySnapshot())  # recorded with no policies at all
    candidate = snapshot_of(PROJECT_X_ZAI)
    result = replay(chain, candidate, by=["repo", "mechanism"], examples=50)
    project_x = [
        payload for _, payload in written if payload["attributes"]["route_shadow.repo"] == "acme/project-x"
    ]
    assert result.replayed == 17
    assert result.changed == len(project_x) == 11
    by_repo = result.group("repo")
    assert by_repo[("acme/project-x",)].changed == 11
    assert by_repo[("acme/other",)].changed == 0
    changed_seqs = {example["seq"] for examples in result.examples.values() for example in examples}
    assert {e["repo"] for examples in result.examples.values() for e in examples} == {"acme/project-x"}
    assert len(changed_seqs) == 11
    # How they change: every project-x spawn goes to z.ai under the managed policy.
    for examples in result.examples.values():
        for example in examples:
            assert example["before"]["policy_source"] == "legacy-compatibility"
            assert example["after"]["policy_source"] == "managed-policy"
            assert example["after"]["policy_id"] == "project-x-uses-zai"
            assert example["after"]["provider"] == "zai"
    # A (4) and D (5) were on anthropic; B (2) already ran on zai: provider changes only for 9.
    assert result.field_changes["provider"] == 9
    assert result.field_changes["policy_id"] == 11
    transitions = {t: n for t, n in result.total.transitions.items()}
    assert transitions == {
        ("selected", "selected", "anthropic", "zai", "no-managed-policy", "policy-selected", (*ALSO, "account")): 9,
        ("selected", "selected", "zai", "zai", "no-managed-policy", "policy-selected", ALSO): 2,
    }
    # The records cite the empty set, whose hash proves its content: integrity is still checked.
    assert result.integrity.checked == 17 and result.integrity_findings == 0
    assert result.total.agreed_before == 17
    assert result.total.agreed_after == 17 - 9


def test_integrity_of_records_citing_another_snapshot_needs_the_store(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    first = store.save([RoutingPolicy.model_validate(p) for p in RECORDED_POLICIES])
    second = store.save([RoutingPolicy.model_validate(p) for p in PROJECT_X_ZAI])
    assert (first.revision, second.revision) == (1, 2)
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, snapshot=store.revision(1))
    candidate = snapshot_of(PROJECT_X_ZAI)

    unchecked = replay(chain, candidate)
    assert unchecked.integrity.checked == 0
    assert unchecked.integrity.unchecked == 17
    assert "no --store" in next(iter(unchecked.integrity.not_checked))
    assert "NOT checked" in format_whatif(unchecked)

    checked = replay(chain, store.revision(2), cited_loader=store.revision)
    assert checked.integrity.checked == 17 and checked.integrity_findings == 0
    assert checked.changed == unchecked.changed > 0

    # A store that holds a different set under the cited revision: every record is a finding.
    other = RoutingPolicyStore(tmp_path / "other")
    other.save([RoutingPolicy.model_validate(p) for p in PROJECT_X_ZAI])
    mismatch = replay(chain, candidate, cited_loader=other.revision)
    assert mismatch.integrity.findings == {"cited-snapshot-mismatch": 17}


def test_records_made_against_a_corrupt_snapshot_replay_as_unavailable(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, snapshot=PolicySnapshot(available=False), snapshot_state="corrupt")
    # The candidate's revision and hash equal the cited ones, but it is available: not the same snapshot.
    result = replay(chain, PolicySnapshot())
    assert result.integrity.checked == 17 and result.integrity_findings == 0
    assert result.changed == 17
    assert {t[0] for t in result.total.transitions} == {"held"}


def test_time_window_and_unverified_chain(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    result = replay(chain, snapshot_of(RECORDED_POLICIES), since="2026-09-01T05:00:00Z")
    assert result.replayed == 12 and result.outside_window == 5
    text = chain.read_text(encoding="utf-8")
    chain.write_text(text.replace("acme/other", "acme/0ther", 1), encoding="utf-8")
    with pytest.raises(UnverifiedChainError):
        replay(chain, snapshot_of(RECORDED_POLICIES))
    flagged = replay(chain, snapshot_of(RECORDED_POLICIES), allow_unverified=True)
    assert flagged.flagged
    assert flagged.as_dict()["totals"]["unverified"] is True


def test_concurrent_verification_gives_the_same_replay(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, snapshot=PolicySnapshot())
    serial = replay(chain, snapshot_of(PROJECT_X_ZAI), concurrent=False)
    parallel = replay(chain, snapshot_of(PROJECT_X_ZAI), concurrent=True)
    assert parallel.as_dict() == serial.as_dict()
    assert parallel.changed == 11


@pytest.mark.parametrize(
    ("attribute", "value", "kind"),
    [
        ("route_shadow.outcome", "held", "decision-fields-mismatch"),
        ("route_shadow.provider", "zai", "decision-fields-mismatch"),
        ("route_shadow.snapshot.revision", 7, "cited"),
        ("route_shadow.context", "ALTERED", "decision-id-mismatch"),
    ],
)
def test_a_forgery_in_a_later_copy_of_a_known_decision_is_caught(
    tmp_path: Path, attribute: str, value: Any, kind: str
) -> None:
    """A decision id already replayed and checked lets later records skip the replay, but only if
    they carry the same context, citation and fields: a forged copy still goes the careful way."""
    chain = tmp_path / "chain.jsonl"
    written = build_chain(chain)
    a_seqs = [i for i, (name, _) in enumerate(written) if name == "A"]
    target = a_seqs[2]  # two earlier records carry the same decision id

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        if seq != target:
            return payload
        attributes = dict(payload["attributes"])
        if value == "ALTERED":
            attributes[attribute] = attributes[attribute].replace('"agentic"', '"one-shot"')
        else:
            attributes[attribute] = value
        return {**payload, "attributes": attributes}

    forged = tmp_path / "forged.jsonl"
    rewrite_chain(chain, forged, edit)
    result = replay(forged, snapshot_of(RECORDED_POLICIES), concurrent=False)
    if kind == "cited":
        # Revision 7 of an unknown snapshot: not the candidate, no store to check it against.
        assert result.integrity.findings == {}
        assert result.integrity.unchecked == 1
    else:
        assert result.integrity.findings == {kind: 1}
        assert result.integrity.examples[0]["seq"] == target
    assert result.integrity.passed == EXPECTED["spawns"] - 1


def test_whatif_agreement_after_counts_a_requirement_defied_spawn_as_the_recorder_does(tmp_path: Path) -> None:
    # Replayed against the snapshot it was recorded under, nothing changes, so agreement must not
    # change either: a route that defied its literal requirement agreed with neither decision.
    chain = tmp_path / "chain.jsonl"
    append_observations(chain, [(defied_context(), {})])
    result = replay(chain, snapshot_of(RECORDED_POLICIES))
    assert result.changed == 0
    assert result.total.agreed_before == result.total.agreed_after == 0
    text = format_whatif(result)
    assert "agreement with the route that ran 0.0% recorded -> 0.0% candidate" in text


def test_a_change_of_account_alone_names_it_not_a_transition_to_itself() -> None:
    from otel_route_shadow.analysis.changes import change, transition_dict
    from otel_route_shadow.analysis.replaying import Replayed
    from otel_route_shadow.cli.whatif_text import transition_text
    from otel_route_shadow.core import DECISION_FIELDS

    recorded = tuple(f"{name}-1" for name in DECISION_FIELDS)
    after = tuple(f"{name}-2" if name == "account" else f"{name}-1" for name in DECISION_FIELDS)
    transition, changed, _agreed = change(recorded, Replayed("id", after, True, None), True)
    assert changed == ("account",) and transition is not None
    assert transition_text(transition) == "outcome-1, provider provider-1, reason reason-1; also changed: account"
    assert transition_dict(transition)["also_changed"] == ["account"]
    outcome_only = tuple(f"{name}-2" if name == "outcome" else f"{name}-1" for name in DECISION_FIELDS)
    transition, _changed, _agreed = change(recorded, Replayed("id", outcome_only, True, None), True)
    assert transition is not None and "also" not in transition_text(transition)
