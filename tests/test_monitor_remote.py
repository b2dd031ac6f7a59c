"""Following remote logs with ``report --state``, like a Certificate Transparency monitor: a rerun fetches
the checkpoint, the minimum index and only the entry bundles from the state's size on (against a real
``serve``); its figures equal a full run's; a remote pruned past the state's size is rebuilt from its
minimum index; a remote that hangs during a rerun is excluded and keeps its state entry."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
from serve_support import serving
from test_analysis_fleet import make_log
from test_analysis_monitor import _figures
from test_analysis_remote import _http
from test_analysis_support import SCENARIO, Entry, build_chain
from test_fleet_pruned import Host, _answers, _lines, _state_figures

from otel_route_shadow.analysis import EXCLUDED, Fetch, RemoteError, build_fleet_report, follow_fleet
from otel_route_shadow.analysis.fleet import ReportSettings, fleet_specs
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import as_specs
from otel_route_shadow.analysis.monitor_state import CellTable, entry_digest
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_OK
from otel_route_shadow.cli.fleet import remote_fetch
from otel_route_shadow.logstore import Checkpointer, bundle_path
from otel_route_shadow.tlog import Signer

ORIGIN = "remote.example/route-shadow"
T1 = 1_791_000_000 * 10**9


def _sign(chain: Path, signer: Signer) -> None:
    """A checkpoint of every record of ``chain`` (the writer signs a grown tree in steps)."""
    checkpointer = Checkpointer(str(chain), ORIGIN, signer)
    for _ in range(64):
        checkpointer.checkpoint()
        if not checkpointer.behind:
            return
    raise AssertionError("the checkpointer never caught up")


class Counted:
    """A fetch that records each URL it was asked for (each a request the server answered or not)."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.fetch: Fetch = remote_fetch(timeout)
        self.urls: list[str] = []

    def __call__(self, url: str, max_bytes: int) -> bytes:
        self.urls.append(url)
        return self.fetch(url, max_bytes)

    def taken(self) -> list[str]:
        """The URLs asked for since the last call, relative to the log's base URL (``.../route-shadow/``)."""
        urls, self.urls = self.urls, []
        return [url.split("/route-shadow/", 1)[1] for url in urls]


def test_a_remote_log_is_followed_with_state_reading_only_its_new_bundles(tmp_path: Path) -> None:
    entries = [Entry(e.name, e.context, e.count * 150) for e in SCENARIO]  # 2,550 records: ten bundles
    chain, signer = make_log(tmp_path / "hosts", "remote", ORIGIN, entries)
    state = str(tmp_path / "state.json")
    fetch = Counted()
    with serving([chain], workdir=tmp_path) as served:
        url = served.urls[ORIGIN]
        first = follow_fleet([url], state, fetch=fetch)
        assert first.fleet is not None and first.fleet.followed is not None
        assert first.fleet.followed.rebuilt == (url,) and first.spawns == 2550
        full_read = fetch.taken()
        assert len([path for path in full_read if path.startswith("tile/entries/")]) == 10
        build_chain(chain, [Entry(e.name, e.context, e.count * 2) for e in SCENARIO[:4]], start_ns=T1)  # 1%
        _sign(chain, signer)
        again = follow_fleet([url], state, fetch=fetch)
        # the checkpoint, the minimum index, the new tree's edge tiles, and the bundle holding index 2,550
        # (now full) and the next (the bundles read ahead by another thread: in any order)
        taken = ["checkpoint", "min-index", "tile/0/010.p/18", "tile/1/000.p/10", "tile/entries/009"]
        assert sorted(fetch.taken()) == [*taken, "tile/entries/010.p/18"]
        assert again.fleet is not None and again.fleet.followed is not None
        assert again.fleet.followed.extended == (url,) and again.fleet.followed.warnings == ()
        full = build_fleet_report([url], fetch=fetch)
        assert _figures(again.as_dict()) == _figures(full.as_dict()) and again.spawns == 2550 + 28
        fetch.taken()
        nothing_new = follow_fleet([url], state, fetch=fetch)
        assert fetch.taken() == ["checkpoint", "min-index"]  # nothing new: no bundle at all
        assert _figures(nothing_new.as_dict()) == _figures(full.as_dict())
    local = build_fleet_report([str(chain)])
    assert _state_figures(again.as_dict()) == _state_figures(local.as_dict())


