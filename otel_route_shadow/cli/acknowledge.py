"""``otel-route-shadow acknowledge CHAIN``: let the writer sign on after a refusal its operator explains.

The writer refuses to sign when the newest checkpoint in ``CHAIN.tlog/checkpoints`` does not verify with
its own key (``unverified-checkpoint``) or when no authenticated checkpoint is as large as a size signed
before (``rolled-back``: ``state`` or a witness shows it). An operator who knows why (a rotated key, a
restored backup, a log started over on purpose) runs this command: it copies the last line of
``refusals`` into ``acknowledged``, and the writer's next start signs on from what it can authenticate,
for that very refusal (same reason, origin and size) only. The refusals that say the chain itself no
longer holds what was signed (``truncated``, ``rewritten``, ``broken-link``, ``fork``) cannot be
acknowledged: restore the chain.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from otel_route_shadow.cli.common import CliError
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, epilog
from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore import ACKNOWLEDGEABLE, Acknowledgement, LogStore, acknowledge_last_refusal

__all__ = ["register"]


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "acknowledge",
        help="let the writer sign on after a refusal whose cause you know (docs/chain-format.md 13.6)",
        description=(
            "Acknowledge the writer's last refusal (CHAIN.tlog/refusals) when it is one of "
            + ", ".join(sorted(ACKNOWLEDGEABLE))
            + ": the writer then signs on from the checkpoints it can authenticate with its own key. "
            "Its witnesses still refuse a checkpoint inconsistent with what they cosigned."
        ),
        epilog=epilog("acknowledge"),
    )
    parser.add_argument("chain", metavar="CHAIN", help="the chain file whose writer refused")
    parser.set_defaults(handler=_acknowledge)


def _acknowledge(args: argparse.Namespace) -> int:
    directory = LogStore(args.chain)
    if not os.path.isdir(directory.path):  # a mistyped path is no "nothing to acknowledge"
        raise CliError(f"{directory.path}: no log folder (is {args.chain} a chain with checkpoints?)")
    try:
        found = acknowledge_last_refusal(directory)
    except FileRefused as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{directory.path}: cannot write: {exc.strerror or type(exc).__name__}") from None
    if found is None:
        print(f"{directory.path}: no refusal to acknowledge")
        return EXIT_FINDING
    if not isinstance(found, Acknowledgement):
        reason = str(found.get("reason"))[:40]
        raise CliError(
            f"{directory.path}: the last refusal ({reason!r}) cannot be acknowledged: only "
            f"{', '.join(sorted(ACKNOWLEDGEABLE))} can; the chain must be restored"
        )
    print(f"acknowledged: {found.reason} at size {found.tree_size} ({found.origin})")
    return EXIT_OK
