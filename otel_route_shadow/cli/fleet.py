"""``report`` and ``whatif`` over a fleet: several chains, or a folder of them, in one report.

The command takes the fleet form when it is given more than one chain or a folder
(:func:`fleet_mode`); each log is then verified against its newest checkpoint before it is counted
(``analysis.fleet``), and a log that does not verify is named and excluded, which makes the exit
status 1 (:func:`excluded_logs`). See docs/reports.md, "Fleet".
"""

from __future__ import annotations

import argparse
import os
import sys

from otel_route_shadow.analysis import MIN_SPAWNS, Report, WhatIfResult
from otel_route_shadow.cli.common import CliError, check_output

__all__ = ["excluded_logs", "fleet_mode", "min_spawns_arg", "monitor_args", "whatif_fleet_args"]


def fleet_mode(args: argparse.Namespace) -> bool:
    """True when ``args.chain`` names several chains or a folder; refuses ``--allow-unverified`` then
    (a fleet excludes every log that does not verify; it never counts one flagged)."""
    chains: list[str] = args.chain
    fleet = len(chains) > 1 or os.path.isdir(chains[0]) or getattr(args, "state", None) is not None
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
    """``whatif``'s options for checking each fleet log's checkpoint (``report`` has them already)."""
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="with several chains: verifier key (string or file) that must have signed each log's newest "
        "checkpoint",
    )
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="with several chains: a C2SP tlog-policy; each log's newest checkpoint must meet its quorum",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def min_spawns_arg(parser: argparse.ArgumentParser) -> None:
    """``report --min-spawns N``: the minimum sample of a positive readiness verdict."""
    parser.add_argument(
        "--min-spawns",
        type=_positive,
        default=MIN_SPAWNS,
        metavar="N",
        help="a group with fewer stable spawns and no blocker reads 'not-enough-spawns', not ready "
        f"(default {MIN_SPAWNS})",
    )


def monitor_args(parser: argparse.ArgumentParser) -> None:
    """``report --state FILE [--rebuild]``: follow the fleet like a monitor."""
    parser.add_argument(
        "--state",
        metavar="FILE",
        help="monitor state: per log, the last checkpoint verified and the counts up to it; a rerun reads "
        "only each log's records after it (proven against the new checkpoint's root), then rewrites FILE",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="with --state: read every log in full and rewrite the state"
    )
