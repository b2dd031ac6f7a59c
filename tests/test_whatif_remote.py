"""``whatif`` over remote logs: a ``serve`` URL is checked whole (its entries give its signed root)
before the replay, then read again for it, each bundle the very bytes checked; the same log read
locally gives the same replay. A remote whose entries do not give its root is named and excluded; one
that answers otherwise the second time fails the command, naming it, with no figure given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from serve_support import serving
from test_analysis_fleet import make_log
from test_analysis_remote import ORIGIN, _Garbage, _http
from test_analysis_support import SCENARIO, Entry, snapshot_of
from tlog_support import edge_tiles

from otel_route_shadow.analysis import EXCLUDED, INCLUDED, FleetError, fleet_replay
from otel_route_shadow.analysis.remote import MAX_BUNDLE_BYTES, _bundles
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, EXIT_USAGE
from otel_route_shadow.cli.fleet import remote_fetch
from otel_route_shadow.logstore import bundle_path, tlog_dir
from otel_route_shadow.logstore.entries import encode_bundle
from otel_route_shadow.tlog import TILE_WIDTH

POLICIES = str(Path(__file__).resolve().parent.parent / "examples" / "policies.json")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    entries = [Entry(e.name, e.context, e.count * 20) for e in SCENARIO]  # 340 records: two bundles
    return make_log(tmp_path / "hosts", "alpha", ORIGIN, entries)[0]


def _figures(data: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    data.pop("fleet")
    return data


def _answers(chain: Path) -> dict[str, bytes]:
    """What ``serve`` answers for the 340-record log: its checkpoint, its edge tiles and its two entry
    bundles."""
    lines = chain.read_bytes().split(b"\n")[:-1]
    return {
        "/log/checkpoint": (Path(tlog_dir(str(chain))) / "checkpoint").read_bytes(),
        "/log/" + bundle_path(0, 256): encode_bundle(lines[:256]),
        "/log/" + bundle_path(1, 84): encode_bundle(lines[256:340]),
        **edge_tiles(chain, 340),
    }


def test_whatif_over_serve_gives_the_same_replay_as_read_locally(
    log: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    candidate = snapshot_of([], revision=7)
    with serving([log], workdir=tmp_path) as served:
        url = served.urls[ORIGIN]
        remote = fleet_replay([url], candidate, fetch=remote_fetch(30.0))
        assert main(["whatif", url, "--policies", POLICIES, "--json", "--no-progress"]) == EXIT_OK
    local = fleet_replay([str(log)], candidate)
    assert remote.fleet is not None and [h.status for h in remote.fleet.logs] == [INCLUDED]
    assert remote.replayed == 340
    assert _figures(remote.as_dict()) == _figures(local.as_dict())
    assert json.loads(capsys.readouterr().out)["totals"]["replayed"] == 340


def test_a_remote_whose_entries_do_not_give_its_signed_root_is_excluded_from_whatif(log: Path) -> None:
    answers = _answers(log)
    lines = log.read_bytes().split(b"\n")[:-1]
    changed = [*lines[:5], lines[5].replace(b"acme/", b"evil/", 1), *lines[6:256]]
    answers["/log/" + bundle_path(0, 256)] = encode_bundle(changed)  # a record changed in transit
    with _http(answers) as url:
        result = fleet_replay([url], snapshot_of([], revision=7), fetch=remote_fetch(30.0))
    assert result.fleet is not None
    (remote,) = result.fleet.logs
    assert remote.status == EXCLUDED and "do not give its checkpoint's root" in (remote.reason or "")
    assert result.replayed == 0


class _Fickle(_Garbage):
    """Answers as :class:`_Garbage`, except that a path's second GET gets ``second`` when it has one."""

    second: ClassVar[dict[str, bytes]] = {}
    seen: ClassVar[set[str]] = set()

    def do_GET(self) -> None:
        if self.path in self.seen and self.path in self.second:
            self.answers = {**self.answers, self.path: self.second[self.path]}
        self.seen.add(self.path)
        super().do_GET()


def test_a_remote_that_serves_other_bytes_when_read_again_fails_the_whatif_naming_it(
    log: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = _answers(log)
    lines = log.read_bytes().split(b"\n")[:-1]
    changed = [*lines[:5], lines[5].replace(b"acme/", b"evil/", 1), *lines[6:256]]
    _Fickle.second = {"/log/" + bundle_path(0, 256): encode_bundle(changed)}
    _Fickle.seen = set()
    with _http(answers, _Fickle) as url:
        with pytest.raises(FleetError, match="not the bytes it served when the log was checked") as caught:
            fleet_replay([url], snapshot_of([], revision=7), fetch=remote_fetch(30.0))
        assert url in str(caught.value) and "no figure is given" in str(caught.value)
        _Fickle.seen = set()
        assert main(["whatif", url, "--policies", POLICIES, "--no-progress"]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and url in captured.err


def test_a_whatif_over_a_remote_that_hangs_names_it_and_replays_the_others(
    log: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/log/"
        args = ["whatif", url, str(log), "--policies", POLICIES, "--remote-timeout", "0.5"]
        assert main([*args, "--json", "--no-progress"]) == EXIT_FINDING
    data = json.loads(capsys.readouterr().out)
    remote = next(h for h in data["fleet"]["hosts"] if h["path"] == url)
    assert remote["status"] == EXCLUDED and "timeout" in remote["reason"]
    assert data["totals"]["replayed"] == 340


def test_a_full_entry_bundle_of_the_longest_entries_fits_the_fetch_bound_with_its_headers() -> None:
    entries = [bytes([65 + i % 26]) * 65535 for i in range(TILE_WIDTH)]
    data = encode_bundle(entries)
    assert len(data) == MAX_BUNDLE_BYTES
    with _http({"/log/" + bundle_path(0, TILE_WIDTH): data}) as url:
        ((index, served, found),) = list(_bundles(url, 0, TILE_WIDTH, remote_fetch(30.0)))
    assert (index, served, found) == (0, data, entries)
