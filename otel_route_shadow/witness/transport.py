"""One bounded HTTP exchange (a POST, or a GET): a deadline for the whole exchange and a cap on the
bytes read.

``http.client`` does the HTTP; what it reads comes through a stream that, before every ``recv``, sets
the socket's timeout to what is left of the deadline and, after it, counts the bytes against the cap.
So a witness that drips its answer a byte at a time, or sends megabytes, costs at most the deadline
and the cap. The connection is never reused (``Connection: close``). The name lookup of a host name is
bounded by the system resolver's own timeouts; witnesses on an IP address skip it.
"""

from __future__ import annotations

import dataclasses
import enum
import http.client
import io
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any

from otel_route_shadow.version import __version__

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = ["HttpAnswer", "TransportError", "TransportFault", "http_get", "post"]

USER_AGENT = f"otel-route-shadow/{__version__}"


class TransportFault(enum.Enum):
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    TOO_LARGE = "too-large"
    MALFORMED = "malformed"


class TransportError(Exception):
    """The exchange did not complete: ``fault`` says how."""

    def __init__(self, fault: TransportFault, message: str) -> None:
        super().__init__(message)
        self.fault = fault


@dataclasses.dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    content_type: str
    body: bytes


@dataclasses.dataclass
class _Budget:
    deadline: float
    bytes_left: int

    def seconds_left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left

    def spend(self, count: int) -> None:
        self.bytes_left -= count
        if self.bytes_left < 0:
            raise TransportError(TransportFault.TOO_LARGE, "the answer is larger than allowed")


class _BoundedStream(io.RawIOBase):
    """A socket's read side, each ``recv`` within the budget's time and bytes."""

    def __init__(self, sock: socket.socket, budget: _Budget) -> None:
        super().__init__()
        self._sock = sock
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        self._sock.settimeout(self._budget.seconds_left())
        count = self._sock.recv_into(view, min(len(view), self._budget.bytes_left + 1))
        self._budget.spend(count)
        return count


class _BoundedSocket:
    """What ``http.client`` sees as its socket: writes and reads under the budget."""

    def __init__(self, sock: socket.socket, budget: _Budget) -> None:
        self._sock = sock
        self._budget = budget

    def makefile(self, mode: str, *_: Any, **__: Any) -> io.BufferedReader:
        return io.BufferedReader(_BoundedStream(self._sock, self._budget))

    def sendall(self, data: ReadableBuffer) -> None:
        self._sock.settimeout(self._budget.seconds_left())
        self._sock.sendall(data)

    def close(self) -> None:
        """``http.client`` closes its socket while the answer is read: the socket is closed by ``post``."""


class _Connection(http.client.HTTPConnection):
    def __init__(
        self, host: str, port: int, budget: _Budget, connect_timeout: float, tls: ssl.SSLContext | None
    ) -> None:
        super().__init__(host, port)
        self._budget = budget
        self._connect_timeout = connect_timeout
        self._tls = tls
        self.raw: socket.socket | None = None

    def connect(self) -> None:
        timeout = min(self._connect_timeout, self._budget.seconds_left())
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock.settimeout(min(self._connect_timeout, self._budget.seconds_left()))
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.raw = sock
        self.sock = _BoundedSocket(sock, self._budget)


def post(
    *,
    host: str,
    port: int,
    path: str,
    body: bytes,
    tls: ssl.SSLContext | None,
    connect_timeout: float,
    timeout: float,
    max_bytes: int,
) -> HttpAnswer:
    """POST ``body`` to ``path``; the answer's status, media type and body, or ``TransportError``."""
    return _bounded("POST", host, port, path, body, tls, connect_timeout, timeout, max_bytes)


def http_get(
    *,
    host: str,
    port: int,
    path: str,
    tls: ssl.SSLContext | None,
    connect_timeout: float,
    timeout: float,
    max_bytes: int,
) -> HttpAnswer:
    """GET ``path``; the answer's status, media type and body, or ``TransportError``."""
    return _bounded("GET", host, port, path, None, tls, connect_timeout, timeout, max_bytes)


def _bounded(
    method: str,
    host: str,
    port: int,
    path: str,
    body: bytes | None,
    tls: ssl.SSLContext | None,
    connect_timeout: float,
    timeout: float,
    max_bytes: int,
) -> HttpAnswer:
    budget = _Budget(time.monotonic() + timeout, max_bytes)
    connection = _Connection(host, port, budget, connect_timeout, tls)
    try:
        return _exchange(connection, method, path, body)
    finally:
        connection.close()
        if connection.raw is not None:
            connection.raw.close()


def _exchange(connection: _Connection, method: str, path: str, body: bytes | None) -> HttpAnswer:
    headers = {"User-Agent": USER_AGENT, "Connection": "close"}
    if body is not None:
        headers["Content-Type"] = "text/plain; charset=utf-8"
    try:
        connection.connect()
    except TimeoutError:
        raise TransportError(TransportFault.TIMEOUT, "no connection within the timeout") from None
    except OSError as exc:
        raise TransportError(TransportFault.UNREACHABLE, f"cannot connect: {_os_reason(exc)}") from None
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
    except TimeoutError:
        raise TransportError(TransportFault.TIMEOUT, "no complete answer within the timeout") from None
    except http.client.HTTPException as exc:
        raise TransportError(TransportFault.MALFORMED, f"not an HTTP answer ({type(exc).__name__})") from None
    except OSError as exc:
        raise TransportError(TransportFault.UNREACHABLE, f"the connection broke: {_os_reason(exc)}") from None
    media = (response.getheader("Content-Type") or "").split(";", 1)[0].strip().lower()
    return HttpAnswer(response.status, media, data)


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
