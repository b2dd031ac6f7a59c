"""PhoenixBackend and the ``audit`` command against an in-process stand-in for Phoenix's REST API.

The stand-in (a thread in this process, bound to 127.0.0.1 on a free port) mimics the one route the
backend uses, ``GET /v1/projects/{project}/spans``, with Phoenix 20.26's parameters and answers; the
end-to-end suite (tests/e2e) runs the real Phoenix.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backend_support import FakePhoenix, phoenix_on_loopback

from otel_route_shadow.backend import (
    BackendNotFound,
    BackendProtocolError,
    BackendUnavailable,
    PhoenixBackend,
    QueryWindow,
)
from otel_route_shadow.backend.base import format_unix_nano
from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.cli import main

T0 = 1_796_000_000_000_000_000


@pytest.fixture
def fake() -> Iterator[tuple[FakePhoenix, str]]:
    with phoenix_on_loopback() as served:
        yield served


def _payload(i: int, *, agreed: bool | None = None, mechanism: str = "role-dial") -> dict[str, Any]:
    return {
        "kind": "route-shadow",
        "trace_id": f"{i + 1:032x}",
        "span_id": f"{i + 1:016x}",
        "start_time_unix_nano": str(T0 + i * 1_000_123),  # the chain keeps a decimal string
        "attributes": {
            "route_shadow.seam": "runner_utils.run_lightweight_agent",
            "route_shadow.decision_id": f"sha256:{i:064x}",
            "route_shadow.agreed": (i % 2 == 0) if agreed is None else agreed,
            "route_shadow.legacy.mechanism": mechanism,
            "route_shadow.rung": 3,
            "gen_ai.provider.name": "zai",
            "gen_ai.operation.name": "chat",
        },
    }


def _write_chain(path: Path, payloads: list[dict[str, Any]]) -> Path:
    with DecisionChain(path) as log:
        for payload in payloads:
            log.append(payload)
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


WIDE = QueryWindow(T0 - 10**9, T0 + 10**12)


# --------------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------------


def test_pages_through_every_span_in_order(fake: tuple[FakePhoenix, str]) -> None:
    state, url = fake
    for i in range(25):
        state.add("p", _payload(i))
    spans = list(PhoenixBackend(url, "p", page_size=7).fetch_spans(WIDE))
    assert [s.span_id for s in spans] == [f"{i + 1:016x}" for i in range(25)]
    assert len(state.requests) == 4
    assert all(q["sort"] == ["start_time"] and q["order"] == ["asc"] for q in state.requests)
    first = spans[0]
    assert first.attributes["route_shadow.agreed"] is True
    assert abs(first.start_time_unix_nano - T0) <= 1000


def test_attribute_filters_are_json_typed(fake: tuple[FakePhoenix, str]) -> None:
    state, url = fake
    for i in range(10):
        state.add("p", _payload(i, mechanism="role-dial" if i < 6 else "credit-failover"))
    backend = PhoenixBackend(url, "p")
    hits = list(
        backend.fetch_spans(
            WIDE, {"route_shadow.agreed": False, "route_shadow.legacy.mechanism": "role-dial"}
        )
    )
    assert [s.span_id for s in hits] == [f"{i + 1:016x}" for i in (1, 3, 5)]
    assert state.requests[-1]["attribute"] == [
        "route_shadow.agreed:false",
        'route_shadow.legacy.mechanism:"role-dial"',
    ]


def test_window_is_sent_with_microsecond_margins(fake: tuple[FakePhoenix, str]) -> None:
    state, url = fake
    state.add("p", _payload(0))
    window = QueryWindow(T0 + 500, T0 + 10**9)
    assert len(list(PhoenixBackend(url, "p").fetch_spans(window))) == 1
    assert state.requests[-1]["start_time"] == [format_unix_nano(T0 + 500 - 1000)]


def test_missing_project_is_not_found(fake: tuple[FakePhoenix, str]) -> None:
    _, url = fake
    with pytest.raises(BackendNotFound, match="the project holds no spans"):
        list(PhoenixBackend(url, "nope").fetch_spans(WIDE))


@pytest.mark.parametrize(
    ("status", "body", "error", "text"),
    [
        (401, b"unauthorized", BackendUnavailable, "PHOENIX_API_KEY"),
        (503, b"busy", BackendUnavailable, "HTTP 503"),
        (422, b"bad filter", BackendProtocolError, "422"),
        (200, b"<html>", BackendProtocolError, "not JSON"),
        (200, b"[" * 100_000 + b"]" * 100_000, BackendProtocolError, "not JSON"),  # was a RecursionError
        (200, b'{"spans": []}', BackendProtocolError, "no 'data' list"),
        (200, b'{"data": [{"context": {"trace_id": "XYZ"}}]}', BackendProtocolError, "unexpected span shape"),
    ],
)
def test_backend_failures_are_typed(
    fake: tuple[FakePhoenix, str], status: int, body: bytes, error: type[Exception], text: str
) -> None:
    state, url = fake
    state.status = status if status != 200 else None
    state.raw_body = body
    with pytest.raises(error, match=text):
        list(PhoenixBackend(url, "p").fetch_spans(WIDE))


@pytest.mark.parametrize(
    "body",
    [b'{"data": [], "data": [], "next_cursor": null}', b'{"data": [], "next_cursor": NaN}'],
    ids=["duplicate-key", "nan"],
)
def test_a_phoenix_answer_json_loads_took_but_strict_json_refuses_is_not_phoenix(
    fake: tuple[FakePhoenix, str], body: bytes
) -> None:
    # json.loads kept the last of two "data" keys and read NaN; network input goes through strict_json.
    state, url = fake
    state.raw_body = body
    with pytest.raises(BackendProtocolError, match="not JSON"):
        list(PhoenixBackend(url, "p").fetch_spans(WIDE))


def test_unreachable_and_slow_backends_are_unavailable(fake: tuple[FakePhoenix, str]) -> None:
    with pytest.raises(BackendUnavailable, match="unreachable"):
        list(PhoenixBackend(f"http://127.0.0.1:{_closed_port()}", "p").fetch_spans(WIDE))
    state, url = fake
    state.add("p", _payload(0))
    state.delay = 1.0
    with pytest.raises(BackendUnavailable, match="no answer within"):
        list(PhoenixBackend(url, "p", timeout=0.2).fetch_spans(WIDE))


def test_constructor_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        PhoenixBackend("ftp://x", "p")
    with pytest.raises(ValueError):
        PhoenixBackend("http://127.0.0.1:1", "")
    with pytest.raises(ValueError):
        PhoenixBackend("http://127.0.0.1:1", "p", page_size=5000)


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def _audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_agrees_on_an_intact_chain(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, url = fake
    payloads = [_payload(i) for i in range(12)]
    for p in payloads[::2] + payloads[1::2][:3]:  # 3 records left unsampled
        state.add("proj", p)
    chain = _write_chain(tmp_path / "chain.jsonl", payloads)
    code, out, _ = _audit(capsys, str(chain), "--backend", url, "--project", "proj")
    assert code == 0, out
    assert "records the backend lacks: 3 of 12 (25.0%)" in out
    assert "verdict: AGREE" in out


def test_audit_reports_truncation_and_rewrite(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, url = fake
    payloads = [_payload(i) for i in range(10)]
    for p in payloads:
        state.add("proj", p)
    tampered = [json.loads(json.dumps(p)) for p in payloads[:7]]
    tampered[4]["attributes"]["route_shadow.decision_id"] = "sha256:forged"
    chain = _write_chain(tmp_path / "chain.jsonl", tampered)
    code, out, _ = _audit(capsys, str(chain), "--backend", url, "--project", "proj", "--json")
    assert code == 1
    body = json.loads(out)
    assert body["verdict"] == "disagree"
    assert [o["span_id"] for o in body["spans"]["orphan_spans"]] == [p["span_id"] for p in payloads[7:]]
    assert body["spans"]["decision_id_mismatches"] == [4]
    code, text, _ = _audit(capsys, str(chain), "--backend", url, "--project", "proj")
    assert code == 1
    assert "spans with no chain record: 3 (a truncated or pruned chain)" in text
    assert 'route_shadow.decision_id: chain "sha256:forged", backend "sha256:' in text
    assert "verdict: DISAGREE" in text


def test_audit_bad_inputs_each_one_line_and_their_own_exit_code(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, url = fake
    state.add("proj", _payload(0))
    chain = _write_chain(tmp_path / "chain.jsonl", [_payload(0)])
    empty = _write_chain(tmp_path / "empty.jsonl", [{"kind": "chain-quarantine"}])
    garbage = tmp_path / "garbage.jsonl"
    _write_chain(garbage, [_payload(0)])
    with garbage.open("a") as fh:
        fh.write("not json\n")
    cases = [
        ([str(chain), "--backend", f"http://127.0.0.1:{_closed_port()}"], "unreachable", 4),
        ([str(chain), "--backend", url, "--project", "nope"], "the project holds no spans", 3),
        ([str(empty), "--backend", url], "no seam records", 2),
        ([str(tmp_path / "absent.jsonl"), "--backend", url], "no such file", 2),
        ([str(garbage), "--backend", url, "--project", "proj"], "garbage.jsonl: line 2: not a record", 2),
        ([str(chain), "--backend", "not-a-url"], "not an http(s) URL", 2),
        ([str(chain), "--backend", url, "--since", "tomorrow"], "--since", 2),
        ([str(chain), "--backend", url, "--until", "2000-01-01T00:00:00Z"], "empty window", 2),
        ([str(chain), "--backend", url, "--key", str(tmp_path / "nokey")], "--key", 2),
    ]
    for argv, text, expected in cases:
        code, out, err = _audit(capsys, *argv)
        assert code == expected, (argv, out, err)
        assert text in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
        assert out == ""
    for bad in ("2", "-0.1", "nan", "x"):  # refused by argparse, as every number option: usage, then why
        with pytest.raises(SystemExit) as refused:
            _audit(capsys, str(chain), "--backend", url, "--min-span-coverage", bad)
        err = capsys.readouterr().err
        assert refused.value.code == 2 and "--min-span-coverage" in err.strip().splitlines()[-1], err


def test_a_server_that_is_not_phoenix_is_never_project_not_found(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A collector's OTLP/HTTP port answers 404 to every GET: that is not "no such project"."""
    state, url = fake
    state.not_phoenix = True
    chain = _write_chain(tmp_path / "chain.jsonl", [_payload(0)])
    code, out, err = _audit(capsys, str(chain), "--backend", url, "--project", "proj")
    assert code == 5, err
    assert "not a Phoenix server" in err and "no spans" not in err and "not found" not in err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_empty_chain_with_since_finds_the_spans_it_lacks(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, url = fake
    for i in range(3):
        state.add("proj", _payload(i))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, _ = _audit(
        capsys, str(empty), "--backend", url, "--project", "proj", "--since", str(T0 - 10), "--json"
    )
    assert code == 1
    assert len(json.loads(out)["spans"]["orphan_spans"]) == 3


def test_backend_url_from_environment(
    fake: tuple[FakePhoenix, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, url = fake
    state.add("envproj", _payload(0))
    chain = _write_chain(tmp_path / "chain.jsonl", [_payload(0)])
    monkeypatch.setenv("ROUTE_SHADOW_PHOENIX_URL", url)
    monkeypatch.setenv("ROUTE_SHADOW_PHOENIX_PROJECT", "envproj")
    code, out, _ = _audit(capsys, str(chain))
    assert code == 0, out
    monkeypatch.delenv("ROUTE_SHADOW_PHOENIX_URL")
    code, _, err = _audit(capsys, str(chain))
    assert code == 2 and "--backend URL is required" in err


def test_broken_linkage_is_a_finding_and_a_torn_tail_a_note(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, url = fake
    payloads = [_payload(i) for i in range(5)]
    for p in payloads:
        state.add("proj", p)
    chain = _write_chain(tmp_path / "chain.jsonl", payloads)
    lines = chain.read_bytes().splitlines(keepends=True)
    # Swap two records' places without recomputing anything: every record still matches its span,
    # but the chain's own links no longer hold.
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_bytes(b"".join([lines[0], lines[2], lines[1], *lines[3:]]))
    code, out, _ = _audit(capsys, str(swapped), "--backend", url, "--project", "proj")
    assert code == 1, out
    assert "chain linkage:" in out and "broken" in out
    assert "the chain's own hashes do not hold" in out
    code, out, _ = _audit(capsys, str(swapped), "--backend", url, "--project", "proj", "--no-verify")
    assert code == 0, out
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines) + lines[0][:30])
    code, out, _ = _audit(capsys, str(torn), "--backend", url, "--project", "proj", "--json")
    assert code == 0, out
    assert json.loads(out)["spans"]["chain_linkage"]["verdict"] == "torn-tail"


def test_chain_scrubbing_is_not_a_rewrite(
    fake: tuple[FakePhoenix, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The span carries a credential-shaped string; the chain stores it scrubbed. Not a mismatch."""
    state, url = fake
    payload = _payload(0)
    payload["attributes"]["route_shadow.legacy.detail"] = (
        "provider=zai api_key=sk-ant-api03-abcdefghijklmnopqrstuvwxyz"
    )
    state.add("proj", payload)
    chain = _write_chain(tmp_path / "chain.jsonl", [payload])
    stored = next(iter(DecisionChain(chain).iter_records()))
    assert stored.redactions, "the chain did not scrub the credential-shaped value"
    code, out, _ = _audit(capsys, str(chain), "--backend", url, "--project", "proj")
    assert code == 0, out
