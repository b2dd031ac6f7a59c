"""A witness to push to: its name in the policy, its cosignature key, and its submission prefix URL.

The URL is ``http://`` or ``https://``, a host, an optional port and path; no user information (it would
be a credential sent in the clear and logged), no query, no fragment. ``add-checkpoint`` is appended to
the path.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

from otel_route_shadow.tlog import CosignatureVerifier, Policy

__all__ = ["WitnessConfigError", "WitnessEndpoint", "endpoints_from_policy"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_URL = 2048


class WitnessConfigError(ValueError):
    """A witness URL that cannot be pushed to; the message names the witness and the problem."""


@dataclasses.dataclass(frozen=True, slots=True)
class WitnessEndpoint:
    """``name`` (the policy's witness name), ``verifier`` (its key), where to reach it."""

    name: str
    verifier: CosignatureVerifier
    url: str
    host: str
    port: int
    path: str
    tls: bool

    @classmethod
    def parse(cls, name: str, verifier: CosignatureVerifier, url: str) -> WitnessEndpoint:
        """Check ``url`` (the submission prefix) and split it; ``WitnessConfigError`` names the problem."""
        if len(url) > _MAX_URL or not url.isprintable() or any(ch.isspace() for ch in url):
            raise WitnessConfigError(
                f"witness {name}: the URL is too long or holds spaces or control characters"
            )
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS:
            raise WitnessConfigError(f"witness {name}: the URL is not http:// or https://")
        if parts.username is not None or parts.password is not None:
            raise WitnessConfigError(f"witness {name}: the URL holds user information")
        if parts.query or parts.fragment or url.endswith(("?", "#")):
            raise WitnessConfigError(f"witness {name}: the URL holds a query or a fragment")
        try:
            port = _DEFAULT_PORTS[parts.scheme] if parts.port is None else parts.port
        except ValueError:
            port = 0
        if not 1 <= port <= 65535:
            raise WitnessConfigError(f"witness {name}: the URL's port is not a number in 1-65535")
        if not parts.hostname:
            raise WitnessConfigError(f"witness {name}: the URL has no host")
        path = parts.path.rstrip("/")
        return cls(name, verifier, url, parts.hostname, port, path, parts.scheme == "https")


def endpoints_from_policy(policy: Policy) -> tuple[WitnessEndpoint, ...]:
    """An endpoint for each witness of ``policy`` that has a URL, in the policy's order."""
    return tuple(
        WitnessEndpoint.parse(w.name, w.verifier, w.url) for w in policy.witnesses if w.url is not None
    )
