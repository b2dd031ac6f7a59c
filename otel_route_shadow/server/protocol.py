"""The small part of HTTP/1.1 a read-only tlog-tiles server needs, with every size bounded.

:class:`HeadReader` cuts request heads out of the bytes a connection receives, in a bounded buffer,
and refuses a malformed request line as soon as it ends; :func:`parse_head` turns a head into a
:class:`Request` or raises :class:`HTTPError` with the status the request deserves; no
body is ever read (a GET or HEAD has none, and a request that announces one is answered and the
connection closed). :func:`response_head` writes a response head, :func:`response_bytes` a whole response.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Final

__all__ = ["HTTPError", "HeadReader", "Limits", "Request", "parse_head", "response_bytes", "response_head"]

_TOKEN: Final = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VERSION: Final = re.compile(rb"HTTP/([0-9])\.([0-9])")
_HEAD_END: Final = re.compile(rb"\r?\n\r?\n")
_ABSOLUTE: Final = re.compile(rb"(?i:https?)://[^/?#@]+([/?][^#]*)?")
"""An absolute-form target with a host and no user information; group 1 is the path (and query)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """What one connection and one request may cost."""

    max_connections: int = 4096
    """Connections open at once. At the limit a new connection closes the one that has waited longest
    for a request; when none waits (every one is being answered) it is answered 503 and closed."""
    max_answering: int = 64
    """Answers computed at once, and entry bundles computed or being sent at once (each held in memory
    until sent); more wait their turn."""
    max_request_line: int = 4096
    """Bytes of the request line (method, target, version); longer: 414."""
    max_head: int = 16 * 1024
    """Bytes of the whole request head; more: 431."""
    max_headers: int = 64
    """Header fields in one request; more: 431."""
    timeout: float = 10.0
    """Seconds a request head may take to arrive (and an idle kept-alive connection may wait)."""
    send_timeout: float = 30.0
    """Seconds a response may take to be read by the client, the whole of it; then the connection closes."""


class HTTPError(Exception):
    """A request answered with ``status`` and a one-line ``message``; the connection is then closed."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """A parsed request head: ``path`` is the target without its query, as sent (nothing decoded)."""

    method: str
    path: str
    version: tuple[int, int]
    headers: Mapping[str, str]

    @property
    def keep_alive(self) -> bool:
        """Whether the connection stays open after the response (HTTP/1.1 unless ``close``)."""
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version >= (1, 1):
            return "close" not in tokens
        return "keep-alive" in tokens

    def accepts_gzip(self) -> bool:
        """Whether ``Accept-Encoding`` names gzip with a non-zero quality."""
        for item in self.headers.get("accept-encoding", "").split(","):
            name, _, params = item.strip().partition(";")
            if name.strip().lower() in ("gzip", "x-gzip"):
                quality = params.strip().lower()
                return quality not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
        return False


class HeadReader:
    """Request heads out of the bytes one connection receives, in a bounded buffer (bytes after a
    head, a pipelined request, are kept for the next head). It does no I/O: the caller feeds it what
    it reads and decides how long to wait."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._buffer = bytearray()
        self._line_checked = False
        self._scanned = 0
        """Bytes of the buffer already searched for the head's end (each byte is searched once)."""
        self._skipped = 0
        """Bytes of empty lines dropped before the head being read, bounded as a head is."""

    def feed(self, data: bytes) -> None:
        """Add bytes received from the client."""
        self._buffer += data

    @property
    def pending(self) -> bool:
        """Whether part of a request head has arrived (empty lines before a request do not count)."""
        return bool(self._buffer.lstrip(b"\r\n"))

    def head(self) -> bytes | None:
        """The next complete request head (without the blank line that ends it), None until one has
        arrived. Raises :class:`HTTPError` as soon as the bytes show what is wrong: a request line too
        long (414) or malformed, an HTTP/0.9 one among them, once it ends (400, 505), a head too large
        (431), empty lines before a request beyond the head's bound (400: RFC 9112 section 2.2 asks a
        server to ignore at least one, not any number)."""
        while self._buffer[:2] == b"\r\n" or self._buffer[:1] == b"\n":  # empty lines before a request
            width = 2 if self._buffer[:1] == b"\r" else 1
            del self._buffer[:width]
            self._scanned, self._skipped = 0, self._skipped + width
            if self._skipped > self.limits.max_head:
                raise HTTPError(HTTPStatus.BAD_REQUEST, "too many empty lines before a request")
        line_end = self._buffer.find(b"\n")
        if (line_end < 0 and len(self._buffer) > self.limits.max_request_line) or (
            line_end > self.limits.max_request_line
        ):
            raise HTTPError(HTTPStatus.REQUEST_URI_TOO_LONG, "request line too long")
        if line_end >= 0 and not self._line_checked:
            _request_line(bytes(self._buffer[:line_end]))
            self._line_checked = True
        end = _HEAD_END.search(self._buffer, max(0, self._scanned - 3))  # an end may straddle two reads
        if end is not None:
            head = bytes(self._buffer[: end.start()])
            if end.start() > self.limits.max_head:
                raise HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
            del self._buffer[: end.end()]
            self._line_checked, self._scanned, self._skipped = False, 0, 0
            return head
        self._scanned = len(self._buffer)
        if len(self._buffer) > self.limits.max_head:
            raise HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
        return None


