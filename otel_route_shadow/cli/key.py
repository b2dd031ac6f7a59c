"""``otel-route-shadow key generate --name ORIGIN [--out FILE]``: make a checkpoint signing key;
``otel-route-shadow key verifier KEYFILE``: print its verifier key again.

``generate`` writes the signer key to a new file (never overwriting one; mode 0600) and prints only the
verifier key, which auditors and witnesses use; ``verifier`` reads a key file as the plugin does
(``logstore.read_signing_keys``) and prints the verifier key of each of its keys. The signer key is
never printed. The key's name is the log's
origin: the plugin, given the key file, signs checkpoints whose origin is that name (C2SP
tlog-checkpoint asks the log's key to be named after its origin), and refuses the key when another
origin is configured.
"""

from __future__ import annotations

import argparse
from typing import Any

from otel_route_shadow.cli.common import CliError
from otel_route_shadow.cli.exit_codes import EXIT_OK, epilog
from otel_route_shadow.logstore import KeyFileError, generate_key_file, read_signing_keys

__all__ = ["register"]


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "key",
        help="make a key that signs the chain's checkpoints, or print its verifier key again",
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
    verifier = actions.add_parser(
        "verifier",
        help="print the verifier key of a signing key file again (never the signing key)",
        description=(
            "Print the verifier key <name>+<key id>+<public key> of each signing key in KEYFILE, one a line, "
            "as key generate printed it. KEYFILE is read as the plugin reads it: a regular file that only "
            "its owner may read, holding signing keys. The signing key itself is never printed."
        ),
        epilog=epilog("key verifier"),
    )
    verifier.add_argument("file", metavar="KEYFILE", help="the signing key file (key generate --out)")
    verifier.set_defaults(handler=_verifier)


def _generate(args: argparse.Namespace) -> int:
    name: str = args.name
    out: str = args.out or _default_file(name)
    try:
        signer = generate_key_file(name, out)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    print(signer.verifier())
    return EXIT_OK


def _verifier(args: argparse.Namespace) -> int:
    try:
        signers = read_signing_keys(args.file)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    for signer in signers:
        print(signer.verifier())
    return EXIT_OK


def _default_file(name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return f"{safe}.key"
