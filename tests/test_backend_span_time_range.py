"""A span start time from the backend outside 1970-01-01 .. 9999-12-30 is the backend's fault (exit 5):
``0001-01-01T00:00:00+14:00`` crashed the text report with an ``OverflowError`` (exit 1, read as
"disagree"). ``format_unix_nano`` never raises."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Seen, hostile_phoenix, send, write_chain

from otel_route_shadow.backend import format_unix_nano
from otel_route_shadow.cli import main


@pytest.mark.parametrize(
    "start", ["0001-01-01T00:00:00+14:00", "1969-12-31T23:59:59+00:00", "9999-12-31T23:59:59.999999+00:00"]
)
def test_a_span_start_time_out_of_range_is_a_protocol_error_not_a_crash(
    start: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    span = {
        "context": {"trace_id": "0123456789abcdef0123456789abcdef", "span_id": "0123456789abcdef"},
        "start_time": start,
        "name": "x",
        "attributes": {"route_shadow.origin": "o"},
    }
    body = json.dumps({"data": [span], "next_cursor": None}).encode()

    def answer(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        send(handler, 200, body)

    with hostile_phoenix(answer) as (_, url):
        code = main(["audit", str(chain), "--backend", url])
    out, err = capsys.readouterr()
    assert code == 5, (out, err)
    assert "start_time is outside" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("value", [-(10**30), 10**30, -62_135_596_800 * 10**9 - 1, 10**25])
def test_format_unix_nano_never_raises(value: int) -> None:
    assert str(value) in format_unix_nano(value) or format_unix_nano(value).endswith("Z")
