"""``otel-route-shadow key generate --name ORIGIN [--out FILE]``: make a checkpoint signing key.

Writes the signer key to a new file (never overwriting one; mode 0600) and prints only the verifier
key, which auditors and witnesses use. The signer key is never printed. The key's name is the log's
origin: the plugin, given the key file, signs checkpoints whose origin is that name (C2SP
tlog-checkpoint asks the log's key to be named after its origin), and refuses the key when another
origin is configured.
"""

from __future__ import annotations

import argparse
from typing import Any

from otel_route_shadow.cli.common import CliError
from otel_route_shadow.cli.exit_codes import EXIT_OK, epilog
from otel_route_shadow.logstore import KeyFileError, generate_key_file

__all__ = ["register"]


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "key",
        help="make a key that signs the chain's checkpoints",
        description="Manage the Ed25519 keys that sign checkpoints (Go sumdb/note key strings).",
    )
    actions = parser.add_subparsers(dest="key_command", required=True, metavar="ACTION")
    generate = actions.add_parser(
        "generate",
        help="write a new signing key to a file (mode 0600) and print its verifier key",
        description=(
            "Write a new signer key to FILE (created, never overwritten, mode 0600) and print the "
            "verifier key <name>+<key id>+<public key> on stdout. Point OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY "
            "at the file: the key's name becomes the log's origin (leave OTEL_PYTHON_ROUTE_SHADOW_ORIGIN "
            "unset; another origin is refused and the checkpoints are written unsigned). Hand the verifier "
            "key to whoever checks the checkpoints and to the witnesses."
        ),
        epilog=epilog("key generate"),
    )
    generate.add_argument(
        "--name",
        required=True,
        metavar="ORIGIN",
        help="key name: the log's origin, never to change (e.g. example.com/route-shadow/host-a)",
    )
    generate.add_argument(
        "--out", default=None, metavar="FILE", help="key file to create (default: ./<name>.key)"
    )
    generate.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    name: str = args.name
    out: str = args.out or _default_file(name)
    try:
        signer = generate_key_file(name, out)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    print(signer.verifier())
    return EXIT_OK


def _default_file(name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return f"{safe}.key"
