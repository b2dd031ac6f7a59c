"""The Phoenix API key goes into an HTTP header: a key that cannot be sent there (the CR a CRLF ``.env``
file leaves, text that is not latin-1) is refused in one line that does not quote it (exit 2), where it
was a ``ValueError`` traceback quoting the whole ``Authorization`` header (exit 1). An answer
``http.client`` cannot read as HTTP is the backend's fault (exit 5), never a traceback; a server that
echoes the key back in an error body does not get it printed."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Answer, Seen, hostile_phoenix, send, write_chain

from otel_route_shadow.cli import main

SECRET = "tok-SECRET-123"


def _empty(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    send(handler, 200, b'{"data": [], "next_cursor": null}')


@pytest.mark.parametrize("key", [SECRET + "\r", SECRET + "\n", SECRET + "\x1b", SECRET + "\u20ac"])
def test_an_api_key_with_a_carriage_return_is_refused_unquoted(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    monkeypatch.setenv("PHOENIX_API_KEY", key)
    with hostile_phoenix(_empty) as (seen, url):
        code = main(["audit", str(chain), "--backend", url])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "PHOENIX_API_KEY" in err and len(err.strip().splitlines()) == 1, err
    assert SECRET not in out + err and "tok-" not in out + err
    assert seen.requests == []


def _not_http(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    handler.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")


def _bad_chunk(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")


@pytest.mark.parametrize("answer", [_not_http, _bad_chunk], ids=["status-line", "chunk-size"])
def test_an_answer_that_is_not_http_is_not_a_backend_and_no_traceback(
    answer: Answer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    monkeypatch.setenv("PHOENIX_API_KEY", SECRET)
    with hostile_phoenix(answer) as (_, url):
        code = main(["audit", str(chain), "--backend", url, "--timeout", "10"])
    out, err = capsys.readouterr()
    assert code == 5, err
    assert "not an HTTP answer" in err and len(err.strip().splitlines()) == 1, err
    assert SECRET not in out + err


def _echo_401(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    send(handler, 401, f"denied: {handler.headers.get('Authorization')}".encode())


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_an_api_key_echoed_back_in_an_error_body_is_not_printed(
    json_flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several chains: each chain's error is a line of the fleet's report on stdout.
    chains = [str(write_chain(tmp_path / f"chain{i}.jsonl")) for i in range(2)]
    monkeypatch.setenv("PHOENIX_API_KEY", SECRET)
    with hostile_phoenix(_echo_401) as (seen, url):
        code = main(["audit", *chains, "--backend", url, *json_flag])
    out, err = capsys.readouterr()
    assert code == 4, (out, err)
    assert seen.requests and seen.requests[0][1] == f"Bearer {SECRET}"
    assert "access refused" in out and "[REDACTED]" in out
    assert SECRET not in out + err


@pytest.mark.parametrize(
    ("key", "padding"),
    [
        # 300 bytes are read: they end 6 characters into the key (the spaces are shown as one)
        (SECRET, " " * (300 - len("denied: Bearer ") - 6)),
        ("tok-\xa0SECRET-123", ""),  # a character escaped when shown: it was escaped before it was looked for
        (SECRET, "x" * 178),  # 200 characters are shown: the key straddles the cut
    ],
    ids=["cut-by-the-read", "escaped-character", "cut-where-shown"],
)
def test_an_echoed_api_key_leaks_no_part_of_itself(
    key: str,
    padding: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: the key was looked for after the body was cut to what is shown and escaped, so a key
    the cut went through, or one holding a character written as an escape, was printed in part or whole."""

    def echo(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        sent = handler.headers.get("Authorization", "")
        send(handler, 401, (padding + "denied: " + sent).encode("latin-1"))

    chain = str(write_chain(tmp_path / "chain.jsonl"))
    monkeypatch.setenv("PHOENIX_API_KEY", key)
    with hostile_phoenix(echo) as (_, url):
        main(["audit", chain, "--backend", url])
    out, err = capsys.readouterr()
    assert "access refused" in out + err
    assert "tok-" not in out + err and "SECRET" not in out + err
