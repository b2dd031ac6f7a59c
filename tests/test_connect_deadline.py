"""Making a connection is under an exchange's deadline (``socket_budget.connect_within``): the name lookup,
a proxy's ``CONNECT`` answer and the TLS handshake each waited on their own timeout (the lookup on the
system resolver's), so ``audit --timeout`` did not bound a backend whose name never resolved, nor did a
witness's deadline. No test here measures time: a lookup that never answers is an event never set until
the test ends, and a thread's join timeout is only a failure detector."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_phoenix import write_chain

from otel_route_shadow.cli import main
from otel_route_shadow.socket_budget import Budget, connect_within
from otel_route_shadow.witness.transport import Connection, TransportError

_GENEROUS_S = 20.0


@pytest.fixture
def unanswered_lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every lookup of a name ending in ``.invalid`` waits until the test ends (a resolver that never
    answers); the names asked for are listed."""
    released = threading.Event()
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".invalid"):
            asked.append(host)
            released.wait(6 * _GENEROUS_S)  # released at the end of the test, long after its detector
            raise socket.gaierror(socket.EAI_AGAIN, "released at the end of the test")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        yield asked
    finally:
        released.set()


def _in_thread(call: Any) -> list[Any]:
    """Run ``call`` in a thread; what it returned or raised (a failure when it is still running)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(_GENEROUS_S)
    assert not thread.is_alive(), "the call went on past its deadline"
    return outcome


def test_audit_gives_up_on_a_backend_whose_name_never_resolves_at_its_timeout(
    unanswered_lookups: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = write_chain(tmp_path / "chain.jsonl")
    argv = ["audit", str(chain), "--backend", "http://phoenix.invalid:6006", "--timeout", "0.5"]
    (code,) = _in_thread(lambda: main(argv))
    out, err = capsys.readouterr()
    assert unanswered_lookups == ["phoenix.invalid"]
    assert code == 4, (code, out, err)  # the backend unreachable
    assert "unreachable" in out + err and "deadline" in out + err


def test_a_witness_post_gives_up_on_a_name_that_never_resolves_at_its_deadline(
    unanswered_lookups: list[str],
) -> None:
    connection = Connection("witness.invalid", 443, None, connect_timeout=_GENEROUS_S)
    (raised,) = _in_thread(lambda: connection.post("/add-checkpoint", b"x", timeout=0.5, max_bytes=1024))
    assert isinstance(raised, TransportError | TimeoutError), raised
    assert unanswered_lookups == ["witness.invalid"]


def test_a_connection_made_after_the_deadline_is_closed_and_never_handed_out() -> None:
    go, closed = threading.Event(), threading.Event()
    made: list[object] = []

    def connect() -> object:
        go.wait(_GENEROUS_S)
        made.append(object())
        return made[-1]

    def close(value: object) -> None:
        assert value is made[-1]
        closed.set()

    with pytest.raises(TimeoutError):
        connect_within(Budget(time.monotonic() + 0.2, 0, Exception), connect, close)
    go.set()
    assert closed.wait(_GENEROUS_S)


def test_what_the_connect_raises_is_raised_and_what_it_returns_is_returned() -> None:
    budget = Budget(time.monotonic() + _GENEROUS_S, 0, Exception)
    assert connect_within(budget, lambda: 7, lambda _: None) == 7

    def refused() -> int:
        raise ConnectionRefusedError(111, "refused")

    with pytest.raises(ConnectionRefusedError):
        connect_within(budget, refused, lambda _: None)