def test_a_remote_pruned_between_two_runs_extends_at_or_above_its_minimum_index(tmp_path: Path) -> None:
    host = Host(tmp_path / "fleet").grow(306).cut().grow(205).sign()  # 512 records: two whole bundles
    state = str(tmp_path / "state.json")
    fetch = Counted()
    with serving([host.chain], workdir=tmp_path) as served:
        url = served.urls[host.origin]
        first = follow_fleet([url], state, fetch=fetch)
        assert first.fleet is not None and first.fleet.logs[0].size == 512
        host.cut().grow(136).sign()
        twin = tmp_path / "twin"
        shutil.copytree(host.chain.parent, twin)  # the same log, never pruned
        host.prune(306)  # serve publishes 512: the state's size
        fetch.taken()
        again = follow_fleet([url], state, fetch=fetch)
        taken = ["checkpoint", "min-index", "tile/0/002.p/137", "tile/1/000.p/2", "tile/entries/002.p/137"]
        assert sorted(fetch.taken()) == taken
    assert again.fleet is not None and again.fleet.followed is not None
    assert again.fleet.followed.extended == (url,) and again.fleet.followed.warnings == ()
    (log,) = again.fleet.logs
    assert (log.start, log.size) == (0, 649)  # the counts made before the prune are kept
    full = build_fleet_report([str(twin / host.chain.name)])
    assert again.spawns == 647 and _state_figures(again.as_dict()) == _state_figures(full.as_dict())


def test_a_remote_minimum_index_past_the_states_size_excludes_it_until_rebuild_never_drops_its_counts(
    tmp_path: Path,
) -> None:
    """Regression: a remote whose ``min-index`` was above the entry's size was rebuilt from it, its
    counted history dropped from the state for good; ``min-index`` is not signed, so whoever sits
    between the monitor and the server could erase it with one answer. The log is excluded, its entry
    kept, until ``--rebuild`` counts it from its minimum index."""
    host = Host(tmp_path / "fleet").grow(200).sign()
    state = str(tmp_path / "state.json")
    with serving([host.chain], workdir=tmp_path) as served:
        url = served.urls[host.origin]
        follow_fleet([url], state, fetch=remote_fetch(30.0))
        before = json.loads(Path(state).read_text())["logs"]
        host.grow(106).cut().grow(205).cut().grow(136).sign().prune(306)  # serve publishes 512
        again = follow_fleet([url], state, fetch=remote_fetch(30.0))
        assert again.fleet is not None and again.fleet.followed is not None
        (log,) = again.fleet.logs
        assert log.status == EXCLUDED and "records 200..511 were never counted" in (log.reason or "")
        assert "--rebuild" in (log.reason or "")
        assert json.loads(Path(state).read_text())["logs"] == before
        rebuilt = follow_fleet([url], state, fetch=remote_fetch(30.0), rebuild=True)
        full = build_fleet_report([url], fetch=remote_fetch(30.0))
    (log,) = rebuilt.fleet.logs if rebuilt.fleet is not None else ()
    assert (log.start, log.counted) == (512, 137)
    assert _state_figures(rebuilt.as_dict()) == _state_figures(full.as_dict())


def _entry(state: Path, url: str) -> dict[str, Any]:
    (entry,) = [log for log in json.loads(state.read_text(encoding="utf-8"))["logs"] if log["path"] == url]
    assert "end" not in entry  # a remote log's entries are addressed by index, not by byte
    return dict(entry)


