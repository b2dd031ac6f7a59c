"""Policy gaps against transient mechanisms (issue 15 part 5), findings that are never suppressed, and
policy usage (issue 18 part 2), against the hand-computed scenario of test_analysis_support.

Mechanism classes of the scenario: A (4, role-dial, managed, agrees), B (2, credit-failover, managed,
diverges), C (3, role-dial, legacy, direct-http), D (5, fleet-ratchet, legacy), E (1, role-dial,
managed, held), F (2, role-dial, managed, rejected, direct-http).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_analysis_support import (
    ACCOUNTS,
    RECORDED_POLICIES,
    SCENARIO,
    Entry,
    build_chain,
    context,
    rewrite_chain,
    snapshot_of,
)
from test_record_compat import NEW_KEYS

from otel_route_shadow.analysis import build_report, cited_loader, replay
from otel_route_shadow.analysis.gaps import (
    MIN_SPAWNS,
    NOT_ENOUGH,
    NOT_READY,
    READY,
    TRANSIENT_ONLY,
    UNKNOWN,
    GapTally,
    SpawnFacts,
)
from otel_route_shadow.cli import main
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.cli.whatif_text import format_whatif
from otel_route_shadow.core import LegacyStage, RouteContext, RoutingPolicy, build_legacy_route
from otel_route_shadow.core.shadow import REQUIREMENT_DEFIED
from otel_route_shadow.store import RoutingPolicyStore


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    return path


def older(source: Path, target: Path) -> Path:
    """The same chain as an older writer would have left it: none of issue 15's fields."""

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in payload["attributes"].items() if k not in NEW_KEYS}
        return {**payload, "attributes": kept}

    rewrite_chain(source, target, edit)
    return target


def defied_context() -> RouteContext:
    """ADR-0139's example: a claude-opus spawn served by GLM after a credit failover, whose host
    claims a mechanism its stages do not show."""
    stages = [
        LegacyStage(mechanism="role-dial", provider="anthropic", model="claude-opus-4-1"),
        LegacyStage(mechanism="credit-failover", provider="zai", model="glm-5.1"),
    ]
    legacy = build_legacy_route(stages, "agentic", account="zai-legacy")
    assert legacy is not None
    return RouteContext(
        repo="acme/defied",
        role="implementer",
        request_face="agentic",
        requirement="claude-opus",
        accounts=ACCOUNTS,
        legacy_route=legacy.model_copy(update={"mechanism": "fleet-ratchet"}),
    )


def test_the_split_counts_persistent_gaps_and_transient_mechanisms(chain: Path) -> None:
    report = build_report(chain)
    total = report.gap_total
    assert (total.spawns, total.persistent, total.gaps, total.transient, total.uncovered_transient) == (
        17,
        10,  # A, C, E, F: role dials
        3,  # C: a role dial no managed policy decides
        7,  # B, D
        5,  # D: the fleet ratchet, legacy compatibility
    )
    assert total.verdict()[0] == NOT_READY
    roles = {key: g for key, g in report.gaps["role"]}
    assert (roles["implementer"].gaps, roles["implementer"].uncovered_transient) == (3, 5)
    verdict, why = roles["implementer"].verdict()
    assert verdict == NOT_READY and "3 of 8 spawn(s) (37.5%)" in why and "policy gap" in why
    assert "bypass" in why  # C went direct-http
    reviewer, why = roles["reviewer"].verdict()
    assert reviewer == NOT_READY and "divergence" in why and "policy gap" not in why


