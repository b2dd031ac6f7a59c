"""A redirect from the backend is never followed: urllib's default handler sent the request's
``Authorization`` header (the Phoenix API key) on to whatever host the redirect named. It is refused in
one line (exit 5), and the host it names receives nothing."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Seen, hostile_phoenix, send, write_chain

from otel_route_shadow.cli import main

SECRET = "tok-SECRET-123"


def _empty(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    send(handler, 200, b'{"data": [], "next_cursor": null}')


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_api_key_never_reaches_its_target(
    status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    monkeypatch.setenv("PHOENIX_API_KEY", SECRET)
    with hostile_phoenix(_empty) as (target_seen, target):
        target = target.replace("127.0.0.1", "localhost")  # another host

        def redirect(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
            send(handler, status, b"", Location=target + handler.path)

        with hostile_phoenix(redirect) as (seen, url):
            code = main(["audit", str(chain), "--backend", url])
    out, err = capsys.readouterr()
    assert code == 5, (out, err)
    assert f"redirect (HTTP {status})" in err and len(err.strip().splitlines()) == 1, err
    assert seen.requests and target_seen.requests == []
    assert SECRET not in out + err
