"""What each request is answered: the logs under their prefixes, statuses, content types, cache rules.

Each log is served under its origin (``/<origin>/checkpoint``, ``/<origin>/tile/...``): C2SP
tlog-tiles names the origin as the log's URL prefix, and it is unique per log. ``/`` lists the
prefixes. The path is matched as sent: nothing is percent-decoded or normalized, so ``..``, ``%2e``,
``%2f``, a NUL or a backslash never match a resource; a file is only ever opened at a path built from
the parsed numbers (``logstore.published``), below the log's directory, following no link.

| answer | when |
| --- | --- |
| 200 | the resource, authenticated against the log's checkpoint (the checkpoint itself without the cosignature lines that claim a given witness key and do not verify, each set logged once) |
| 404 | no log at that prefix, not a tlog-tiles path, a resource beyond the checkpoint's tree, a tile file that is not there |
| 405 | a method other than GET and HEAD |
| 410 | a resource the log's retention pruned: an entry bundle, or a full tile, whose end index is at most the minimum index (C2SP tlog-tiles "Pruning" lets a log refuse them), one a prune removed while it was being read included |
| 409 | the resource exists but cannot be given as good: a damaged or forged tile, a tile that cannot be authenticated, a chain that does not hold the signed entries, a checkpoint that does not authenticate, an entry bundle holding a line longer than 65,535 bytes (an older chain's); the message names what is wrong and the log line says what to do |
| 500 | a file that cannot be read (an I/O error, which may pass) |

``/<origin>/min-index`` is the log's minimum index (decimal, one line; 0 when it was never pruned): C2SP
tlog-tiles names no endpoint for it yet. It is the chain's first kept record rounded up to a multiple of 256
(``logstore.served_min_index``): the entry bundle across the first kept record also holds pruned records,
so it is refused whole, and every bundle served is whole. A pruned resource is a 410 Gone, not a 404: it was part of the
log and was removed on purpose, which a monitor should tell apart from a file missing; like a 404 it is
final for tlog-tiles clients (they retry only a 5xx or a 429).

Every answer but a 200 is logged, each distinct line once (``ProblemLog``). Damaged data is a 409, not a
5xx: tlog-tiles clients (torchwood's ``TileFetcher``) retry a 5xx or a 429 for minutes and give up at
once on any other status, and retrying cannot mend a damaged file. Tiles and entry bundles, partial ones
included, are immutable (a resource's bytes never change), so they are cached for a year.
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import threading
from collections.abc import Sequence
from http import HTTPStatus
from typing import Final

from otel_route_shadow.logstore import (
    BundleUnservable,
    NotFound,
    PublishedLog,
    Resource,
    Unservable,
    parse_resource,
    pruned_resource,
    served_min_index,
)
from otel_route_shadow.redacted_log import redacting
from otel_route_shadow.server.problems import ProblemLog
from otel_route_shadow.server.protocol import Request

__all__ = ["LogSite", "Response", "SiteError"]

_LOG = redacting(logging.getLogger("otel_route_shadow.server"))

TEXT: Final = "text/plain; charset=utf-8"
BINARY: Final = "application/octet-stream"
IMMUTABLE: Final = "public, max-age=31536000, immutable"
CHECKPOINT: Final = "public, max-age=5"
NO_STORE: Final = "no-store"
_SAFE_SEGMENT: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
_GZIP_LEVEL: Final = 1
MIN_INDEX: Final = "min-index"


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
        self.problems = ProblemLog(_LOG)

    @staticmethod
    def asks_bundle(request: Request) -> bool:
        """Whether ``request`` may ask for an entry bundle (up to 16.8 MB; every other answer is a few
        kilobytes, a checkpoint at most 1 MiB)."""
        return "/tile/entries/" in request.path

    def respond(self, request: Request) -> Response:
        """The answer to ``request`` (any failure is a status, never an exception)."""
        if request.method not in ("GET", "HEAD"):
            response = self._refusal(request, HTTPStatus.METHOD_NOT_ALLOWED, "only GET and HEAD are served")
            response.headers["Allow"] = "GET, HEAD"
            return response
        if request.path == "/":
            listing = "".join(f"/{s.prefix}/\n" for s in sorted(self._served, key=lambda s: s.prefix))
            return _text(HTTPStatus.OK, listing, cache=CHECKPOINT)
        for served in self._served:
            start = "/" + served.prefix + "/"
            if request.path.startswith(start):
                return self._resource(served, request, request.path[len(start) :])
        return self._refusal(request, HTTPStatus.NOT_FOUND, "no log at this path")

    def _resource(self, served: _Served, request: Request, relative: str) -> Response:
        min_index = self._min_index(served)
        if relative == MIN_INDEX:
            return _text(HTTPStatus.OK, f"{min_index}\n", cache=CHECKPOINT)
        resource = parse_resource(relative)
        if resource is None:
            return self._refusal(
                request, HTTPStatus.NOT_FOUND, f"not a tlog-tiles resource: {relative[:200]}"
            )
        gone = self._gone(request, resource, min_index)
        if gone is not None:
            return gone
        try:
            with served.lock:
                data = served.log.get(resource)
                self._report_index(served.log)
        except (NotFound, Unservable, BundleUnservable, OSError, ValueError) as exc:
            return self._failed(served, request, resource, exc)
        if resource.kind == "checkpoint":
            self.report_dropped(served.log)
            return Response(HTTPStatus.OK, {"Content-Type": TEXT, "Cache-Control": CHECKPOINT}, data)
        headers = {"Content-Type": BINARY, "Cache-Control": IMMUTABLE}
        if resource.kind == "entries":
            headers["Vary"] = "Accept-Encoding"
            if request.accepts_gzip():
                headers["Content-Encoding"] = "gzip"
                data = gzip.compress(data, _GZIP_LEVEL, mtime=0)
        return Response(HTTPStatus.OK, headers, data)

    def _failed(self, served: _Served, request: Request, resource: Resource, exc: Exception) -> Response:
        """The answer when ``resource`` could not be given: 410 when a prune that committed after the
        minimum index was read removed it (gone, not missing or damaged), else 404, 409 or 500."""
        gone = self._gone(request, resource, self._min_index(served))
        if gone is not None:
            return gone
        if isinstance(exc, NotFound):
            return self._refusal(request, HTTPStatus.NOT_FOUND, str(exc))
        if isinstance(exc, Unservable | BundleUnservable):
            with served.lock:
                pruned_error = served.log.index.pruned_error
            if pruned_error is not None:  # the records may be pruned, and which ones cannot be read
                exc = Unservable(
                    f"{resource.path}: cannot be served: the log's pruned file cannot be used "
                    f"({pruned_error}), so where its kept records begin is not known"
                )
            self.problems.report(f"{served.prefix}: {exc}")
            return _text(HTTPStatus.CONFLICT, str(exc))
        self.problems.report(f"{served.prefix}: {resource.path}: cannot be read: {type(exc).__name__}: {exc}")
        return _text(
            HTTPStatus.INTERNAL_SERVER_ERROR, f"{resource.path}: cannot be read (the server logs why)"
        )

    def _gone(self, request: Request, resource: Resource, min_index: int) -> Response | None:
        """The 410 of a ``resource`` pruned below ``min_index``; None when it is kept."""
        if not pruned_resource(resource.kind, resource.level, resource.index, resource.width, min_index):
            return None
        return self._refusal(
            request, HTTPStatus.GONE, f"{resource.path}: pruned (the log's minimum index is {min_index})"
        )

    def _min_index(self, served: _Served) -> int:
        """The log's minimum index (``served_min_index`` of the entry index's :meth:`kept`), within the served
        tree when its checkpoint can be read (when it cannot, the resource itself is answered why)."""
        with served.lock:
            first_kept, error = served.log.index.kept()[0], served.log.index.pruned_error
        if error is not None:
            self.problems.report(f"{served.prefix}: {error}: serving as if nothing were pruned")
        if first_kept == 0:
            return 0  # never pruned: no checkpoint read for it
        try:
            with served.lock:
                size = served.log.size
        except (Unservable, OSError, ValueError):
            size = 1 << 62
        return served_min_index(first_kept, size)

    def report_dropped(self, log: PublishedLog) -> None:
        """Log the cosignature lines left out of ``log``'s checkpoint (once per distinct set)."""
        dropped = log.dropped_cosignatures()
        if dropped:
            self.problems.report(
                f"{log.origin}: checkpoint served without {len(dropped)} cosignature line(s) claiming a "
                f"--witness-policy key that do not verify ({', '.join(k[:100] for k in dropped[:5])}"
                f"{', ...' if len(dropped) > 5 else ''}): whoever can write "
                f"{log.directory} added them"
            )

    def _refusal(self, request: Request, status: HTTPStatus, message: str) -> Response:
        """A client error answered with ``message`` and logged (each distinct line once)."""
        self.problems.report(
            f"{status.value} {status.phrase}: {request.method} {request.path[:200]}: {message}", client=True
        )
        return _text(status, message)

    def _report_index(self, log: PublishedLog) -> None:
        if log.index.save_error is not None:
            self.problems.report(
                f"{log.origin}: the entry index cannot be written in {log.directory} "
                f"({log.index.save_error}): it is kept in memory and rebuilt at each start"
            )


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
