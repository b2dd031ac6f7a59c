"""Remote logs in a fleet report: a ``serve`` URL read through its entry bundles gives the same report
as the same log read locally; a remote that hangs is bounded by the timeout, and one that answers
garbage (not a checkpoint, entries that do not give the signed root) is named and excluded."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_support import serving
from test_analysis_fleet import make_log
from test_analysis_support import SCENARIO, Entry
from test_tlog_tiles import _stored_tree
from tlog_support import edge_tiles

from otel_route_shadow.analysis import EXCLUDED, INCLUDED, FleetError, build_fleet_report, chain_paths
from otel_route_shadow.analysis.remote import (
    PendingRemote,
    RemoteError,
    _min_index,
    _signed,
    prepare_remote,
    remote_records,
)
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_USAGE
from otel_route_shadow.cli.fleet import remote_fetch
from otel_route_shadow.logstore import bundle_path, tlog_dir
from otel_route_shadow.logstore.entries import encode_bundle
from otel_route_shadow.tlog import decode_bundle

ORIGIN = "alpha.example/route-shadow"


def _figures(data: dict[str, Any]) -> dict[str, Any]:
    """The report without where each log was read from and its checkpoint file's time."""
    data = json.loads(json.dumps(data))
    data.pop("fleet")
    return data


@pytest.fixture
def log(tmp_path: Path) -> Path:
    entries = [Entry(e.name, e.context, e.count * 20) for e in SCENARIO]  # 340 records: two bundles
    path, _signer = make_log(tmp_path / "hosts", "alpha", ORIGIN, entries)
    return path


def test_a_log_over_serve_gives_the_same_report_as_read_locally(log: Path, tmp_path: Path) -> None:
    with serving([log], workdir=tmp_path) as served:
        url = served.urls[ORIGIN]
        remote = build_fleet_report([url], fetch=remote_fetch(30.0))
    local = build_fleet_report([str(log)])
    assert remote.fleet is not None and [h.status for h in remote.fleet.logs] == [INCLUDED]
    assert remote.fleet.logs[0].size == 340
    assert _figures(remote.as_dict()) == _figures(local.as_dict())


class _Garbage(http.server.BaseHTTPRequestHandler):
    """Answers every GET with what ``answers`` holds for its path (200), else 404."""

    answers: dict[str, bytes] = {}

    def do_GET(self) -> None:
        body = self.answers.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def _http(answers: dict[str, bytes], kind: type[_Garbage] | None = None) -> Iterator[str]:
    handler = type("Handler", (kind or _Garbage,), {"answers": answers})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/log/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_answering_garbage_is_named_and_excluded(log: Path, tmp_path: Path) -> None:
    with _http({"/log/checkpoint": b"<html>not a note</html>"}) as url:
        report = build_fleet_report([url, str(log)], fetch=remote_fetch(30.0))
    assert report.fleet is not None
    remote = next(h for h in report.fleet.logs if h.path == url)
    assert remote.status == EXCLUDED and "not a checkpoint note" in (remote.reason or "")
    assert report.spawns == 340  # the local log is counted; the remote is in no figure


def test_a_remote_whose_entries_do_not_give_its_signed_root_is_excluded(log: Path, tmp_path: Path) -> None:
    note = (Path(tlog_dir(str(log))) / "checkpoint").read_bytes()
    lines = log.read_bytes().split(b"\n")[:-1]
    first = decode_bundle(encode_bundle(lines[:256]))
    first[5] = first[5].replace(b"acme/", b"evil/", 1)  # a record changed in transit
    answers = {
        "/log/checkpoint": note,
        "/log/" + bundle_path(0, 256): encode_bundle(first),
        "/log/" + bundle_path(1, 84): encode_bundle(lines[256:340]),
        **edge_tiles(log, 340),
    }
    with _http(answers) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert report.fleet is not None
    (remote,) = report.fleet.logs
    assert remote.status == EXCLUDED and "do not give its checkpoint's root" in (remote.reason or "")
    assert report.spawns == 0


