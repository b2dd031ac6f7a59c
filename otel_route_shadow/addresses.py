"""Network addresses: whether a host is this machine's own (loopback).

Shell code shared by the server (``serve`` says when it listens beyond loopback) and the backend client
(loopback traffic never goes through a proxy).
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


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
