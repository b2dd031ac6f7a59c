"""The noise baseline (issue 27 item 2) against a brute-force count: hypothesis writes small real chains
(keys whose legacy route changes or not, served routes reported or not) and every figure of the report
and of whatif is recomputed here from the chain's payloads with exact fractions, by a different route
than the analysis takes (per-key lists, no streaming state)."""

from __future__ import annotations

import itertools
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_support import (
    ACCOUNTS,
    PROJECT_X_ZAI,
    RECORDED_POLICIES,
    append_observations,
    served,
    snapshot_of,
)

from otel_route_shadow.analysis import build_report, fraction_rate, replay
from otel_route_shadow.analysis.noise import FLOAT_EXACT, NoiseRow, NoiseTable
from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.core import (
    LegacyStage,
    PolicySnapshot,
    RouteContext,
    build_legacy_route,
    compare_routes,
    explain,
)
from otel_route_shadow.shadow.record import RECORD_KIND

KEYS = (
    ("acme/project-x", "reviewer", None, "agentic", None),
    ("acme/other", "implementer", "loop-a", "one-shot", None),
    ("acme/project-x", "implementer", None, "agentic", "claude-opus"),
)
ROUTES = (
    # (mechanism, provider, model, gateway)
    ("role-dial", "anthropic", "claude-opus-4-1", False),
    ("credit-failover", "zai", "glm-5.1", False),
    ("fleet-ratchet", "anthropic", "claude-opus-4-1", True),  # the same model, another transport
    ("role-dial", "anthropic", "claude-sonnet-4-5", False),  # another model only
)
SERVED = (None, "same", "differs", "unknown")
KEY_ATTRS = (
    "route_shadow.repo",
    "route_shadow.role",
    "route_shadow.principal_id",
    "route_shadow.request_face",
    "route_shadow.requirement",
)
ROUTE_ATTRS = ("route_shadow.legacy.provider", "route_shadow.legacy.model", "route_shadow.transport")
KEY_NAMES = ("repo", "role", "principal", "request_face", "requirement")


def make_context(key: int, route: int) -> RouteContext:
    repo, role, principal, face, requirement = KEYS[key]
    mechanism, provider, model, gateway = ROUTES[route]
    stages = [LegacyStage(mechanism=mechanism, provider=provider, model=model, gateway=gateway)]
    legacy = build_legacy_route(stages, face, account=f"{provider}-legacy")
    assert legacy is not None
    return RouteContext(
        repo=repo,
        role=role,
        principal_id=principal,
        request_face=face,
        requirement=requirement,
        accounts=ACCOUNTS,
        legacy_route=legacy,
    )


spawns = st.lists(
    st.tuples(
        st.integers(0, len(KEYS) - 1),
        st.integers(0, len(ROUTES) - 1),
        st.sampled_from(SERVED),
    ),
    min_size=1,
    max_size=24,
)


def write(path: Path, drawn: list[tuple[int, int, str | None]]) -> None:
    items = []
    for key, route, status in drawn:
        other = "zai" if ROUTES[route][1] == "anthropic" else "anthropic"
        provider = other if status == "differs" else ROUTES[route][1]
        items.append((make_context(key, route), served(status, provider, "some-model")))
    append_observations(path, items)


# ---------------------------------------------------------------------------------------------
# The brute force


def observations(path: Path) -> list[dict[str, Any]]:
    return [p["attributes"] for _, p in iter_payloads(path) if p.get("kind") == RECORD_KIND]


def served_differs(a: dict[str, Any]) -> bool:
    codes = str(a.get("route_shadow.finding") or "").split(",")
    return a.get("route_shadow.served.status") == "differs" or "served-differs" in codes


def agreed(a: dict[str, Any]) -> bool:
    return a.get("route_shadow.agreed") is True and not served_differs(a)


def candidate_agreed(a: dict[str, Any], candidate: PolicySnapshot) -> bool:
    context = RouteContext.model_validate_json(a["route_shadow.context"])
    return compare_routes(explain(context, candidate), context.legacy_route)[0] and not served_differs(a)


