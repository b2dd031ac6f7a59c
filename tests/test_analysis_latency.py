"""The spawn's p99 latency per cohort, from the records' ``duration_ns``: a fixed log-bucket histogram
that merges exactly (a fleet's, a monitor's runs) and whose p99 is within its documented relative
error of the exact one; a record without a duration is unknown, never a zero."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_fleet import make_log
from test_analysis_support import SCENARIO

from otel_route_shadow.analysis import build_fleet_report, build_report
from otel_route_shadow.analysis.latency import (
    MAX_DURATION_NS,
    RELATIVE_ERROR,
    LatencyHistogram,
    duration_ns,
)
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report

_durations = st.lists(
    st.one_of(st.integers(0, 10**4), st.integers(0, 10**10), st.integers(0, MAX_DURATION_NS)), max_size=300
)


def _exact(values: list[int], q: float) -> int:
    """The nearest-rank ``q`` quantile: the ``ceil(q * n)``-th smallest value."""
    return sorted(values)[max(math.ceil(q * len(values)), 1) - 1]


def _histogram(values: list[int]) -> LatencyHistogram:
    histogram = LatencyHistogram()
    histogram.extend(values)
    return histogram


@given(_durations, _durations, st.integers(0, 5), st.integers(0, 5))
def test_merging_two_histograms_is_counting_their_durations_together(
    left: list[int], right: list[int], left_unknown: int, right_unknown: int
) -> None:
    merged = _histogram([*left, *[-1] * left_unknown])
    merged.merge(_histogram([*right, *[-1] * right_unknown]))
    together = _histogram([*left, *right, *[-1] * (left_unknown + right_unknown)])
    assert merged.state() == together.state()
    assert (merged.timed, merged.unknown) == (len(left) + len(right), left_unknown + right_unknown)
    restored = LatencyHistogram.restore(*merged.state().values())
    assert restored.state() == together.state() and restored.timed == together.timed


@settings(max_examples=300)
@given(_durations.filter(bool), st.sampled_from([0.5, 0.9, 0.99, 0.999, 1.0]))
def test_a_quantile_is_within_the_documented_relative_error_of_the_exact_one(
    values: list[int], q: float
) -> None:
    found = _histogram(values).quantile(q)
    exact = _exact(values, q)
    assert found is not None
    assert abs(found - exact) <= RELATIVE_ERROR * exact * (1 + 1e-9)
    assert RELATIVE_ERROR < 0.01


def test_a_record_without_a_readable_duration_is_unknown_never_zero() -> None:
    assert duration_ns({"duration_ns": "1500"}) == 1500
    assert duration_ns({"duration_ns": "0"}) == 0
    for bad in (None, 1500, "-1", "1e3", "", " 12", "١٢", "9" * 19, "9" * 5000, ["1"]):
        payload: dict[str, Any] = {"duration_ns": bad}
        assert duration_ns(payload) == -1, bad
    assert duration_ns({}) == -1
    histogram = _histogram([duration_ns({}), duration_ns({"duration_ns": "x"})])
    assert (histogram.timed, histogram.unknown, histogram.quantile(0.99)) == (0, 2, None)


def _ms(i: int) -> int:
    """The ``i``-th spawn's duration: 1 to 100 ms, and every seventh record without one."""
    return -1 if i % 7 == 6 else (i % 100 + 1) * 1_000_000


def _timed(i: int) -> int | None:
    spent = _ms(i)
    return None if spent < 0 else spent


def test_each_cohort_gets_the_p99_of_its_own_durations(tmp_path: Path) -> None:
    path, _ = make_log(tmp_path, "alpha", "alpha.example/rs", SCENARIO, duration=_timed)
    report = build_report(path)
    rows = report.as_dict()["cohorts"]["rows"]
    assert sum(row["latency_timed"] + row["latency_unknown"] for row in rows) == report.spawns
    assert sum(row["latency_unknown"] for row in rows) == sum(_ms(i) < 0 for i in range(report.spawns))
    text, html = format_report(report), render_html(report)
    for _key, cohort in report.cohorts:
        if cohort.latency.timed:
            assert cohort.p99_ms is not None and 1 <= cohort.p99_ms <= 100 * (1 + RELATIVE_ERROR)
            assert f"{cohort.p99_ms:.3f} ms" in text and f"{cohort.p99_ms:.3f} ms" in html


def test_a_fleet_report_s_latencies_are_its_hosts_merged(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    alpha, _ = make_log(folder, "alpha", "alpha.example/rs", SCENARIO, duration=_timed)
    beta, _ = make_log(
        folder,
        "beta",
        "beta.example/rs",
        SCENARIO[1:4],
        start_ns=1_790_500_000 * 10**9,
        duration=lambda i: i * 7,
    )
    fleet = dict(build_fleet_report([str(folder)]).cohorts)
    singles = [dict(build_report(path).cohorts) for path in (alpha, beta)]
    for key, cohort in fleet.items():
        merged = LatencyHistogram()
        for single in singles:
            if key in single:
                merged.merge(single[key].latency)
        assert cohort.latency.state() == merged.state()
        assert cohort.p99_ms == (
            None if merged.quantile(0.99) is None else round(merged.quantile(0.99) / 1e6, 3)
        )
