"""One bounded HTTP GET for the backend client: a deadline for the whole exchange, a cap on the bytes
read, and no redirect followed.

``urllib`` does the HTTP (and the proxies the environment names), on sockets under the exchange's
budget (``socket_budget``): a server that drips its headers or its body a byte at a time costs at most
the deadline (``TimeoutError``). A redirect is never followed: ``urllib`` would send the request's
headers, ``Authorization`` among them, on to whatever host it names, so a 3xx answer is an
``urllib.error.HTTPError`` like any other status. Making the connection (the name lookup, a proxy's
``CONNECT``, the TLS handshake) is under the deadline too (``socket_budget.connect_within``).
"""

from __future__ import annotations

import http.client
import socket
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, cast

from otel_route_shadow.socket_budget import BoundedSocket, Budget, connect_within

__all__ = ["get"]

_BLOCK = 64 * 1024
_HEAD_BYTES = 64 * 1024


def _too_large() -> http.client.HTTPException:
    return http.client.HTTPException("the answer is larger than allowed")


def _bounded(budget: Budget, connect: Callable[[], None], made: Callable[[], socket.socket]) -> socket.socket:
    """The socket ``connect()`` makes (``made()`` after it), made within the budget's deadline
    (``connect_within``), under the budget."""

    def run() -> socket.socket:
        connect()
        return made()

    return cast(socket.socket, BoundedSocket(connect_within(budget, run, socket.socket.close), budget))


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, budget: Budget, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._budget = budget

    def connect(self) -> None:
        self.sock = _bounded(self._budget, super().connect, lambda: self.sock)


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, budget: Budget, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._budget = budget

    def connect(self) -> None:
        # The name lookup, the TCP connection, a proxy's CONNECT, then TLS.
        self.sock = _bounded(self._budget, super().connect, lambda: self.sock)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, budget: Budget) -> None:
        super().__init__()
        self._budget = budget

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, /, **kwargs: Any) -> http.client.HTTPConnection:
        return _HTTPConnection(host, budget=self._budget, **kwargs)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, budget: Budget) -> None:
        super().__init__()
        self._budget = budget

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, /, **kwargs: Any) -> http.client.HTTPConnection:
        return _HTTPSConnection(host, budget=self._budget, **kwargs)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None  # not followed: the 3xx answer reaches the caller as an HTTPError


def get(url: str, headers: Mapping[str, str], *, timeout: float, max_bytes: int, proxies: bool) -> bytes:
    """The body of ``GET url``, at most ``max_bytes + 1`` bytes of it (more means too large), all within
    ``timeout`` seconds: ``TimeoutError`` past it. A status other than 2xx is ``urllib.error.HTTPError``
    (a redirect too: never followed); ``proxies``: through the proxies the environment names."""
    # The cap leaves the caller's own bound (max_bytes + 1) room for the answer's head.
    budget = Budget(time.monotonic() + timeout, max_bytes + 1 + _HEAD_BYTES, _too_large)
    handlers: list[urllib.request.BaseHandler] = [
        _HTTPHandler(budget),
        _HTTPSHandler(budget),
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
