"""Arize Phoenix as a backend, over its REST API with the standard library only.

Endpoint used (Phoenix 20.26, ``phoenix/server/api/routers/v1/spans.py``)::

    GET {base}/v1/projects/{project}/spans
        ?start_time=<ISO 8601, inclusive>&end_time=<ISO 8601, exclusive>   (on the span start time)
        &sort=start_time&order=asc                                        (stable pages)
        &limit=<1..1000>&cursor=<next_cursor of the previous page>
        &attribute=<key>:<JSON value>  (repeatable, ANDed; strings JSON-quoted, so "1" stays a string)

    200 -> {"data": [{"context": {"trace_id", "span_id"}, "start_time", "attributes": {flat dotted
            keys}, "name", ...}], "next_cursor": str | null}
    404 -> the project does not exist: no span has reached it yet, or the name is wrong.

``{project}`` is the project name (the resource attribute ``openinference.project.name`` the host set;
``default`` otherwise) or its id. Phoenix keeps start times in microseconds, rounded through a float, so
a start time may differ by up to 1 us from the nanoseconds the host recorded. Only span attributes are
queryable, never resource attributes. When Phoenix runs with authentication, the API key is sent as a
bearer token (``PHOENIX_API_KEY``).

Each request is bounded as a whole (``timeout``: connection, headers and body, however slowly they
come; :mod:`.transport`), a redirect is never followed (it would carry the bearer token to the host it
names), and a query reads at most :data:`_MAX_PAGES` pages and gives up on :data:`_MAX_EMPTY_PAGES`
empty pages in a row that still name a next cursor. The base URL is checked as every URL the package
requests is (``addresses.parse_http_url``: no user information, query or fragment), so no message or
report that names it carries a credential.
"""

from __future__ import annotations

import http.client
import json
import unicodedata
import urllib.error
import urllib.parse
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from otel_route_shadow.addresses import UrlError, is_loopback, parse_http_url
from otel_route_shadow.backend.base import (
    AttributeValue,
    BackendError,
    BackendNotFound,
    BackendNotPhoenix,
    BackendProtocolError,
    BackendSpan,
    BackendUnavailable,
    QueryWindow,
    datetime_to_unix_nano,
    format_unix_nano,
    in_range,
)
from otel_route_shadow.backend.transport import get
from otel_route_shadow.core import REDACTED, shown_text
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = ["PhoenixBackend", "api_key_problem"]

_MAX_PAGE: Final = 1000
_MAX_PAGES: Final = 10_000
"""Pages one query reads at most (10 million spans at the largest page size): past it, the query fails."""
_MAX_EMPTY_PAGES: Final = 3
"""Empty pages in a row that still name a next cursor (Phoenix sends none): past it, the query fails."""
_MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024
_DETAIL_READ: Final = 300
"""Bytes of an error answer's body read for its message."""
_TOLERANCE_NS: Final = 1000


def _attribute_param(key: str, value: AttributeValue) -> str:
    if not key or ":" in key:
        raise ValueError(f"attribute key {key!r} cannot be used as a Phoenix filter")
    # bool and int are JSON literals; a string is JSON-quoted so that "12" or "true" stay strings.
    return f"{key}:{json.dumps(value)}"


def api_key_problem(api_key: str) -> str | None:
    """Why ``api_key`` cannot be sent in an HTTP header (a control character, such as the CR a CRLF
    ``.env`` file leaves, or text that is not latin-1), or None; the reason never quotes the key."""
    if any(unicodedata.category(ch) == "Cc" for ch in api_key):
        return "holds a control character (a CRLF line end?)"
    if not api_key.isascii() and any(ord(ch) > 0xFF for ch in api_key):
        return "holds characters an HTTP header cannot carry (not latin-1)"
    return None


