"""``audit --timeout`` bounds each backend request as a whole: a server that drips its headers or its
body a byte at a time (each byte well within the timeout) is cut off at the timeout, exit 4. Before,
the timeout bounded each socket read only, and ``audit`` waited as long as bytes kept coming.

The server drips for about 6 s and then completes its answer; the audit is given 0.5 s, so the test
passes long before the drip would end and fails (a wrong exit code after the drip) without the bound.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Answer, Seen, hostile_phoenix, write_chain

from otel_route_shadow.backend import BackendUnavailable, PhoenixBackend, QueryWindow
from otel_route_shadow.cli import main

DRIPS = 60
GAP = 0.1  # seconds between bytes: far below the per-read timeout


def _drip(handler: BaseHTTPRequestHandler, seen: Seen, text: bytes) -> None:
    for byte in text:
        if seen.stop.wait(GAP):
            return
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()


def _drip_body(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    handler.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
    handler.wfile.write(b'{"data": [')
    _drip(handler, seen, b" " * DRIPS)
    handler.wfile.write(b'], "next_cursor": null}')


def _drip_headers(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    handler.wfile.write(b"HTTP/1.0 200 OK\r\nX-Drip: ")
    _drip(handler, seen, b"x" * DRIPS)
    handler.wfile.write(b'\r\nContent-Type: application/json\r\n\r\n{"data": [], "next_cursor": null}')


@pytest.mark.parametrize("answer", [_drip_body, _drip_headers], ids=["body", "headers"])
def test_a_backend_that_drips_its_answer_is_cut_off_at_the_timeout(
    answer: Answer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    with hostile_phoenix(answer) as (_, url):
        code = main(["audit", str(chain), "--backend", url, "--timeout", "0.5"])
    out, err = capsys.readouterr()
    assert code == 4, (out, err)
    assert "no answer within 0.5s" in err and len(err.strip().splitlines()) == 1, err


def test_the_client_raises_unavailable_when_the_body_drips_past_its_timeout() -> None:
    with (
        hostile_phoenix(_drip_body) as (_, url),
        pytest.raises(BackendUnavailable, match="no answer within"),
    ):
        list(PhoenixBackend(url, "p", timeout=0.5).fetch_spans(QueryWindow(0, 10**18)))
