"""Agreement over time: buckets follow the window (a run of minutes gets second-sized buckets, never
one hourly dot), are taken from a fixed ladder, count every spawn, and stay bounded in memory."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from test_analysis_support import SCENARIO, build_chain

from otel_route_shadow.analysis import build_report
from otel_route_shadow.analysis.timeline import (
    LADDER_NS,
    STORED_BUCKETS_LIMIT,
    Timeline,
    width_label,
)

SECOND = 10**9


def test_a_run_of_minutes_gets_buckets_of_seconds(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, SCENARIO, step_ns=7 * SECOND)  # 17 spawns over about two minutes
    width, points = build_report(chain).timeline()
    assert width < 60 * SECOND  # the hourly ladder gave one dot here
    assert len(points) > 8
    assert sum(p.spawns for p in points) == 17


def test_a_run_of_a_second_gets_buckets_of_milliseconds(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, SCENARIO, step_ns=50_000_000)
    width, points = build_report(chain).timeline()
    assert width_label(width).endswith("ms") and len(points) > 8


def test_width_labels() -> None:
    assert [
        width_label(w) for w in (10**6, 5 * 10**8, SECOND, 90 * SECOND, 3600 * SECOND, 86400 * SECOND)
    ] == [
        "1ms",
        "500ms",
        "1s",
        "90s",
        "1h",
        "1d",
    ]


@given(st.lists(st.integers(min_value=0, max_value=40 * 86_400 * SECOND), min_size=1, max_size=300))
def test_every_spawn_is_in_one_bucket_of_a_ladder_width(starts: list[int]) -> None:
    timeline = Timeline()
    for i, ns in enumerate(starts):
        timeline.add(ns, i % 3 == 0)
    width, points = timeline.points(max_points=48)
    assert width in LADDER_NS
    assert sum(p.spawns for p in points) == len(starts)
    assert sum(p.agreed for p in points) == sum(1 for i in range(len(starts)) if i % 3 == 0)
    assert all(p.start_ns % width == 0 for p in points)
    slots = max(starts) // width - min(starts) // width + 1
    assert slots <= 48 or width == LADDER_NS[-1]
    assert [p.start_ns for p in points] == sorted({ns // width * width for ns in starts})


def test_stored_buckets_stay_bounded_and_exact() -> None:
    timeline = Timeline()
    n = 3 * STORED_BUCKETS_LIMIT
    for i in range(n):
        timeline.add(i * 7_000_000, True)  # one spawn every 7 ms: more than the limit in 1 ms buckets
    assert len(timeline.buckets) <= STORED_BUCKETS_LIMIT
    assert timeline.width_ns > 10**6
    _width, points = timeline.points()
    assert sum(p.spawns for p in points) == n
    assert (timeline.first_ns, timeline.last_ns) == (0, (n - 1) * 7_000_000)


def test_a_sparse_chain_gets_full_buckets_not_a_comb() -> None:
    timeline = Timeline()
    for hour in range(17):
        timeline.add(hour * 3600 * SECOND, True)  # one spawn an hour
    width, points = timeline.points()
    assert width == 3600 * SECOND and len(points) == 17


def test_no_timestamps_no_points() -> None:
    assert Timeline().points() == (10**6, [])
