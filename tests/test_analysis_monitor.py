"""Following the fleet like a monitor: a state file keeps each log's last verified checkpoint and the
counts up to it; a rerun reads only the records after it, proven against the new checkpoint's root,
and gives exactly the figures of a full run. The state file is untrusted: a damaged, edited or
mixed-up one is dropped with a warning and the log rebuilt from scratch."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_fleet import make_log
from test_analysis_support import SCENARIO, Entry, build_chain, rewrite_chain

from otel_route_shadow.analysis import build_fleet_report, follow_fleet
from otel_route_shadow.analysis.cells import CELL_KEYS
from otel_route_shadow.analysis.fleet import ReportSettings, fleet_specs
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import parse_by
from otel_route_shadow.analysis.monitor import AggregationState, entry_digest, restore_aggregation
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_OK, EXIT_USAGE
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.logstore import Checkpointer, tlog_dir
from otel_route_shadow.tlog import CompactRange, Signer

T1 = 1_791_000_000 * 10**9


def _figures(data: dict[str, Any]) -> dict[str, Any]:
    """A report's JSON without what changes between runs on its own (the checkpoint's age) and the
    monitor's own account of the run."""
    data = json.loads(json.dumps(data))
    for host in data["fleet"]["hosts"]:
        if host["evidence"] is not None:
            host["evidence"].pop("age_seconds")
    data["fleet"].pop("state")
    return data


def _grow(path: Path, origin: str, signer: Signer, entries: Any, start_ns: int) -> None:
    build_chain(path, entries, start_ns=start_ns)
    assert Checkpointer(str(path), origin, signer).checkpoint() is not None


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, dict[str, tuple[Path, Signer]]]:
    """Two hosts with 102 and 51 records (the scenario, repeated), each checkpointed."""
    folder = tmp_path / "fleet"
    big = [Entry(e.name, e.context, e.count * 6) for e in SCENARIO]
    small = [Entry(e.name, e.context, e.count * 3) for e in SCENARIO]
    hosts = {
        "alpha.example/rs": make_log(folder, "alpha", "alpha.example/rs", big),
        "beta.example/rs": make_log(folder, "beta", "beta.example/rs", small),
    }
    return folder, hosts


