"""Network addresses: whether a host is this machine's own (loopback), and the one check of an HTTP URL
the package requests.

Shell code shared by the server (``serve`` says when it listens beyond loopback), the backend client
(loopback traffic never goes through a proxy), the witnesses pushed to (``witness.endpoint``) and the
remote logs a fleet report reads (``analysis.fleet``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import urllib.parse

__all__ = ["MAX_URL", "HttpUrl", "UrlError", "is_loopback", "parse_http_url"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL = 2048
"""The longest URL accepted, in characters."""


def is_loopback(host: str | None) -> bool:
    """``localhost`` or a loopback IP address (``127.0.0.0/8``, ``::1``); False for any other name."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class UrlError(ValueError):
    """A URL that cannot be requested; the message names the problem and never quotes the URL (it may
    hold a credential)."""


@dataclasses.dataclass(frozen=True, slots=True)
class HttpUrl:
    """A checked URL split: ``host`` (without brackets), ``port``, ``path`` (as given, maybe empty),
    ``tls`` (``https://``)."""

    host: str
    port: int
    path: str
    tls: bool


def parse_http_url(url: str) -> HttpUrl:
    """``url`` checked and split: printable ASCII without spaces, at most :data:`MAX_URL` characters;
    ``http://`` or ``https://``; a host that is an IP address or a valid host name, an optional port in
    1-65535 and path; no user information (a credential, sent in the clear and echoed in every message
    and report that names the URL), no query, no fragment. :class:`UrlError` names the problem."""
    if len(url) > MAX_URL or not url.isascii() or not url.isprintable() or any(ch.isspace() for ch in url):
        raise UrlError("the URL is too long or holds spaces, control characters or non-ASCII characters")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # an unclosed "[", or a bracketed host that is no IPv6 address
        raise UrlError("the URL cannot be parsed (its host's brackets)") from None
    if parts.scheme not in _DEFAULT_PORTS:
        raise UrlError("the URL is not http:// or https://")
    if parts.username is not None or parts.password is not None:
        raise UrlError("the URL holds user information")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise UrlError("the URL holds a query or a fragment")
    try:
        port = _DEFAULT_PORTS[parts.scheme] if parts.port is None else parts.port
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise UrlError("the URL's port is not a number in 1-65535")
    if not parts.hostname:
        raise UrlError("the URL has no host")
    try:
        parts.hostname.encode("idna")  # what the name lookup does with it
    except UnicodeError:
        raise UrlError("the URL's host is not a valid host name (an empty label, or one too long)") from None
    return HttpUrl(parts.hostname, port, parts.path, parts.scheme == "https")
