"""A chain that records a gap (a ``records-dropped`` event: a writer's backlog was full while another
process held the lock) shows it in ``report`` (text, JSON, HTML) and ``audit``; a chain without one
says "none". The drop is forced for real: a child process holds the chain's ``flock`` while a writer
with a zero-record backlog submits.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from backend_support import FakeBackend, Host, seam_payload
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_fleet import make_log
from test_analysis_support import EXPECTED, build_chain
from test_chain_lock import lock_held_by_another_process

from otel_route_shadow.analysis import build_report, follow_fleet
from otel_route_shadow.backend.audit import audit_chain
from otel_route_shadow.backend.verdict import AuditVerdict
from otel_route_shadow.chain import (
    DROPPED_KIND,
    DecisionChain,
    DroppedGap,
    encode_payload,
    iter_payloads,
    sanitize_payload,
)
from otel_route_shadow.cli import audit as audit_cli
from otel_route_shadow.cli import main
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.logstore import Checkpointer

DROPPED = 3


def force_drop(path: Path, count: int = DROPPED) -> tuple[int, int]:
    """Drop ``count`` copies of the chain's last observation (then write one more, which writes the
    event); returns the wall-clock bounds of the drop."""
    last = [payload for _, payload in iter_payloads(path)][-1]
    encoded = encode_payload(*sanitize_payload(last))
    log = DecisionChain(path, lock_timeout=0.01, backlog=0)
    before = time.time_ns()
    with lock_held_by_another_process(path):
        for _ in range(count):
            assert log.submit(encoded) is None
    after = time.time_ns()
    assert log.submit(encoded) is not None
    log.close()
    return before, after


@pytest.fixture
def gap_chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    force_drop(path)
    return path


def test_report_shows_the_dropped_records_in_text_json_and_html(gap_chain: Path) -> None:
    report = build_report(gap_chain)
    assert report.chain.verified and not report.flagged
    assert report.observations == EXPECTED["spawns"] + 1
    dropped: dict[str, Any] = report.as_dict()["records"]["dropped"]
    assert (dropped["events"], dropped["records"]) == (1, DROPPED)
    assert dropped["first_time"] is not None and dropped["first_time"] <= dropped["last_time"]
    text = format_report(report)
    line = next(line for line in text.splitlines() if "GAP" in line)
    assert line.startswith("! GAP: 3 records dropped by the writer in 1 event, from ")
    assert "every figure is over the recorded records only" in line
    html = render_html(report)
    assert '<p class="flag">GAP: 3 records dropped' in html


def test_verify_text_names_the_dropped_records(gap_chain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/chain-format.md section 7 promised a sentence in verify's text; only its JSON said it."""
    assert main(["verify", str(gap_chain)]) == 0
    out = capsys.readouterr().out
    assert ": intact: " in out
    assert f"  dropped: {DROPPED} records in 1 gap(s) recorded by the chain" in out


