"""The listening socket and its connections, on one asyncio event loop in the thread that calls
:meth:`LogServer.serve_forever`.

A connection waiting for a request costs a socket and a few kilobytes, never a thread, so thousands of
idle ones cannot keep a request from being answered. At most ``max_connections`` are open: at the limit
a new connection closes the one that has waited longest for a request (an HTTP client retries a GET
on a kept-alive connection the server closed), and is answered 503 only when every open connection is
being answered. A request head must arrive within ``timeout`` seconds; answers are computed by the site
in a small thread pool (file reads and hashing never block the loop), at most ``max_answering`` at once,
each sent within ``send_timeout`` seconds; at most ``max_answering`` entry bundles (the one resource of
megabytes) are computed or being sent at once, so clients that do not read hold only those. Requests on a
kept-alive connection are answered in turn, read at most a few kilobytes ahead (:data:`_READ`). A stop
answers what is being answered and closes the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import resource
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Final

from otel_route_shadow.server.protocol import (
    HeadReader,
    HTTPError,
    Limits,
    Request,
    parse_head,
    response_bytes,
    response_head,
)
from otel_route_shadow.server.site import TEXT, LogSite, Response

__all__ = ["LogServer"]

_ERROR_HEADERS: Final = {"Content-Type": TEXT, "Cache-Control": "no-store", "Connection": "close"}
_BUSY: Final = response_bytes(
    HTTPStatus.SERVICE_UNAVAILABLE,
    {**_ERROR_HEADERS, "Retry-After": "1"},
    b"too many connections, each being answered; try again\n",
)
_READ: Final = 8 * 1024
"""Bytes read from a connection at once, the stream's limit (it stops reading past twice this), and the
socket's receive buffer (the kernel doubles it): what request heads need, so a client that pipelines
requests and never reads its answers holds tens of kilobytes of this process, not the hundreds one
receive may take with the kernel's default buffer (docs/benchmarks.md, section 9)."""
_JOINED: Final = 16 * 1024
"""A body up to this size (a full tile is 8 KB) is sent in one write with its head."""
_WORKERS: Final = 4
"""Threads computing answers (the site reads one log's files one request at a time)."""
_LINGER: Final = 2.0
"""Seconds a connection closed after an error answer may still send what it had sent (then dropped)."""
_LINGERING: Final = 128
"""Connections lingering at once; more close at once."""
_SPARE_DESCRIPTORS: Final = 256 + _LINGERING
"""File descriptors kept beyond one per connection: the listening socket, the logs' files, the pool's."""