def test_a_remote_that_hangs_during_a_rerun_is_excluded_and_keeps_its_state_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain, signer = make_log(tmp_path / "hosts", "remote", ORIGIN, SCENARIO)
    state = tmp_path / "state.json"
    with serving([chain], workdir=tmp_path) as served:
        url = served.urls[ORIGIN]
        follow_fleet([url], str(state), fetch=remote_fetch(30.0))
    kept = _entry(state, url)
    port = int(url.split(":")[2].split("/")[0])
    with socket.socket() as silent:  # the same address now accepts connections and never answers
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        silent.bind(("127.0.0.1", port))
        silent.listen(4)
        hung = follow_fleet([url], str(state), fetch=remote_fetch(0.5))
    assert hung.fleet is not None and hung.fleet.followed is not None
    (log,) = hung.fleet.logs
    assert log.status == EXCLUDED and "timeout" in (log.reason or "") and hung.spawns == 0
    assert hung.fleet.followed.warnings == (f"state of {url}: kept (the log is excluded from this run)",)
    assert _entry(state, url) == kept
    build_chain(chain, SCENARIO[:2], start_ns=T1)
    _sign(chain, signer)
    with serving([chain], "--listen", f"127.0.0.1:{port}", workdir=tmp_path) as served:
        assert served.urls[ORIGIN] == url
        code = main(["report", url, "--state", str(state), "--json", "--no-progress"])
        full = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert code == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["fleet"]["state"] == {"extended": [url], "rebuilt": [], "warnings": []}
    assert data["totals"] == full.as_dict()["totals"] and full.spawns == 17 + 6
    assert _entry(state, url)["size"] == 17 + 6


def test_a_remote_answering_garbage_during_a_rerun_is_excluded_and_keeps_its_state_entry(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "fleet").grow(300).sign()
    state = tmp_path / "state.json"
    answers = _answers(host, _lines(host), 0)
    with _http(answers) as url:  # the server answers what ``answers`` holds when asked
        follow_fleet([url], str(state), fetch=remote_fetch(30.0))
        kept = _entry(state, url)
        host.grow(20).sign()
        answers.update(_answers(host, _lines(host), 0))
        honest = answers["/log/" + bundle_path(1, 64)]
        answers["/log/" + bundle_path(1, 64)] = b"\x00\x05short"  # one short entry, not the 64
        garbled = follow_fleet([url], str(state), fetch=remote_fetch(30.0))
        assert garbled.fleet is not None and garbled.fleet.followed is not None
        (log,) = garbled.fleet.logs
        assert log.status == EXCLUDED and "entry bundle 1: 1 entries, not 64" in (log.reason or "")
        assert log.origin == host.origin
        assert garbled.fleet.followed.extended == () and garbled.spawns == 0
        assert _entry(state, url) == kept
        answers["/log/" + bundle_path(1, 64)] = honest
        again = follow_fleet([url], str(state), fetch=remote_fetch(30.0))
        full = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert again.fleet is not None and again.fleet.followed is not None
    assert again.fleet.followed.extended == (url,) and again.spawns == 320
    assert _figures(again.as_dict()) == _figures(full.as_dict())


def test_a_kept_entry_whose_cells_lie_beyond_the_states_table_is_dropped_not_a_crash(tmp_path: Path) -> None:
    """An excluded remote's entry is kept as read, never restored; its cell rows went unchecked into
    the table's compaction, and one beyond the table (the digest recomputed: it is not a MAC) raised
    ``IndexError`` out of ``report --state``."""
    alpha, _signer = make_log(tmp_path / "fleet", "alpha", ORIGIN, SCENARIO)
    state = tmp_path / "state.json"
    follow_fleet([str(alpha)], str(state))
    document = json.loads(state.read_text(encoding="utf-8"))
    url = "http://127.0.0.1:9/route-shadow/"
    remote = {key: value for key, value in document["logs"][0].items() if key != "end"}
    remote["path"], remote["aggregation"] = url, {**remote["aggregation"]}
    remote["aggregation"]["cells"] = [999, *remote["aggregation"]["cells"][1:]]
    document["logs"].append(remote)
    settings = ReportSettings(fleet_specs(as_specs(None)), TimeWindow(), 3, MIN_SPAWNS)
    cells = CellTable(document["cells"]).digest()
    for entry in document["logs"]:
        entry["digest"] = entry_digest(entry, settings, cells)
    state.write_text(json.dumps(document), encoding="utf-8")

    def unreachable(location: str, max_bytes: int) -> bytes:
        raise RemoteError(f"{location}: unreachable")

    again = follow_fleet([str(alpha), url], str(state), fetch=unreachable)
    assert again.fleet is not None and again.fleet.followed is not None
    assert again.fleet.followed.extended == (str(alpha),)
    assert (
        f"state of {url}: a cell beyond the state's tables: rebuilt from scratch"
        in again.fleet.followed.warnings
    )
    assert [log["path"] for log in json.loads(state.read_text(encoding="utf-8"))["logs"]] == [str(alpha)]


