"""A witness to push to: its name in the policy, its cosignature key, and its submission prefix URL.

The URL is ``http://`` or ``https://``, a host, an optional port and path; no user information (it would
be a credential sent in the clear and logged), no query, no fragment (``addresses.parse_http_url``, the
check of every URL the package requests). ``add-checkpoint`` is appended to the path.
"""

from __future__ import annotations

import dataclasses

from otel_route_shadow.addresses import UrlError, parse_http_url
from otel_route_shadow.tlog import CosignatureVerifier, WitnessPolicy

__all__ = ["WitnessConfigError", "WitnessEndpoint", "endpoints_from_policy"]


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
        try:
            target = parse_http_url(url)
        except UrlError as exc:
            raise WitnessConfigError(f"witness {name}: {exc}") from None
        return cls(name, verifier, url, target.host, target.port, target.path.rstrip("/"), target.tls)


def endpoints_from_policy(policy: WitnessPolicy) -> tuple[WitnessEndpoint, ...]:
    """An endpoint for each witness of ``policy`` that has a URL, in the policy's order."""
    return tuple(
        WitnessEndpoint.parse(w.name, w.verifier, w.url) for w in policy.witnesses if w.url is not None
    )
