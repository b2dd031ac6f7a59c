"""A backend's error body is quoted in the message with its non-printable characters escaped: an ESC
or BEL in it reached the terminal as is (a hostile backend could retitle the window or clear it)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Seen, hostile_phoenix, send, write_chain

from otel_route_shadow.cli import main

EVIL = b"\x1b]0;pwned\x07\x1b[2J\x1b[31mEVIL\x1b[0m\xe2\x80\x8f"


@pytest.mark.parametrize("status", [503, 500])
def test_an_error_body_with_escape_sequences_is_printed_escaped(
    status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")

    def answer(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        send(handler, status, EVIL)

    with hostile_phoenix(answer) as (_, url):
        code = main(["audit", str(chain), "--backend", url])
    out, err = capsys.readouterr()
    assert code == 4, (out, err)
    assert "EVIL" in err and "\\x1b]0;pwned\\x07" in err and "\\u200f" in err, err
    assert all(ch.isprintable() for ch in err.rstrip("\n")), repr(err)
