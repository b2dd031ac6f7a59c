"""The one record reader and filter: every record read lands in exactly one count, whatever it holds,
and report and whatif count the same records the same way (they drifted when each had its own loop)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_support import RECORDED_POLICIES, SCENARIO, T0, snapshot_of

from otel_route_shadow.analysis.records import RecordCounts, observations
from otel_route_shadow.analysis.report import aggregate
from otel_route_shadow.analysis.source import ChainStatus
from otel_route_shadow.analysis.whatif import replay_payloads
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.shadow.record import observe, record_payload

STATUS = ChainStatus(path="test", records=0, verified=True, checked=True)
SNAPSHOT = snapshot_of(RECORDED_POLICIES)
GENUINE = [
    record_payload(1, 2, T0 + i, observe("seam", entry.context, SNAPSHOT).attributes)
    for i, entry in enumerate(SCENARIO)
]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, T0 * 2), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=4)
attribute_maps = st.dictionaries(
    st.sampled_from(
        ["route_shadow.outcome", "route_shadow.agreed", "route_shadow.repo", "route_shadow.context"]
    ),
    values,
    max_size=4,
)
payloads = st.one_of(
    values,
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["route-shadow", "chain-quarantine", 7])},
        optional={"attributes": st.one_of(attribute_maps, values), "start_time_unix_nano": values},
    ),
    st.sampled_from(GENUINE),
)


def _total(counts: RecordCounts) -> int:
    return (
        counts.observations
        + sum(counts.skipped_kinds.values())
        + counts.outside_window
        + counts.without_decision
        + counts.malformed
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(payloads, max_size=12), st.booleans())
def test_every_record_is_counted_once_and_both_analyses_agree(items: list[Any], windowed: bool) -> None:
    window = TimeWindow(since_ns=T0 + 3, until_ns=T0 + 10) if windowed else TimeWindow()
    pairs = list(enumerate(items))
    counts = RecordCounts()
    seen = list(observations(pairs, counts, window=window))
    assert counts.read == len(items) == _total(counts)
    assert len(seen) == counts.observations
    report = aggregate(pairs, chain=STATUS, window=window)
    whatif = replay_payloads(pairs, SNAPSHOT, chain=STATUS, window=window)
    for result in (report.records, whatif.records):
        assert result.read == len(items) == _total(result)
        assert (result.skipped_kinds, result.outside_window, result.without_decision) == (
            counts.skipped_kinds,
            counts.outside_window,
            counts.without_decision,
        )
    assert report.total.spawns == report.observations


def test_the_scenario_replays_against_its_own_snapshot_without_a_change() -> None:
    pairs = list(enumerate(GENUINE))
    result = replay_payloads(pairs, SNAPSHOT, chain=STATUS)
    assert result.replayed == len(GENUINE) and result.changed == 0
    assert result.integrity.checked == result.integrity.passed == len(GENUINE)


def test_a_repeat_is_settled_only_by_equal_attributes_never_by_the_decision_id_alone() -> None:
    from otel_route_shadow.analysis.records import Repeats

    repeats: Repeats[str] = Repeats()
    genuine = dict(GENUINE[0]["attributes"])
    repeats.remember(genuine, "counted")
    assert repeats.get(dict(genuine)) == "counted"
    forged = {**genuine, "route_shadow.provider": "zai"}  # same decision id, other content
    assert repeats.get(forged) is None


def test_a_forged_copy_after_its_genuine_record_is_still_a_finding() -> None:
    genuine = GENUINE[0]
    forged = {**genuine, "attributes": {**genuine["attributes"], "route_shadow.provider": "zai"}}
    result = replay_payloads([(0, genuine), (1, genuine), (2, forged)], SNAPSHOT, chain=STATUS)
    assert result.integrity.passed == 2
    assert result.integrity.findings == {"decision-fields-mismatch": 1}