class _Connection:
    """One client's streams; the server keeps it among the open connections, and among those waiting for
    a request (which may be closed to admit another) while it waits."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer


class LogServer:
    """Serves ``site`` on ``address`` (host, port; port 0 picks a free one) within ``limits``.
    ``serve_forever()`` runs it; :meth:`stop`, from another thread, ends it. Raises ``OSError`` when
    the address cannot be listened on."""

    def __init__(self, address: tuple[str, int], site: LogSite, limits: Limits | None = None) -> None:
        self.site = site
        self.limits = _within_descriptors(limits or Limits(), site)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._socket = socket.create_server(address, family=family, backlog=1024)
        # Set before any connection is accepted: each inherits it, and its window is sized from the start.
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _READ)
        self.server_address: tuple[str, int] = self._socket.getsockname()[:2]
        self.stopping = False
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._finished = threading.Event()
        self._stop_timeout = 5.0
        self._clean = True
        self._open: dict[_Connection, None] = {}
        self._waiting: dict[_Connection, None] = {}  # by when each began to wait: the first waited longest
        self._answering: asyncio.Semaphore | None = None
        """Answers being computed (in the pool), never held while a client reads."""
        self._bundles: asyncio.Semaphore | None = None
        """Entry bundles computed or being sent (each up to 16.8 MB, in memory until sent)."""
        self._lingering = 0
        self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="route-shadow-answer")

    @property
    def url(self) -> str:
        """``http://host:port`` of the listening socket."""
        host, port = self.server_address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` is called."""
        try:
            asyncio.run(self._serve())
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._socket.close()
            self._finished.set()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop accepting, let the requests being answered finish (at most ``timeout`` seconds), close
        every connection. True when all of them closed in time."""
        with self._lock:
            self.stopping = True
            self._stop_timeout = timeout
            loop, wake = self._loop, self._wake
        if loop is None or wake is None:  # not serving (yet): serve_forever returns at once
            self._socket.close()
            return True
        with contextlib.suppress(RuntimeError):  # the loop already ended
            loop.call_soon_threadsafe(wake.set)
        return self._finished.wait(timeout + 1.0) and self._clean

    async def _serve(self) -> None:
        wake = asyncio.Event()
        self._answering = asyncio.Semaphore(self.limits.max_answering)
        self._bundles = asyncio.Semaphore(self.limits.max_answering)
        with self._lock:
            if self.stopping:
                return
            self._loop, self._wake = asyncio.get_running_loop(), wake
        server = await asyncio.start_server(self._connected, sock=self._socket, limit=_READ)
        await wake.wait()
        server.close()
        for connection in list(self._waiting):
            connection.writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=self._stop_timeout)
            self._clean = not pending
            for connection in list(self._open):
                connection.writer.transport.abort()
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _no_delay(writer)
        connection = _Connection(reader, writer)
        if not self._admit():
            await self._last(connection, _BUSY)
            return
        self._open[connection] = None
        try:
            await self._converse(connection)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # a bug: one log line, the connection closed, the server goes on
            self.site.problems.report(f"a connection failed: {type(exc).__name__}: {exc}", client=True)
        finally:
            self._waiting.pop(connection, None)
            self._open.pop(connection, None)
            writer.close()

    def _admit(self) -> bool:
        """Whether a new connection may be served: below the limit, or once the connection that has
        waited longest for a request is closed."""
        if self.stopping:
            return False
        if len(self._open) < self.limits.max_connections:
            return True
        if not self._waiting:
            self.site.problems.report(
                f"503 Service Unavailable: all {self.limits.max_connections:,} connections are being answered"
            )
            return False
        longest = next(iter(self._waiting))
        del self._waiting[longest]
        longest.writer.close()
        self.site.problems.report(
            f"{self.limits.max_connections:,} connections open (--max-connections): each new one closes "
            "the connection that has waited longest for a request"
        )
        return True

    async def _converse(self, connection: _Connection) -> None:
        heads = HeadReader(self.limits)
        while not self.stopping:
            self._waiting[connection] = None
            try:
                head = await self._head(connection.reader, heads)
                if head is None:
                    return
                request = parse_head(head, self.limits)
            except HTTPError as exc:
                self.site.problems.report(
                    f"{exc.status.value} {exc.status.phrase}: {exc.message}", client=True
                )
                body = (exc.message + "\n").encode()
                await self._last(connection, response_bytes(exc.status, _ERROR_HEADERS, body))
                return
            finally:
                self._waiting.pop(connection, None)
            if not await self._answer(connection.writer, request):
                return

    async def _head(self, reader: asyncio.StreamReader, heads: HeadReader) -> bytes | None:
        """The next request head; None when the client closed, went quiet or was closed for another."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.timeout
        while (head := heads.head()) is None:
            try:
                async with asyncio.timeout_at(deadline):
                    chunk = await reader.read(_READ)
            except TimeoutError:
                if heads.pending:
                    raise HTTPError(HTTPStatus.REQUEST_TIMEOUT, "the request head took too long") from None
                return None
            if not chunk:
                return None
            heads.feed(chunk)
        return head

    async def _answer(self, writer: asyncio.StreamWriter, request: Request) -> bool:
        """Answer ``request``; whether the connection stays open for the next one."""
        assert self._answering is not None and self._bundles is not None
        # A client that does not read holds its own answer only: an entry bundle's slot (the memory
        # bound), never the slot another request needs to be computed or a small answer to be sent.
        async with self._bundles if self.site.asks_bundle(request) else contextlib.nullcontext():
            async with self._answering:
                loop = asyncio.get_running_loop()
                response = await loop.run_in_executor(self._pool, self._respond, request)
            keep = request.keep_alive and not self.stopping
            headers = {**response.headers, "X-Content-Type-Options": "nosniff"}
            if not keep:
                headers["Connection"] = "close"
            head = response_head(response.status, headers, len(response.body))
            body = response.body if request.method != "HEAD" else b""
            return await self._send(writer, head, body) and keep

    def _respond(self, request: Request) -> Response:
        try:
            return self.site.respond(request)
        except Exception as exc:  # a bug: one log line, a 500, never a traceback to the client
            self.site.problems.report(
                f"internal error answering {request.method} {request.path[:200]}: {type(exc).__name__}: {exc}"
            )
            body = b"internal error (the server logs it)\n"
            return Response(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"Content-Type": TEXT, "Cache-Control": "no-store"}, body
            )

    async def _last(self, connection: _Connection, data: bytes) -> None:
        """Send a last response and close, after reading and dropping what the client sends meanwhile
        for at most :data:`_LINGER` seconds (closing with unread bytes resets the connection, and the
        client may lose the response); at most :data:`_LINGERING` connections linger at once."""
        connection.writer.write(data)
        if self._lingering >= _LINGERING or not connection.writer.can_write_eof():
            connection.writer.close()
            return
        self._lingering += 1
        try:
            async with asyncio.timeout(_LINGER):
                await connection.writer.drain()
                connection.writer.write_eof()
                while await connection.reader.read(_READ):
                    pass
        except (OSError, TimeoutError):
            pass
        finally:
            self._lingering -= 1
            connection.writer.close()

    async def _send(self, writer: asyncio.StreamWriter, head: bytes, body: bytes) -> bool:
        """Send ``head`` and ``body`` (a large body in a write of its own, not copied to join them); False
        when the client went away or did not read it all in time."""
        try:
            if len(body) > _JOINED:
                writer.write(head)
                writer.write(body)
            else:
                writer.write(head + body)
            async with asyncio.timeout(self.limits.send_timeout):
                await writer.drain()
        except (OSError, TimeoutError) as exc:
            # The stream keeps a lost connection's exception, and drain raised it here: its traceback
            # would hold this frame, and so the answer, in a cycle only the collector frees.
            exc.__traceback__ = None
            writer.transport.abort()
            return False
        return True


def _no_delay(writer: asyncio.StreamWriter) -> None:
    """Send each write at once (``TCP_NODELAY``): a body over :data:`_JOINED` is written after its
    head, and Nagle's algorithm would hold that body's last short segment until the client acknowledged
    the head, which a client may delay by 40 ms. asyncio sets it only on sockets whose protocol number
    is TCP's, and the sockets accepted from ``socket.create_server`` carry 0."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _within_descriptors(limits: Limits, site: LogSite) -> Limits:
    """``limits``, after raising this process's soft limit on open files (``RLIMIT_NOFILE``) to what
    ``max_connections`` needs when the hard limit allows; else with ``max_connections`` lowered to
    what it allows (and a log line saying so)."""
    needed = limits.max_connections + _SPARE_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return limits
    allowed = max(1, soft - _SPARE_DESCRIPTORS)
    site.problems.report(
        f"at most {allowed:,} connections at once, not {limits.max_connections:,}: this process may open "
        f"{soft:,} files (RLIMIT_NOFILE; raise its hard limit, ulimit -Hn, to allow more)"
    )
    return dataclasses.replace(limits, max_connections=allowed)