def brute_keys(rows: list[dict[str, Any]], lanes: list[list[bool]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per key: spawns, flaps and each lane's divergences, from the per-key list of its spawns."""
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for i, a in enumerate(rows):
        by_key.setdefault(tuple(a.get(k) for k in KEY_ATTRS), []).append(i)
    out = {}
    for key, indexes in by_key.items():
        routes = [tuple(rows[i].get(k) for k in ROUTE_ATTRS) for i in indexes]
        flaps = sum(1 for before, after in itertools.pairwise(routes) if before != after)
        n = len(indexes)
        flap_rate = Fraction(flaps, n - 1) if n > 1 else None
        lane_figures = []
        for lane in lanes:
            diverged = sum(1 for i in indexes if not lane[i])
            rate = Fraction(diverged, n)
            above = rate if flap_rate is None else max(Fraction(0), rate - flap_rate)
            lane_figures.append((diverged, rate, above))
        out[key] = {"spawns": n, "flaps": flaps, "flap_rate": flap_rate, "lanes": lane_figures}
    return out


def brute_part(keys: dict[tuple[Any, ...], dict[str, Any]], which: str, lane: int) -> dict[str, Any]:
    chosen = [k for k in keys.values() if which == "total" or (which == "flapping") == (k["flaps"] > 0)]
    spawns_ = sum(k["spawns"] for k in chosen)
    transitions = sum(k["spawns"] - 1 for k in chosen)
    flaps = sum(k["flaps"] for k in chosen)
    excess = sum((k["spawns"] * k["lanes"][lane][2] for k in chosen), Fraction(0))
    diverged = sum(k["lanes"][lane][0] for k in chosen)
    return {
        "keys": len(chosen),
        "spawns": spawns_,
        "flaps": flaps,
        "transitions": transitions,
        "flap_rate": fraction_rate(Fraction(flaps, transitions)) if transitions else None,
        "diverged": diverged,
        "divergence_rate": fraction_rate(Fraction(diverged, spawns_)) if spawns_ else None,
        "divergence_above_noise": fraction_rate(excess / spawns_) if spawns_ else None,
    }


def brute_row(key: tuple[Any, ...], figures: dict[str, Any], lane: int) -> dict[str, Any]:
    diverged, rate, above = figures["lanes"][lane]
    return {
        "key": dict(zip(KEY_NAMES, key, strict=True)),
        "spawns": figures["spawns"],
        "flaps": figures["flaps"],
        "flap_rate": fraction_rate(figures["flap_rate"]),
        "diverged": diverged,
        "divergence_rate": fraction_rate(rate),
        "divergence_above_noise": fraction_rate(above),
    }


def lane(row: dict[str, Any], name: str | None) -> dict[str, Any]:
    """A JSON row's figures of one lane, in the report's flat shape."""
    figures = row if name is None else {**row, **row[name]}
    return {k: figures.get(k) for k in ("diverged", "divergence_rate", "divergence_above_noise")}


# ---------------------------------------------------------------------------------------------
# The properties


@settings(max_examples=40)
@given(spawns)
def test_report_noise_figures_equal_a_brute_force_count(drawn: list[tuple[int, int, str | None]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.jsonl"
        write(path, drawn)
        report = build_report(path)
        rows = observations(path)
    keys = brute_keys(rows, [[agreed(a) for a in rows]])
    noise = report.as_dict()["noise"]
    for which in ("total", "stable", "flapping"):
        assert noise[which] == brute_part(keys, which, 0), which
    listed = {tuple(row["key"].values()): row for row in noise["flapping_keys"]}
    assert set(listed) == {key for key, k in keys.items() if k["flaps"]}
    for key, row in listed.items():
        expected = brute_row(key, keys[key], 0)
        got = {k: row[k] for k in ("key", "spawns", "flaps", "flap_rate")} | lane(row, None)
        assert got == expected
        assert len(row["flap_seqs"]) == min(keys[key]["flaps"], 3)
        assert row["routes"] == len({tuple(a.get(k) for k in ROUTE_ATTRS) for a in rows if _key(a) == key})
    # Agreement never counts a served route that differs; the verdict is judged on the stable part.
    assert report.total.agreed == sum(agreed(a) for a in rows)
    stable = sum(k["spawns"] for k in keys.values() if not k["flaps"])
    assert (report.gap_total.stable.spawns, report.gap_total.flapping.spawns) == (stable, len(rows) - stable)
    data = report.as_dict()["served"]
    statuses = [
        "differs"
        if served_differs(a)
        else ("same" if a.get("route_shadow.served.status") == "same" else "unknown")
        for a in rows
    ]
    assert (data["same"], data["differs"], data["unknown"]) == tuple(
        statuses.count(state) for state in ("same", "differs", "unknown")
    )


def _key(a: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(a.get(k) for k in KEY_ATTRS)


@settings(max_examples=25)
@given(spawns)
def test_whatif_noise_figures_equal_a_brute_force_count(drawn: list[tuple[int, int, str | None]]) -> None:
    candidate = snapshot_of(PROJECT_X_ZAI + RECORDED_POLICIES)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.jsonl"
        write(path, drawn)
        result = replay(path, candidate, cited_loader=lambda n: snapshot_of(RECORDED_POLICIES, n))
        rows = observations(path)
    assert result.integrity_findings == 0
    lanes = [[agreed(a) for a in rows], [candidate_agreed(a, candidate) for a in rows]]
    keys = brute_keys(rows, lanes)
    noise = result.as_dict()["noise"]
    for which in ("total", "stable", "flapping"):
        for i, name in enumerate(("recorded", "candidate")):
            expected = brute_part(keys, which, i)
            got = noise[which]
            assert {k: got[k] for k in ("keys", "spawns", "flaps", "transitions", "flap_rate")} == {
                k: expected[k] for k in ("keys", "spawns", "flaps", "transitions", "flap_rate")
            }
            assert lane(got, name) == lane(expected, None), (which, name)
    for row in noise["flapping_keys"]:
        key = tuple(row["key"].values())
        for i, name in enumerate(("recorded", "candidate")):
            assert lane(row, name) == lane(brute_row(key, keys[key], i), None)
    assert result.total.agreed_before == sum(lanes[0])
    assert result.total.agreed_after == sum(lanes[1])


# ---------------------------------------------------------------------------------------------
# Worked examples


def test_a_key_whose_route_flaps_is_shown_apart_and_left_out_of_the_verdict(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    # Key 0 (reviewers, agreeing on anthropic) flaps to z.ai twice; key 1 is stable.
    order = [(0, 0), (1, 0), (0, 1), (1, 0), (0, 0), (0, 0), (0, 1), (1, 0)]
    append_observations(path, [(make_context(k, r), {}) for k, r in order])
    report = build_report(path)
    (row,) = report.noise.flapping
    assert row.key == KEYS[0]
    assert (row.spawns, row.flaps, row.flap_rate) == (5, 3, Fraction(3, 4))
    assert row.divergence_rate() == Fraction(2, 5)  # the two z.ai spawns: provider-differs
    assert row.above_noise() == 0  # all of it is the flapping route
    assert row.flap_seqs == (2, 4, 6)
    _verdict, reasons = report.gap_total.reasons()
    assert "judged on the stable part (3 spawn(s)); 5 spawn(s)" in reasons[-1]
    data = report.as_dict()
    assert data["noise"]["flapping"]["keys"] == 1 and data["noise"]["stable"]["keys"] == 1
    assert data["policy_gaps"]["total"]["stable_spawns"] == 3
    assert data["policy_gaps"]["total"]["flapping_spawns"] == 5


def test_a_group_of_flapping_keys_only_has_no_stable_part_to_judge(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    append_observations(path, [(make_context(0, r), {}) for r in (0, 1, 0, 1)])
    verdict, reasons = build_report(path).gap_total.reasons()
    assert verdict == "unknown" and "no stable part to judge" in reasons[0]


@pytest.mark.parametrize("n", [1, 2])
def test_a_key_seen_once_has_no_noise_to_subtract(tmp_path: Path, n: int) -> None:
    path = tmp_path / "chain.jsonl"
    append_observations(path, [(make_context(0, 1), {})] * n)  # z.ai against an anthropic policy
    (row,) = build_report(path).noise.rows
    assert row.flap_rate == (None if n == 1 else 0)
    assert row.above_noise() == 1  # never hidden: the whole divergence is above the noise


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 41) | st.just(FLOAT_EXACT + 3), st.sampled_from("abc")),
        max_size=12,
    )
)
def test_the_noise_table_orders_flap_rates_as_their_exact_fractions(rows: list[tuple[int, int, str]]) -> None:
    """The table sorts its flapping keys by float flap rates while every one has fewer transitions
    than ``FLOAT_EXACT`` (and by fractions otherwise): the order is the fractions' either way."""
    table = NoiseTable(
        rows=[
            NoiseRow(
                key=(repo, "r", "p", "f", "q"),
                spawns=spawns,
                flaps=min(flaps, spawns - 1),
                routes=1,
                diverged=(0,),
            )
            for flaps, spawns, repo in rows
        ]
    )
    exact = sorted(
        (row for row in table.rows if row.flapping),
        key=lambda row: (
            -(row.flap_rate or Fraction(0)),
            -row.spawns,
            tuple(map(str, row.key)),
            str(row.host),
        ),
    )
    assert [(row.key, row.spawns, row.flaps) for row in table.flapping] == [
        (row.key, row.spawns, row.flaps) for row in exact
    ]
