"""One bounded HTTP GET for the backend client: a deadline for the whole exchange, a cap on the bytes
read, and no redirect followed.

``urllib`` does the HTTP (and the proxies the environment names). The connections it opens here read
through a stream that, before every ``recv``, sets the socket's timeout to what is left of the deadline:
a socket timeout alone bounds each read, so a server that drips its headers or its body a byte at a
time would hold the request for ever; here it costs at most the deadline (``TimeoutError``). A redirect
is never followed: ``urllib`` would send the request's headers, ``Authorization`` among them, on to
whatever host it names, so a 3xx answer is an ``urllib.error.HTTPError`` like any other status. The name
lookup of a host name is bounded by the system resolver's own timeouts.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = ["get"]

_BLOCK = 64 * 1024


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


class _DeadlineReader(io.RawIOBase):
    """A socket's read side, each ``recv`` within what is left of the deadline. It holds the socket's
    own file object, so the socket stays open until the answer is read (``urllib`` closes the
    connection's reference as soon as the headers are in)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._raw.readinto(buffer) or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineSocket:
    """What ``http.client`` sees as its socket once connected: reads and writes within the deadline."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def makefile(self, mode: str, *_: Any, **__: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def sendall(self, data: ReadableBuffer) -> None:
        self._sock.settimeout(self._deadline.left())
        self._sock.sendall(data)

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()
        self.sock = cast(socket.socket, _DeadlineSocket(self.sock, self._deadline))


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()  # the TCP connection, then TLS
        self.sock = cast(socket.socket, _DeadlineSocket(self.sock, self._deadline))


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, /, **kwargs: Any) -> http.client.HTTPConnection:
        return _HTTPConnection(host, deadline=self._deadline, **kwargs)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, /, **kwargs: Any) -> http.client.HTTPConnection:
        return _HTTPSConnection(host, deadline=self._deadline, **kwargs)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None  # not followed: the 3xx answer reaches the caller as an HTTPError


def get(url: str, headers: Mapping[str, str], *, timeout: float, max_bytes: int, proxies: bool) -> bytes:
    """The body of ``GET url``, at most ``max_bytes + 1`` bytes of it (more means too large), all within
    ``timeout`` seconds: ``TimeoutError`` past it. A status other than 2xx is ``urllib.error.HTTPError``
    (a redirect too: never followed); ``proxies``: through the proxies the environment names."""
    deadline = _Deadline(timeout)
    handlers: list[urllib.request.BaseHandler] = [
        _HTTPHandler(deadline),
        _HTTPSHandler(deadline),
        _NoRedirect(),
    ]
    if not proxies:
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, headers=dict(headers), method="GET")  # noqa: S310
    blocks: list[bytes] = []
    size = 0
    with opener.open(request, timeout=timeout) as response:
        while size <= max_bytes and (block := response.read(min(_BLOCK, max_bytes + 1 - size))):
            blocks.append(block)
            size += len(block)
    return b"".join(blocks)
