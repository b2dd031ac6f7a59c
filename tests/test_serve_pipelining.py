"""A client that pipelines requests and never reads its answers holds little of the server: the server
reads a connection at most a few kilobytes ahead of the request it answers (``server.listener._READ``:
the stream's limit and the listening socket's receive buffer). It held about 154 KiB each before."""

from __future__ import annotations

import gc
import select
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from tlog_support import ORIGIN, append

from otel_route_shadow.logstore import Checkpointer, PublishedLog
from otel_route_shadow.server import LogServer, LogSite

CONNECTIONS = 20
HELD_PER_CONNECTION = 64 * 1024


def _fill(sock: socket.socket, data: bytes) -> None:
    """Send ``data`` until the socket would block: the server's receive buffer and ours are full, so the
    server has stopped reading this connection."""
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent:])
    except BlockingIOError:
        return
    raise AssertionError(f"the server read all {len(data):,} bytes of pipelined requests unanswered")


def _most(measure: Callable[[], int], readings: int = 5) -> int:
    """The largest of ``readings`` of ``measure()``, 0.05 s apart: the server, having answered on each
    connection, has read ahead what it will of each (the figure can only come out too high, never too low)."""
    most = 0
    for _ in range(readings):
        gc.collect()
        most = max(most, measure())
        time.sleep(0.05)
    return most


def test_a_client_pipelining_requests_it_never_reads_holds_a_few_kilobytes_of_the_server(
    tmp_path: Path,
) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 300, Checkpointer(str(chain), ORIGIN, None), every=300)
    server = LogServer(("127.0.0.1", 0), LogSite([PublishedLog(str(chain))]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    requests = f"GET /{ORIGIN}/tile/0/000.p/200 HTTP/1.1\r\nHost: x\r\n\r\n".encode() * 200_000
    sockets: list[socket.socket] = []
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(CONNECTIONS):
            sock = socket.create_connection(server.server_address[:2], timeout=20)
            sockets.append(sock)
            _fill(sock, requests)
        for sock in sockets:  # an answer on each: the server is reading every connection
            assert select.select([sock], [], [], 20)[0], "the server answered nothing in 20 s"
        held = _most(lambda: tracemalloc.get_traced_memory()[0] - before) / CONNECTIONS
    finally:
        tracemalloc.stop()
        for sock in sockets:
            sock.close()
        assert server.stop(5.0)
        thread.join(5.0)
    assert held < HELD_PER_CONNECTION, f"{held / 1024:.0f} KiB held per connection"
