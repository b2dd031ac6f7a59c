"""``otel-route-shadow serve`` (issue 26 item 5): the tlog-tiles API read-only over HTTP, every resource
authenticated before it is sent, the spec's content types and cache rules, bounded requests and
connections, no path outside the log, the right status for every other request, a clean stop.

Most tests run the real server in this process on loopback (a thread); the command's own tests run it
as a process and stop it with SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_support import get, serving
from test_chain_support import forge_chain
from tlog_support import ORIGIN, append, lines, log_dir

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, PublishedLog, Unservable, parse_resource
from otel_route_shadow.logstore.published import Resource
from otel_route_shadow.server import Limits, LogServer, LogSite, Request, Response, SiteError
from otel_route_shadow.server.problems import DISTINCT_MAX
from otel_route_shadow.tlog import Signer, Verifier, decode_bundle, sign_note, tile_path

SIGNER = Signer.generate(ORIGIN)
KEY = Verifier.parse(str(SIGNER.verifier()))
IMMUTABLE = "public, max-age=31536000, immutable"


def _log(
    directory: Path, count: int = 700, every: int = 97, origin: str = ORIGIN, signer: Signer = SIGNER
) -> Path:
    directory.mkdir(exist_ok=True)
    chain = directory / "chain.jsonl"
    writer = Checkpointer(str(chain), origin, signer)
    append(chain, count, writer, every=every)
    writer.checkpoint()
    return chain


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _log(tmp_path_factory.mktemp("pristine") / "log")


@pytest.fixture
def chain(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine.parent, tmp_path / "log")
    return tmp_path / "log" / "chain.jsonl"


@contextlib.contextmanager
def running(
    chains: list[Path], limits: Limits | None = None, site: LogSite | None = None
) -> Iterator[LogServer]:
    site = site or LogSite([PublishedLog(str(c), [KEY]) for c in chains])
    server = LogServer(("127.0.0.1", 0), site, limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        assert server.stop(5.0)
        thread.join(5.0)


def _url(server: LogServer, relative: str = "") -> str:
    return f"{server.url}/{ORIGIN}/{relative}"


def _raw(server: LogServer, data: bytes, *, read_all: bool = True) -> bytes:
    """Send raw bytes, return what comes back until the server closes (or the first response)."""
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=20) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        return out


def _status(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:80]
    return int(response[9:12])


# --- what a client sees -------------------------------------------------------------------------------


def test_content_types_and_cache_rules(chain: Path) -> None:
    expected = lines(chain)
    with running([chain]) as server:
        status, headers, body = get(_url(server, "checkpoint"))
        assert (status, headers["Content-Type"], headers["Cache-Control"]) == (
            200,
            "text/plain; charset=utf-8",
            "public, max-age=5",
        )
        assert body == (log_dir(chain) / "checkpoint").read_bytes()
        status, headers, body = get(_url(server, "tile/0/001"))
        assert (status, headers["Content-Type"]) == (200, "application/octet-stream")
        assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert body == (log_dir(chain) / "tile/0/001").read_bytes()
        status, headers, body = get(_url(server, "tile/0/002.p/188"))
        assert (status, headers["Cache-Control"], len(body)) == (200, IMMUTABLE, 188 * 32)
        status, headers, body = get(_url(server, "tile/entries/001"))
        assert (status, headers["Cache-Control"], headers["Vary"]) == (
            200,
            "public, max-age=31536000, immutable",
            "Accept-Encoding",
        )
        assert decode_bundle(body) == expected[256:512]
        status, headers, body = get(_url(server, "tile/entries/002.p/100"))
        assert (status, headers["Cache-Control"]) == (200, IMMUTABLE)
        assert decode_bundle(body) == expected[512:612]
        status, headers, body = get(_url(server, "tile/entries/000"), headers={"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        assert decode_bundle(gzip.decompress(body)) == expected[:256]
        status, headers, body = get(_url(server, "tile/0/001"), "HEAD")
        assert (status, headers["Content-Length"], body) == (200, "8192", b"")
        status, _, body = get(server.url + "/")
        assert body == f"/{ORIGIN}/\n".encode()


def test_a_partial_tile_the_writer_removed_is_the_full_tiles_first_hashes(chain: Path) -> None:
    assert not (log_dir(chain) / "tile/0/000.p/97").exists()  # removed once tile/0/000 existed
    with running([chain]) as server:
        status, _, body = get(_url(server, "tile/0/000.p/97"))
    assert status == 200
    assert body == (log_dir(chain) / "tile/0/000").read_bytes()[: 97 * 32]


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("tile/0/003", "beyond the tree"),
        ("tile/0/002", "the full tile does not exist yet"),
        ("tile/0/002.p/189", "wider than the checkpoint's"),
        ("tile/0/002.p/50", "no checkpoint of 562 was published and the full tile does not exist"),
        ("tile/entries/002", "beyond the tree"),
        ("tile/entries/002.p/189", "beyond the tree"),
        ("tile/3/000", "a level the tree does not reach"),
        ("tile/0/x000/001", "not the one spelling"),
        ("tile/00/001", "a leading zero"),
        ("tile/0/001.p/0", "no empty tile"),
        ("tile/0/001.p/256", "no partial tile of 256"),
        ("tile/64/000", "levels end at 63"),
        ("tile/0/../0/001", "no dot segments"),
        ("tile/0/%30%30%31", "nothing is decoded"),
        ("tile%2F0%2F001", "no encoded slashes"),
        ("tile/0/001/", "a trailing slash"),
        ("tile\\0\\001", "backslashes"),
        ("state", "only tlog-tiles resources"),
        ("checkpoints", "only tlog-tiles resources"),
        ("entries-index", "only tlog-tiles resources"),
        ("../chain.jsonl", "never the chain itself"),
    ],
)
def test_what_is_not_a_published_resource_is_404(chain: Path, relative: str, why: str) -> None:
    with running([chain]) as server:
        status, headers, body = get(_url(server, relative))
    assert status == 404, why
    assert headers["Cache-Control"] == "no-store"
    assert b"Traceback" not in body


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /checkpoint HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"DELETE /checkpoint HTTP/1.1\r\nHost: x\r\n\r\n", 405),
        (b"GET /x HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET /x\r\n\r\n", 400),
        (b"GET  /x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET http://a/x HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (b"GET http:///x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET http://user@a/x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET ftp://a/x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\n\r\n", 400),
        (b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", 400),
        (b"GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413),
        (b"GET /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413),
        (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"GET /x HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 17000 + b"\r\n\r\n", 431),
        (b"GET /x HTTP/1.1\r\nHost: x\r\n" + b"X: a\r\n" * 70 + b"\r\n", 431),
        (b"GET /x HTTP/1.0\r\n\r\n", 404),
        (b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"\r\n" * 9000 + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n", 400),
    ],
)
def test_every_other_request_gets_its_status_never_a_traceback(
    chain: Path, request_bytes: bytes, status: int
) -> None:
    with running([chain]) as server:
        response = _raw(server, request_bytes + b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert _status(response) == status
        assert b"Traceback" not in response
        assert _status(_raw(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) == 200
    if status == 405:
        assert b"\r\nAllow: GET, HEAD\r\n" in response


def test_requests_on_a_kept_alive_connection_are_answered_in_turn(chain: Path) -> None:
    with running([chain]) as server:
        one = f"GET /{ORIGIN}/tile/0/000 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        last = f"GET /{ORIGIN}/checkpoint HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        response = _raw(server, one + one + last)
    assert response.count(b"HTTP/1.1 200 OK") == 3
    assert len(response) > 2 * 8192


def test_answers_are_sent_without_waiting_for_the_clients_acknowledgement(chain: Path) -> None:
    """Regression: the accepted sockets lacked ``TCP_NODELAY`` (asyncio sets it only on sockets whose
    protocol number is TCP's, and ``socket.create_server`` gives 0), so Nagle's algorithm held a
    response's last short segment until the client acknowledged the ones before it: a body over 16 KB,
    written after its head, waited up to 40 ms for the client's delayed ACK."""
    with running([chain]) as server:
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), int(port)), timeout=20) as sock:
            assert _exchange(sock, _LISTING)[0] == 200
            options = [
                c.writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                for c in list(server._open)
            ]
    assert options and all(options)


