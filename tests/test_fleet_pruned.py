"""The fleet over pruned, segmented logs (docs/chain-format.md 14.5, docs/reports.md "Fleet"): a pruned
log is verified and counted from its minimum index, never excluded for being pruned; locally from the
first record it keeps, remotely (``serve``) from the published minimum index, the subtrees below it read
from the served tiles and judged by the checkpoint's root; a monitor's state follows a log pruned
between two runs, or rebuilds it from the minimum index naming the records never counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from segment_support import chain_lines
from serve_support import serving
from test_analysis_fleet import _add, _counts, make_log
from test_analysis_remote import _http
from test_analysis_support import SCENARIO, Entry, build_chain, snapshot_of
from tlog_support import edge_tiles

from otel_route_shadow.analysis import (
    EXCLUDED,
    INCLUDED,
    Fetch,
    FleetError,
    build_fleet_report,
    fleet_replay,
    follow_fleet,
)
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_OK
from otel_route_shadow.cli.fleet import remote_fetch
from otel_route_shadow.logstore import (
    Checkpointer,
    PruneOptions,
    Retention,
    bundle_path,
    cut_signed,
    prune,
    tlog_dir,
)
from otel_route_shadow.logstore.entries import encode_bundle
from otel_route_shadow.tlog import Signer, Tile, Verifier

T0 = 1_790_000_000 * 10**9
HOUR = 3_600 * 10**9
ORIGIN = "pruned.example/route-shadow"


def _entries(count: int) -> list[Entry]:
    """``count`` spawns of the scenario's mix (at least 17)."""
    rounds, rest = divmod(count, 17)
    scaled = [Entry(e.name, e.context, e.count * rounds) for e in SCENARIO]
    extra = [SCENARIO[i % len(SCENARIO)] for i in range(rest)]
    return scaled + [Entry(e.name, e.context, 1) for e in extra]


class Host:
    """A host's chain of real decision records, cut into segments and signed as it grows, by the
    writer's own ``Checkpointer`` and cut (``logstore.cut_signed``, as ``rotate`` cuts)."""

    def __init__(self, folder: Path, name: str = "gamma", origin: str = ORIGIN) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.chain = folder / f"{name}.jsonl"
        self.origin = origin
        self.signer = Signer.generate(origin)
        self.written = 0

    @property
    def key(self) -> str:
        return str(self.signer.verifier())

    def grow(self, count: int) -> Host:
        """``count`` more records in the live file."""
        assert len(build_chain(self.chain, _entries(count), start_ns=T0 + self.written * HOUR)) == count
        self.written += count
        return self

    def checkpointer(self) -> Checkpointer:
        return Checkpointer(str(self.chain), self.origin, self.signer)

    def cut(self) -> Host:
        """Close the live file as a segment (its checkpoint signed); the anchor is the next record."""
        assert cut_signed(self.checkpointer(), timeout=30.0) is not None
        self.written += 1
        return self

    def sign(self) -> Host:
        """A checkpoint of every record so far."""
        checkpointer = self.checkpointer()
        made = None
        for _ in range(64):  # a rebuild of the tree may take several calls
            made = checkpointer.checkpoint() or made
            if not checkpointer.behind:
                break
        assert checkpointer.refused is None and made is not None and made.size == self.written
        return self

    def prune(self, min_index: int) -> Host:
        assert main(["prune", str(self.chain), "--key", self.key, "--min-index", str(min_index)]) == EXIT_OK
        return self


def _three_files(folder: Path) -> Host:
    """649 records in three files: [0, 306), [306, 512) and the live file [512, 649)."""
    return Host(folder).grow(306).cut().grow(205).cut().grow(136).sign()


def _pruned_host(folder: Path, min_index: int) -> Host:
    """:func:`_three_files` pruned below ``min_index`` (306 or 512)."""
    return _three_files(folder).prune(min_index)


def _lines(host: Host) -> list[bytes]:
    """Every line of the host's chain (before it is pruned: the entries a remote serves)."""
    return [line.rstrip(b"\n") for line in chain_lines(host.chain)]


def _figures(data: dict[str, Any]) -> dict[str, Any]:
    """The report without where each log was read from."""
    data = json.loads(json.dumps(data))
    data.pop("fleet")
    return data


