"""The divergence report's figures against hand-computed counts (see test_analysis_support.SCENARIO)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_analysis_support import EXPECTED, HOUR, SCENARIO, T0, build_chain

from otel_route_shadow.analysis.report import aggregate, build_report
from otel_route_shadow.analysis.source import (
    ChainStatus,
    EmptyChainError,
    MissingChainError,
    UnverifiedChainError,
)
from otel_route_shadow.analysis.window import TimeWindow, WindowError
from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.cli.report_text import format_report


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    build_chain(path, extra_payloads=[{"kind": "chain-quarantine", "note": "test"}])
    return path


def test_totals_match_hand_computed_counts(chain: Path) -> None:
    report = build_report(chain)
    assert report.chain.verified and not report.flagged
    assert report.chain.records == EXPECTED["spawns"] + 1
    assert report.observations == EXPECTED["spawns"]
    assert report.skipped_kinds == {"chain-quarantine": 1}
    t = report.total
    assert (t.spawns, t.agreed, t.diverged, t.managed, t.bypass) == (
        EXPECTED["spawns"],
        EXPECTED["agreed"],
        EXPECTED["diverged"],
        EXPECTED["managed"],
        EXPECTED["bypass"],
    )
    assert report.divergences == EXPECTED["divergences"]
    assert report.outcomes == EXPECTED["outcomes"]
    assert report.held_reasons == EXPECTED["held_reasons"]
    assert report.rejected_reasons == EXPECTED["rejected_reasons"]
    assert report.policy_sources == {"managed-policy": 9, "legacy-compatibility": 8}


def test_per_mechanism_readiness_and_bypass(chain: Path) -> None:
    report = build_report(chain)
    got = {name: (t.spawns, t.agreed, t.bypass) for name, t in report.mechanisms}
    assert got == EXPECTED["mechanisms"]
    # Ordered by spawns, most first.
    assert [name for name, _ in report.mechanisms] == ["role-dial", "fleet-ratchet", "credit-failover"]
    assert report.mechanism("credit-failover").divergences == {"provider-differs": 2}
    data = report.as_dict()
    assert data["bypass"]["spawns"] == 5
    assert data["bypass"]["share"] == pytest.approx(5 / 17, abs=1e-6)
    assert data["bypass"]["by_mechanism"] == [
        {
            "mechanism": "role-dial",
            "bypass": 5,
            "spawns": 10,
            "share_of_mechanism": 0.5,
            "share_of_bypass": 1.0,
        }
    ]
    role_dial = next(row for row in data["mechanisms"] if row["mechanism"] == "role-dial")
    assert role_dial["agreement_rate"] == pytest.approx(0.7)
    assert role_dial["top_divergences"] == [
        {"divergence": "policy-rejected", "count": 2},
        {"divergence": "policy-held", "count": 1},
    ]


def test_groups_by_repo_and_crossed_dimensions(chain: Path) -> None:
    report = build_report(chain, by=["repo", "repo+role", "outcome", "principal"])
    repos = {key[0]: (t.spawns, t.agreed) for key, t in report.group("repo").items()}
    assert repos == EXPECTED["repos"]
    crossed = {key: t.spawns for key, t in report.group("repo+role").items()}
    assert crossed == {
        ("acme/project-x", "reviewer"): 6,
        ("acme/project-x", "implementer"): 5,
        ("acme/other", "implementer"): 3,
        ("acme/other", "reviewer"): 1,
        ("acme/other", "triager"): 2,
    }
    assert {key[0]: t.spawns for key, t in report.group("outcome").items()} == EXPECTED["outcomes"]
    assert {key: t.spawns for key, t in report.group("principal").items()} == {(None,): 17}
    rows = report.as_dict()["groups"]["repo+role"]
    assert rows[0]["key"] == {"repo": "acme/project-x", "role": "reviewer"}
    assert rows[0]["agreement_rate"] == pytest.approx(4 / 6, abs=1e-6)


def test_time_window_selects_by_start_time(chain: Path) -> None:
    # Records start at T0 and are an hour apart: [T0+3h, T0+10h) holds seven of them.
    window = TimeWindow(since_ns=T0 + 3 * HOUR, until_ns=T0 + 10 * HOUR)
    report = build_report(chain, window=window)
    assert report.observations == 7
    assert report.outside_window == 10
    assert report.first_ns == T0 + 3 * HOUR
    assert report.last_ns == T0 + 9 * HOUR
    same = build_report(chain, since="2026-09-01T03:00:00Z", until="2026-09-01T10:00:00+00:00")
    assert same.observations == 7
    whole_day = build_report(chain, since="2026-09-01", until="2026-09-01")
    assert whole_day.observations == 17
    nothing = build_report(chain, since="2026-09-02")
    assert nothing.observations == 0
    assert "no observations in this window" in format_report(nothing)



def test_time_window_bound_given_to_the_nanosecond_is_not_cut_to_the_microsecond(tmp_path: Path) -> None:
    # A record's start as the reports print it (nanoseconds) given back as a bound: it was cut to the
    # microsecond, so --since let in a record up to 999 ns before it and --until left out one before it.
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, start_ns=T0 + 123_456_789, step_ns=1)  # starts ...0.123456789, ...790, ...
    report = build_report(chain, since="2026-09-01T00:00:00.123456790Z")
    assert report.observations == EXPECTED["spawns"] - 1
    assert report.as_dict()["window"]["since"] == "2026-09-01T00:00:00.12345679Z"
    assert build_report(chain, until="2026-09-01T00:00:00.123456790Z").observations == 1
    with pytest.raises(WindowError, match="finer than a nanosecond"):
        build_report(chain, since="2026-09-01T00:00:00.1234567891Z")


def test_a_start_time_past_year_9999_is_read_as_unknown_not_a_traceback(tmp_path: Path) -> None:
    # A record whose start_time_unix_nano lies past 9999-12-31 made format_ns raise OverflowError:
    # report (text, JSON, HTML) ended in a traceback, exit 1.
    chain = tmp_path / "chain.jsonl"
    written = build_chain(chain)
    DecisionChain(chain).append({**written[0][1], "start_time_unix_nano": "9" * 23})
    report = build_report(chain)
    assert report.observations == EXPECTED["spawns"] + 1
    assert "spawns 18:" in format_report(report)
    assert report.as_dict()["timeline"]["last"] == "2026-09-01T16:00:00Z"
    assert build_report(chain, since="2026-09-01").observations == EXPECTED["spawns"]

def test_timeline_counts_every_spawn(chain: Path) -> None:
    report = build_report(chain)
    width, points = report.timeline()
    assert width == HOUR  # spawns an hour apart: hourly buckets, every one holding a spawn
    assert sum(p.spawns for p in points) == 17
    assert sum(p.agreed for p in points) == 12
    coarse_width, coarse = report.timeline(max_points=4)
    assert coarse_width >= 6 * HOUR
    assert sum(p.spawns for p in coarse) == 17


def test_missing_and_empty_chains_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MissingChainError, match="no such chain file"):
        build_report(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(EmptyChainError, match="empty"):
        build_report(empty)


def test_unverifiable_chain_is_refused_unless_allowed(chain: Path) -> None:
    text = chain.read_text(encoding="utf-8")
    assert "acme/other" in text
    chain.write_text(text.replace("acme/other", "acme/0ther", 1), encoding="utf-8")
    with pytest.raises(UnverifiedChainError, match="--allow-unverified"):
        build_report(chain)
    report = build_report(chain, allow_unverified=True)
    assert report.flagged
    data = report.as_dict()
    assert data["flagged"] is True and data["flag"] == "UNVERIFIED"
    assert data["totals"]["unverified"] is True
    assert all(row["unverified"] for row in data["mechanisms"])
    assert all(row["unverified"] for rows in data["groups"].values() for row in rows)
    text_out = format_report(report)
    assert text_out.startswith("!!! UNVERIFIED CHAIN")
    figure_lines = [line for line in text_out.splitlines() if "spawns" in line and "agreed" in line]
    assert figure_lines and all(line.startswith("!") for line in figure_lines)


def test_aggregate_skips_what_is_not_an_observation() -> None:
    status = ChainStatus(path="mem", records=5, verified=True, checked=True)
    payloads = [
        (1, {"kind": "chain-quarantine"}),
        (2, "not an object"),
        (
            3,
            {
                "kind": "route-shadow",
                "attributes": {"route_shadow.seam": "s", "route_shadow.error.type": "E"},
            },
        ),
        (
            4,
            {
                "kind": "route-shadow",
                "attributes": {"route_shadow.outcome": "selected", "route_shadow.agreed": True},
            },
        ),
        (5, {"kind": "route-shadow", "attributes": ["bad"]}),
    ]
    report = aggregate(payloads, chain=status)
    assert report.skipped_kinds == {"chain-quarantine": 1}
    assert report.malformed == 2
    assert report.without_decision == 1
    assert report.observations == 1
    assert report.total.agreed == 1


def test_scenario_is_what_the_support_module_says() -> None:
    assert sum(entry.count for entry in SCENARIO) == EXPECTED["spawns"]


def test_concurrent_verification_gives_the_same_report(chain: Path) -> None:
    serial = build_report(chain, by=["repo+role"], concurrent=False)
    parallel = build_report(chain, by=["repo+role"], concurrent=True)
    assert parallel.chain == serial.chain
    assert parallel.as_dict() == serial.as_dict()


def test_concurrent_verification_still_refuses_an_unverifiable_chain(chain: Path) -> None:
    text = chain.read_text(encoding="utf-8")
    chain.write_text(text.replace("acme/project-x", "acme/project-y", 1), encoding="utf-8")
    with pytest.raises(UnverifiedChainError) as caught:
        build_report(chain, concurrent=True)
    assert caught.value.status.first_bad_seq is not None
    flagged = build_report(chain, concurrent=True, allow_unverified=True)
    assert flagged.flagged and flagged.chain.checked


def test_a_torn_tail_is_left_out_and_noted(chain: Path) -> None:
    with chain.open("ab") as handle:
        handle.write(b'{"payload":{"kind":"route-shadow"')  # an append that has not finished
    for concurrent in (False, True):
        report = build_report(chain, concurrent=concurrent)
        assert report.chain.verified and not report.flagged
        assert report.chain.note is not None and "torn tail" in report.chain.note
        assert report.observations == EXPECTED["spawns"]


@pytest.mark.parametrize("concurrent", [False, True])
def test_a_garbled_line_is_counted_when_unverified_is_allowed(chain: Path, concurrent: bool) -> None:
    lines = chain.read_bytes().split(b"\n")
    lines[3] = b"this is not a record"
    chain.write_bytes(b"\n".join(lines))
    with pytest.raises(UnverifiedChainError, match="seq 3"):
        build_report(chain, concurrent=concurrent)
    report = build_report(chain, allow_unverified=True, concurrent=concurrent)
    assert report.flagged
    assert report.malformed == 1
    assert report.observations == EXPECTED["spawns"] - 1


def test_records_appended_after_verification_are_not_counted(
    chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from otel_route_shadow.analysis import source
    from otel_route_shadow.chain import DecisionChain

    real = source._verify

    def verify_then_append(path: Path, jobs: int, progress: object, start: int) -> source.ChainStatus:
        status = real(path, jobs, None, start)
        DecisionChain(path).append({"kind": "route-shadow", "attributes": {"route_shadow.outcome": "held"}})
        return status

    monkeypatch.setattr(source, "_verify", verify_then_append)
    report = build_report(chain, concurrent=False)
    assert report.chain.records == EXPECTED["spawns"] + 1
    assert report.records_read == EXPECTED["spawns"] + 1
    assert report.outcomes == EXPECTED["outcomes"]


def test_no_worker_process_falls_back_to_serial(chain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    from otel_route_shadow.analysis import source

    class NoChildren:
        def __init__(self) -> None:
            self.real = multiprocessing.get_context("fork")

        def Pipe(self, duplex: bool = True) -> object:
            return self.real.Pipe(duplex=duplex)

        def Process(self, *args: object, **kwargs: object) -> object:
            class Refuses:
                def start(self) -> None:
                    raise AssertionError("daemonic processes are not allowed to have children")

            return Refuses()

    monkeypatch.setattr(source, "mp_context", NoChildren)
    report = build_report(chain, concurrent=True)
    assert report.chain.verified and report.observations == EXPECTED["spawns"]


def test_a_line_over_the_limit_is_one_chain_error_not_a_traceback(tmp_path: Path) -> None:
    # verify could pass lines of up to about 5 MiB; the reader then raised the chain's own
    # ChainFormatError, which no command caught: a traceback.
    from otel_route_shadow.analysis.source import ChainAnalysisError, read_payloads

    path = tmp_path / "chain.jsonl"
    path.write_bytes(b'{"seq":0,"payload":{"x":"' + b"a" * (5 << 20) + b'"}}\n')
    with pytest.raises(ChainAnalysisError, match="exceeds"):
        list(read_payloads(path))
    assert list(read_payloads(path, lenient=True)) == [(-1, None)]


def test_each_divergent_decision_listed_names_its_seq(chain: Path) -> None:
    # Issue 24 item 5: a receipt for one decision is made from its seq.
    from otel_route_shadow.chain import iter_payloads

    by_seq = dict(iter_payloads(chain))
    listed = build_report(chain, examples=2).as_dict()["divergent_decisions"]
    assert {row["divergence"]: row["count"] for row in listed} == EXPECTED["divergences"]
    for row in listed:
        seqs = [example["seq"] for example in row["examples"]]
        assert seqs == sorted(seqs) and 0 < len(seqs) <= 2
        for example in row["examples"]:
            attributes = by_seq[example["seq"]]["attributes"]
            assert attributes["route_shadow.divergence"] == row["divergence"]
            assert example["span_id"] == by_seq[example["seq"]]["span_id"]
    # The lowest seqs: every earlier record of that divergence is listed.
    first_held = min(
        s
        for s, p in by_seq.items()
        if p.get("attributes", {}).get("route_shadow.divergence") == "policy-held"
    )
    held = next(row for row in listed if row["divergence"] == "policy-held")
    assert held["examples"][0]["seq"] == first_held
    assert build_report(chain, examples=0).as_dict()["divergent_decisions"][0]["examples"] == []


def test_the_two_requirement_defied_counts_are_explained_where_they_appear(tmp_path: Path) -> None:
    # A claude-opus spawn that ran on GLM: under the triagers-on-zai policy it is rejected
    # (policy-rejected is its divergence) and it defies its requirement (a finding) at once.
    from test_analysis_gaps import defied_context
    from test_analysis_support import ACCOUNTS, append_observations

    from otel_route_shadow.cli.report_html import render_html
    from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route

    stages = [LegacyStage(mechanism="credit-failover", provider="zai", model="glm-5.1")]
    legacy = build_legacy_route(stages, "one-shot", account="zai-legacy")
    assert legacy is not None
    rejected = RouteContext(
        repo="acme/other",
        role="triager",
        request_face="one-shot",
        requirement="claude-opus",
        accounts=ACCOUNTS,
        legacy_route=legacy,
    )
    path = tmp_path / "chain.jsonl"
    append_observations(path, [(defied_context(), {}), (rejected, {}), (rejected, {})])
    report = build_report(path)
    assert report.findings == {"requirement-defied": 3}
    assert report.divergences == {"requirement-defied": 1, "policy-rejected": 2}
    assert report.as_dict()["findings"]["by_divergence"] == {
        "requirement-defied": {"policy-rejected": 2, "requirement-defied": 1}
    }
    text = format_report(report)
    assert (
        "requirement-defied is the divergence of 1 of these 3; the other 2 are counted there as policy-rejected 2"
        in text
    )
    html = render_html(report)
    assert "Why 3 here and 1 among the divergences" in html


def test_report_examples_option(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    import json

    from otel_route_shadow.cli import main

    assert main(["report", str(chain), "--json", "--no-progress", "--examples", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)["divergent_decisions"]
    assert all(len(row["examples"]) == 1 for row in rows)
    with pytest.raises(SystemExit) as refused:
        main(["report", str(chain), "--examples", "-1"])
    assert refused.value.code == 2 and "--examples" in capsys.readouterr().err