def test_a_large_body_and_the_next_answer_arrive_whole_on_one_connection(chain: Path) -> None:
    """A large body (written after its head), the next answer and a HEAD (the body's length without
    the body) on one connection."""
    bundle = f"/{ORIGIN}/tile/entries/000"
    with running([chain]) as server:
        host, port = server.server_address[:2]
        with socket.create_connection((str(host), int(port)), timeout=20) as sock:
            status, body = _exchange(sock, f"GET {bundle} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert status == 200 and len(body) > 16 * 1024
            assert decode_bundle(body) == lines(chain)[:256]
            assert _exchange(sock, _LISTING)[0] == 200
            sock.sendall(f"HEAD {bundle} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            head = b""
            while chunk := sock.recv(65536):
                head += chunk
    assert f"Content-Length: {len(body)}\r\n".encode() in head and head.endswith(b"\r\n\r\n")


def test_a_request_head_that_does_not_arrive_in_time_is_408(chain: Path) -> None:
    with running([chain], Limits(timeout=0.3)) as server:
        response = _raw(server, b"GET /x HTTP/1.1\r\nHost: x\r\n")
    assert _status(response) == 408


def _exchange(sock: socket.socket, request: bytes) -> tuple[int, bytes]:
    """Send one request on a kept-alive connection and read its whole response: (status, body)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection: {data[:80]!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return _status(head), body


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


_LISTING = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


def test_a_new_connection_at_the_limit_closes_the_one_idle_longest_not_itself(chain: Path) -> None:
    with running([chain], Limits(max_connections=2)) as server:
        address = (str(server.server_address[0]), int(server.server_address[1]))
        held = [socket.create_connection(address, timeout=20) for _ in range(2)]
        try:
            for sock in held:  # both accepted and answered, then idle, the first the longest
                assert _exchange(sock, _LISTING)[0] == 200
            with socket.create_connection(address, timeout=20) as newcomer:
                assert _exchange(newcomer, _LISTING)[0] == 200
                assert _closed_by_server(held[0])
                assert _exchange(held[1], _LISTING)[0] == 200
        finally:
            for sock in held:
                sock.close()


def test_a_connection_trickling_its_head_is_closed_first_to_make_room(chain: Path) -> None:
    with running([chain], Limits(max_connections=2, timeout=600)) as server:
        address = (str(server.server_address[0]), int(server.server_address[1]))
        with (
            socket.create_connection(address, timeout=20) as trickling,
            socket.create_connection(address, timeout=20) as client,
        ):
            trickling.sendall(b"GET / HTTP/1.1\r\nHo")  # and never more
            assert _exchange(client, _LISTING)[0] == 200  # answered after the trickle began waiting
            with socket.create_connection(address, timeout=20) as newcomer:
                assert _exchange(newcomer, _LISTING)[0] == 200
            assert _closed_by_server(trickling)
            assert _exchange(client, _LISTING)[0] == 200


class _GatedSite(LogSite):
    """A site whose answer to ``GET /gate`` waits until the test opens the gate."""

    def __init__(self, logs: list[PublishedLog]) -> None:
        super().__init__(logs)
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)

    def respond(self, request: Request) -> Response:
        if request.path == "/gate":
            self.entered.release()
            self.gate.wait(30)
        return super().respond(request)


def test_a_connection_beyond_the_limit_is_answered_503_only_when_every_one_is_being_answered(
    chain: Path,
) -> None:
    site = _GatedSite([PublishedLog(str(chain), [KEY])])
    with running([chain], Limits(max_connections=2), site) as server:
        address = (str(server.server_address[0]), int(server.server_address[1]))
        busy = [socket.create_connection(address, timeout=20) for _ in range(2)]
        try:
            for sock in busy:
                sock.sendall(b"GET /gate HTTP/1.1\r\nHost: x\r\n\r\n")
            assert site.entered.acquire(timeout=20) and site.entered.acquire(timeout=20)
            response = _raw(server, _LISTING)
            assert _status(response) == 503
            assert b"Retry-After: 1" in response
            site.gate.set()
            for sock in busy:
                assert _exchange(sock, b"")[0] == 404
            assert (
                _status(_raw(server, _LISTING.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))) == 200
            )
        finally:
            site.gate.set()
            for sock in busy:
                sock.close()


def _waiting_on_the_client(server: LogServer) -> int:
    """Connections whose answer the kernel could not take whole (the rest waits in the transport): for
    a client that never reads, for good."""
    try:
        return sum(c.writer.transport.get_write_buffer_size() > 0 for c in list(server._open))
    except RuntimeError:  # the loop changed the dict meanwhile
        return 0


def test_clients_that_never_read_their_bundles_keep_no_tile_or_checkpoint_from_being_answered(
    chain: Path,
) -> None:
    # Each answer held its slot while the client read it: clients that pipelined bundle requests and
    # never read held every slot for the whole send timeout, and no other request was answered.
    with running([chain], Limits(max_answering=2, send_timeout=600)) as server:
        address = (str(server.server_address[0]), int(server.server_address[1]))
        stalled = []
        for _ in range(2):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(address)
            stalled.append(sock)
        try:
            request = f"GET /{ORIGIN}/tile/entries/000 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            for sock in stalled:
                sock.sendall(request * 300)  # about 20 MB of answers each, never read
            for _ in range(2000):  # until both wait on their clients, for good (a failure detector)
                if _waiting_on_the_client(server) == 2:
                    break
                threading.Event().wait(0.01)
            assert _waiting_on_the_client(server) == 2
            assert (
                _status(
                    _raw(
                        server,
                        f"GET /{ORIGIN}/checkpoint HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
                        read_all=False,
                    )
                )
                == 200
            )
            assert (
                _status(
                    _raw(
                        server,
                        f"GET /{ORIGIN}/tile/0/001 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
                        read_all=False,
                    )
                )
                == 200
            )
        finally:
            for sock in stalled:
                sock.close()


def test_an_http09_request_line_is_answered_400_at_once_not_left_waiting(chain: Path) -> None:
    with running([chain], Limits(timeout=60)) as server:
        response = _raw(server, b"GET /\r\n")  # HTTP/0.9: no version, no headers, no blank line
    assert _status(response) == 400
    assert b"Connection: close" in response


def test_an_absolute_form_target_is_answered_as_its_path(chain: Path) -> None:
    with running([chain]) as server:
        for target in (f"http://h/{ORIGIN}/checkpoint", f"HTTPS://h:1/{ORIGIN}/checkpoint?x=1"):
            response = _raw(server, f"GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode())
            assert _status(response) == 200
            assert response.endswith((log_dir(chain) / "checkpoint").read_bytes())
        response = _raw(server, b"GET http://h?x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert _status(response) == 200
        assert response.endswith(f"/{ORIGIN}/\n".encode())


def test_partial_tiles_and_bundles_are_cached_as_immutable_like_full_ones(chain: Path) -> None:
    with running([chain]) as server:
        for relative in ("tile/0/002.p/188", "tile/0/000.p/97", "tile/1/000.p/2", "tile/entries/002.p/188"):
            status, headers, _ = get(_url(server, relative))
            assert (status, headers["Cache-Control"]) == (200, IMMUTABLE), relative


def test_400_404_405_413_answers_are_logged_once_each(chain: Path, caplog: pytest.LogCaptureFixture) -> None:
    requests = [
        b"GET  /x HTTP/1.1\r\nHost: x\r\n\r\n",
        f"GET /{ORIGIN}/tile/0/003 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
        b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    ]
    with running([chain]) as server:
        for request in requests * 2:
            _raw(server, request + b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    logged = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow.server"]
    assert logged == [
        "400 Bad Request: malformed request line (HTTP/1.0 or HTTP/1.1 is served)",
        f"404 Not Found: GET /{ORIGIN}/tile/0/003: tile/0/003: not in the tree of the checkpoint (size 700)",
        "404 Not Found: GET /nowhere: no log at this path",
        "405 Method Not Allowed: POST /: only GET and HEAD are served",
        "413 Request Entity Too Large: a request body is not accepted",
    ]


# --- nothing unauthenticated, nothing outside the log -------------------------------------------------


def test_a_damaged_tile_is_409_which_clients_do_not_retry_and_is_logged_once_naming_it(
    chain: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tile = log_dir(chain) / "tile/0/001"
    data = bytearray(tile.read_bytes())
    data[40] ^= 1
    tile.write_bytes(bytes(data))
    with running([chain]) as server:
        for _ in range(3):
            status, headers, body = get(_url(server, "tile/0/001"))
            assert (status, headers["Cache-Control"]) == (409, "no-store")
            assert body.startswith(b"tile/0/001: does not match its parent tile tile/1/000.p/2")
        assert get(_url(server, "tile/entries/001"))[0] == 409
        assert get(_url(server, "tile/0/000"))[0] == 200
    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"{ORIGIN}: tile/0/001:")]
    assert len(messages) == 1


def test_a_client_flooding_the_log_with_bad_requests_never_silences_a_forged_tile(
    chain: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # One budget of 4,096 distinct lines served every problem: a client's 4,097 distinct bad requests
    # (405s to paths of its choosing) used it up, and a forged tile met after them was answered 409 but
    # never logged.
    tile = log_dir(chain) / "tile/0/001"
    tile.write_bytes(bytes([tile.read_bytes()[0] ^ 1]) + tile.read_bytes()[1:])
    site = LogSite([PublishedLog(str(chain), [KEY])])
    for number in range(DISTINCT_MAX + 1):
        assert site.respond(Request("DELETE", f"/x{number}", (1, 1), {})).status == 405
    assert site.respond(Request("GET", f"/{ORIGIN}/tile/0/001", (1, 1), {})).status == 409
    logged = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow.server"]
    assert sum(line.startswith("405 ") for line in logged) == DISTINCT_MAX
    assert any(line.startswith(f"{ORIGIN}: tile/0/001: does not match its parent tile") for line in logged)


def test_a_lost_connections_exception_does_not_keep_its_answer_alive(chain: Path) -> None:
    # asyncio's stream keeps a lost connection's exception, and drain raises that very object: its
    # traceback held the send's frame and the answer in a cycle only the collector frees. Clients that
    # never read, connecting again and again, made serve hold every answer it had given up on.
    lost = ConnectionResetError("reset by the peer")

    class Unread:
        transport = types.SimpleNamespace(abort=lambda: None)

        def write(self, data: bytes) -> None:
            pass

        async def drain(self) -> None:
            raise lost

    with running([chain]) as server:
        writer: Any = Unread()
        assert asyncio.run(server._send(writer, b"HTTP/1.1 200 OK\r\n\r\n", bytes(64 * 1024))) is False
    assert lost.__traceback__ is None


def test_a_damaged_partial_tile_is_409(chain: Path) -> None:
    tile = log_dir(chain) / "tile/0/002.p/70"
    tile.write_bytes(tile.read_bytes()[:-1] + b"\x00")
    with running([chain]) as server:
        status, _, body = get(_url(server, "tile/0/002.p/70"))
    assert status == 409
    assert b"does not hold the hashes of the signed tree" in body


def test_links_planted_in_the_tile_store_are_never_followed(chain: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    real = log_dir(chain) / "tile/0/001"
    (outside / "001").write_bytes(real.read_bytes())  # the right bytes, but outside the log
    real.unlink()
    os.symlink(outside / "001", real)
    os.rename(log_dir(chain) / "tile/1", outside / "level1")
    os.symlink(outside / "level1", log_dir(chain) / "tile/1")
    with running([chain]) as server:
        status, _, body = get(_url(server, "tile/0/001"))
        assert status == 409
        assert b"symbolic link" in body
        assert get(_url(server, "tile/1/000.p/2"))[0] == 409


def test_a_wrong_entry_index_is_rebuilt_and_never_served(chain: Path) -> None:
    expected = lines(chain)
    with running([chain]) as server:
        assert get(_url(server, "tile/entries/002.p/188"))[0] == 200
    index = log_dir(chain) / "entries-index"
    index.write_bytes(index.read_bytes()[:8] + (1234).to_bytes(8, "big") + index.read_bytes()[16:])
    with running([chain]) as server:
        status, _, body = get(_url(server, "tile/entries/001"))
    assert status == 200
    assert decode_bundle(body) == expected[256:512]


def test_a_bundle_with_a_line_over_65535_bytes_is_409_and_named(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    payloads = [{"kind": "route-shadow", "n": n} for n in range(300)]
    payloads[260] = {"kind": "route-shadow", "blob": "x" * 70_000}
    forge_chain(chain, payloads)
    Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint()
    with running([chain]) as server:
        status, _, body = get(_url(server, "tile/entries/001.p/44"))
        assert status == 409
        assert body.startswith(b"tile/entries/001.p/44: seq 260 is 70,")
        assert b"cannot be served" in body
        assert get(_url(server, "tile/entries/001.p/4"))[0] == 200
        assert get(_url(server, "tile/entries/000"))[0] == 200


def test_a_checkpoint_that_goes_back_or_forks_is_refused(chain: Path, tmp_path: Path) -> None:
    with running([chain]) as server:
        assert get(_url(server, "checkpoint"))[0] == 200
        checkpoint = log_dir(chain) / "checkpoint"
        current = checkpoint.read_bytes()
        older = (log_dir(chain) / "checkpoints").read_text().splitlines()[0]
        checkpoint.write_text(json.loads(older)["note"])
        status, _, body = get(_url(server, "checkpoint"))
        assert status == 409
        assert b"below the 700 served before (a rollback)" in body
        forked = _log(tmp_path / "fork", count=800)  # another tree, signed by the same key
        checkpoint.write_bytes((log_dir(forked) / "checkpoint").read_bytes())
        status, _, body = get(_url(server, "checkpoint"))
        assert status == 409
        assert b"refused" in body
        checkpoint.write_bytes(current)
        assert get(_url(server, "checkpoint"))[0] == 200


def test_a_checkpoint_by_another_key_never_authenticates(chain: Path) -> None:
    other = Signer.generate(ORIGIN)
    note = (log_dir(chain) / "checkpoint").read_text().split("\n\n")[0] + "\n"
    (log_dir(chain) / "checkpoint").write_text(sign_note(note, [other]))
    with pytest.raises(Unservable, match="unknown-key"):
        PublishedLog(str(chain), [KEY])


# --- several chains -----------------------------------------------------------------------------------


def test_several_chains_each_under_its_origin(chain: Path, tmp_path: Path) -> None:
    origin = "example.org/another-log"
    other = _log(tmp_path / "other", count=300, every=300, origin=origin, signer=Signer.generate(origin))
    site = LogSite([PublishedLog(str(chain)), PublishedLog(str(other))])
    first = site.respond(Request("GET", f"/{origin}/tile/entries/001.p/44", (1, 1), {}))
    assert decode_bundle(first.body) == lines(other)[256:300]
    second = site.respond(Request("GET", f"/{ORIGIN}/checkpoint", (1, 1), {}))
    assert second.body == (log_dir(chain) / "checkpoint").read_bytes()
    assert (
        site.respond(Request("GET", f"/{origin}/checkpoint", (1, 1), {})).body
        == (log_dir(other) / "checkpoint").read_bytes()
    )
    with pytest.raises(SiteError, match="cannot both be URL prefixes"):
        LogSite([PublishedLog(str(chain)), PublishedLog(str(chain))])


def test_an_origin_that_is_not_a_url_path_cannot_be_served(tmp_path: Path) -> None:
    origin = "example.com/route-shadow/../x"
    bad = _log(tmp_path / "bad", count=10, every=10, origin=origin, signer=Signer.generate(origin))
    with pytest.raises(SiteError, match="cannot be a URL path prefix"):
        LogSite([PublishedLog(str(bad))])


# --- fuzzing the path and the request -----------------------------------------------------------------

_PATH_ALPHABET = "tile/entries0123456789x.p%2e2f\\\x00?#;~ é"


@pytest.fixture(scope="module")
def site(pristine: Path) -> LogSite:
    return LogSite([PublishedLog(str(pristine), [KEY])])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(alphabet=_PATH_ALPHABET, max_size=60))
def test_any_path_is_200_only_for_a_resource_of_the_log(site: LogSite, pristine: Path, path: str) -> None:
    full = f"/{ORIGIN}/{path}"
    response = site.respond(Request("GET", full, (1, 1), {}))
    assert response.status in (200, 404)
    if response.status == 200:
        resource = parse_resource(path)
        assert resource is not None and resource.path == path and ".." not in path
        if resource.kind == "tile":
            assert (
                response.body
                == (log_dir(pristine) / tile_path(resource.level, resource.index, 256)).read_bytes()[
                    : resource.width * 32
                ]
                or response.body == (log_dir(pristine) / path).read_bytes()
            )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_parse_resource_accepts_one_spelling_and_nothing_outside(text: str) -> None:
    resource = parse_resource(text)
    if resource is not None:
        assert resource.path == text
        assert not any(part in ("", ".", "..") for part in text.split("/"))
        assert text == "checkpoint" or text.startswith("tile/")


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["tile", "entries"]),
    level=st.integers(0, 63),
    index=st.integers(0, 10**18),
    width=st.integers(1, 256),
)
def test_every_resource_path_parses_back(kind: str, level: int, index: int, width: int) -> None:
    resource = Resource(kind, level if kind == "tile" else 0, index, width)
    assert parse_resource(resource.path) == resource


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_any_bytes_on_the_wire_get_a_status_or_a_close(chain: Path, data: bytes) -> None:
    with running([chain], Limits(timeout=0.2)) as server:
        response = _raw(server, data)
        if response:
            assert _status(response) in (200, 400, 404, 405, 408, 413, 414, 431, 505)
        assert _status(_raw(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")) == 200


# --- the command --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_the_command_serves_and_stops_cleanly_with_a_connection_open(
    chain: Path, tmp_path: Path, stop: int
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otel_route_shadow.cli",
            "serve",
            str(chain),
            "--listen",
            "127.0.0.1:0",
            "--key",
            str(SIGNER.verifier()),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(f"serving {ORIGIN} (size 700, ")
    url = line.split()[-1]
    host, port = url.split("/")[2].split(":")
    idle = socket.create_connection((host, int(port)), timeout=20)
    idle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")
    process.send_signal(stop)
    _out, err = process.communicate(timeout=30)
    idle.close()
    assert process.returncode == 0
    assert "Traceback" not in err


def test_the_command_refuses_what_it_cannot_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 3)
    assert main(["serve", str(chain), "--listen", "127.0.0.1:0"]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["serve", str(chain), "--listen", "nonsense"]) == 2
    assert "not HOST:PORT" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_command_names_the_bundles_it_cannot_serve(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    payloads = [{"kind": "route-shadow", "n": n} for n in range(300)]
    payloads[5] = {"kind": "route-shadow", "blob": "x" * 70_000}
    forge_chain(chain, payloads)
    Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint()
    with serving([chain], workdir=tmp_path) as served:
        assert get(served.urls[ORIGIN] + "tile/entries/001.p/44")[0] == 200
    assert f"{ORIGIN}: entry bundles: 1 cannot be served to tlog-tiles clients" in served.log()
    assert "tile/entries/000 (and its partial bundles): seq 5, 70," in served.log()


IDLE = 1000


def test_a_thousand_idle_connections_do_not_keep_a_valid_request_from_being_answered(chain: Path) -> None:
    tile = (log_dir(chain) / "tile/0/001").read_bytes()
    with running([chain], Limits(timeout=600)) as server:  # no idle connection times out during the test
        address = (str(server.server_address[0]), int(server.server_address[1]))
        held: list[socket.socket] = []
        try:
            for _ in range(IDLE):  # each answered once, so the server holds it, then left idle
                sock = socket.create_connection(address, timeout=20)
                held.append(sock)
                assert _exchange(sock, _LISTING)[0] == 200
            with socket.create_connection(address, timeout=20) as sock:
                request = f"GET /{ORIGIN}/tile/0/001 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                assert _exchange(sock, request) == (200, tile)
            for sock in held:  # all still open and served: none was closed to make room
                assert _exchange(sock, _LISTING)[0] == 200
        finally:
            for sock in held:
                sock.close()


def test_an_open_file_limit_below_max_connections_lowers_it_and_says_so(chain: Path) -> None:
    command = [sys.executable, "-m", "otel_route_shadow.cli", "serve", str(chain), "--listen", "127.0.0.1:0"]
    process = subprocess.Popen(  # ulimit -n sets the hard limit too: it cannot be raised
        ["sh", "-c", 'ulimit -n 600 && exec "$@"', "sh", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().split()[-1]
    status, _, body = get(url + "checkpoint")
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert (process.returncode, status) == (0, 200)
    assert body == (log_dir(chain) / "checkpoint").read_bytes()
    assert "at most 216 connections at once, not 4,096: this process may open 600 files (RLIMIT_NOFILE" in err


_SIGNAL_AT_EVERY_LINE = r'''
import faulthandler, signal, sys, threading
from otel_route_shadow.cli import serve

serve._POLL_MS = 20  # two rounds of the wait loop in a few dozen lines


class Server:
    def __init__(self):
        self.stopped = threading.Event()

    def serve_forever(self):
        self.stopped.wait()

    def stop(self, timeout):
        self.stopped.set()
        return True


def run(k):
    """SIGTERM raised at the k-th line the main thread runs once serving (any function): False once k is
    past the lines of the first 0.2 s (a timer stops serve then)."""
    count, hit = 0, []

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line" and not hit and callable(signal.getsignal(signal.SIGTERM)):  # serve's handler
            count += 1
            if count == k:
                hit.append(k)
                sys.settrace(None)
                signal.raise_signal(signal.SIGTERM)
        return tracer

    def announce():
        sys._getframe(1).f_trace = tracer
        sys.settrace(tracer)

    def late():
        if not hit:
            hit.append(0)
            signal.raise_signal(signal.SIGTERM)

    timer = threading.Timer(0.2, late)
    timer.start()
    serve._serve(Server(), announce)
    sys.settrace(None)
    timer.cancel()
    return hit != [0]


faulthandler.dump_traceback_later(60, exit=True)  # a hang: its stacks, exit 1
k = 1
while run(k):
    k += 1
print("stopped at every line:", k - 1)
'''


def test_a_stop_signal_at_any_line_of_the_wait_stops_serve(tmp_path: Path) -> None:
    """The handler runs between any two bytecodes of the main thread; it called ``Event.set`` while
    ``Event.wait`` could hold the event's lock in that thread: a hang (seen once in a full run). SIGTERM
    is raised at every line the main thread runs while serving, one run each: every run stops."""
    script = tmp_path / "signal_at_every_line.py"
    script.write_text(_SIGNAL_AT_EVERY_LINE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split(":")[-1]) >= 5  # the lines before the first wait at least (about 100 here)


def test_serve_closes_its_wake_pipe_when_it_cannot_start() -> None:
    """The pipe was made before the handlers were installed and closed only once serving: a failure
    between (handlers installed from another thread than the main one) left both ends open."""
    from otel_route_shadow.cli import serve

    def attempt(errors: list[BaseException]) -> None:
        try:
            serve._serve(None, lambda: None)  # type: ignore[arg-type]
        except ValueError as exc:
            errors.append(exc)

    before = len(os.listdir("/proc/self/fd"))
    errors: list[BaseException] = []
    for _ in range(3):
        worker = threading.Thread(target=attempt, args=(errors,))
        worker.start()
        worker.join()
    assert len(errors) == 3 and "main thread" in str(errors[0])
    assert len(os.listdir("/proc/self/fd")) == before