def test_a_remote_that_hangs_is_bounded_by_the_timeout_and_excluded(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/log/"
        code = main(["report", url, str(log), "--remote-timeout", "0.5", "--json", "--no-progress"])
    assert code == EXIT_FINDING
    data = json.loads(capsys.readouterr().out)
    remote = next(h for h in data["fleet"]["hosts"] if h["path"] == url)
    assert remote["status"] == EXCLUDED and "timeout" in remote["reason"]
    assert data["totals"]["spawns"] == 340


class _KeptAlive(_Garbage):
    """:class:`_Garbage` over HTTP/1.1 (connections kept alive), noting each request's client port."""

    protocol_version = "HTTP/1.1"
    ports: list[int] = []

    def do_GET(self) -> None:
        self.ports.append(self.client_address[1])
        super().do_GET()


def test_a_remote_logs_requests_share_kept_alive_connections(log: Path) -> None:
    """Each request opened a connection of its own (``Connection: close``): as costly as serving the
    bundle, so a log read remotely took twice as long as read locally (row 11d)."""
    lines = log.read_bytes().split(b"\n")[:-1]
    answers = {
        "/log/checkpoint": (Path(tlog_dir(str(log))) / "checkpoint").read_bytes(),
        "/log/" + bundle_path(0, 256): encode_bundle(lines[:256]),
        "/log/" + bundle_path(1, 84): encode_bundle(lines[256:340]),
        **edge_tiles(log, 340),
    }
    _KeptAlive.ports = []
    with _http(answers, _KeptAlive) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
        again = build_fleet_report([url], fetch=remote_fetch(30.0))
    assert report.fleet is not None and report.fleet.logs[0].status == INCLUDED and report.spawns == 340
    assert again.spawns == 340
    assert len(_KeptAlive.ports) == 12  # per report: checkpoint, min-index (404), two edge tiles, two bundles
    assert len(set(_KeptAlive.ports)) <= 4  # at most two connections per report (the bundle reader's)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://[::1/o/", "cannot be parsed"),  # urllib's ValueError, raised outside any try
        ("http://a..b/o/", "not a valid host name"),  # the name lookup's UnicodeError (IDNA)
        ("http://127.0.0.1:{port}/\u00e9/", "non-ASCII"),  # http.client's UnicodeEncodeError, once connected
    ],
)
@pytest.mark.parametrize("command", ["report", "whatif"])
def test_a_malformed_remote_url_is_refused_in_one_line_not_a_traceback(
    command: str, url: str, problem: str, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policies = ["--policies", str(Path(__file__).resolve().parent.parent / "examples" / "policies.json")]
    extra = policies if command == "whatif" else []
    with socket.socket() as listening:  # the connection would be made (the backlog), never answered
        listening.bind(("127.0.0.1", 0))
        listening.listen(4)
        url = url.format(port=listening.getsockname()[1])
        assert main([command, str(log), url, *extra, "--no-progress", "--remote-timeout", "5"]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert (
        captured.err.startswith("otel-route-shadow: the remote log given as chain 2: ")
        and problem in captured.err
    )


def test_a_remote_url_with_a_password_is_refused_without_printing_it(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Authorization is ever sent: the credential was only echoed, in every reason line, the JSON and
    HTML host rows and the state file's ``path``."""
    state = tmp_path / "state.json"
    for url in (
        "http://admin:hunter2@127.0.0.1:1/o/",
        "http://admin:hunter2@[::1/o/",
        "HTTP://admin:hunter2@127.0.0.1:1/o/",
    ):
        code = main(["report", url, str(log), "--state", str(state), "--json", "--no-progress"])
        assert code == EXIT_USAGE
        captured = capsys.readouterr()
        assert "hunter2" not in captured.out + captured.err and "admin" not in captured.err
        assert captured.err.count("\n") == 1 and not state.exists()
    code = main(["report", "http://admin:hunter2@127.0.0.1:1/o/", "--json", "--no-progress"])
    assert code == EXIT_USAGE
    assert "holds user information" in capsys.readouterr().err
    with pytest.raises(FleetError, match="user information") as caught:  # the library refuses it too
        build_fleet_report(["http://admin:hunter2@127.0.0.1:1/o/"], fetch=remote_fetch(30.0))
    assert "hunter2" not in str(caught.value)


def test_a_min_index_of_thousands_of_digits_excludes_the_remote_not_the_report(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``int()`` of more than 4,300 digits raises ValueError: it escaped the report as a traceback."""
    answers = {
        "/log/checkpoint": (Path(tlog_dir(str(log))) / "checkpoint").read_bytes(),
        "/log/min-index": b"9" * 5000 + b"\n",
    }
    with _http(answers) as url:
        report = build_fleet_report([url], fetch=remote_fetch(30.0))
        code = main(["report", url, "--json", "--no-progress"])
    assert report.fleet is not None
    (remote,) = report.fleet.logs
    assert remote.status == EXCLUDED and "min-index: not a whole number" in (remote.reason or "")
    assert len(remote.reason or "") < 200 and report.spawns == 0
    assert code == EXIT_FINDING
    (host,) = json.loads(capsys.readouterr().out)["fleet"]["hosts"]
    assert host["status"] == EXCLUDED and host["reason"].startswith("min-index: not a whole number")


@pytest.mark.parametrize("text", [b" 256\n", b"256", b"256\r\n", b"0256\n", b"256\n\n", b"+256\n", b""])
def test_a_min_index_written_otherwise_than_serve_writes_it_is_refused(text: bytes) -> None:
    """Regression: the number was read with the spaces and line ends around it stripped, so
    ``" 256"``, ``"256"`` without its newline and ``"256\\r\\n"`` were all taken; ``serve`` writes one
    decimal line and nothing else."""
    with pytest.raises(RemoteError, match=r"^min-index: not a whole number of at most 19 digits on one line"):
        _min_index("http://h/log/", 512, lambda url, limit: text)
    assert _min_index("http://h/log/", 512, lambda url, limit: b"256\n") == 256


def test_a_remote_naming_a_local_logs_origin_is_excluded_not_the_whole_fleet(tmp_path: Path) -> None:
    """Regression: every log's origin counted in the refusal of two logs with one origin, those of
    remotes already excluded too, so a remote serving a note of a local log's origin, signed by a key
    nobody trusts, refused the whole fleet (exit 2, no figure). Only a log whose checkpoint was taken
    names an origin; a remote naming one already named (a copy served) is the one excluded."""
    from otel_route_shadow.tlog import Signer, sign_note

    entries = [Entry(e.name, e.context, e.count * 20) for e in SCENARIO]
    log, signer = make_log(tmp_path / "hosts", "alpha", ORIGIN, entries)
    key = signer.verifier()
    impostor = sign_note(
        f"{ORIGIN}\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", [Signer.generate(ORIGIN)]
    )
    with _http({"/log/checkpoint": impostor.encode()}) as url:
        report = build_fleet_report([str(log), url], fetch=remote_fetch(30.0), verifiers=[key])
    assert report.fleet is not None and report.spawns == 340
    assert [h.status for h in report.fleet.logs] == [INCLUDED, EXCLUDED]
    with serving([log], workdir=tmp_path) as served:  # the same log, served: a copy
        copy = served.urls[ORIGIN]
        report = build_fleet_report([str(log), copy], fetch=remote_fetch(30.0))
    assert report.fleet is not None and report.spawns == 340
    local, remote = report.fleet.logs
    assert local.status == INCLUDED and remote.status == EXCLUDED
    assert "one log given twice, or a copy" in (remote.reason or "")


def test_one_url_given_twice_is_refused_not_counted_twice(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: the logs were told apart by their path, so one URL given twice was one log in two
    places: ``report --state`` counted its spawns twice (exit 0), ``report`` excluded both."""
    with serving([log], workdir=tmp_path) as served:
        url = served.urls[ORIGIN]
        state = tmp_path / "state.json"
        for extra in ([], ["--state", str(state)]):
            assert main(["report", url, url, "--no-progress", "--json", *extra]) == EXIT_USAGE
            assert "given as chains 1 and 2 are one URL" in capsys.readouterr().err
    assert not state.exists()


@pytest.mark.parametrize(
    "other", ["http://H:80/log/", "http://h/log", "http://h:80/log/", "HTTP://h/log/"], ids=str.lower
)
def test_one_url_written_two_ways_is_one_log(other: str) -> None:
    """Regression: URLs were compared as strings, so ``http://h/log/`` and ``http://H:80/log`` were two
    logs (one then excluded as the other's copy, exit 1) where one URL given twice is refused."""
    with pytest.raises(FleetError, match="given as chains 1 and 2 are one URL"):
        chain_paths(["http://h/log/", other])
    assert chain_paths(["http://h/log/", "http://h/other/", "https://h/log/"]) == [
        "http://h/log/",
        "http://h/other/",
        "https://h/log/",
    ]


def _forged_first_bundle(log: Path) -> dict[str, bytes]:
    """What ``serve`` answers for the log, but for a record of its first bundle changed in transit."""
    lines = log.read_bytes().split(b"\n")[:-1]
    first = decode_bundle(encode_bundle(lines[:256]))
    first[5] = first[5].replace(b"acme/", b"evil/", 1)
    return {
        "/log/checkpoint": (Path(tlog_dir(str(log))) / "checkpoint").read_bytes(),
        "/log/" + bundle_path(0, 256): encode_bundle(first),
        "/log/" + bundle_path(1, 84): encode_bundle(lines[256:340]),
        **edge_tiles(log, 340),
    }


def test_a_remote_bundle_is_checked_before_any_of_its_records_is_counted(log: Path) -> None:
    """The records were counted as they arrived and the root compared after the last bundle: a
    network that forged every bundle made a report hold every record it sent before the log was
    excluded."""
    seen: list[Any] = []
    with _http(_forged_first_bundle(log)) as url:
        pending = prepare_remote(url, remote_fetch(30.0))
        assert isinstance(pending, PendingRemote)
        with pytest.raises(RemoteError, match="entry bundle 0: its entries do not give its checkpoint's root"):
            for record in remote_records(pending, 0, lambda leaf: None):
                seen.append(record)
    assert seen == []


class _Noted(_Garbage):
    """:class:`_Garbage` noting each path asked for."""

    paths: list[str] = []

    def do_GET(self) -> None:
        self.paths.append(self.path)
        super().do_GET()


def test_no_bundle_is_read_ahead_after_one_failed_and_the_reader_never_holds_the_exit(log: Path) -> None:
    """The read-ahead pool's worker took the next bundle as soon as one failed, and a process exit
    joined it: a log whose bundles hang cost twice the timeout, and Ctrl-C waited for the request."""
    answers = _forged_first_bundle(log)
    del answers["/log/" + bundle_path(0, 256)]  # a 404: the read fails at once
    _Noted.paths = []
    with _http(answers, _Noted) as url:
        pending = prepare_remote(url, remote_fetch(30.0))
        assert isinstance(pending, PendingRemote)
        records = remote_records(pending, 0, lambda leaf: None)
        with pytest.raises(RemoteError, match="HTTP 404"):
            next(records)
        readers = [t for t in threading.enumerate() if t.name.startswith("route-shadow-bundles")]
    assert all(reader.daemon for reader in readers)
    assert "/log/" + bundle_path(1, 84) not in _Noted.paths


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 3 * 65536 + 700), data=st.data())
def test_a_bundles_leaves_are_signed_exactly_when_they_are_the_trees(size: int, data: st.DataObject) -> None:
    """The rule each remote bundle is held to (``remote._signed``), over trees whose level-1 tiles are
    full, partial or both: its own leaves pass, and one leaf changed, or the leaves of the bundle beside
    it, never do."""
    leaves, _builder, _storage, reader = _stored_tree(size)
    index = data.draw(st.integers(0, (size - 1) // 256))
    mine = leaves[index * 256 : (index + 1) * 256]
    assert _signed(reader, index, mine)
    changed = list(mine)
    at = data.draw(st.integers(0, len(mine) - 1))
    changed[at] = bytes(32)
    assert not _signed(reader, index, changed)
    beside = [leaves[i * 256 : (i + 1) * 256] for i in (index - 1, index + 1) if 0 <= i <= (size - 1) // 256]
    for other in beside:
        assert len(other) != len(mine) or not _signed(reader, index, other)  # a width is checked before