def parse_head(head: bytes, limits: Limits) -> Request:
    """The request a head holds; :class:`HTTPError` for a malformed one (400; two Host fields among
    them, as RFC 9112 section 3.2 requires), an HTTP version other than 1.x (505), too many header
    fields (431) or a request with a body (413)."""
    lines = head.split(b"\n")
    method, path, minor = _request_line(lines[0].rstrip(b"\r"))
    if len(lines) - 1 > limits.max_headers:
        raise HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many header fields")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        line = raw.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed header field")
        if any((b < 0x20 and b != 0x09) or b == 0x7F for b in value):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "a control character in a header field")
        key = name.decode("ascii").lower()
        if key == "host" and key in headers:
            raise HTTPError(HTTPStatus.BAD_REQUEST, "more than one Host header field")
        text = value.strip(b" \t").decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    if minor == 1 and "host" not in headers:
        raise HTTPError(HTTPStatus.BAD_REQUEST, "an HTTP/1.1 request without Host")
    if "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0"):
        raise HTTPError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "a request body is not accepted")
    return Request(method, path, (1, minor), headers)


def _request_line(line: bytes) -> tuple[str, str, int]:
    """(method, path, HTTP/1 minor version) of a request line. The target is an absolute path or,
    as RFC 9112 section 3.2.2 requires a server to accept, an absolute ``http(s)://`` URI, whose path
    is taken; the path is kept as sent, without its query. A line without a version (an HTTP/0.9
    request) is malformed (RFC 9112 section 3: the version is part of every request line): 400."""
    parts = line.rstrip(b"\r").split(b" ")
    if len(parts) != 3 or not all(parts):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed request line (HTTP/1.0 or HTTP/1.1 is served)")
    method, target, version_text = parts
    version = _VERSION.fullmatch(version_text)
    if version is None:
        raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed HTTP version")
    if version[1] != b"1":
        raise HTTPError(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "only HTTP/1.0 and HTTP/1.1 are served")
    if not _TOKEN.fullmatch(method):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed method")
    if any(b < 0x21 or b > 0x7E for b in target):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "the target must be visible ASCII")
    absolute = _ABSOLUTE.fullmatch(target)
    if absolute is not None:
        target = absolute[1] if absolute[1] and absolute[1][:1] == b"/" else b"/" + (absolute[1] or b"")
    elif not target.startswith(b"/"):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "the target must be an absolute path or an http(s) URI")
    path = target.split(b"?", 1)[0].split(b"#", 1)[0].decode("ascii")
    return method.decode("ascii"), path, int(version[2])


def response_head(status: HTTPStatus, headers: Mapping[str, str], length: int) -> bytes:
    """A response's status line and ``headers``, with ``Content-Length: length``."""
    lines = [f"HTTP/1.1 {status.value} {status.phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def response_bytes(status: HTTPStatus, headers: Mapping[str, str], body: bytes) -> bytes:
    """A whole response: :func:`response_head` and ``body``."""
    return response_head(status, headers, len(body)) + body