def test_ready_and_transient_only_groups(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    ready = context("acme/ready", "reviewer", "agentic", "anthropic", "role-dial")
    ratchet = context("acme/ratchet", "implementer", "agentic", "anthropic", "fleet-ratchet", gateway=True)
    build_chain(path, [Entry("ready", ready, 3), Entry("ratchet", ratchet, 2)])
    repos = dict(build_report(path, min_spawns=1).gaps["repo"])
    assert repos["acme/ready"].verdict()[0] == READY
    verdict, why = repos["acme/ratchet"].verdict()
    assert verdict == TRANSIENT_ONLY and "no policy gap" in why and "2 of 2 spawn(s) (100.0%)" in why


def test_a_record_without_a_mechanism_is_unknown_not_a_gap() -> None:
    tally = GapTally()
    old = SpawnFacts(
        mechanism=None,
        managed=False,
        agreed=True,
        bypass=False,
        findings=frozenset(),
        claim_mismatch=None,
        whole_decision=False,
    )
    tally.add(old, 4)
    verdict, why = tally.verdict()
    assert verdict == UNKNOWN and "4 spawn(s) record no legacy mechanism" in why
    assert tally.as_dict()["requirement_defied"] is None  # unknown, not zero


def test_an_older_chain_shows_findings_as_unknown_in_every_output(chain: Path, tmp_path: Path) -> None:
    report = build_report(older(chain, tmp_path / "older.jsonl"))
    assert not report.findings_known
    assert "findings (requirement-defied): unknown" in format_report(report)
    findings = report.as_dict()["findings"]
    del findings["counting"]
    assert findings == {
        "known": False,
        "requirement_defied": None,
        "by_code": {},
        "by_divergence": {},
        "claim_mismatches": None,
    }
    assert "unknown: no record carries the whole decision" in render_html(report)
    # The same chain as written today: findings are known, and none.
    assert build_report(chain).as_dict()["findings"]["requirement_defied"] == 0


def test_requirement_defied_and_claim_mismatches_are_shown_never_suppressed(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, [*SCENARIO, Entry("defied", defied_context(), 2)])
    report = build_report(path)
    assert report.findings == {REQUIREMENT_DEFIED: 2}
    assert report.claim_mismatches == {"mechanism": 2}
    assert report.divergences[REQUIREMENT_DEFIED] == 2  # the divergence names it too
    text = format_report(report)
    assert "findings: requirement-defied 2 (10.5%)" in text
    assert "claim mismatches (the host claimed otherwise than derived): mechanism 2" in text
    data = report.as_dict()
    assert data["findings"]["requirement_defied"] == 2
    defied = next(row for row in data["policy_gaps"]["repo"] if row["key"] == {"repo": "acme/defied"})
    assert defied["requirement_defied"] == 2 and defied["readiness"] == NOT_READY
    assert "requirement-defied" in defied["why"] and "divergence" not in defied["why"]
    assert defied["transient"] == 2  # derived from the stages: the credit failover moved the route
    assert "<b>requirement-defied</b>: 2 of 19 spawns" in render_html(report)


def test_policy_usage_of_the_candidate_in_whatif(chain: Path) -> None:
    candidate = snapshot_of(
        [
            *RECORDED_POLICIES,
            # Same rung and match as reviewers-on-anthropic, lower priority: outranked in every reviewer spawn.
            {
                "id": "reviewers-backup",
                "priority": -1,
                "match": {"roles": ["reviewer"]},
                "action": {"provider_lock": "zai-harness"},
            },
            {
                "id": "nobody",
                "match": {"principal_ids": ["nobody"]},
                "action": {"provider_lock": "zai-harness"},
            },
        ]
    )
    result = replay(chain, candidate)
    assert result.usage is not None
    uses = {use.policy_id: (use.decided, use.outranked, use.never_matched) for use in result.usage.policies}
    assert uses == {
        "reviewers-on-anthropic": (7, 0, 10),  # A, B, E
        "triagers-on-zai": (2, 0, 15),  # F
        "reviewers-backup": (0, 7, 10),
        "nobody": (0, 0, 17),
    }
    assert result.usage.idle == ["reviewers-backup", "nobody"]
    assert "nobody: decided 0, outranked 0, never matched 17  <- decided nothing" in format_whatif(result)
    assert result.as_dict()["policy_usage"]["idle"] == ["reviewers-backup", "nobody"]


def test_policy_usage_of_the_cited_snapshot_in_report_with_a_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    policies = [
        *RECORDED_POLICIES,
        {"id": "idle", "match": {"principal_ids": ["nobody"]}, "action": {"provider_lock": "zai-harness"}},
    ]
    saved = RoutingPolicyStore(store).save([RoutingPolicy.model_validate(p) for p in policies])
    snapshot = cited_loader(store)(saved.revision)
    assert snapshot is not None
    path = tmp_path / "chain.jsonl"
    build_chain(path, snapshot=snapshot)

    without = build_report(path)
    assert without.usage == []
    assert without.decided == {
        (saved.revision, saved.content_hash): {"reviewers-on-anthropic": 7, "triagers-on-zai": 2}
    }
    assert "pass --store DIR" in format_report(without)

    report = build_report(path, cited_loader=cited_loader(store))
    (table,) = report.usage
    assert (table.revision, table.spawns) == (saved.revision, 17)
    assert table.idle == ["idle"]
    assert "idle: decided 0, outranked 0, never matched 17  <- decided nothing" in format_report(report)


def test_report_store_option_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    saved = RoutingPolicyStore(store).save([RoutingPolicy.model_validate(p) for p in RECORDED_POLICIES])
    snapshot = cited_loader(store)(saved.revision)
    assert snapshot is not None
    path = tmp_path / "chain.jsonl"
    build_chain(path, snapshot=snapshot)
    assert main(["report", str(path), "--store", str(store), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (table,) = data["policy_usage"]["replayed"]
    assert table["spawns"] == 17 and table["idle"] == []
    assert data["policy_gaps"]["total"]["readiness"] == NOT_READY
    assert main(["report", str(path), "--store", str(tmp_path / "nowhere")]) == 2


def test_a_group_below_the_minimum_sample_is_not_called_ready(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    ready = context("acme/ready", "reviewer", "agentic", "anthropic", "role-dial")
    ratchet = context("acme/ratchet", "implementer", "agentic", "anthropic", "fleet-ratchet", gateway=True)
    build_chain(path, [Entry("ready", ready, 3), Entry("ratchet", ratchet, 2)])
    report = build_report(path, min_spawns=3)
    repos = dict(report.gaps["repo"])
    assert repos["acme/ready"].verdict()[0] == READY  # 3 spawns: the minimum is met
    verdict, why = repos["acme/ratchet"].verdict()
    assert verdict == NOT_ENOUGH
    assert "not enough spawns: 2 stable spawn(s), fewer than the minimum sample of 3" in why
    assert "would read transient-only" in why
    data = report.as_dict()
    rows = {row["key"]["repo"]: row for row in data["policy_gaps"]["repo"]}
    assert rows["acme/ratchet"]["readiness"] == NOT_ENOUGH and rows["acme/ratchet"]["min_spawns"] == 3


def test_a_blocker_is_reported_whatever_the_sample() -> None:
    tally = GapTally(min_spawns=1000)
    tally.add(
        SpawnFacts(
            mechanism="role-dial",
            managed=False,
            agreed=True,
            bypass=True,
            findings=frozenset(),
            claim_mismatch=None,
            whole_decision=True,
        ),
        1,
    )
    assert tally.verdict()[0] == NOT_READY


def test_the_default_minimum_sample_holds_back_a_small_ready_group(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    ready = context("acme/ready", "reviewer", "agentic", "anthropic", "role-dial")
    build_chain(path, [Entry("ready", ready, MIN_SPAWNS - 1)])
    assert dict(build_report(path).gaps["repo"])["acme/ready"].verdict()[0] == NOT_ENOUGH
    path2 = tmp_path / "chain2.jsonl"
    build_chain(path2, [Entry("ready", ready, MIN_SPAWNS)])
    assert dict(build_report(path2).gaps["repo"])["acme/ready"].verdict()[0] == READY