def test_a_remote_that_signs_another_root_for_the_same_size_is_excluded_as_a_fork(tmp_path: Path) -> None:
    """Two notes of one key for one size and two roots prove a fork without a record read: a remote
    (whose old tree cannot be read) was rebuilt from scratch and counted, with only a warning."""
    from test_analysis_monitor import _sign_another_history

    chain, signer = make_log(tmp_path / "hosts", "remote", ORIGIN, SCENARIO)
    state = str(tmp_path / "state.json")
    keys = [signer.verifier()]
    with serving([chain], workdir=tmp_path) as served:
        url = served.urls[ORIGIN]
        follow_fleet([url], state, verifiers=keys, fetch=remote_fetch(30.0))
    _sign_another_history(chain, ORIGIN, signer)
    with serving([chain], workdir=tmp_path) as served:  # a new server (the one before refuses it: 409)
        document = json.loads(Path(state).read_text(encoding="utf-8"))  # its entry under the new URL
        document["logs"][0]["path"] = served.urls[ORIGIN]
        settings = ReportSettings(fleet_specs(as_specs(None)), TimeWindow(), 3, MIN_SPAWNS)
        document["logs"][0]["digest"] = entry_digest(
            document["logs"][0], settings, CellTable(document["cells"]).digest()
        )
        Path(state).write_text(json.dumps(document), encoding="utf-8")
        again = follow_fleet([served.urls[ORIGIN]], state, verifiers=keys, fetch=remote_fetch(30.0))
    [log] = again.fleet.logs if again.fleet is not None else ()
    assert log.status == EXCLUDED and log.reason is not None
    assert "a fork, proven by two signed checkpoints" in log.reason and "give the root" in log.reason


def test_a_remote_whose_new_entries_are_altered_keeps_its_entry_while_excluded(tmp_path: Path) -> None:
    """Regression: new entries that decode as records but do not give the signed root made the rerun
    drop the remote's entry before reading it in full; that read failed too, the log was excluded, and
    the entry, with its counts and the fork check it carries, was gone from the state. Whoever sits
    between the monitor and the server could do it without the key. The entry stays until a full read
    includes the log."""
    from otel_route_shadow.logstore.entries import encode_bundle
    from otel_route_shadow.tlog import decode_bundle

    host = Host(tmp_path / "fleet").grow(300).sign()
    state = tmp_path / "state.json"
    answers = _answers(host, _lines(host), 0)
    keys = [host.signer.verifier()]
    with _http(answers) as url:
        follow_fleet([url], str(state), verifiers=keys, fetch=remote_fetch(30.0))
        before = json.loads(state.read_text())["logs"]
        host.grow(20).sign()
        answers.update(_answers(host, _lines(host), 0))
        entries = decode_bundle(answers["/log/" + bundle_path(1, 64)])
        entries[60] = entries[60].replace(b'"seq":', b'"seq": ', 1)  # still a record, another leaf
        answers["/log/" + bundle_path(1, 64)] = encode_bundle(entries)
        altered = follow_fleet([url], str(state), verifiers=keys, fetch=remote_fetch(30.0))
        assert altered.fleet is not None and [h.status for h in altered.fleet.logs] == [EXCLUDED]
        assert json.loads(state.read_text())["logs"] == before
        answers.update(_answers(host, _lines(host), 0))  # honest again: extended from the entry
        again = follow_fleet([url], str(state), verifiers=keys, fetch=remote_fetch(30.0))
        full = build_fleet_report([url], verifiers=keys, fetch=remote_fetch(30.0))
    assert again.fleet is not None and again.fleet.followed is not None
    assert again.fleet.followed.extended == (url,)
    assert _state_figures(again.as_dict()) == _state_figures(full.as_dict())
