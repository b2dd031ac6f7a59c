"""A query's pagination is bounded: a backend that answers empty pages, each naming a new cursor, is
refused after a few of them (exit 5), and no query reads more than ``_MAX_PAGES`` pages. Before, only a
repeated cursor stopped it, and ``audit`` looped for ever.

The servers here end their answers after many pages, so that without the bound the test fails rather
than hangs."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Seen, hostile_phoenix, send, write_chain

from otel_route_shadow.backend import BackendProtocolError, PhoenixBackend, QueryWindow
from otel_route_shadow.backend import phoenix as phoenix_module
from otel_route_shadow.cli import main

GIVE_UP = 200  # the servers' own last page


def _empty_pages(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    n = len(seen.requests)
    send(handler, 200, json.dumps({"data": [], "next_cursor": str(n) if n < GIVE_UP else None}).encode())


def test_empty_pages_with_new_cursors_are_refused_not_followed_for_ever(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    with hostile_phoenix(_empty_pages) as (seen, url):
        code = main(["audit", str(chain), "--backend", url])
    out, err = capsys.readouterr()
    assert code == 5, (out, err)
    assert "empty pages in a row" in err and len(err.strip().splitlines()) == 1, err
    assert len(seen.requests) < 10


def _one_span_pages(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    n = len(seen.requests)
    span = {
        "context": {"trace_id": f"{n:032x}", "span_id": f"{n:016x}"},
        "start_time": "2026-11-30T01:36:23.623422+00:00",
        "attributes": {},
    }
    send(handler, 200, json.dumps({"data": [span], "next_cursor": str(n) if n < GIVE_UP else None}).encode())


def test_a_query_reads_no_more_than_the_page_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(phoenix_module, "_MAX_PAGES", 5, raising=False)
    with (
        hostile_phoenix(_one_span_pages) as (seen, url),
        pytest.raises(BackendProtocolError, match="more than 5 pages"),
    ):
        list(PhoenixBackend(url, "p").fetch_spans(QueryWindow(0, 2 * 10**18)))
    assert len(seen.requests) == 5
