"""The served route in the report (the reading side of issue 27 item 1): counts of same / differs /
unknown overall and per mechanism; a spawn served by another route never counts as agreement; a record
that says nothing is unknown, never agreement; ``route_shadow.finding`` may hold several codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_analysis_support import (
    Entry,
    append_observations,
    build_chain,
    context,
    served,
    with_finding,
)

from otel_route_shadow.analysis import build_report, finding_codes
from otel_route_shadow.analysis.served import served_state
from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.cli import main
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report

REVIEW = context("acme/project-x", "reviewer", "agentic", "anthropic", "role-dial")
"""Agrees with the recorded policies (reviewers on anthropic)."""
FAILOVER = context("acme/project-x", "reviewer", "agentic", "zai", "credit-failover")
RATCHET = context("acme/project-x", "implementer", "agentic", "anthropic", "fleet-ratchet", gateway=True)


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    append_observations(
        path,
        [
            (REVIEW, served("same", "anthropic", "claude-opus-4-1")),
            (REVIEW, served("differs", "zai", "glm-5.1")),  # recorded agreed, served elsewhere
            (REVIEW, {}),  # nothing reported: unknown
            (REVIEW, served("unknown")),
            (RATCHET, served("differs", "zai", "glm-5.1")),
            (RATCHET, served("same", "anthropic")),
            (FAILOVER, served("differs", "anthropic", "claude-opus-4-1")),  # diverges anyway
        ],
    )
    return path


def test_served_states_are_counted_overall_and_per_mechanism(chain: Path) -> None:
    report = build_report(chain)
    assert report.served == {"same": 2, "differs": 3, "unknown": 2}
    by = {name: counts for name, counts in report.served_by_mechanism}
    assert by["role-dial"] == {"same": 1, "differs": 1, "unknown": 2}
    assert by["fleet-ratchet"] == {"same": 1, "differs": 1, "unknown": 0}
    assert by["credit-failover"] == {"same": 0, "differs": 1, "unknown": 0}
    data = report.as_dict()["served"]
    assert (data["same"], data["differs"], data["unknown"]) == (2, 3, 2)
    assert data["known_share"] == pytest.approx(5 / 7, abs=1e-6)
    assert data["sources"] == {"response-hook": 5}
    assert {json.dumps(r, sort_keys=True) for r in data["routes"]} >= {
        json.dumps(
            {
                "chosen": {"provider": "anthropic", "model": None},
                "served": {"provider": "zai", "model": "glm-5.1"},
                "count": 2,
            },
            sort_keys=True,
        )
    }
    assert [example["seq"] for example in data["examples"]] == [1, 4, 6]


def test_a_served_route_that_differs_is_never_agreement(chain: Path) -> None:
    report = build_report(chain)
    recorded = [p["attributes"]["route_shadow.agreed"] for _, p in iter_payloads(chain)]
    assert recorded == [True, True, True, True, True, True, False]
    # seq 1 and 4 were recorded as agreeing; their served route differs: divergences, named so.
    assert report.total.agreed == 4
    assert report.divergences == {"served-differs": 2, "provider-differs": 1}
    assert report.findings == {"served-differs": 3}
    assert report.findings_by_divergence == {"served-differs": {"served-differs": 2, "provider-differs": 1}}
    assert report.gap_total.stable.served_differs + report.gap_total.flapping.served_differs == 3
    assert any("served-differs" in reason for reason in report.gap_total.reasons()[1])
    (divergent,) = [
        row for row in report.as_dict()["divergent_decisions"] if row["divergence"] == "served-differs"
    ]
    assert [example["seq"] for example in divergent["examples"]] == [1, 4]
    assert divergent["examples"][0]["served"] == {
        "status": "differs",
        "provider": "zai",
        "model": "glm-5.1",
        "source": "response-hook",
        "why": None,  # recorded before the reason was: a disagreement, as it always was
    }


def test_every_existing_chain_is_unknown_never_agreement(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    report = build_report(path)
    assert report.served == {"unknown": report.spawns}
    assert report.as_dict()["served"]["known_share"] == 0
    assert "unknown for all 17 spawns" in render_html(report)
    assert (
        "served route (what served each spawn against the route chosen): same 0, differs 0, unknown 17"
        in (format_report(report))
    )


def test_several_finding_codes_are_read_each(tmp_path: Path) -> None:
    from test_analysis_gaps import defied_context

    path = tmp_path / "chain.jsonl"
    append_observations(
        path,
        [
            (defied_context(), served("differs", "zai", "glm-4")),  # both findings
            (defied_context(), {}),  # requirement-defied alone
        ],
    )
    payloads = [p for _, p in iter_payloads(path)]
    assert payloads[0]["attributes"]["route_shadow.finding"] == "requirement-defied,served-differs"
    report = build_report(path)
    assert report.findings == {"requirement-defied": 2, "served-differs": 1}
    assert report.as_dict()["findings"]["requirement_defied"] == 2


@pytest.mark.parametrize(
    ("status", "finding", "state"),
    [
        (None, None, "unknown"),
        ("same", None, "same"),
        ("differs", None, "differs"),
        ("unknown", None, "unknown"),
        ("garbage", None, "unknown"),
        (["same"], None, "unknown"),
        ("same", "served-differs", "differs"),  # the finding wins: never read as agreement
        (None, "requirement-defied,served-differs", "differs"),
        (None, "requirement-defied", "unknown"),
    ],
)
def test_served_state_of_a_record(status: object, finding: str | None, state: str) -> None:
    assert served_state(status, finding_codes(finding)) == state


def test_finding_codes() -> None:
    assert finding_codes(None) == frozenset()
    assert finding_codes(3) == frozenset()
    assert finding_codes("requirement-defied") == {"requirement-defied"}
    assert finding_codes("requirement-defied, served-differs,") == {"requirement-defied", "served-differs"}
    assert with_finding({}, "served-differs") == {"route_shadow.finding": "served-differs"}


def test_served_route_in_every_output(
    chain: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = build_report(chain)
    text = format_report(report)
    assert "same 2, differs 3, unknown 2" in text
    assert (
        "differs 3 (42.9%; why: (not recorded) 3); served-differs 3 (a fallback: never counted as agreement)"
        in text
    )
    html = render_html(report)
    assert "Chosen against served (served-differs)" in html
    assert main(["report", str(chain), "--json", "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["served"]["differs"] == 3


def test_a_record_with_nothing_reported_says_unknown_and_nothing_else_served(tmp_path: Path) -> None:
    # build_chain (every older test) reports no served route: each record says unknown, no more.
    path = tmp_path / "chain.jsonl"
    build_chain(path, [Entry("A", REVIEW, 2)])
    for _, payload in iter_payloads(path):
        served = {k: v for k, v in payload["attributes"].items() if k.startswith("route_shadow.served.")}
        assert served == {"route_shadow.served.status": "unknown"}


def test_a_chain_the_demo_recorded_shows_its_gateway_fallbacks_and_flapping_keys(tmp_path: Path) -> None:
    """A real recorded chain (the demo through the instrumentor, its response hooks): the report's served
    counts are the records' own, the gateway's silent fallbacks are served-differs, and the credit failover
    that comes and goes makes keys flap."""
    from otel_route_shadow.demo.run import run_demo

    summary = run_demo(tmp_path / "demo", spawns=120)
    chain = tmp_path / "demo" / "chain.jsonl"
    records = [p["attributes"] for _, p in iter_payloads(chain) if p.get("kind") == "route-shadow"]
    statuses = [a["route_shadow.served.status"] for a in records]
    report = build_report(chain)
    assert report.served == {state: statuses.count(state) for state in ("same", "differs", "unknown")}
    assert report.served["differs"] > 0 and report.served["differs"] == summary.served["differs"]
    assert report.served["unknown"] == sum(a["route_shadow.seam"] == "subprocess" for a in records)
    assert all(
        a["route_shadow.agreed"] is False for a in records if a["route_shadow.served.status"] == "differs"
    )
    assert {route for route in report.served_routes} == {("anthropic", "claude-sonnet-4-5", "zai", "glm-5.1")}
    assert report.noise.flapping and report.noise.part("stable").spawns > 0
    text, html = format_report(report), render_html(report)
    assert "served-differs" in text and "flapping keys (" in text
    assert "Chosen against served (served-differs)" in html


def test_an_alias_or_load_balanced_route_is_differs_but_never_a_disagreement_in_any_figure(
    tmp_path: Path,
) -> None:
    """Since ``route_shadow.served.why`` is recorded, only a fallback disagrees: the report, the gap
    table and what-if count an alias or a load-balanced deployment as differs, not as served-differs."""
    from test_analysis_support import RECORDED_POLICIES, snapshot_of

    from otel_route_shadow.analysis.whatif import replay

    path = tmp_path / "chain.jsonl"
    alias = {**served("differs", "anthropic", "claude-opus-prod"), "route_shadow.served.why": "alias"}
    balanced = {**served("differs", "bedrock", "claude-opus-4-1"), "route_shadow.served.why": "load-balance"}
    fallback = {**served("differs", "zai", "glm-5.1"), "route_shadow.served.why": "fallback"}
    append_observations(path, [(REVIEW, alias), (REVIEW, balanced)], served_differs_finding=False)
    append_observations(path, [(REVIEW, fallback)])  # the recorder adds the finding for a fallback
    report = build_report(path)
    assert report.served == {"differs": 3}
    assert report.served_why == {"alias": 1, "load-balance": 1, "fallback": 1}
    assert report.findings == {"served-differs": 1} and report.total.agreed == 2
    assert report.gap_total.stable.served_differs + report.gap_total.flapping.served_differs == 1
    assert report.as_dict()["served"]["why"] == {"alias": 1, "fallback": 1, "load-balance": 1}
    text = format_report(report)
    assert "why: alias 1, fallback 1, load-balance 1); served-differs 1" in text
    whatif = replay(path, snapshot_of(RECORDED_POLICIES))
    assert whatif.total.agreed_before == whatif.total.agreed_after == 2


def test_a_differs_record_written_before_why_was_recorded_stays_a_disagreement(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    append_observations(path, [(REVIEW, served("differs", "zai", "glm-5.1"))], served_differs_finding=False)
    report = build_report(path)  # no why, no finding: what a hand-written or foreign record may hold
    assert report.findings == {"served-differs": 1} and report.total.agreed == 0
    assert report.served_why == {"(not recorded)": 1}
