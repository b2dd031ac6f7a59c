"""The cross-check between chain payloads and witness spans, with no servers."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.backend.base import BackendSpan, QueryWindow, format_unix_nano, parse_time
from otel_route_shadow.backend.crosscheck import (
    MISSING,
    cross_check,
    seam_record,
    summarize_chain,
)

T0 = 1_796_000_000_000_000_000
WINDOW = QueryWindow(T0, T0 + 10**12)
MECHANISMS = ("role-dial", "repo-override", "fleet-ratchet", "credit-failover")


def _attrs(i: int) -> dict[str, Any]:
    agreed = i % 3 != 0
    attrs: dict[str, Any] = {
        "route_shadow.seam": "base_runner._execute",
        "route_shadow.decision_id": f"d{i:04d}",
        "route_shadow.outcome": "selected",
        "route_shadow.rung": i % 10,
        "route_shadow.agreed": agreed,
        "route_shadow.legacy.mechanism": MECHANISMS[i % 4],
        "route_shadow.transport": "gateway",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4",
        "gen_ai.operation.name": "invoke_agent",
    }
    if not agreed:
        attrs["route_shadow.divergence"] = "provider-differs"
    return attrs


def _payload(i: int) -> dict[str, Any]:
    return {
        "kind": "route-shadow",
        "trace_id": f"{i + 1:032x}",
        "span_id": f"{i + 1:016x}",
        "start_time_unix_nano": T0 + i * 1_000_000 + 789,  # sub-microsecond part: the backend drops it
        "attributes": _attrs(i),
    }


def _span(payload: dict[str, Any], **extra: Any) -> BackendSpan:
    attributes = dict(payload["attributes"])
    # What Phoenix adds on ingestion; never compared.
    attributes.update({"llm.provider": "anthropic", "llm.model_name": "claude-sonnet-4"})
    attributes.update(extra)
    start_us = round(payload["start_time_unix_nano"] / 1000)  # Phoenix: microseconds via a float
    return BackendSpan(payload["trace_id"], payload["span_id"], start_us * 1000, attributes, "seam")


def _chain(n: int) -> list[tuple[int, dict[str, Any]]]:
    return [(i, _payload(i)) for i in range(n)]


def _check(chain: list[tuple[int, Any]], spans: list[BackendSpan]) -> Any:
    return cross_check(chain, spans, window=WINDOW, backend="test", time_tolerance_ns=1000)


def test_intact_chain_agrees() -> None:
    chain = _chain(20)
    report = _check(chain, [_span(p) for _, p in chain])
    assert report.verdict == "agree"
    assert report.matched == 20
    assert report.errors == 0
    assert report.missing_in_backend == []
    assert report.missing_rate == 0.0


def test_sampled_records_are_a_rate_not_an_error() -> None:
    chain = _chain(30)
    spans = [_span(p) for seq, p in chain if seq % 3]
    report = _check(chain, spans)
    assert report.verdict == "agree"
    assert report.missing_in_backend == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]
    assert report.missing_rate == pytest.approx(10 / 30)


def test_truncated_chain_reports_each_missing_record_as_orphan_span() -> None:
    chain = _chain(25)
    spans = [_span(p) for _, p in chain]
    k = 4
    report = _check(chain[:-k], spans)
    assert report.verdict == "disagree"
    assert [o.span_id for o in report.orphan_spans] == [p["span_id"] for _, p in chain[-k:]]
    assert [o.decision_id for o in report.orphan_spans] == [
        p["attributes"]["route_shadow.decision_id"] for _, p in chain[-k:]
    ]


def test_rewritten_record_is_reported_with_each_differing_attribute() -> None:
    chain = _chain(10)
    spans = [_span(p) for _, p in chain]
    rewritten = [(seq, {**p, "attributes": dict(p["attributes"])}) for seq, p in chain]
    attrs = rewritten[5][1]["attributes"]
    attrs["route_shadow.agreed"] = not attrs["route_shadow.agreed"]
    attrs["route_shadow.decision_id"] = "forged"
    report = _check(rewritten, spans)
    assert report.verdict == "disagree"
    assert len(report.mismatches) == 1
    mismatch = report.mismatches[0]
    assert mismatch.seq == 5
    assert {d.key for d in mismatch.diffs} == {"route_shadow.agreed", "route_shadow.decision_id"}
    assert mismatch.decision_id_differs
    assert [m.seq for m in report.decision_id_mismatches] == [5]


def test_deleted_and_added_attributes_are_mismatches() -> None:
    chain = _chain(3)
    spans = [_span(p) for _, p in chain]
    del chain[0][1]["attributes"]["route_shadow.legacy.mechanism"]
    chain[1][1]["attributes"]["route_shadow.repo"] = "acme/injected"
    report = _check(chain, spans)
    diffs = {m.seq: m.diffs for m in report.mismatches}
    assert diffs[0][0].key == "route_shadow.legacy.mechanism"
    assert diffs[0][0].chain is MISSING
    assert diffs[1][0].key == "route_shadow.repo"
    assert diffs[1][0].backend is MISSING
    assert not report.mismatches[0].decision_id_differs


def test_bool_is_not_int_and_int_equals_whole_float() -> None:
    chain = _chain(2)
    spans = [
        _span(chain[0][1], **{"route_shadow.rung": float(chain[0][1]["attributes"]["route_shadow.rung"])})
    ]
    chain[1][1]["attributes"]["route_shadow.agreed"] = 1
    spans.append(_span(chain[1][1], **{"route_shadow.agreed": True}))
    report = _check(chain, spans)
    assert [m.seq for m in report.mismatches] == [1]


def test_start_time_beyond_tolerance_is_a_mismatch() -> None:
    chain = _chain(2)
    spans = [_span(p) for _, p in chain]
    chain[1][1]["start_time_unix_nano"] += 5_000
    report = _check(chain, spans)
    assert [(m.seq, m.diffs[0].key) for m in report.mismatches] == [(1, "start_time_unix_nano")]


def test_non_seam_payloads_and_spans_are_ignored() -> None:
    chain: list[tuple[int, Any]] = [(0, {"kind": "chain-quarantine", "reason": "torn line"}), *_chain(3)]
    chain.append((99, {"kind": "something-else"}))
    spans = [_span(p) for _, p in _chain(3)]
    spans.append(BackendSpan("f" * 32, "e" * 16, T0 + 5, {"http.method": "GET"}, "GET /"))
    report = _check(chain, spans)
    assert report.verdict == "agree"
    assert report.other_records == 2
    assert report.seam_records == 3
    assert report.spans_fetched == 4
    assert report.seam_spans == 3


def test_duplicate_and_malformed_records_are_errors() -> None:
    chain = _chain(3)
    chain.append((3, chain[1][1]))
    chain.append(
        (
            4,
            {
                "kind": "route-shadow",
                "trace_id": "XYZ",
                "span_id": "0" * 16,
                "start_time_unix_nano": T0,
                "attributes": {},
            },
        )
    )
    chain.append(
        (
            5,
            {
                "kind": "route-shadow",
                "trace_id": "a" * 32,
                "span_id": "b" * 16,
                "start_time_unix_nano": True,
                "attributes": {},
            },
        )
    )
    report = _check(chain, [_span(p) for _, p in _chain(3)])
    assert report.verdict == "disagree"
    assert [(d.seq, d.first_seq) for d in report.duplicates] == [(3, 1)]
    assert [m.seq for m in report.malformed] == [4, 5]



def test_records_of_a_span_that_records_nothing_are_records_the_backend_lacks_not_duplicates() -> None:
    # OTEL_SDK_DISABLED=true: every record carries the all-zero ids of the SDK's no-op span; audit read
    # each after the first as a duplicate (a replayed record), DISAGREE, on an honest chain.
    chain = _chain(2)
    for seq in (2, 3, 4):
        payload = {**_payload(seq), "trace_id": "0" * 32, "span_id": "0" * 16}
        chain.append((seq, payload))
    chain.append((5, {**_payload(5), "span_id": "0" * 16}))
    report = _check(chain, [_span(p) for _, p in chain[:2]])
    assert report.duplicates == []
    assert report.missing_in_backend == [2, 3, 4, 5]
    assert report.verdict == "agree"

def test_records_outside_the_window_are_not_held_against_it() -> None:
    chain = _chain(5)
    window = QueryWindow(chain[2][1]["start_time_unix_nano"], T0 + 10**12)
    spans = [_span(p) for _, p in chain[2:]]
    report = cross_check(chain, spans, window=window, time_tolerance_ns=1000)
    assert report.outside_window == 2
    assert report.verdict == "agree"
    assert report.missing_in_backend == []


def test_summary_gives_window_and_counts() -> None:
    chain: list[tuple[int, Any]] = list(reversed(_chain(4)))
    chain.append((9, {"kind": "chain-quarantine"}))
    summary = summarize_chain(chain)
    assert summary.seam_records == 4
    assert summary.other_records == 1
    assert summary.first_start_unix_nano == _payload(0)["start_time_unix_nano"]
    assert summary.last_start_unix_nano == _payload(3)["start_time_unix_nano"]
    empty = summarize_chain([])
    assert empty.first_start_unix_nano is None


def test_seam_record_parsing() -> None:
    assert seam_record(1, "not a mapping") is None
    assert seam_record(1, {"kind": "chain-quarantine"}) is None
    record = seam_record(7, _payload(7))
    assert record is not None and not hasattr(record, "reason")


def test_json_report_shape() -> None:
    chain = _chain(6)
    spans = [_span(p) for _, p in chain]
    chain[2][1]["attributes"]["route_shadow.decision_id"] = "other"
    body = _check(chain[:-1], spans).to_json()
    assert body["verdict"] == "disagree"
    assert body["errors"] == 2
    assert body["decision_id_mismatches"] == [2]
    assert body["orphan_spans"][0]["span_id"] == chain[-1][1]["span_id"]
    assert body["mismatches"][0]["diffs"][0] == {
        "key": "route_shadow.decision_id",
        "chain": "other",
        "chain_present": True,
        "backend": "d0002",
        "backend_present": True,
    }
    assert body["missing_in_backend"]["rate"] == 0.0


def test_time_helpers_round_trip() -> None:
    ns = parse_time("2026-11-30T01:36:23.623422Z")
    assert format_unix_nano(ns) == "2026-11-30T01:36:23.623422Z"
    assert parse_time("2026-11-30T01:36:23.623422") == ns  # naive means UTC
    assert parse_time(str(ns)) == ns
    with pytest.raises(ValueError):
        parse_time("yesterday")


# --------------------------------------------------------------------------------------------------
# Property: for any sampling, truncation and single rewrite, each finding lands in exactly its bucket.
# --------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=60),
    sampled=st.lists(st.booleans(), min_size=60, max_size=60),
    truncate=st.integers(min_value=0, max_value=10),
    rewrite=st.one_of(st.none(), st.integers(min_value=0, max_value=59)),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_findings_partition(
    n: int, sampled: list[bool], truncate: int, rewrite: int | None, seed: int
) -> None:
    chain = _chain(n)
    spans = [_span(p) for seq, p in chain if sampled[seq]]
    random.Random(seed).shuffle(spans)  # the backend's order is irrelevant
    truncate = min(truncate, n)
    kept = chain[: n - truncate]
    if rewrite is not None and rewrite < len(kept):
        seq, p = kept[rewrite]
        kept[rewrite] = (seq, {**p, "attributes": {**p["attributes"], "route_shadow.outcome": "held"}})
    report = _check(kept, spans)
    orphans_expected = {chain[i][1]["span_id"] for i in range(n - truncate, n) if sampled[i]}
    assert {o.span_id for o in report.orphan_spans} == orphans_expected
    assert report.missing_in_backend == [seq for seq, _ in kept if not sampled[seq]]
    rewritten_and_seen = rewrite is not None and rewrite < len(kept) and sampled[rewrite]
    assert [m.seq for m in report.mismatches] == ([rewrite] if rewritten_and_seen else [])
    assert report.matched + len(report.missing_in_backend) == len(kept)
    assert (report.verdict == "agree") == (not orphans_expected and not rewritten_and_seen)


def test_decimal_string_start_time_as_the_chain_stores_it() -> None:
    chain = _chain(3)
    spans = [_span(p) for _, p in chain]
    as_stored = [(seq, {**p, "start_time_unix_nano": str(p["start_time_unix_nano"])}) for seq, p in chain]
    report = _check(as_stored, spans)
    assert report.verdict == "agree" and report.matched == 3
    assert summarize_chain(as_stored).first_start_unix_nano == chain[0][1]["start_time_unix_nano"]
    bad = [(0, {**chain[0][1], "start_time_unix_nano": "12e5"})]
    assert [m.reason for m in _check(bad, []).malformed] == [
        "start_time_unix_nano is not a non-negative integer or decimal string"
    ]


def test_scrubbed_strings_match_their_raw_span_value() -> None:
    chain = _chain(2)
    raw = "provider=zai api_key=sk-ant-api03-abcdefghijklmnopqrstuvwxyz"
    spans = [_span(chain[0][1], **{"route_shadow.legacy.detail": raw}), _span(chain[1][1])]
    chain[0][1]["attributes"]["route_shadow.legacy.detail"] = "provider=zai api_key=[REDACTED]"
    report = _check(chain, spans)
    assert report.verdict == "agree", report.mismatches
    chain[1][1]["attributes"]["route_shadow.legacy.detail"] = "[REDACTED]"  # scrubbing what was no secret
    assert [m.seq for m in _check(chain, spans).mismatches] == [1]


def test_values_under_credential_named_keys_compare_as_the_chain_stores_them() -> None:
    chain = _chain(1)
    spans = [_span(chain[0][1], **{"gen_ai.request.api_key": "not-shaped-like-a-key"})]
    chain[0][1]["attributes"]["gen_ai.request.api_key"] = "[REDACTED]"
    assert _check(chain, spans).verdict == "agree"


def test_a_time_of_non_ascii_digits_is_refused_not_read_as_nanoseconds() -> None:
    for text in ("\u0663", "\u00b2"):  # Arabic-Indic three was read as 3 ns; "²" raised from int()
        with pytest.raises(ValueError, match="neither ISO 8601 nor Unix nanoseconds"):
            parse_time(text)
