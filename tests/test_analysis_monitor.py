"""Following the fleet like a monitor: a state file keeps each log's last verified checkpoint and the
counts up to it; a rerun reads only the records after it, proven against the new checkpoint's root,
and gives exactly the figures of a full run. The state file is untrusted: a damaged, edited or
mixed-up one is dropped with a warning and the log rebuilt from scratch."""

from __future__ import annotations

import base64
import gc
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
from otel_route_shadow.analysis.fleet import FleetError, ReportSettings, fleet_specs
from otel_route_shadow.analysis.fleet_logs import Followed
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import parse_by
from otel_route_shadow.analysis.monitor_state import (
    STATE_VERSION,
    AggregationState,
    CellTable,
    ValueTable,
    entry_digest,
    restore_aggregation,
)
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_OK, EXIT_USAGE
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.logstore import Checkpointer, tlog_dir
from otel_route_shadow.tlog import Checkpoint, CompactRange, Signer, leaf_hash, sign_note

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


def _duration(i: int) -> int | None:
    """Durations of 0.5 to 50 ms, and every fifth record without one (written before they were)."""
    return None if i % 5 == 4 else (i * 37 % 100 + 1) * 500_000


def test_an_incremental_run_with_durations_equals_a_full_run_and_its_p99s(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    big = [Entry(e.name, e.context, e.count * 6) for e in SCENARIO]
    alpha, signer = make_log(folder, "alpha", "alpha.example/rs", big, duration=_duration)
    make_log(folder, "beta", "beta.example/rs", SCENARIO, duration=lambda i: 1_000_000 + i)
    state = str(tmp_path / "state.json")
    follow_fleet([str(folder)], state)
    build_chain(alpha, [SCENARIO[0], SCENARIO[3]], start_ns=T1, duration=lambda i: 900_000_000 + i)
    assert Checkpointer(str(alpha), "alpha.example/rs", signer).checkpoint() is not None
    again = follow_fleet([str(folder)], state)
    assert again.fleet is not None and again.fleet.followed is not None
    assert len(again.fleet.followed.extended) == 2 and again.fleet.followed.warnings == ()
    full = build_fleet_report([str(folder)])
    assert _figures(again.as_dict()) == _figures(full.as_dict())
    rows = again.as_dict()["cohorts"]["rows"]
    assert sum(row["latency_unknown"] for row in rows) == sum(_duration(i) is None for i in range(17 * 6))
    assert any(row["p99_latency_ms"] is not None and row["p99_latency_ms"] >= 891 for row in rows)
    assert [row["latency_timed"] for row in rows] == [
        row["latency_timed"] for row in full.as_dict()["cohorts"]["rows"]
    ]


def _edit_document(state: Path, edit: Any) -> None:
    document = json.loads(state.read_text(encoding="utf-8"))
    edit(document)
    state.write_text(json.dumps(document), encoding="utf-8")


def _edit_state(state: Path, edit: Any) -> None:
    _edit_document(state, lambda document: edit(document["logs"][0]))


def _as_version_one(document: dict[str, Any]) -> None:
    """The state as version 1 wrote it: no latency histograms."""
    document["version"] = 1
    for log in document["logs"]:
        del log["aggregation"]["latencies"]


def _rerun_after(folder: Path, state: Path, edit: Any) -> Followed:
    """Follow the fleet, ``edit`` the state's document, follow again: what the rerun says of its
    logs (its figures checked against a full run's)."""
    follow_fleet([str(folder)], str(state))
    _edit_document(state, edit)
    again = follow_fleet([str(folder)], str(state))
    assert again.fleet is not None and again.fleet.followed is not None
    assert _figures(again.as_dict()) == _figures(build_fleet_report([str(folder)]).as_dict())
    return again.fleet.followed


def test_a_state_of_the_older_schema_is_rebuilt_with_a_warning(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    state = tmp_path / "state.json"
    followed = _rerun_after(fleet[0], state, _as_version_one)
    assert len(followed.rebuilt) == 2 and followed.extended == ()
    assert any("schema version" in warning for warning in followed.warnings)
    assert json.loads(state.read_text(encoding="utf-8"))["version"] == STATE_VERSION


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


def test_a_state_of_a_fleet_that_counted_no_spawn_is_used_by_the_next_run(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    # A window no record falls in: the state held the timeline's "last" as -1, which its own schema
    # refused, so every later run warned "cannot be used" and read every log in full.
    folder, _hosts = fleet
    state = str(tmp_path / "state.json")
    window = TimeWindow.parse("2099-01-01", None)
    first = follow_fleet([str(folder)], state, window=window)
    assert first.spawns == 0
    again = follow_fleet([str(folder)], state, window=window)
    assert again.fleet is not None and again.fleet.followed is not None
    assert not again.fleet.followed.warnings and len(again.fleet.followed.extended) == 2
    assert _figures(again.as_dict()) == _figures(first.as_dict())


def test_an_edited_count_in_the_state_is_dropped_with_a_warning(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    def inflate(document: dict[str, Any]) -> None:
        document["logs"][0]["aggregation"]["cells"][2] += 1000  # the first cell's count

    followed = _rerun_after(fleet[0], tmp_path / "state.json", inflate)
    assert len(followed.rebuilt) == 1
    assert "digest does not match" in followed.warnings[0]


def test_a_state_whose_tree_is_not_the_logs_is_caught_by_the_signed_root(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """A forger who rewrites an entry's tree and root consistently, and recomputes its digest, still
    cannot make it extend to the log's next signed root."""
    folder, hosts = fleet
    state = tmp_path / "state.json"
    follow_fleet([str(folder)], str(state))
    settings = ReportSettings(fleet_specs(parse_by(None)), TimeWindow(), 3, MIN_SPAWNS)
    cells = CellTable(json.loads(state.read_text(encoding="utf-8"))["cells"]).digest()

    def forge_tree(entry: dict[str, Any]) -> None:
        nodes = [base64.b64decode(node) for node in entry["frontier"]]
        nodes[0] = hashlib.sha256(b"another history").digest()
        entry["frontier"] = [base64.b64encode(node).decode() for node in nodes]
        entry["root"] = base64.b64encode(CompactRange(entry["size"], nodes).root()).decode()
        entry["digest"] = entry_digest(entry, settings, cells)

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
    "content",
    [
        b"",
        b'{"kind":"route-shadow-monitor-state","version":',
        b'{"kind": "route-shadow-monitor-state"}',
        b'{"kind":"route-shadow-monitor-state"' + b"[" * 100000,
    ],
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


@pytest.mark.parametrize(
    "content", [b"not json", b"[" * 100000, b'{"kind": "other"}', b"PRIVATE+KEY+x+1+abc"]
)
@pytest.mark.parametrize("rebuild", [False, True])
def test_a_state_path_naming_a_file_that_is_not_a_state_file_is_refused_and_left_as_it_was(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    rebuild: bool,
) -> None:
    # Any file there was replaced by the state file, with a warning: a mistyped --state naming the
    # signing key or a chain destroyed it.
    folder, _hosts = fleet
    state = tmp_path / "state.json"
    state.write_bytes(content)
    args = [
        "report",
        str(folder),
        "--state",
        str(state),
        "--no-progress",
        *(["--rebuild"] if rebuild else []),
    ]
    assert main(args) == EXIT_USAGE
    assert "not a fleet state file" in capsys.readouterr().err
    assert state.read_bytes() == content


def test_a_state_path_naming_a_chain_or_its_log_folder_is_refused(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _hosts = fleet
    chain = sorted(folder.glob("*.jsonl"))[0]
    before = chain.read_bytes()
    for target in (chain, Path(f"{chain}.tlog") / "state.json"):
        assert main(["report", str(folder), "--state", str(target), "--no-progress"]) == EXIT_USAGE
        assert "one of its files" in capsys.readouterr().err
    assert chain.read_bytes() == before


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
    values = draw(st.lists(_SCALARS, min_size=1, max_size=6))
    index = st.integers(0, len(values))  # one beyond the table too
    shared = draw(st.lists(st.lists(_SCALARS, min_size=len(CELL_KEYS), max_size=len(CELL_KEYS)), max_size=3))
    cell_width = draw(st.sampled_from([3, 3, 2, len(CELL_KEYS) + 2]))
    cells = [
        value
        for _ in range(draw(st.integers(0, 4)))
        for value in draw(st.lists(st.integers(0, len(shared)), min_size=1, max_size=1))
        + draw(st.lists(index, min_size=cell_width - 1, max_size=cell_width - 1))
    ]
    keys = draw(st.lists(index | st.integers(0, 9), min_size=0, max_size=20))  # any row, length first or not
    for _ in range(draw(st.integers(0, 2))):  # well-formed rows: a key, flaps, the last route, routes, seqs
        last = draw(st.sampled_from([[], [0, 0, 0]]))
        routes = draw(st.lists(st.lists(index, min_size=3, max_size=3), max_size=2))
        row = [
            *draw(st.lists(index, min_size=6, max_size=6)),
            draw(st.integers(0, 9)),
            len(last),
            *last,
            len(routes),
            *(value for route in routes for value in route),
            *draw(st.lists(st.integers(0, 99), max_size=3)),
        ]
        keys.extend([len(row), *row])
    width = draw(st.sampled_from([1_000_000, 1_000_000_000, 7]))
    latencies = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "cohort": st.lists(_SCALARS, min_size=3, max_size=5),
                    "buckets": st.lists(st.tuples(st.integers(-3, 3000), st.integers(0, 9)), max_size=4),
                    "unknown": st.integers(0, 9),
                }
            ),
            max_size=3,
        )
    )
    return {
        "shared": shared,
        "values": values,
        "cells": cells,
        "latencies": latencies,
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
    shared = data.pop("shared")
    state = AggregationState.model_validate(data)
    report_settings = ReportSettings(fleet_specs(parse_by(None)), TimeWindow(), 3, MIN_SPAWNS)
    try:
        table = ValueTable(state.values, CellTable(shared))
        aggregation = restore_aggregation(state, report_settings, table)
    except ValueError:
        return  # refused: the log is read in full instead
    report = aggregation.finish()
    report.as_dict()
    format_report(report)


def _decoded(state: Path) -> dict[str, Any]:
    """Each log's cells and decision keys, values in place of their indices (``AggregationState``)."""
    out = {}
    document = json.loads(state.read_text(encoding="utf-8"))
    for entry in document["logs"]:
        aggregation = entry["aggregation"]
        values, cells, keys = aggregation["values"], aggregation["cells"], aggregation["keys"]
        decoded_cells = {
            (*document["cells"][cells[at]], values[cells[at + 1]]): cells[at + 2]
            for at in range(0, len(cells), 3)
        }
        decoded_keys, at = {}, 0
        while at < len(keys):
            row = keys[at + 1 : at + 1 + keys[at]]
            last = tuple(values[i] for i in row[8 : 8 + row[7]])
            after = 8 + row[7]
            routes = row[after + 1 : after + 1 + 3 * row[after]]
            decoded_keys[tuple(values[i] for i in row[:6])] = (
                row[6],
                last,
                sorted(tuple(values[i] for i in routes[r : r + 3]) for r in range(0, len(routes), 3)),
                row[after + 1 + len(routes) :],
            )
            at += 1 + keys[at]
        out[entry["path"]] = (entry["size"], entry["root"], decoded_cells, decoded_keys)
    return out


def test_a_rerun_writes_back_the_rows_it_read_and_its_state_holds_a_rebuilds_counts(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """A rerun writes the cells and keys the new records did not change as it read them, and the
    others anew: the state it leaves holds what a rebuild over the same logs holds."""
    folder, hosts = fleet
    state, rebuilt = tmp_path / "state.json", tmp_path / "rebuilt.json"
    follow_fleet([str(folder)], str(state))
    path, signer = hosts["alpha.example/rs"]
    _grow(path, "alpha.example/rs", signer, [SCENARIO[1], SCENARIO[4]], T1)
    again = follow_fleet([str(folder)], str(state))
    assert again.fleet is not None and again.fleet.followed is not None
    assert len(again.fleet.followed.extended) == 2
    follow_fleet([str(folder)], str(rebuilt), rebuild=True)
    assert _decoded(state) == _decoded(rebuilt)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_followed_run_leaves_the_garbage_collector_as_it_found_it(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path, enabled: bool
) -> None:
    folder, hosts = fleet
    state = str(tmp_path / "state.json")
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        follow_fleet([str(folder)], state)
        assert gc.isenabled() is enabled
        follow_fleet([str(folder)], state)
        assert gc.isenabled() is enabled
        with pytest.raises(FleetError):  # two logs of one origin: refused, the collector restored
            follow_fleet([str(folder), str(hosts["alpha.example/rs"][0])], state)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_a_followed_run_with_the_collector_paused_leaves_no_garbage_behind(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """The monitor pauses the cyclic collector for a whole run: everything it drops must be freed by
    reference counting alone (no reference cycle), or a paused run would hold it until the next
    collection."""
    folder, hosts = fleet
    state = str(tmp_path / "state.json")
    follow_fleet([str(folder)], state)
    path, signer = hosts["alpha.example/rs"]
    _grow(path, "alpha.example/rs", signer, [SCENARIO[1]], T1)
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        report = follow_fleet([str(folder)], state)
        assert report.fleet is not None and report.fleet.followed is not None
        assert len(report.fleet.followed.extended) == 2
        report = follow_fleet([str(folder)], str(tmp_path / "full.json"), rebuild=True)
        Path(state).write_text('{"kind":"route-shadow-monitor-state"', "utf-8")  # damaged: all rebuilt
        report = follow_fleet([str(folder)], state)
        assert report.fleet is not None and report.fleet.followed is not None
        assert report.fleet.followed.warnings
        del report
        assert gc.collect() == 0
    finally:
        gc.enable() if was else gc.disable()


def test_an_edited_cell_of_the_shared_table_rebuilds_every_log_that_uses_it(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """The table of cells is shared by every entry and bound into each entry's digest."""

    def forge_cell(document: dict[str, Any]) -> None:
        document["cells"][0][2] = "held" if document["cells"][0][2] != "held" else "decided"

    followed = _rerun_after(fleet[0], tmp_path / "state.json", forge_cell)
    assert len(followed.rebuilt) == 2 and followed.extended == ()
    assert all("digest does not match" in warning for warning in followed.warnings)


def test_the_state_keeps_only_the_cells_of_the_logs_it_follows(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """A log no longer followed leaves no cell of its own behind in the shared table, and the rows
    of the logs kept are renumbered into the smaller table."""
    _folder, hosts = fleet
    gamma, _signer = make_log(tmp_path / "more", "gamma", "gamma.example/rs", [SCENARIO[0]])
    alpha = hosts["alpha.example/rs"][0]
    state = tmp_path / "state.json"
    follow_fleet([str(alpha), str(gamma)], str(state))
    both = json.loads(state.read_text(encoding="utf-8"))["cells"]
    again = follow_fleet([str(gamma)], str(state))
    assert again.fleet is not None and again.fleet.followed is not None
    assert len(again.fleet.followed.extended) == 1
    document = json.loads(state.read_text(encoding="utf-8"))
    used = set(document["logs"][0]["aggregation"]["cells"][::3])
    assert len(document["cells"]) < len(both) and used == set(range(len(document["cells"])))
    third = follow_fleet([str(gamma)], str(state))
    assert _figures(third.as_dict()) == _figures(build_fleet_report([str(gamma)]).as_dict())


def _fleet_of_one(tmp_path: Path) -> tuple[Path, Signer, str]:
    alpha, signer = make_log(tmp_path / "fleet", "alpha", "alpha.example/rs")
    return alpha, signer, str(tmp_path / "state.json")


def _edit_line(path: Path, number: int) -> list[bytes]:
    """Edit the chain's line ``number`` (its hash no longer matches); its lines."""
    lines = path.read_bytes().split(b"\n")[:-1]
    lines[number] = lines[number].replace(b"acme/", b"ACME/", 1)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return lines


def _statuses(report: Any) -> list[tuple[str, str | None]]:
    return [(log.status, log.reason) for log in report.fleet.logs]


def test_a_rerun_checks_the_lines_after_the_checkpoint_as_a_full_run_does(tmp_path: Path) -> None:
    """Lines appended after the checkpoint, one of them edited: a full run excludes the log, and so
    must a rerun (it counted the log before: lines after a checkpoint were never checked)."""
    alpha, signer, state = _fleet_of_one(tmp_path)
    keys = [signer.verifier()]
    follow_fleet([str(alpha)], state, verifiers=keys)
    build_chain(alpha, SCENARIO[:2], start_ns=T1)
    _edit_line(alpha, -1)
    full = build_fleet_report([str(alpha)], verifiers=keys)
    again = follow_fleet([str(alpha)], state, verifiers=keys)
    assert _statuses(again) == _statuses(full) and full.fleet is not None and not full.fleet.included
    assert again.fleet is not None and again.fleet.followed is not None and not again.fleet.followed.extended


def test_a_rerun_without_a_key_checks_the_links_of_the_records_it_adds(tmp_path: Path) -> None:
    """New records, one edited, under a checkpoint signed again over them: without a key nothing
    vouches for them, so a full run checks every line and excludes the log; so must a rerun."""
    alpha, signer, state = _fleet_of_one(tmp_path)
    follow_fleet([str(alpha)], state)
    size = len(alpha.read_bytes().split(b"\n")) - 1
    build_chain(alpha, SCENARIO[:2], start_ns=T1)
    lines = _edit_line(alpha, size + 2)
    tree = CompactRange()
    for line in lines:
        tree.append(leaf_hash(line))
    note = sign_note(Checkpoint("alpha.example/rs", tree.size, tree.root()).text(), [signer])
    (Path(tlog_dir(str(alpha))) / "checkpoint").write_text(note, encoding="utf-8")
    full = build_fleet_report([str(alpha)])
    again = follow_fleet([str(alpha)], state)
    assert _statuses(again) == _statuses(full) and full.fleet is not None and not full.fleet.included


def test_a_chain_cut_short_below_its_unchanged_checkpoint_is_not_counted_by_a_rerun(tmp_path: Path) -> None:
    """The rerun read nothing (the checkpoint did not move) and counted 17 records a chain of 5 no
    longer holds; it must see that its position is gone and read the log in full, as a full run."""
    alpha, signer, state = _fleet_of_one(tmp_path)
    keys = [signer.verifier()]
    follow_fleet([str(alpha)], state, verifiers=keys)
    alpha.write_bytes(b"\n".join(alpha.read_bytes().split(b"\n")[:5]) + b"\n")
    full = build_fleet_report([str(alpha)], verifiers=keys)
    again = follow_fleet([str(alpha)], state, verifiers=keys)
    assert _statuses(again) == _statuses(full) and full.fleet is not None and not full.fleet.included
    assert again.fleet is not None and again.fleet.followed is not None
    assert "cut short" in again.fleet.followed.warnings[0]


def _sign_another_history(path: Path, origin: str, signer: Signer, keep: int | None = None) -> None:
    """The log's history rewritten (seq 3's repo changed; only its first ``keep`` lines kept) and its
    new tree signed by its own key from a fresh log folder: a fork of what it signed before."""
    copy = path.with_suffix(".rewritten")

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        if seq == 3:
            payload["attributes"]["route_shadow.repo"] = "acme/rewritten"
        return payload

    rewrite_chain(path, copy, edit)
    if keep is not None:
        copy.write_bytes(b"".join(copy.read_bytes().splitlines(keepends=True)[:keep]))
    path.unlink()
    shutil.rmtree(tlog_dir(str(path)))
    shutil.move(copy, path)
    assert Checkpointer(str(path), origin, signer).checkpoint() is not None


def _repos(report: Any) -> set[str]:
    return {row["key"]["repo"] for row in report.as_dict()["groups"]["repo"]}


def _log(report: Any, path: Path) -> Any:
    return next(log for log in report.fleet.logs if log.path == str(path))


@pytest.mark.parametrize(
    ("keep", "grow", "says"),
    [
        (None, False, "give the root"),  # the same size, another root: no record read for the proof
        (None, True, "give the root"),  # grown: its first records read again
        (10, False, "a stale copy or a rollback"),  # smaller: no fork proven, not counted either
    ],
    ids=["same-size", "grown", "older"],
)
def test_a_log_that_signs_another_history_is_excluded_until_rebuilt(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]],
    tmp_path: Path,
    keep: int | None,
    grow: bool,
    says: str,
) -> None:
    """With its key, a log whose new checkpoint does not extend the one the state holds is excluded,
    named, its entry kept so that every rerun says it again, until ``rebuild`` counts it as it is: a
    fork proven by two signed notes (rewritten), or an older checkpoint than the state's (shrunk)."""
    folder, hosts = fleet
    keys = [signer.verifier() for _, signer in hosts.values()]
    state = str(tmp_path / "state.json")
    follow_fleet([str(folder)], state, verifiers=keys)
    path, signer = hosts["beta.example/rs"]
    _sign_another_history(path, "beta.example/rs", signer, keep)
    if grow:
        _grow(path, "beta.example/rs", signer, [SCENARIO[0]], T1)
    for _ in range(2):
        again = follow_fleet([str(folder)], state, verifiers=keys)
        beta = _log(again, path)
        assert not beta.included and says in beta.reason and "acme/rewritten" not in _repos(again)
        assert ("a fork, proven by two signed checkpoints" in beta.reason) == (keep is None)
        assert again.fleet is not None and again.fleet.followed is not None
        assert [w for w in again.fleet.followed.warnings if "beta.jsonl" in w] == [
            f"state of {path}: kept (the log is excluded from this run)"
        ]
        assert _log(again, hosts["alpha.example/rs"][0]).included
    rebuilt = follow_fleet([str(folder)], state, verifiers=keys, rebuild=True)
    assert _log(rebuilt, path).included and "acme/rewritten" in _repos(rebuilt)


def _followed_with_keys(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> tuple[Path, list[Any], Path, ReportSettings, str]:
    """The fleet followed once with its keys: its folder, keys, state file, settings and cells' digest."""
    folder, hosts = fleet
    keys = [signer.verifier() for _, signer in hosts.values()]
    state = tmp_path / "state.json"
    follow_fleet([str(folder)], str(state), verifiers=keys)
    settings = ReportSettings(fleet_specs(parse_by(None)), TimeWindow(), 3, MIN_SPAWNS)
    return (
        folder,
        keys,
        state,
        settings,
        CellTable(json.loads(state.read_text(encoding="utf-8"))["cells"]).digest(),
    )


def test_a_damaged_state_is_not_taken_for_a_fork(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """An entry whose tree was forged still holds the log's own signed checkpoint: the log's records
    give that checkpoint's root, so there is no fork, and the log is rebuilt with a warning."""
    folder, keys, state, settings, cells = _followed_with_keys(fleet, tmp_path)

    def forge_tree(entry: dict[str, Any]) -> None:
        nodes = [hashlib.sha256(b"another history").digest()] * len(entry["frontier"])
        entry["frontier"] = [base64.b64encode(node).decode() for node in nodes]
        entry["root"] = base64.b64encode(CompactRange(entry["size"], nodes).root()).decode()
        entry["digest"] = entry_digest(entry, settings, cells)

    _edit_state(state, forge_tree)
    again = follow_fleet([str(folder)], str(state), verifiers=keys)
    assert again.fleet is not None and again.fleet.followed is not None
    assert all(log.included for log in again.fleet.logs)
    assert any("rebuilt from scratch" in warning for warning in again.fleet.followed.warnings)


def test_a_state_note_signed_by_another_key_proves_no_fork(
    fleet: tuple[Path, dict[str, tuple[Path, Signer]]], tmp_path: Path
) -> None:
    """A note in the state that the log's key did not sign (forged to claim another history) cannot
    get a healthy log excluded: the log is rebuilt with a warning."""
    folder, keys, state, settings, cells = _followed_with_keys(fleet, tmp_path)

    def forge_note(entry: dict[str, Any]) -> None:
        root = hashlib.sha256(b"another history").digest()
        origin = entry["origin"]
        entry["note"] = sign_note(
            Checkpoint(origin, entry["size"] + 1, root).text(), [Signer.generate(origin)]
        )
        entry["size"] += 1  # no longer extends: the rerun looks for a fork
        entry["digest"] = entry_digest(entry, settings, cells)

    _edit_state(state, forge_note)
    again = follow_fleet([str(folder)], str(state), verifiers=keys)
    assert again.fleet is not None and again.fleet.followed is not None
    assert all(log.included for log in again.fleet.logs)
    assert any("rebuilt from scratch" in warning for warning in again.fleet.followed.warnings)
