"""A ``--backend`` URL (or ``$ROUTE_SHADOW_PHOENIX_URL``) holding user information, a query or a
fragment is refused without quoting it (exit 2), as remote logs' URLs are: the URL was echoed in the
"unreachable" error and in the report's header (text and JSON), credential and all."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hostile_phoenix import Seen, hostile_phoenix, send, write_chain

from otel_route_shadow.backend import PhoenixBackend
from otel_route_shadow.cli import main

SECRET = "hunter2pass"


def _empty(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    send(handler, 200, b'{"data": [], "next_cursor": null}')


def _variants(url: str) -> list[str]:
    host = url.removeprefix("http://")
    return [
        f"http://admin:{SECRET}@{host}",
        f"http://{SECRET}@{host}",
        f"{url}/?api_key={SECRET}",
        f"{url}/#{SECRET}",
        f"ftp://admin:{SECRET}@{host}",
    ]


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("from_env", [False, True], ids=["option", "environment"])
def test_a_backend_url_with_a_credential_is_refused_unquoted(
    index: int,
    from_env: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    with hostile_phoenix(_empty) as (seen, url):
        bad = _variants(url)[index]
        for json_flag in ([], ["--json"]):
            if from_env:
                monkeypatch.setenv("ROUTE_SHADOW_PHOENIX_URL", bad)
                code = main(["audit", str(chain), *json_flag])
            else:
                code = main(["audit", str(chain), "--backend", bad, *json_flag])
            out, err = capsys.readouterr()
            assert code == 2, (out, err)
            assert "--backend" in err and len(err.strip().splitlines()) == 1, err
            assert SECRET not in out + err
    assert seen.requests == []


def test_the_client_refuses_a_url_with_user_information_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="user information") as refused:
        PhoenixBackend(f"http://admin:{SECRET}@127.0.0.1:6006", "p")
    assert SECRET not in str(refused.value)
