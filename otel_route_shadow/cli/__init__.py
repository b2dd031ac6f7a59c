"""The ``otel-route-shadow`` command line.

Each subcommand lives in its own module with a ``register(subparsers)`` function. The exit codes are
stated once, in :mod:`otel_route_shadow.cli.exit_codes` (each command's ``--help`` ends with its own);
unusable input is one line on stderr naming the file and the problem, never a traceback. What the
command line prints when it refuses is scrubbed of credential-shaped strings (``core.redact_text``):
argparse quotes a value it refuses, and a value may be a key pasted in the wrong place.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from otel_route_shadow.cli import (
    acknowledge,
    audit,
    demo,
    explain,
    key,
    policy,
    prove,
    prune,
    report,
    rotate,
    serve,
    verify,
)
from otel_route_shadow.cli.common import CliError, harden_streams, name_chains, prunes_held_off_for
from otel_route_shadow.cli.exit_codes import EXIT_INTERRUPTED, EXIT_OK
from otel_route_shadow.core import redact_text
from otel_route_shadow.version import __version__

__all__ = ["build_parser", "main"]

_MODULES = (explain, policy, verify, demo, audit, report, key, prove, serve, acknowledge, rotate, prune)


class _Parser(argparse.ArgumentParser):
    """argparse's parser (each command's too), its refusal scrubbed of credentials. An option is taken
    only as written whole: ``prove --key K`` is refused, never read as ``--keys K`` (a file)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        super().error(redact_text(message)[0])


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="otel-route-shadow",
        description="Shadow LLM-agent routing: explain decisions, keep policy snapshots, verify the chain.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _MODULES:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    harden_streams()
    parser = build_parser()
    args = parser.parse_args(argv)
    name_chains(args)
    try:
        with prunes_held_off_for(args):
            code: int = args.handler(args)
    except CliError as exc:
        print(f"otel-route-shadow: {redact_text(str(exc))[0]}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("otel-route-shadow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    return code