def test_a_local_pruned_log_in_a_fleet_of_three_is_counted_from_its_first_record_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "fleet"
    alpha, a = make_log(folder, "alpha", "alpha.example/route-shadow")
    beta, b = make_log(folder, "beta", "beta.example/route-shadow", SCENARIO[1:4], start_ns=T0 + 10**15)
    gamma = _pruned_host(folder, 306)
    from otel_route_shadow.tlog import Verifier

    keys = [Verifier.parse(k) for k in (str(a.verifier()), str(b.verifier()), gamma.key)]
    fleet = build_fleet_report([str(folder)], verifiers=keys, jobs=2)
    assert fleet.fleet is not None
    hosts = {Path(log.path).name: log for log in fleet.fleet.logs}
    assert [log.status for log in fleet.fleet.logs] == [INCLUDED] * 3
    assert hosts["gamma.jsonl"].start == 306 and hosts["gamma.jsonl"].counted == 649 - 306
    singles = [build_fleet_report([str(path)], verifiers=keys).as_dict() for path in (alpha, beta, gamma.chain)]
    data = fleet.as_dict()
    assert _counts(data) == _add(_add(_counts(singles[0]), _counts(singles[1])), _counts(singles[2]))
    assert data["totals"]["spawns"] == 17 + 10 + 341  # the anchors at 306 and 512 are not spawns
    assert data["fleet"]["pruned"] == 1 and data["chain"]["records"] == 17 + 10 + 343
    gamma_row = next(host for host in data["fleet"]["hosts"] if host["origin"] == ORIGIN)
    assert gamma_row["from_seq"] == 306 and gamma_row["records_counted"] == 343
    html = tmp_path / "fleet.html"
    assert main(["report", str(folder), "--no-progress", "--html", str(html)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "1 pruned (counted from their minimum index)" in text
    assert "343 records counted from seq 306 (pruned" in text
    assert "<th>from seq</th>" in html.read_text() and "<td>343</td><td>306</td>" in html.read_text()


def test_fleet_whatif_over_a_pruned_log_replays_it_from_its_first_record_kept(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    alpha, _a = make_log(folder, "alpha", "alpha.example/route-shadow")
    gamma = _pruned_host(folder, 306)
    candidate = snapshot_of([], revision=7)
    fleet = fleet_replay([str(folder)], candidate, jobs=2)
    assert fleet.fleet is not None and [log.start for log in fleet.fleet.logs] == [0, 306]
    singles = [fleet_replay([str(path)], candidate).as_dict() for path in (alpha, gamma.chain)]
    assert [single["totals"]["replayed"] for single in singles] == [17, 341]
    for figure in ("replayed", "changed"):
        assert fleet.as_dict()["totals"][figure] == sum(single["totals"][figure] for single in singles)


def test_a_segment_an_interrupted_prune_left_below_the_minimum_index_is_not_counted(tmp_path: Path) -> None:
    host = _three_files(tmp_path / "fleet")
    first = Path(str(host.chain) + ".segments") / "0000000000000000.jsonl"
    left = first.read_bytes()
    host.prune(306)
    clean = build_fleet_report([str(host.chain)]).as_dict()
    first.write_bytes(left)  # as a prune killed after saving ``pruned`` and before removing it leaves it
    report = build_fleet_report([str(host.chain)])
    assert report.fleet is not None and report.fleet.logs[0].status == INCLUDED, report.fleet.logs[0].reason
    assert _figures(report.as_dict()) == _figures(clean) and report.spawns == 341
    # With a key, the one-pass count read the chain from record 0 and, the stray segment making the
    # leaves whole, counted the pruned records too (647 spawns from seq 0).
    keyed = build_fleet_report([str(host.chain)], verifiers=[Verifier.parse(host.key)])
    assert keyed.fleet is not None and keyed.fleet.logs[0].start == 306 and keyed.spawns == 341


def test_a_local_pruned_log_whose_first_record_kept_was_edited_is_excluded(tmp_path: Path) -> None:
    host = _pruned_host(tmp_path / "fleet", 306)
    segment = Path(str(host.chain) + ".segments") / "0000000000000306.jsonl"
    data = segment.read_bytes()
    first, rest = data.split(b"\n", 1)
    anchor = first.replace(b'"kind":"segment-anchor"', b'"kind":"segment-anchor","x":1', 1)
    assert anchor != first
    segment.write_bytes(anchor + b"\n" + rest)
    report = build_fleet_report([str(host.chain)])
    assert report.fleet is not None
    (log,) = report.fleet.logs
    assert log.status == EXCLUDED and report.spawns == 0
    assert "seq 306, the first record kept, is not the leaf the checkpoint of size 649 signed" in (log.reason or "")


def test_a_pruned_remote_log_is_read_from_its_minimum_index_not_excluded(tmp_path: Path) -> None:
    """Pruned below 306, ``serve`` publishes 512 (a whole entry bundle): the remote is counted from 512,
    and its figures are those of the same log read locally from 512."""
    served = _pruned_host(tmp_path / "served", 306)
    local = _pruned_host(tmp_path / "local", 512)
    with serving([served.chain], workdir=tmp_path) as server:
        url = server.urls[ORIGIN]
        remote = build_fleet_report([url], fetch=remote_fetch(30.0))
    here = build_fleet_report([str(local.chain)])
    assert remote.fleet is not None and here.fleet is not None
    (log,) = remote.fleet.logs
    assert log.status == INCLUDED, log.reason
    assert (log.start, log.size, log.counted) == (512, 649, 137) == (here.fleet.logs[0].start, 649, 137)
    assert remote.spawns == 136 and remote.fleet.as_dict()["pruned"] == 1
    assert _figures(remote.as_dict()) == _figures(here.as_dict())


def _answers(host: Host, lines: list[bytes], min_index: int) -> dict[str, bytes]:
    """What an honest ``serve`` of ``host``'s log answers for a reader from ``min_index``."""
    note = (Path(tlog_dir(str(host.chain))) / "checkpoint").read_bytes()
    size = len(lines)
    answers = {"/log/checkpoint": note, "/log/min-index": f"{min_index}\n".encode()}
    answers.update(edge_tiles(host.chain, size))
    for index in range(min_index // 256, -(-size // 256)):
        width = min(256, size - index * 256)
        answers["/log/" + bundle_path(index, width)] = encode_bundle(lines[index * 256 : index * 256 + width])
    return answers


def test_a_remote_whose_tile_hashes_lie_about_its_pruned_records_is_named_and_excluded(tmp_path: Path) -> None:
    host = _three_files(tmp_path / "served")
    lines = _lines(host)
    honest = _answers(host.prune(306), lines, 512)
    (tile,) = [path for path in honest if "/tile/1/" in path]
    assert tile == "/log/" + Tile(1, 0, 2).path
    with _http(honest) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert report.fleet is not None and report.fleet.logs[0].status == INCLUDED, report.fleet.logs[0].reason
    assert report.spawns == 136
    lying = dict(honest)
    lying[tile] = bytes([honest[tile][0] ^ 1]) + honest[tile][1:]
    with _http(lying) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert report.fleet is not None
    (log,) = report.fleet.logs
    assert log.status == EXCLUDED and report.spawns == 0
    assert "its tiles do not give its checkpoint's root" in (log.reason or "") and Tile(1, 0, 2).path in (log.reason or "")


def test_a_remote_without_a_min_index_endpoint_is_read_from_0_and_a_bad_one_is_excluded(tmp_path: Path) -> None:
    host = _three_files(tmp_path / "whole")
    answers = _answers(host, _lines(host), 0)
    del answers["/log/min-index"]
    with _http(answers) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert report.fleet is not None and report.fleet.logs[0].status == INCLUDED and report.spawns == 647
    whole = _answers(host, _lines(host), 649)  # pruned past its last bundle: nothing left to count
    with _http(whole) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert report.fleet is not None and report.fleet.logs[0].status == INCLUDED, report.fleet.logs[0].reason
    assert (report.fleet.logs[0].start, report.fleet.logs[0].counted, report.spawns) == (649, 0, 0)
    for bad in (b"300\n", b"700\n", b"-1\n", b"lots\n"):
        with _http({**answers, "/log/min-index": bad}) as url:
            report = build_fleet_report([url], fetch=remote_fetch(30.0))
        assert report.fleet is not None
        (log,) = report.fleet.logs
        assert log.status == EXCLUDED and "min-index" in (log.reason or ""), bad


def _state_figures(data: dict[str, Any]) -> dict[str, Any]:
    data = _figures(data)
    data["chain"].pop("path", None)
    return data


def test_a_state_at_or_above_the_new_minimum_index_extends_across_a_prune(tmp_path: Path) -> None:
    host = Host(tmp_path / "fleet").grow(306).cut().grow(205).sign()
    twin_folder = tmp_path / "twin"
    state = str(tmp_path / "state.json")
    first = follow_fleet([str(host.chain)], state)
    assert first.fleet is not None and first.fleet.logs[0].size == 512
    host.cut().grow(136).sign()
    shutil.copytree(host.chain.parent, twin_folder)  # the same log, never pruned
    host.prune(306)
    again = follow_fleet([str(host.chain)], state)
    assert again.fleet is not None and again.fleet.followed is not None
    assert again.fleet.followed.extended == (str(host.chain),) and again.fleet.followed.warnings == ()
    (log,) = again.fleet.logs
    assert (log.start, log.size) == (0, 649)  # the counts made before the prune are kept
    full = build_fleet_report([str(twin_folder / host.chain.name)])
    assert again.spawns == 647 and _state_figures(again.as_dict()) == _state_figures(full.as_dict())
    host.grow(17).sign()
    twin = twin_folder / host.chain.name
    build_chain(twin, _entries(17), start_ns=T0 + 649 * HOUR)
    assert Checkpointer(str(twin), host.origin, host.signer).checkpoint() is not None
    third = follow_fleet([str(host.chain)], state)  # positions kept across the prune: extended again
    assert third.fleet is not None and third.fleet.followed is not None
    assert third.fleet.followed.extended == (str(host.chain),) and third.fleet.followed.warnings == ()
    assert _state_figures(third.as_dict()) == _state_figures(build_fleet_report([str(twin)]).as_dict())


def test_a_state_below_the_new_minimum_index_is_rebuilt_from_it_naming_the_records_never_counted(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path / "fleet").grow(200).sign()
    state = str(tmp_path / "state.json")
    follow_fleet([str(host.chain)], state)
    host.grow(106).cut().grow(205).cut().grow(136).sign().prune(306)
    again = follow_fleet([str(host.chain)], state)
    assert again.fleet is not None and again.fleet.followed is not None
    assert again.fleet.followed.rebuilt == (str(host.chain),)
    (warning,) = again.fleet.followed.warnings
    assert "below the log's minimum index 306" in warning and "records 200..305 were never counted" in warning
    assert warning.endswith("rebuilt from seq 306")
    (log,) = again.fleet.logs
    assert (log.start, log.counted) == (306, 343)
    full = build_fleet_report([str(host.chain)])
    assert _state_figures(again.as_dict()) == _state_figures(full.as_dict())


def _pruning(host: Host, fetch: Fetch, min_index: int, on: str, passed: int = 0) -> Fetch:
    """``fetch``, the host's retention pruning below ``min_index`` just before the request whose URL holds
    ``on`` after ``passed`` such requests (as it does after a cut, while a fleet reads the log)."""
    seen: list[str] = []

    def pruning_fetch(url: str, max_bytes: int) -> bytes:
        if on in url:
            seen.append(url)
            if len(seen) == passed + 1:
                verifier = host.signer.verifier()
                assert prune(str(host.chain), Retention(min_index=min_index), PruneOptions([verifier])).after
        return fetch(url, max_bytes)

    return pruning_fetch


def test_a_remote_log_pruned_while_the_fleet_reads_it_is_read_again_from_its_new_minimum_index(
    tmp_path: Path,
) -> None:
    # The bundles below the new minimum index were 410 Gone under the read: the log was excluded,
    # "entry bundle 0: HTTP 410", and the report exited 1, for a host whose retention did its job.
    served = _three_files(tmp_path / "served")
    local = _pruned_host(tmp_path / "local", 512)
    with serving([served.chain], workdir=tmp_path) as server:
        fetch = _pruning(served, remote_fetch(30.0), 306, "/tile/entries/")
        remote = build_fleet_report([server.urls[ORIGIN]], fetch=fetch)
    here = build_fleet_report([str(local.chain)])
    assert remote.fleet is not None and here.fleet is not None
    (log,) = remote.fleet.logs
    assert log.status == INCLUDED, log.reason
    assert (log.start, log.size, log.counted) == (512, 649, 137)
    assert _figures(remote.as_dict()) == _figures(here.as_dict())


@pytest.mark.parametrize(
    ("on", "passed"),
    [
        ("/tile/entries/", 0),  # while the check reads it
        ("/tile/entries/000", 1),  # between the check and the replay: as the replay asks for bundle 0 again
    ],
    ids=["while-checked", "between-check-and-replay"],
)
def test_a_remote_log_pruned_before_its_replay_is_replayed_from_its_new_minimum_index(
    tmp_path: Path, on: str, passed: int
) -> None:
    # Between the check and the replay, the replay read the log's first bundle again, 410 Gone: the whole
    # whatif failed, "no figure is given", though nothing it had replayed came from that log.
    served = _three_files(tmp_path / "served")
    local = _pruned_host(tmp_path / "local", 512)
    candidate = snapshot_of([], revision=7)
    with serving([served.chain], workdir=tmp_path) as server:
        fetch = _pruning(served, remote_fetch(30.0), 306, on, passed)
        remote = fleet_replay([server.urls[ORIGIN]], candidate, fetch=fetch)
    here = fleet_replay([str(local.chain)], candidate)
    assert remote.fleet is not None and [log.start for log in remote.fleet.logs] == [512]
    assert remote.as_dict()["totals"] == here.as_dict()["totals"]
    assert remote.chain.records == 137


def test_a_remote_log_pruned_under_its_replay_fails_the_whatif_saying_so(tmp_path: Path) -> None:
    served = _three_files(tmp_path / "served")
    candidate = snapshot_of([], revision=7)
    with serving([served.chain], workdir=tmp_path) as server:
        # Bundle 0 is replayed again, then the host prunes as the replay asks for bundle 1 again.
        fetch = _pruning(served, remote_fetch(30.0), 306, "/tile/entries/001", passed=1)
        with pytest.raises(FleetError, match=r"pruned it under the replay \(run again\); no figure is given"):
            fleet_replay([server.urls[ORIGIN]], candidate, fetch=fetch)