class PhoenixBackend:
    """Spans of one Phoenix project. ``base_url`` is Phoenix's HTTP address, e.g. http://127.0.0.1:6006."""

    kind = "phoenix"
    time_tolerance_ns = _TOLERANCE_NS

    def __init__(
        self,
        base_url: str,
        project: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        page_size: int = _MAX_PAGE,
    ) -> None:
        # The URL is never quoted in a message: it may hold a credential.
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("the backend URL is not an http(s) URL")
        try:
            address = parse_http_url(base_url)
        except UrlError as exc:
            raise ValueError(f"the backend URL cannot be used: {exc}") from None
        if api_key and (problem := api_key_problem(api_key)):
            raise ValueError(f"the API key {problem}")
        if not project:
            raise ValueError("project name is empty")
        if not 0 < page_size <= _MAX_PAGE:
            raise ValueError(f"page size must be 1..{_MAX_PAGE}")
        self.base_url = base_url.rstrip("/")
        self.project = project
        self.timeout = timeout
        self.page_size = page_size
        self._headers = {"Accept": "application/json", "User-Agent": "otel-route-shadow-audit"}
        self._api_key = api_key or ""
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._proxies = not is_loopback(address.host)  # never send loopback traffic to a proxy

    def describe(self) -> str:
        return f"phoenix {self.base_url} project {self.project!r}"

    # ---- queries -------------------------------------------------------------------------------------

    def fetch_spans(
        self, window: QueryWindow, attributes: Mapping[str, AttributeValue] | None = None
    ) -> Iterator[BackendSpan]:
        # Phoenix compares microseconds: widen by the rounding tolerance on both sides.
        params: list[tuple[str, str]] = [
            ("start_time", format_unix_nano(window.start_unix_nano - _TOLERANCE_NS)),
            ("end_time", format_unix_nano(window.end_unix_nano + 2 * _TOLERANCE_NS)),
            ("sort", "start_time"),
            ("order", "asc"),
            ("limit", str(self.page_size)),
        ]
        for key, value in (attributes or {}).items():
            params.append(("attribute", _attribute_param(key, value)))
        path = f"/v1/projects/{urllib.parse.quote(self.project, safe='')}/spans"
        cursor: str | None = None
        seen_cursors: set[str] = set()
        empty = 0
        for _ in range(_MAX_PAGES):
            query = params + ([("cursor", cursor)] if cursor else [])
            body = self._get_json(path, query)
            data, next_cursor = self._page(body)
            for raw in data:
                yield self._span(raw)
            if not next_cursor:
                return
            if next_cursor in seen_cursors:
                raise BackendProtocolError(f"{self.describe()}: pagination cursor repeats")
            empty = 0 if data else empty + 1
            if empty >= _MAX_EMPTY_PAGES:
                raise BackendProtocolError(
                    f"{self.describe()}: {empty} empty pages in a row, each naming a next cursor"
                )
            seen_cursors.add(next_cursor)
            cursor = next_cursor
        raise BackendProtocolError(
            f"{self.describe()}: more than {_MAX_PAGES} pages of spans in one query; audit a narrower "
            "window (--since/--until)"
        )

    # ---- HTTP ----------------------------------------------------------------------------------------

    def _get_json(self, path: str, query: list[tuple[str, str]]) -> Any:
        url = self.base_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        try:
            raw = self._fetch(url)
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc) from None
        try:
            return loads_strict(raw)
        except StrictJSONError:  # not JSON, or JSON we do not take: duplicate keys, NaN, too deep
            raise self._not_phoenix("answers, but not JSON") from None

    def _fetch(self, url: str) -> bytes:
        """The body of a GET within ``timeout`` for the whole exchange; HTTPError (a redirect too) passes
        through, an answer that is not HTTP is BackendProtocolError, every other failure BackendUnavailable."""
        try:
            raw = get(
                url, self._headers, timeout=self.timeout, max_bytes=_MAX_RESPONSE_BYTES, proxies=self._proxies
            )
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError as exc:
            reason = exc.reason.strerror if isinstance(exc.reason, OSError) else exc.reason
            raise BackendUnavailable(f"{self.base_url}: unreachable ({reason or exc.reason})") from None
        except TimeoutError:
            raise BackendUnavailable(f"{self.base_url}: no answer within {self.timeout:g}s") from None
        except (ConnectionError, OSError) as exc:
            raise BackendUnavailable(f"{self.base_url}: connection failed ({exc})") from None
        except (http.client.HTTPException, ValueError, OverflowError) as exc:
            # Never the exception's text: http.client quotes the header or line it refuses.
            raise BackendProtocolError(
                f"{self.base_url}: not an HTTP answer ({type(exc).__name__})"
            ) from None
        if len(raw) > _MAX_RESPONSE_BYTES:
            raise BackendProtocolError(f"{self.describe()}: response larger than {_MAX_RESPONSE_BYTES} bytes")
        return raw

    def _http_error(self, exc: urllib.error.HTTPError) -> BackendError:
        if 300 <= exc.code < 400:
            return BackendProtocolError(
                f"{self.describe()}: answers with a redirect (HTTP {exc.code}), which is not followed; give "
                "the address Phoenix answers at itself (https:// if it redirects there)"
            )
        detail = _error_detail(exc, self._api_key)
        if exc.code in (401, 403):
            return BackendUnavailable(
                f"{self.describe()}: access refused (HTTP {exc.code}); set PHOENIX_API_KEY{detail}"
            )
        if exc.code >= 500:
            return BackendUnavailable(f"{self.describe()}: HTTP {exc.code}{detail}")
        # A 4xx from a server that is not Phoenix (a collector's OTLP port answers 404 or 405 to this
        # GET) must not read as "project not found": ask Phoenix's project list first.
        if not self.is_phoenix():
            return self._not_phoenix(
                f"answers HTTP {exc.code}, and /v1/projects is not Phoenix's project list"
            )
        if exc.code == 404:
            return BackendNotFound(
                f"{self.describe()}: the project holds no spans (Phoenix creates a project with its first span; "
                f"or the name is wrong){detail}"
            )
        if exc.code == 422:
            return BackendProtocolError(f"{self.describe()}: query rejected (HTTP 422){detail}")
        return BackendProtocolError(f"{self.describe()}: HTTP {exc.code}{detail}")

    def _not_phoenix(self, what: str) -> BackendNotPhoenix:
        return BackendNotPhoenix(
            f"{self.base_url}: {what}: not a Phoenix server (a collector's OTLP port? give Phoenix's HTTP "
            "address, e.g. http://127.0.0.1:6006)"
        )

    def is_phoenix(self) -> bool:
        """Whether ``GET /v1/projects`` answers with Phoenix's project list (``{"data": [...]}``)."""
        try:
            raw = self._fetch(self.base_url + "/v1/projects?limit=1")
            body = loads_strict(raw)
        except (BackendError, urllib.error.HTTPError, StrictJSONError):
            return False
        return isinstance(body, dict) and isinstance(body.get("data"), list)

    # ---- decoding ------------------------------------------------------------------------------------

    def _page(self, body: Any) -> tuple[list[Any], str | None]:
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise self._not_phoenix("answers JSON with no 'data' list")
        next_cursor = body.get("next_cursor")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise BackendProtocolError(f"{self.describe()}: next_cursor is not a string")
        return body["data"], next_cursor

    def _span(self, raw: Any) -> BackendSpan:
        try:
            context = raw["context"]
            start = datetime_to_unix_nano(
                datetime.fromisoformat(str(raw["start_time"]).replace("Z", "+00:00"))
            )
            if not in_range(start):
                raise ValueError("start_time is outside 1970-01-01 .. 9999-12-30")
            attributes = raw.get("attributes") or {}
            if not isinstance(attributes, dict):
                raise TypeError("attributes is not an object")
            return BackendSpan(
                trace_id=str(context["trace_id"]),
                span_id=str(context["span_id"]),
                start_time_unix_nano=start,
                attributes=attributes,
                name=str(raw.get("name") or ""),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            shown = _shown(str(exc).encode("utf-8", "replace"), self._api_key)
            raise BackendProtocolError(f"{self.describe()}: unexpected span shape ({shown})") from None


def _error_detail(exc: urllib.error.HTTPError, api_key: str) -> str:
    """The start of an error answer's body as a message may show it (:func:`_shown`)."""
    try:
        raw = exc.read(_DETAIL_READ)
    except OSError:
        return ""
    text = _shown(raw, api_key, cut_short=len(raw) == _DETAIL_READ)
    return f": {text}" if text else ""


def _shown(raw: bytes, api_key: str, *, cut_short: bool = False) -> str:
    """Text a server sent, as a message may show it: the API key (a server may echo the request back; as
    it was sent, latin-1, or as UTF-8) and, when ``raw`` was ``cut_short``, any start of it at its end,
    redacted before the rest of what :func:`~otel_route_shadow.core.shown_text` does (credential-shaped
    strings redacted, cut to 200 characters, escaped)."""
    for form in {api_key.encode("latin-1"), api_key.encode("utf-8")} if api_key else ():
        raw = raw.replace(form, REDACTED.encode())
        if cut_short:  # the read stopped inside the body, maybe inside the key
            start = next((n for n in range(min(len(form), len(raw)), 3, -1) if raw.endswith(form[:n])), 0)
            raw = raw[: len(raw) - start] + (REDACTED.encode() if start else b"")
    return shown_text(raw, 200)
