"""``report`` and ``whatif`` over a fleet: several chains, a folder of them, or ``serve`` URLs, in one
report.

The command takes the fleet form when it is given more than one chain, a folder or a URL
(:func:`fleet_mode`); each log is then verified against its newest checkpoint before it is counted
(``analysis.fleet``), and a log that does not verify is named and excluded, which makes the exit
status 1 (:func:`excluded_logs`). See docs/reports.md, "Fleet".
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import threading

from otel_route_shadow.addresses import UrlError, parse_http_url
from otel_route_shadow.analysis import MIN_SPAWNS, Fetch, RemoteError, Report, WhatIfResult, is_remote
from otel_route_shadow.cli.checkpoints import add_key_options
from otel_route_shadow.cli.common import (
    CliError,
    check_output,
    count_argument,
    number_argument,
    witness_policy_arg,
)
from otel_route_shadow.witness import Connection, TransportError

__all__ = [
    "DEFAULT_REMOTE_TIMEOUT",
    "excluded_logs",
    "fleet_mode",
    "min_spawns_arg",
    "monitor_args",
    "remote_fetch",
    "whatif_fleet_args",
]

DEFAULT_REMOTE_TIMEOUT = 10.0
MAX_REMOTE_TIMEOUT = 3600.0
"""Seconds a remote log's request may take, from connecting to the last byte (``--remote-timeout``)."""


def fleet_mode(args: argparse.Namespace) -> bool:
    """True when ``args.chain`` names several chains or a folder; refuses ``--allow-unverified`` then
    (a fleet excludes every log that does not verify; it never counts one flagged)."""
    chains: list[str] = args.chain
    fleet = (
        len(chains) > 1
        or os.path.isdir(chains[0])
        or is_remote(chains[0])
        or getattr(args, "state", None) is not None
    )
    state = getattr(args, "state", None)
    if getattr(args, "rebuild", False) and state is None:
        raise CliError("--rebuild goes with --state FILE")
    if state is not None:
        check_output(state, "--state")
    if state is not None and args.store:
        raise CliError(
            "--state does not go with --store (the replayed policy usage is not kept in the state)"
        )
    if fleet and args.allow_unverified:
        raise CliError(
            "--allow-unverified takes one chain: a fleet report excludes every log that does not verify"
        )
    return fleet


def excluded_logs(result: Report | WhatIfResult) -> bool:
    """True when a fleet log was excluded from the figures (the exit status is then 1). Each warning
    of a monitor's state file is also said on stderr."""
    fleet = result.fleet
    if fleet is not None and fleet.followed is not None:
        for warning in fleet.followed.warnings:
            print(f"otel-route-shadow: warning: {warning}", file=sys.stderr)
    return fleet is not None and bool(fleet.excluded)


def whatif_fleet_args(parser: argparse.ArgumentParser) -> None:
    """``whatif``'s options for checking each fleet log's checkpoint and bounding each request to a
    remote log (``report`` has them already)."""
    remote_timeout_arg(parser)
    add_key_options(
        parser,
        "with several chains: verifier key (string or file) that must have signed each log's newest "
        "checkpoint; of a pruned chain, it authenticates the first record kept from the signed tree",
    )
    witness_policy_arg(
        parser,
        "with several chains: a C2SP tlog-policy; each log's newest checkpoint must meet its quorum",
    )


def min_spawns_arg(parser: argparse.ArgumentParser) -> None:
    """``report --min-spawns N``: the minimum sample of a positive readiness verdict."""
    parser.add_argument(
        "--min-spawns",
        type=count_argument(1),
        default=MIN_SPAWNS,
        metavar="N",
        help="a group with fewer stable spawns and no blocker reads 'not-enough-spawns', not ready "
        f"(default {MIN_SPAWNS})",
    )


def monitor_args(parser: argparse.ArgumentParser) -> None:
    """``report --state FILE [--rebuild]``: follow the fleet like a monitor; ``--remote-timeout``."""
    remote_timeout_arg(parser)
    parser.add_argument(
        "--state",
        metavar="FILE",
        help="monitor state: per log, the last checkpoint verified and the counts up to it; a rerun reads "
        "only each log's records after it (proven against the new checkpoint's root), then rewrites FILE",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="with --state: read every log in full and rewrite the state"
    )


def remote_timeout_arg(parser: argparse.ArgumentParser) -> None:
    """``report --remote-timeout S``: the bound on each request to a remote log."""
    parser.add_argument(
        "--remote-timeout",
        type=number_argument(MAX_REMOTE_TIMEOUT, positive=True),
        default=DEFAULT_REMOTE_TIMEOUT,
        metavar="SECONDS",
        help=f"each request to a remote log (a serve URL given as CHAIN) must complete within this "
        f"(default {DEFAULT_REMOTE_TIMEOUT:g}); a remote that does not is named and excluded",
    )


def remote_fetch(timeout: float) -> Fetch:
    """A bounded HTTP GET for remote logs: ``timeout`` seconds for each whole exchange, on kept-alive
    connections (``witness.Connection``, one request at a time each), kept per remote and reused: a
    log's bundles are read one after the other, and a new connection for each cost about as much as
    serving it (row 11d in docs/benchmarks.md). At most as many per remote as requests ran at once."""
    if not timeout > 0:
        raise CliError("--remote-timeout must be a positive number of seconds")
    idle: dict[tuple[str, int, bool], list[Connection]] = {}
    lock = threading.Lock()

    def get(host: str, port: int, https: bool, path: str, max_bytes: int) -> bytes:
        with lock:
            free = idle.get((host, port, https))
            connection = free.pop() if free else None
        if connection is None:
            connection = Connection(host, port, ssl.create_default_context() if https else None, timeout)
        answer = connection.request(
            "GET", path, None, timeout=timeout, max_bytes=max_bytes
        )  # closes on error
        with lock:
            idle.setdefault((host, port, https), []).append(connection)
        if answer.status != 200:
            raise RemoteError(f"HTTP {answer.status}", answer.status)
        return answer.body

    def fetch(url: str, max_bytes: int) -> bytes:
        try:
            target = parse_http_url(url)  # each remote log's URL was checked so up front (chain_paths)
        except UrlError as exc:
            raise RemoteError(str(exc)) from None  # never quoted: it may hold a credential
        try:
            return get(target.host, target.port, target.tls, target.path or "/", max_bytes)
        except TransportError as exc:
            raise RemoteError(f"{url}: {exc}") from None
        except RemoteError as exc:
            raise RemoteError(f"{url}: {exc}", exc.status) from None

    return fetch
