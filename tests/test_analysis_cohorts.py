"""Figures an operator can defend: a Wilson 95% interval on every agreement and divergence rate, and
per cohort (legacy mechanism and route) the consistency rate, the p99 latency (unknown for records
without a duration: tests/test_analysis_latency.py has the timed ones) and the shadow path's error
rate, from the records."""

from __future__ import annotations

from pathlib import Path

from test_analysis_support import SCENARIO, build_chain

from otel_route_shadow.analysis import LATENCY_NOTE, build_report
from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.core import wilson_interval


def _interval(part: int, whole: int) -> list[float]:
    found = wilson_interval(part, whole)
    assert found is not None
    return [round(found[0], 6), round(found[1], 6)]


def _failed_shadow(
    seq: int, mechanism: str, provider: str, model: str | None, transport: str
) -> dict[str, object]:
    """An observation whose shadow path failed: no decision, an error type, the legacy route."""
    legacy = {
        "route_shadow.legacy.mechanism": mechanism,
        "route_shadow.legacy.provider": provider,
        "route_shadow.legacy.model": model,
        "route_shadow.transport": transport,
    }
    return {
        "kind": "route-shadow",
        "trace_id": f"{seq:032x}",
        "span_id": f"{seq:016x}",
        "start_time_unix_nano": "1788220800000000000",
        "attributes": {
            "route_shadow.error.type": "ValueError",
            **{key: value for key, value in legacy.items() if value is not None},
        },
    }


def test_every_agreement_and_divergence_rate_has_its_wilson_interval(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    data = build_report(path, by=["repo", "repo+role"]).as_dict()
    rows = [data["totals"], *data["mechanisms"], *(row for rows in data["groups"].values() for row in rows)]
    for row in rows:
        assert row["agreement_interval"] == _interval(row["agreed"], row["spawns"])
        assert row["divergence_interval"] == _interval(row["diverged"], row["spawns"])
    for key in data["noise"]["flapping_keys"]:
        assert key["divergence_interval"] == _interval(key["diverged"], key["spawns"])


def test_cohorts_give_consistency_errors_and_count_records_without_a_duration_as_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chain.jsonl"
    written = build_chain(path)
    first = written[0][1]["attributes"]
    route = (
        first["route_shadow.legacy.mechanism"],
        first["route_shadow.legacy.provider"],
        first.get("route_shadow.legacy.model"),
        first["route_shadow.transport"],
    )
    log = DecisionChain(path)
    log.append(_failed_shadow(900, *route))
    log.append(_failed_shadow(901, *route))
    report = build_report(path)
    data = report.as_dict()
    cohorts = data["cohorts"]
    assert cohorts["latency"] == LATENCY_NOTE
    assert sum(row["spawns"] for row in cohorts["rows"]) == data["totals"]["spawns"] == 17
    assert sum(row["agreed"] for row in cohorts["rows"]) == data["totals"]["agreed"]
    by_key = {
        (row["mechanism"], row["route"]["provider"], row["route"]["model"], row["route"]["transport"]): row
        for row in cohorts["rows"]
    }
    row = by_key[route]
    assert row["p99_latency_ms"] is None
    assert all(
        other["latency_unknown"] == other["spawns"] and other["latency_timed"] == 0
        for other in by_key.values()
    )
    assert row["shadow_errors"] == 2
    observed = row["spawns"] + 2
    assert row["shadow_error_rate"] == round(2 / observed, 6)
    assert row["shadow_error_interval"] == _interval(2, observed)
    assert row["consistency_interval"] == _interval(row["agreed"], row["spawns"])
    assert all(other["shadow_errors"] == 0 for key, other in by_key.items() if key != route)
    assert data["records"]["without_decision"] == 2
    text = format_report(report)
    assert "cohorts (" in text and "untimed" in text and "agree 95% CI" in text
    html = render_html(report)
    assert 'id="cohorts"' in html and "agreement (95% CI)" in html


def test_one_mechanism_on_two_routes_is_two_cohorts(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, SCENARIO[:2])  # role-dial on anthropic, credit-failover on zai
    rows = build_report(path).as_dict()["cohorts"]["rows"]
    assert [(row["mechanism"], row["route"]["provider"], row["spawns"]) for row in rows] == [
        ("role-dial", "anthropic", 4),
        ("credit-failover", "zai", 2),
    ]
