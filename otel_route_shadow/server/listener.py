"""The listening socket and its connections: a thread per connection, at most ``max_connections`` at
once (one more is answered 503 and closed at once), requests answered one after the other on a kept-alive
connection, and a stop that answers what is being answered and closes the rest.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
from http import HTTPStatus
from typing import Any

from otel_route_shadow.server.protocol import Connection, HTTPError, Limits, parse_head, response_bytes
from otel_route_shadow.server.site import TEXT, LogSite, Response

__all__ = ["LogServer"]

_LOG = logging.getLogger("otel_route_shadow.server")
_BUSY = response_bytes(
    HTTPStatus.SERVICE_UNAVAILABLE,
    {"Content-Type": TEXT, "Cache-Control": "no-store", "Retry-After": "1", "Connection": "close"},
    b"too many connections; try again\n",
)


class LogServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """Serves ``site`` on ``address`` (host, port; port 0 picks a free one) within ``limits``.
    ``serve_forever()`` runs it; :meth:`stop`, from another thread, ends it."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], site: LogSite, limits: Limits | None = None) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.site = site
        self.limits = limits or Limits()
        self.stopping = False
        self._slots = threading.BoundedSemaphore(self.limits.max_connections)
        self._open: dict[socket.socket, bool] = {}  # each connection, and whether it waits for a request
        self._changed = threading.Condition()
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """``http://host:port`` of the listening socket."""
        host, port = self.server_address[:2]
        host = str(host)
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.stopping or not self._slots.acquire(blocking=False):
            _refuse(request)
            self.shutdown_request(request)
            return
        with self._changed:
            self._open[request] = True
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed(request)

    def _closed(self, request: socket.socket) -> None:
        with self._changed:
            if self._open.pop(request, None) is not None:
                self._slots.release()
            self._changed.notify_all()

    def waiting(self, request: socket.socket, idle: bool) -> bool:
        """Mark a connection idle (waiting for a request) or busy; False when it must close (idle
        while the server stops)."""
        with self._changed:
            self._open[request] = idle
            return not (idle and self.stopping)

    def handle_error(self, request: Any, client_address: Any) -> None:
        _LOG.warning("a connection from %s failed", client_address[0] if client_address else "?")

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop accepting, let the requests being answered finish (at most ``timeout`` seconds), close
        every connection. True when all of them closed in time."""
        self.stopping = True
        self.shutdown()
        self.server_close()
        with self._changed:
            for request, idle in self._open.items():
                if idle:
                    _wake(request)
            done = self._changed.wait_for(lambda: not self._open, timeout)
            for request in self._open:
                _wake(request)
        return done


class _Handler(socketserver.BaseRequestHandler):
    server: LogServer

    def handle(self) -> None:
        connection = Connection(self.request, self.server.limits)
        while self.server.waiting(self.request, idle=True):
            try:
                head = connection.read_head()
                if head is None:
                    return
                self.server.waiting(self.request, idle=False)
                request = parse_head(head, self.server.limits)
            except HTTPError as exc:
                headers = {"Content-Type": TEXT, "Cache-Control": "no-store", "Connection": "close"}
                connection.send(response_bytes(exc.status, headers, (exc.message + "\n").encode()))
                return
            response = self._answer(request)
            keep = request.keep_alive and not self.server.stopping
            headers = {**response.headers, "X-Content-Type-Options": "nosniff"}
            if not keep:
                headers["Connection"] = "close"
            data = response_bytes(response.status, headers, response.body, send_body=request.method != "HEAD")
            if not connection.send(data) or not keep:
                return

    def _answer(self, request: Any) -> Response:
        try:
            return self.server.site.respond(request)
        except Exception as exc:  # a bug: one log line, a 500, never a traceback to the client
            _LOG.error(
                "internal error answering %s %s: %s: %s",
                request.method,
                request.path[:200],
                type(exc).__name__,
                exc,
            )
            body = b"internal error (the server logs it)\n"
            return Response(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"Content-Type": TEXT, "Cache-Control": "no-store"}, body
            )


def _refuse(request: socket.socket) -> None:
    """Answer 503 without waiting for the client (the accepting thread must never block)."""
    try:
        request.setblocking(False)
        request.send(_BUSY)
    except OSError:
        pass


def _wake(request: socket.socket) -> None:
    with contextlib.suppress(OSError):
        request.shutdown(socket.SHUT_RDWR)
