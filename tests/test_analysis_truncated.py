"""A chain holding ``record-truncated`` placeholders (a record too large for one line, kept as its size and
digest: docs/chain-format.md section 6) says so in ``report`` (text, JSON, HTML) and ``whatif``, as it
says records the writer dropped; figures leave them out, and a chain without one says "none". The
placeholders are written by the chain's own writer, from a payload no cut can fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_analysis_support import EXPECTED, RECORDED_POLICIES, build_chain, snapshot_of

from otel_route_shadow.analysis import build_report
from otel_route_shadow.analysis.whatif import replay
from otel_route_shadow.chain import DecisionChain, iter_payloads
from otel_route_shadow.chain.truncation import TRUNCATED_KIND
from otel_route_shadow.cli import main
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.cli.whatif_text import format_whatif


def _too_large(kind: str) -> dict[str, object]:
    """A payload no cut of its strings fits in one line: long member names, small values."""
    return {"kind": kind, **{f"k{'x' * 200}{i}": i for i in range(400)}}


@pytest.fixture
def truncated_chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    log = DecisionChain(path)
    log.append(_too_large("route-shadow"))
    log.append(_too_large("something-else"))
    log.close()
    kinds = [payload.get("kind") for _, payload in iter_payloads(path)]
    assert kinds[-2:] == [TRUNCATED_KIND, TRUNCATED_KIND]
    return path


def test_report_counts_and_flags_the_truncated_records(
    truncated_chain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = build_report(truncated_chain)
    assert report.spawns == EXPECTED["spawns"]  # in no figure
    first = EXPECTED["spawns"]
    assert report.records.truncated.as_dict() == {
        "records": 2,
        "observations": 1,
        "first_seqs": [first, first + 1],
    }
    lines = format_report(report).splitlines()
    assert (
        f"! TRUNCATED: 2 records too large to keep stand as record-truncated placeholders (1 of them "
        f"observations), first at seq {first}, {first + 1}; every figure is over the recorded records only"
    ) in lines
    assert '<p class="flag">TRUNCATED: 2 records too large to keep' in render_html(report)
    assert main(["report", str(truncated_chain), "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["records"]["truncated"]["records"] == 2


def test_whatif_flags_the_truncated_records_too(truncated_chain: Path) -> None:
    result = replay(truncated_chain, snapshot_of(RECORDED_POLICIES))
    assert result.replayed == EXPECTED["spawns"] and result.records.truncated.records == 2
    text = format_whatif(result)
    assert "! TRUNCATED: 2 records too large to keep" in text
    assert "  dropped records: none" in text.splitlines()


def test_a_chain_without_placeholders_says_none(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    report = build_report(path)
    assert report.as_dict()["records"]["truncated"] == {"records": 0, "observations": 0, "first_seqs": []}
    assert "  truncated records: none" in format_report(report).splitlines()
    assert "TRUNCATED" not in render_html(report)
