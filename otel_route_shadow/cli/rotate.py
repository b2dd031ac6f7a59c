"""``otel-route-shadow rotate CHAIN [--key KEY]``: cut the chain now (docs/chain-format.md section 14.3).

The live file ``CHAIN`` is closed as ``CHAIN.segments/<first seq>.jsonl`` and a new live file starts
with the anchor record, under the chain's lock, exactly as the plugin's background cut does. With
``--key`` (the log's signing key file, its name the log's origin) the anchor carries the checkpoint of
the cut's size, signed now when none is; a chain whose log is signed must be given its key. Without a
log the anchor's ``checkpoint`` is null. Another process holding the chain's lock past ``--timeout``
is exit code 7, nothing changed.
"""

from __future__ import annotations

import argparse
from typing import Any

from otel_route_shadow.chain import ChainError, ChainLockTimeout, CutRefused, cut_chain
from otel_route_shadow.cli.common import CliError, input_file, number_argument
from otel_route_shadow.cli.exit_codes import EXIT_BUSY, EXIT_FINDING, EXIT_OK, epilog
from otel_route_shadow.logstore import (
    Checkpointer,
    KeyFileError,
    LogStore,
    cut_signed,
    read_signing_keys,
    signed_checkpoint_from_note,
)
from otel_route_shadow.tlog import AuthenticationError, Signer

__all__ = ["register"]

DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 3600.0


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "rotate",
        help="cut the chain now: close its live file as a segment, start the next with an anchor",
        description=(
            "Close the live file CHAIN as CHAIN.segments/<first seq>.jsonl and start a new live file whose "
            "first record anchors it (its name, last seq and record hash, SHA-256 and size, and the "
            "checkpoint of its size). Writers running meanwhile wait for the chain's lock and go on in "
            "the new file."
        ),
        epilog=epilog("rotate"),
    )
    parser.add_argument("chain", metavar="CHAIN", help="the chain's live file")
    parser.add_argument(
        "--key",
        metavar="KEY",
        help="the log's signing key file (otel-route-shadow key generate): the anchor carries a checkpoint",
    )
    parser.add_argument(
        "--timeout",
        type=number_argument(MAX_TIMEOUT_S),
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=(
            "the longest wait for another process holding the chain's lock, and then for one checkpointing "
            f"(default {DEFAULT_TIMEOUT_S:g})"
        ),
    )
    parser.set_defaults(handler=_rotate)


def _rotate(args: argparse.Namespace) -> int:
    input_file(args.chain)  # a chain that is not there, or not a file, is refused before any lock or key
    signers = _signers(args.key, args.chain)
    try:
        if not signers:
            cut = cut_chain(args.chain, sign=None, timeout=args.timeout)
        else:
            checkpointer = Checkpointer(args.chain, signers[0].name, signers, retries=False)
            cut = cut_signed(checkpointer, args.timeout, args.timeout, catch_up=None, check_live=True)
    except FileNotFoundError:
        raise CliError(f"{args.chain}: no such chain") from None
    except ChainLockTimeout:
        print(f"{args.chain}: another process held the chain's lock for {args.timeout:g} s; nothing changed")
        return EXIT_BUSY
    except CutRefused as exc:
        print(f"not cut: {exc}")
        return EXIT_FINDING
    except (ChainError, OSError) as exc:
        raise CliError(f"{args.chain}: {exc}") from None
    if cut is None:
        print(f"{args.chain}: nothing to cut (no record after the live file's anchor)")
        return EXIT_OK
    signed = "no checkpoint (the chain has no log)" if cut.checkpoint is None else "its checkpoint"
    print(
        f"closed {cut.segment}: records {cut.first_seq}..{cut.end - 1}, {cut.bytes} bytes, sha256 {cut.sha256}"
    )
    print(f"{args.chain} starts with its anchor (seq {cut.end}) and {signed}")
    return EXIT_OK


def _signers(key: str | None, chain: str) -> tuple[Signer, ...]:
    """The signing key; refused when it is not the log's (named after another origin), or when the log
    is signed and no key was given."""
    published = _published_origin(chain)
    if key is None:
        if published is not None:
            raise CliError(f"{chain}: its log is signed ({published}): give its signing key with --key")
        return ()
    try:
        signers = read_signing_keys(key)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None
    if published is not None and published != signers[0].name:
        raise CliError(f"{key}: the key is named {signers[0].name!r}, the log's checkpoints {published!r}")
    return signers


def _published_origin(chain: str) -> str | None:
    """The origin of the chain's published checkpoint when it is signed, else None."""
    try:
        note = LogStore(chain).checkpoint_file().decode("utf-8")
        published = signed_checkpoint_from_note(note) if note else None
    except (OSError, ValueError, AuthenticationError):
        return None
    return published.origin if published is not None and published.signed else None