def test_an_incremental_run_after_one_percent_new_records_equals_a_full_run(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    folder, hosts = fleet
    state = str(tmp_path / "state.json")
    first = follow_fleet([str(folder)], state)
    assert first.fleet is not None and first.fleet.followed is not None
    assert len(first.fleet.followed.rebuilt) == 2 and first.fleet.followed.warnings == ()
    path, signer = hosts["alpha.example/rs"]
    _grow(path, "alpha.example/rs", signer, [SCENARIO[1]], T1)  # 2 new records on 102: about 1%
    again = follow_fleet([str(folder)], state)
    assert again.fleet is not None and again.fleet.followed is not None
    assert sorted(Path(p).name for p in again.fleet.followed.extended) == ["alpha.jsonl", "beta.jsonl"]
    assert again.fleet.followed.rebuilt == () and again.fleet.followed.warnings == ()
    full = build_fleet_report([str(folder)])
    assert _figures(again.as_dict()) == _figures(full.as_dict())
    assert again.spawns == 17 * 9 + 2


def test_a_run_with_nothing_new_reads_nothing_and_gives_the_same_report(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    folder, _hosts = fleet
    state = str(tmp_path / "state.json")
    first = _figures(follow_fleet([str(folder)], state).as_dict())
    again = follow_fleet([str(folder)], state)
    assert again.fleet is not None and again.fleet.followed is not None
    assert len(again.fleet.followed.extended) == 2
    assert _figures(again.as_dict()) == first


def _edit_state(state: Path, edit: Any) -> None:
    document = json.loads(state.read_text(encoding="utf-8"))
    edit(document["logs"][0])
    state.write_text(json.dumps(document), encoding="utf-8")


def test_an_edited_count_in_the_state_is_dropped_with_a_warning(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    folder, _hosts = fleet
    state = tmp_path / "state.json"
    follow_fleet([str(folder)], str(state))

    def inflate(entry: dict[str, Any]) -> None:
        entry["aggregation"]["cells"][0][1] += 1000

    _edit_state(state, inflate)
    again = follow_fleet([str(folder)], str(state))
    assert again.fleet is not None and again.fleet.followed is not None
    assert len(again.fleet.followed.rebuilt) == 1
    assert "digest does not match" in again.fleet.followed.warnings[0]
    assert _figures(again.as_dict()) == _figures(build_fleet_report([str(folder)]).as_dict())


def test_a_state_whose_tree_is_not_the_logs_is_caught_by_the_signed_root(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """A forger who rewrites an entry's tree and root consistently, and recomputes its digest, still
    cannot make it extend to the log's next signed root."""
    folder, hosts = fleet
    state = tmp_path / "state.json"
    follow_fleet([str(folder)], str(state))
    settings = ReportSettings(fleet_specs(parse_by(None)), TimeWindow(), 3, MIN_SPAWNS)

    def forge_tree(entry: dict[str, Any]) -> None:
        nodes = [base64.b64decode(node) for node in entry["frontier"]]
        nodes[0] = hashlib.sha256(b"another history").digest()
        entry["frontier"] = [base64.b64encode(node).decode() for node in nodes]
        entry["root"] = base64.b64encode(CompactRange(entry["size"], nodes).root()).decode()
        entry["digest"] = entry_digest(entry, settings)

    _edit_state(state, forge_tree)
    path, signer = hosts["alpha.example/rs"]
    _grow(path, "alpha.example/rs", signer, [SCENARIO[2]], T1)
    again = follow_fleet([str(folder)], str(state))
    assert again.fleet is not None and again.fleet.followed is not None
    warning = next(w for w in again.fleet.followed.warnings if "alpha.jsonl" in w)
    assert "do not give the checkpoint's root" in warning and "rebuilt from scratch" in warning
    assert _figures(again.as_dict()) == _figures(build_fleet_report([str(folder)]).as_dict())


def test_a_rewritten_history_is_not_extended(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    folder, hosts = fleet
    state = tmp_path / "state.json"
    follow_fleet([str(folder)], str(state))
    path, signer = hosts["beta.example/rs"]
    copy = tmp_path / "copy.jsonl"

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        if seq == 3:
            payload["attributes"]["route_shadow.repo"] = "acme/rewritten"
        return payload

    rewrite_chain(path, copy, edit)
    path.unlink()
    shutil.rmtree(tlog_dir(str(path)))
    shutil.move(copy, path)
    _grow(path, "beta.example/rs", signer, [SCENARIO[0]], T1)  # the same key signs the new history
    again = follow_fleet([str(folder)], str(state))
    assert again.fleet is not None and again.fleet.followed is not None
    warning = next(w for w in again.fleet.followed.warnings if "beta.jsonl" in w)
    assert "history differs" in warning
    assert "acme/rewritten" in {row["key"]["repo"] for row in again.as_dict()["groups"]["repo"]}


@pytest.mark.parametrize(
    "content", [b"", b"not json", b'{"kind": "route-shadow-monitor-state"}', b"[" * 100000]
)
def test_a_state_file_that_cannot_be_used_is_ignored_with_a_warning(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path, content: bytes
) -> None:
    folder, _hosts = fleet
    state = tmp_path / "state.json"
    state.write_bytes(content)
    report = follow_fleet([str(folder)], str(state))
    assert report.fleet is not None and report.fleet.followed is not None
    assert "cannot be used" in report.fleet.followed.warnings[0]
    assert _figures(report.as_dict()) == _figures(build_fleet_report([str(folder)]).as_dict())
    assert json.loads(state.read_text(encoding="utf-8"))["kind"] == "route-shadow-monitor-state"


def test_other_settings_rebuild_the_state(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    folder, _hosts = fleet
    state = str(tmp_path / "state.json")
    follow_fleet([str(folder)], state)
    report = follow_fleet([str(folder)], state, by=["repo+role"])
    assert report.fleet is not None and report.fleet.followed is not None
    assert len(report.fleet.followed.rebuilt) == 2 and len(report.fleet.followed.warnings) == 2


def test_the_report_command_follows_with_state(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _hosts = fleet
    state = str(tmp_path / "state.json")
    assert main(["report", str(folder), "--state", state, "--json", "--no-progress"]) == EXIT_OK
    first = json.loads(capsys.readouterr().out)
    assert len(first["fleet"]["state"]["rebuilt"]) == 2
    assert main(["report", str(folder), "--state", state, "--no-progress"]) == EXIT_OK
    assert "2 log(s) extended from the state file" in capsys.readouterr().out
    assert main(["report", str(folder), "--rebuild", "--no-progress"]) == EXIT_USAGE
    assert main(["report", str(folder), "--state", state, "--store", str(tmp_path)]) == EXIT_USAGE


def test_a_state_path_that_is_not_a_regular_file_is_refused(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _hosts = fleet
    assert main(["report", str(folder), "--state", str(tmp_path), "--no-progress"]) == EXIT_USAGE
    assert "not a regular file" in capsys.readouterr().err
    missing = str(tmp_path / "no-such-dir" / "state.json")
    assert main(["report", str(folder), "--state", missing, "--no-progress"]) == EXIT_USAGE
    assert "cannot write" in capsys.readouterr().err


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "role-dial", "true"])
)


@st.composite
def _aggregation_states(draw: st.DrawFn) -> dict[str, Any]:
    """Aggregation states of any shape the schema lets through (a forger's, or a damaged file's)."""
    cell_width = draw(st.sampled_from([len(CELL_KEYS) + 1, len(CELL_KEYS), 3]))
    cells = draw(
        st.lists(
            st.tuples(st.lists(_SCALARS, min_size=cell_width, max_size=cell_width), st.integers(0, 9)),
            max_size=4,
        )
    )
    route = st.lists(_SCALARS, min_size=2, max_size=4)
    keys = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.lists(_SCALARS, min_size=5, max_size=7),
                    "last": st.none() | route,
                    "flaps": st.integers(0, 9),
                    "routes": st.lists(route, max_size=3),
                    "flap_seqs": st.lists(st.integers(0, 99), max_size=5),
                }
            ),
            max_size=3,
        )
    )
    width = draw(st.sampled_from([1_000_000, 1_000_000_000, 7]))
    return {
        "cells": cells,
        "keys": keys,
        "timeline": {
            "width_ns": width,
            "first": draw(st.integers(0, 10**12)),
            "last": draw(st.integers(0, 10**12)),
            "buckets": draw(
                st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 9), st.integers(0, 9)), max_size=3)
            ),
        },
        "divergent": draw(
            st.dictionaries(
                st.sampled_from(["policy-held", "x"]),
                st.lists(st.fixed_dictionaries({"seq": st.integers(0, 9)}) | st.just({}), max_size=3),
                max_size=2,
            )
        ),
        "served": [],
        "counts": {
            "read": 1,
            "observations": 1,
            "skipped_kinds": {},
            "outside_window": 0,
            "without_decision": 0,
            "malformed": 0,
            "dropped": {"events": 0, "records": 0, "first_ns": None, "last_ns": None},
            "truncated": {"records": 0, "observations": 0, "first_seqs": []},
            "shadow_errors": draw(
                st.lists(st.tuples(st.lists(_SCALARS, min_size=4, max_size=4), st.integers(0, 3)), max_size=2)
            ),
        },
    }


@settings(max_examples=150, deadline=None)
@given(_aggregation_states())
def test_any_state_the_schema_admits_restores_or_is_refused_never_crashes_the_report(
    data: dict[str, Any],
) -> None:
    state = AggregationState.model_validate(data)
    report_settings = ReportSettings(fleet_specs(parse_by(None)), TimeWindow(), 3, MIN_SPAWNS)
    try:
        aggregation = restore_aggregation(state, report_settings)
    except ValueError:
        return  # refused: the log is read in full instead
    report = aggregation.finish()
    report.as_dict()
    format_report(report)
