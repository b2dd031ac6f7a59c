"""One bounded HTTP exchange (a POST, or a GET): a deadline for the whole exchange and a cap on the
bytes read.

``http.client`` does the HTTP, on a socket under the exchange's budget (``socket_budget``): a witness
that drips its answer a byte at a time, or sends megabytes, costs at most the deadline and the cap. A :class:`Connection` is kept open between requests (HTTP/1.1 keep-alive, as C2SP
tlog-witness recommends: one per witness), and opened again when the server closed it; :func:`post`
makes one request on a connection of its own (``Connection: close``). The name lookup of a host name is
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

from otel_route_shadow.socket_budget import BoundedSocket, Budget, connect_within
from otel_route_shadow.version import __version__

__all__ = ["Connection", "HttpAnswer", "TransportError", "TransportFault", "post"]

USER_AGENT = f"otel-route-shadow/{__version__}"
_BLOCK = 64 * 1024


class TransportFault(enum.Enum):
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    TOO_LARGE = "too-large"
    MALFORMED = "malformed"


class TransportError(Exception):
    """The exchange did not complete: ``fault`` says how; ``stale``: a reused connection was found
    closed by the server (a new one may be tried)."""

    def __init__(self, fault: TransportFault, message: str, *, stale: bool = False) -> None:
        super().__init__(message)
        self.fault = fault
        self.stale = stale


@dataclasses.dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    content_type: str
    body: bytes


def _too_large() -> TransportError:
    return TransportError(TransportFault.TOO_LARGE, "the answer is larger than allowed")


class _Connection(http.client.HTTPConnection):
    def __init__(
        self, host: str, port: int, budget: Budget, connect_timeout: float, tls: ssl.SSLContext | None
    ) -> None:
        super().__init__(host, port)
        self.budget = budget
        self._connect_timeout = connect_timeout
        self._tls = tls
        self.raw: socket.socket | None = None

    def connect(self) -> None:
        sock = connect_within(self.budget, self._connected, socket.socket.close)
        self.raw = sock
        self.sock = BoundedSocket(sock, self.budget)

    def _connected(self) -> socket.socket:
        """The name lookup, the TCP connection and TLS (run by ``connect_within``: within the deadline)."""
        timeout = min(self._connect_timeout, self.budget.seconds_left())
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock.settimeout(min(self._connect_timeout, self.budget.seconds_left()))
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        return sock


class Connection:
    """One persistent HTTP/1.1 connection to a host (keep-alive): each :meth:`post` has its own deadline
    and byte cap; a connection the server closed (after an answer, or while idle) is opened again, and
    a request that finds a reused connection closed is sent once more on a new one. Not thread-safe:
    one request at a time."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, connect_timeout: float) -> None:
        self._budget = Budget(0.0, 0, _too_large)
        self._connection = _Connection(host, port, self._budget, connect_timeout, tls)

    def post(
        self, path: str, body: bytes, *, timeout: float, max_bytes: int, keep_alive: bool = True
    ) -> HttpAnswer:
        """POST ``body`` to ``path`` within ``timeout`` seconds, reading at most ``max_bytes``; the
        answer's status, media type and body, or ``TransportError`` (the connection is then closed)."""
        return self.request("POST", path, body, timeout=timeout, max_bytes=max_bytes, keep_alive=keep_alive)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        *,
        timeout: float,
        max_bytes: int,
        keep_alive: bool = True,
    ) -> HttpAnswer:
        """``method`` ``path`` (with ``body``, or none) under the same bounds as :meth:`post`."""
        self._budget.deadline = time.monotonic() + timeout
        self._budget.bytes_left = max_bytes
        for attempt in range(2):
            reused = self._connection.raw is not None
            try:
                answer = _exchange(self._connection, method, path, body, keep_alive)
            except TransportError as exc:
                self.close()
                if reused and attempt == 0 and exc.stale:
                    continue  # the server closed the idle connection: once more on a new one
                raise
            except BaseException:
                self.close()
                raise
            if not keep_alive or self._connection.sock is None:  # the server said it closes
                self.close()
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the connection (the next :meth:`post` opens a new one)."""
        self._connection.close()
        if self._connection.raw is not None:
            self._connection.raw.close()
            self._connection.raw = None


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
    """POST ``body`` to ``path`` on a connection of its own (``Connection: close``); the answer's
    status, media type and body, or ``TransportError``."""
    connection = Connection(host, port, tls, connect_timeout)
    try:
        return connection.post(path, body, timeout=timeout, max_bytes=max_bytes, keep_alive=False)
    finally:
        connection.close()


def _exchange(
    connection: _Connection, method: str, path: str, body: bytes | None, keep_alive: bool
) -> HttpAnswer:
    headers = {"User-Agent": USER_AGENT, "Connection": "keep-alive" if keep_alive else "close"}
    if body is not None:
        headers["Content-Type"] = "text/plain; charset=utf-8"
    if connection.raw is None:
        _connect(connection)
    sent = False
    try:
        connection.request(method, path, body=body, headers=headers)
        sent = True
        response = connection.getresponse()
        data = _body(response, connection.budget)
    except TimeoutError:
        raise TransportError(TransportFault.TIMEOUT, "no complete answer within the timeout") from None
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
        raise TransportError(
            TransportFault.UNREACHABLE, f"the connection broke: {_os_reason(exc)}", stale=True
        ) from None
    except http.client.HTTPException as exc:
        stale = not sent and isinstance(exc, http.client.CannotSendRequest)
        raise TransportError(
            TransportFault.MALFORMED, f"not an HTTP answer ({type(exc).__name__})", stale=stale
        ) from None
    except OSError as exc:
        raise TransportError(TransportFault.UNREACHABLE, f"the connection broke: {_os_reason(exc)}") from None
    except OverflowError:  # a chunk size beyond any length
        raise TransportError(
            TransportFault.MALFORMED, "not an HTTP answer (a chunk size too large)"
        ) from None
    except ValueError:  # UnicodeEncodeError too: a path or host http.client cannot put in a request
        if sent:  # a negative chunk size, read as a negative length
            raise TransportError(TransportFault.MALFORMED, "not an HTTP answer (a bad chunk size)") from None
        raise TransportError(
            TransportFault.UNREACHABLE, "the request cannot be sent: its path or host is not plain ASCII"
        ) from None
    media = (response.getheader("Content-Type") or "").split(";", 1)[0].strip().lower()
    return HttpAnswer(response.status, media, data)


def _connect(connection: _Connection) -> None:
    try:
        connection.connect()
    except TimeoutError:
        raise TransportError(TransportFault.TIMEOUT, "no connection within the timeout") from None
    except OSError as exc:
        raise TransportError(TransportFault.UNREACHABLE, f"cannot connect: {_os_reason(exc)}") from None
    except ValueError:  # UnicodeError too: a host name the name lookup's IDNA encoding refuses
        raise TransportError(TransportFault.UNREACHABLE, "cannot connect: not a valid host name") from None


def _body(response: http.client.HTTPResponse, budget: Budget) -> bytes:
    """The answer's body, a block at a time: read whole, ``http.client`` allocates a declared length or
    chunk size at once, whatever the cap (a server announcing 10^17 bytes raised ``MemoryError``). A
    declared length beyond the cap (and the reader's buffer, already counted) is refused unread, and a
    body shorter than its declared length is refused too."""
    declared = response.length
    if declared is not None and declared > budget.bytes_left + io.DEFAULT_BUFFER_SIZE:
        raise TransportError(TransportFault.TOO_LARGE, "the answer is larger than allowed")
    blocks: list[bytes] = []
    while block := response.read(_BLOCK):
        blocks.append(block)
    data = b"".join(blocks)
    if declared is not None and len(data) != declared:  # http.client returns what came before the close
        raise TransportError(TransportFault.MALFORMED, "the answer ended before its declared length")
    return data


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
