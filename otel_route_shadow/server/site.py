"""What each request is answered: the logs under their prefixes, statuses, content types, cache rules.

Each log is served under its origin (``/<origin>/checkpoint``, ``/<origin>/tile/...``): C2SP
tlog-tiles names the origin as the log's URL prefix, and it is unique per log. ``/`` lists the
prefixes. The path is matched as sent: nothing is percent-decoded or normalized, so ``..``, ``%2e``,
``%2f``, a NUL or a backslash never match a resource; a file is only ever opened at a path built from
the parsed numbers (``logstore.published``), below the log's directory, following no link.

| answer | when |
| --- | --- |
| 200 | the resource, authenticated against the log's checkpoint |
| 404 | no log at that prefix, not a tlog-tiles path, a resource beyond the checkpoint's tree, a tile file that is not there |
| 405 | a method other than GET and HEAD |
| 409 | an entry bundle holding a line longer than 65,535 bytes (an older chain's): permanent, the message names the seq |
| 500 | a damaged tile, a tile that cannot be authenticated, a chain that does not hold the signed entries, a checkpoint that does not authenticate: logged once, with what to do |
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import threading
from collections.abc import Sequence
from http import HTTPStatus
from typing import Final

from otel_route_shadow.logstore import BundleUnservable, NotFound, PublishedLog, Unservable, parse_resource
from otel_route_shadow.server.protocol import Request

__all__ = ["LogSite", "Response", "SiteError"]

_LOG = logging.getLogger("otel_route_shadow.server")

TEXT: Final = "text/plain; charset=utf-8"
BINARY: Final = "application/octet-stream"
IMMUTABLE: Final = "public, max-age=31536000, immutable"
PARTIAL: Final = "public, max-age=60"
CHECKPOINT: Final = "public, max-age=5"
NO_STORE: Final = "no-store"
_SAFE_SEGMENT: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
_REPORTED_MAX: Final = 4096
_GZIP_LEVEL: Final = 1


class SiteError(ValueError):
    """Logs that cannot be served together (an origin that cannot be a URL prefix, two alike)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Response:
    status: HTTPStatus
    headers: dict[str, str]
    body: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class _Served:
    prefix: str
    log: PublishedLog
    lock: threading.Lock


class LogSite:
    """The logs of ``logs``, each under its origin; :meth:`respond` answers one request (thread-safe:
    one request at a time per log reads its files)."""

    def __init__(self, logs: Sequence[PublishedLog]) -> None:
        served: list[_Served] = []
        for log in logs:
            problem = prefix_problem(log.origin)
            if problem:
                raise SiteError(f"{log.chain_path}: its origin {log.origin!r} {problem}")
            for other in served:
                if (
                    other.prefix == log.origin
                    or log.origin.startswith(other.prefix + "/")
                    or (other.prefix.startswith(log.origin + "/"))
                ):
                    raise SiteError(
                        f"{log.chain_path} and {other.log.chain_path}: origins {log.origin!r} and "
                        f"{other.prefix!r} cannot both be URL prefixes (one holds the other)"
                    )
            served.append(_Served(log.origin, log, threading.Lock()))
        self._served = sorted(served, key=lambda s: len(s.prefix), reverse=True)
        self._reported: set[str] = set()
        self._reported_lock = threading.Lock()

    @property
    def prefixes(self) -> list[str]:
        return sorted(s.prefix for s in self._served)

    def respond(self, request: Request) -> Response:
        """The answer to ``request`` (any failure is a status, never an exception)."""
        if request.method not in ("GET", "HEAD"):
            response = _text(HTTPStatus.METHOD_NOT_ALLOWED, "only GET and HEAD are served")
            response.headers["Allow"] = "GET, HEAD"
            return response
        if request.path == "/":
            listing = "".join(f"/{s.prefix}/\n" for s in sorted(self._served, key=lambda s: s.prefix))
            return _text(HTTPStatus.OK, listing, cache=CHECKPOINT)
        for served in self._served:
            start = "/" + served.prefix + "/"
            if request.path.startswith(start):
                return self._resource(served, request, request.path[len(start) :])
        return _text(HTTPStatus.NOT_FOUND, "no log at this path")

    def _resource(self, served: _Served, request: Request, relative: str) -> Response:
        resource = parse_resource(relative)
        if resource is None:
            return _text(HTTPStatus.NOT_FOUND, f"not a tlog-tiles resource: {relative[:200]}")
        try:
            with served.lock:
                data = served.log.get(resource)
                self._report_index(served.log)
        except NotFound as exc:
            return _text(HTTPStatus.NOT_FOUND, str(exc))
        except BundleUnservable as exc:
            self._report(f"{served.prefix}: {exc}")
            return _text(HTTPStatus.CONFLICT, str(exc))
        except Unservable as exc:
            self._report(f"{served.prefix}: {exc}")
            return _text(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        except (OSError, ValueError) as exc:
            self._report(f"{served.prefix}: {resource.path}: cannot be read: {type(exc).__name__}: {exc}")
            return _text(
                HTTPStatus.INTERNAL_SERVER_ERROR, f"{resource.path}: cannot be read (the server logs why)"
            )
        if resource.kind == "checkpoint":
            return Response(HTTPStatus.OK, {"Content-Type": TEXT, "Cache-Control": CHECKPOINT}, data)
        headers = {"Content-Type": BINARY, "Cache-Control": PARTIAL if resource.partial else IMMUTABLE}
        if resource.kind == "entries":
            headers["Vary"] = "Accept-Encoding"
            if request.accepts_gzip():
                headers["Content-Encoding"] = "gzip"
                data = gzip.compress(data, _GZIP_LEVEL, mtime=0)
        return Response(HTTPStatus.OK, headers, data)

    def _report_index(self, log: PublishedLog) -> None:
        if log.index.save_error is not None:
            self._report(
                f"{log.origin}: the entry index cannot be written in {log.directory} "
                f"({log.index.save_error}): it is kept in memory and rebuilt at each start"
            )

    def _report(self, message: str) -> None:
        """Log ``message`` once per process (at most a few thousand distinct ones)."""
        with self._reported_lock:
            if message in self._reported or len(self._reported) >= _REPORTED_MAX:
                return
            self._reported.add(message)
        _LOG.warning("%s", message)


def prefix_problem(origin: str) -> str:
    """Why ``origin`` cannot be a URL path prefix as it is ("" when it can): segments of letters,
    digits and ``-._~``, none empty, ``.`` or ``..``."""
    segments = origin.split("/")
    for segment in segments:
        if segment in ("", ".", "..") or not set(segment) <= _SAFE_SEGMENT:
            return "cannot be a URL path prefix as it is (segments of letters, digits and -._~ only)"
    return ""


def _text(status: HTTPStatus, message: str, *, cache: str = NO_STORE) -> Response:
    body = message if message.endswith("\n") or not message else message + "\n"
    return Response(status, {"Content-Type": TEXT, "Cache-Control": cache}, body.encode("utf-8"))