def test_the_dropped_times_are_when_the_drop_happened(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    before, after = force_drop(path, 2)
    gap = build_report(path).records.dropped
    assert (gap.events, gap.records) == (1, 2)
    assert gap.first_ns is not None and gap.last_ns is not None
    assert before <= gap.first_ns <= gap.last_ns <= after


def test_two_gaps_are_summed_and_span_both(gap_chain: Path) -> None:
    force_drop(gap_chain, 2)
    gap = build_report(gap_chain).records.dropped
    assert (gap.events, gap.records) == (2, DROPPED + 2)


def test_a_chain_without_a_gap_says_none(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    report = build_report(path)
    assert report.as_dict()["records"]["dropped"] == {
        "events": 0,
        "records": 0,
        "events_without_count": 0,
        "first_time": None,
        "last_time": None,
    }
    assert "  dropped records: none" in format_report(report).splitlines()
    assert "GAP" not in render_html(report)


def test_report_names_records_waiting_beside_the_chain_not_only_dropped_records_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # report said "dropped records: none" (text, JSON, HTML) while a killed writer's records waited in
    # <chain>.waiting/ and verify named the file: the operator reading the report was never told.
    import json

    from otel_route_shadow.chain.waiting import WaitingFile

    path = tmp_path / "chain.jsonl"
    build_chain(path)
    assert main(["report", "--no-progress", str(path)]) == 0
    assert "not in the chain yet" not in capsys.readouterr().out
    waiting = WaitingFile(str(path))
    waiting.keep(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 1})))
    (named,) = os.listdir(waiting.dir)
    left = f"{waiting.dir}/{named}"
    html = tmp_path / "report.html"
    assert main(["report", "--no-progress", "--html", str(html), str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("  dropped records: none")
    assert lines[at + 2].startswith(f"! not in the chain yet: {left}, what a writer left for it")
    assert f'<p class="flag">not in the chain yet: {left}' in html.read_text()
    assert main(["report", "--no-progress", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["left_beside"] == [left]


# -- audit ---------------------------------------------------------------------------------------------

AUDIT_ORIGIN = "example.test/route-shadow/gaps"


def _drop_then_append(chain: Path, backend: FakeBackend, count: int) -> None:
    """Another process holds the lock while ``count`` seam records are submitted and dropped; the next
    record writes the ``records-dropped`` event, then itself (its span reaches the backend)."""
    log = DecisionChain(chain, lock_timeout=0.01, backlog=0)
    with lock_held_by_another_process(chain):
        for i in range(count):
            dropped = encode_payload(*sanitize_payload(seam_payload(AUDIT_ORIGIN, 100 + i, 1)))
            assert log.submit(dropped) is None
    after = seam_payload(AUDIT_ORIGIN, 200, 1)
    assert log.submit(encode_payload(*sanitize_payload(after))) is not None
    backend.add_seam(after)
    log.close()


def test_audit_lists_the_gap_under_coverage_and_still_agrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = FakeBackend()
    monkeypatch.setattr(audit_cli, "build_backend", lambda *_: backend)
    host = Host(tmp_path / "host", AUDIT_ORIGIN, backend).run(20)
    _drop_then_append(host.chain, backend, DROPPED)
    report = audit_chain(str(host.chain), backend)
    assert report.verdict is AuditVerdict.AGREE
    assert (report.dropped.events, report.dropped.records) == (1, DROPPED)
    coverage = report.to_json()["coverage"]
    assert coverage["dropped"]["records"] == DROPPED and coverage["dropped"]["first_time"] is not None
    assert report.spans.verdict == "agree" and report.spans.errors == 0  # not a span finding
    assert report.unwitnessed == 2  # the event and the record after it, past the last checkpoint
    code = main(["audit", str(host.chain), "--backend", "http://127.0.0.1:9"])
    out = capsys.readouterr().out
    assert code == 0, out
    coverage_at = out.index("coverage: ")
    gap_at = out.index("  GAP: 3 records dropped by the writer in 1 event, from ")
    assert coverage_at < gap_at < out.index("verdict: AGREE")
    assert "the chain records it, so it is no disagreement" in out


def test_audit_of_a_chain_without_a_gap_says_none(tmp_path: Path) -> None:
    backend = FakeBackend()
    host = Host(tmp_path / "host", AUDIT_ORIGIN, backend).run(10)
    report = audit_chain(str(host.chain), backend)
    assert report.to_json()["coverage"]["dropped"]["events"] == 0
    assert "  dropped records: none" in audit_cli.render_text(report).splitlines()


def test_audit_names_records_waiting_beside_the_chain_not_only_dropped_records_none(tmp_path: Path) -> None:
    # audit said "dropped records: none" while a killed writer's records waited in <chain>.waiting/
    # (verify and report name the file): an auditor was not told the chain did not hold them yet.
    from otel_route_shadow.chain.waiting import WaitingFile

    backend = FakeBackend()
    host = Host(tmp_path / "host", AUDIT_ORIGIN, backend).run(10)
    waiting = WaitingFile(str(host.chain))
    waiting.keep(encode_payload(*sanitize_payload(seam_payload(AUDIT_ORIGIN, 300, 1))))
    (named,) = os.listdir(waiting.dir)
    left = f"{waiting.dir}/{named}"
    report = audit_chain(str(host.chain), backend)
    assert report.to_json()["coverage"]["left_beside"] == [left]
    lines = audit_cli.render_text(report).splitlines()
    at = lines.index("  dropped records: none")
    assert lines[at + 1].startswith(f"  not in the chain yet: {left}, what a writer left for it")


event_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.text(max_size=24), st.floats()
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            event_values,
            st.fixed_dictionaries(
                {"kind": st.sampled_from([DROPPED_KIND, "route-shadow", 7])},
                optional={
                    "count": event_values,
                    "first_time_unix_nano": st.one_of(event_values, st.integers(0, 10**22).map(str)),
                    "last_time_unix_nano": st.one_of(event_values, st.integers(0, 10**22).map(str)),
                },
            ),
        ),
        max_size=8,
    )
)
def test_a_gap_reads_any_payload_without_raising(payloads: list[Any]) -> None:
    gap = DroppedGap()
    for payload in payloads:
        gap.add(payload)
    events = [p for p in payloads if isinstance(p, dict) and p.get("kind") == DROPPED_KIND]
    assert gap.events == len(events) and gap.records >= 0
    counted = [p["count"] for p in events if type(p.get("count")) is int and p["count"] > 0]
    assert (gap.records, gap.uncounted) == (sum(counted), len(events) - len(counted))
    assert (gap.events == 0) == gap.describe().endswith("none")
    assert gap.as_dict()["events"] == gap.events  # the dates format, whatever the times were


def test_an_event_without_a_readable_count_is_said_not_silently_read_as_zero(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path)
    log = DecisionChain(path)
    for count in ("3", -2):
        assert log.submit(encode_payload(*sanitize_payload({"kind": DROPPED_KIND, "count": count}))) is not None
    log.close()
    gap = build_report(path).records.dropped
    assert (gap.events, gap.records, gap.uncounted) == (2, 0, 2)
    assert gap.describe().endswith("; 2 of them name no count (read as 0 records)")
    assert gap.as_dict()["events_without_count"] == 2


def test_a_state_file_keeps_the_events_without_a_readable_count(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    path, signer = make_log(folder, "alpha", "alpha.example/route-shadow")
    log = DecisionChain(path)
    assert log.submit(encode_payload(*sanitize_payload({"kind": DROPPED_KIND, "count": 0}))) is not None
    log.close()
    assert Checkpointer(str(path), "alpha.example/route-shadow", signer).checkpoint() is not None
    state = str(tmp_path / "state.json")
    follow_fleet([str(folder)], state)
    again = follow_fleet([str(folder)], state)  # every record counted before: read back from the state
    assert again.fleet is not None and again.fleet.followed is not None and again.fleet.followed.extended
    assert (again.records.dropped.events, again.records.dropped.uncounted) == (1, 1)
