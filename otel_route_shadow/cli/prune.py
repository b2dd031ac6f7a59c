"""``otel-route-shadow prune CHAIN``: retention by the C2SP tlog-tiles pruning rules.

Raises the chain's minimum index to a segment boundary as ``--keep-records``, ``--keep-days`` or
``--min-index`` allow (none given: nothing is pruned; retention is off by default); whole closed segments
below it go to ``CHAIN.archive/`` (gzip unless ``--no-compress``) with a ``.proof`` each, or are deleted
with ``--delete``; ``CHAIN.tlog/pruned`` records what, when and by which command (``logstore.prune``).
Exit codes: ``exit_codes.COMMANDS["prune"]``.
"""

from __future__ import annotations

import argparse
import shlex
import time
from typing import Any

from otel_route_shadow.cli.checkpoints import add_key_options, read_log_keys
from otel_route_shadow.cli.common import (
    CliError,
    count_argument,
    input_file,
    number_argument,
    witness_policy_arg,
)
from otel_route_shadow.cli.exit_codes import (
    EXIT_BUSY,
    EXIT_FINDING,
    EXIT_INSUFFICIENT,
    EXIT_OK,
    EXIT_USAGE,
    epilog,
)
from otel_route_shadow.cli.witnessed import log_keys, read_witness_policy
from otel_route_shadow.logstore import (
    CHECKPOINTS_FILE,
    MAX_COMMAND_CHARS,
    PRUNE_LOCK_WAIT_S,
    LogStore,
    PruneOptions,
    PruneRefused,
    PruneResult,
    Retention,
    prune,
    served_min_index,
)
from otel_route_shadow.tlog import KeyWindow

__all__ = ["register"]

MAX_WAIT_S = 3600.0
MAX_KEEP_DAYS = 1_000_000.0

_EXIT_OF = {
    "busy": EXIT_BUSY,
    "unwitnessed": EXIT_INSUFFICIENT,
    "finding": EXIT_FINDING,
    "unusable": EXIT_USAGE,
}


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "prune",
        help="prune a segmented chain's oldest segments (retention; archives with proofs)",
        description=(
            "Raise the chain's minimum index to a segment boundary: whole closed segments below it are "
            "archived to CHAIN.archive/ with a proof of their place in the signed tree (or deleted with "
            "--delete). Refuses records that no witnessed checkpoint covers unless --force."
        ),
        epilog=epilog("prune"),
    )
    parser.add_argument("chain", metavar="CHAIN", help="the chain's live file")
    parser.add_argument(
        "--keep-records", type=count_argument(0), metavar="K", help="keep at least the newest K records"
    )
    parser.add_argument(
        "--keep-days",
        type=number_argument(MAX_KEEP_DAYS),
        metavar="D",
        help="keep every segment closed less than D days ago",
    )
    parser.add_argument(
        "--min-index",
        type=count_argument(0),
        metavar="M",
        help="prune below M (rounded down to a segment boundary)",
    )
    parser.add_argument(
        "--no-compress", action="store_true", help="archive segments as they are, not gzipped"
    )
    parser.add_argument(
        "--delete", action="store_true", help="delete the pruned segments instead of archiving them"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="prune records no witnessed checkpoint covers (archived without a proof)",
    )
    add_key_options(parser, "the log's verifier key (string or file)")
    witness_policy_arg(
        parser,
        "a C2SP tlog-policy file: only records a checkpoint its quorum attests covers are pruned",
    )
    parser.add_argument(
        "--wait",
        type=number_argument(MAX_WAIT_S),
        default=PRUNE_LOCK_WAIT_S,
        metavar="SECONDS",
        help=f"wait at most this long for each lock: another prune's, the chain's (default {PRUNE_LOCK_WAIT_S:g})",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    path: str = input_file(args.chain)
    if args.delete and args.no_compress:
        raise CliError("--no-compress goes with archives, not with --delete")
    policy = read_witness_policy(args.witness_policy) if args.witness_policy else None
    keys = (
        log_keys(policy, read_log_keys(args.key, args.keys), args.witness_policy)
        if policy
        else read_log_keys(args.key, args.keys)
    )
    if not keys and not args.force:
        raise CliError(
            "give --key or --witness-policy: they authenticate the checkpoint that must cover what is pruned"
        )
    retention = Retention(args.keep_records, args.keep_days, args.min_index)
    if retention == Retention():
        raise CliError("no retention given (--keep-records, --keep-days or --min-index): nothing to prune")
    options = PruneOptions(
        verifiers=[KeyWindow.parse(key) for key in keys],
        policy=policy,
        compress=not args.no_compress,
        delete=args.delete,
        force=args.force,
        now=int(time.time()),
        command=_command_line(args),
        wait=args.wait,
    )
    try:
        result = prune(path, retention, options)
    except PruneRefused as exc:
        raise CliError(str(exc), exit_code=_EXIT_OF[exc.kind]) from None
    except OSError as exc:  # a full disk, a folder that cannot be written: the commit is one rename
        where = f"{exc.filename}: " if exc.filename else ""
        raise CliError(
            f"{path}: {where}{exc.strerror or exc}: nothing pruned past what pruned records; the next prune "
            "finishes or undoes what was written"
        ) from None
    for line in _lines(path, result, options):
        print(line)
    return EXIT_OK


def _command_line(args: argparse.Namespace) -> str:
    """The prune command as given (only paths, numbers and flags: a verifier key is public), cut short
    past what a ``pruned`` file records."""
    words = ["otel-route-shadow", "prune", args.chain]
    for option in ("keep_records", "keep_days", "min_index", "witness_policy", "wait"):
        value = getattr(args, option)
        if value is not None and not (option == "wait" and value == PRUNE_LOCK_WAIT_S):
            words += [
                "--" + option.replace("_", "-"),
                f"{value:g}" if isinstance(value, float) else str(value),
            ]
    words += [
        word
        for flag, word in (
            (args.no_compress, "--no-compress"),
            (args.delete, "--delete"),
            (args.force, "--force"),
        )
        if flag
    ]
    for key in args.key:
        words += ["--key", key]
    for key_set in args.keys:
        words += ["--keys", key_set]
    command = shlex.join(words)
    return command if len(command) <= MAX_COMMAND_CHARS else command[: MAX_COMMAND_CHARS - 4] + " ..."


def _served(first_kept: int) -> str:
    """What ``serve`` publishes for this minimum index, when it differs (rounded up to an entry bundle, at
    most the size of the checkpoint it serves)."""
    served = served_min_index(first_kept, 1 << 62)
    if served == first_kept:
        return ""
    return f" (serve publishes {served}, or the log's size while it is smaller: its entry bundles are whole)"


def _lines(path: str, result: PruneResult, options: PruneOptions) -> list[str]:
    lines = []
    if result.finished or result.undone:
        lines.append(
            f"{path}: an interrupted prune was settled ({result.finished} segment(s) removed, "
            f"{result.undone} archive file(s) undone)"
        )
    if not result.pruned:
        lines.append(f"{path}: nothing to prune; minimum index {result.after}")
        return lines + _notes_lines(path, result)
    where = (
        "deleted"
        if options.delete
        else f"archived to {path}.archive/" + ("" if options.compress else " (not compressed)")
    )
    lines.append(
        f"{path}: pruned records [{result.before}, {result.after}) in {len(result.pruned)} segment(s), {where}; "
        f"minimum index {result.after}" + _served(result.after)
    )
    if result.proven_by is not None and not options.delete:
        lines.append(f"{path}: each archive proven against the checkpoint of {result.proven_by} records")
    if result.unproven:
        lines.append(
            f"{path}: forced: no checkpoint covers {', '.join(result.unproven)}: archived without a proof"
        )
    return lines + _notes_lines(path, result)


def _notes_lines(path: str, result: PruneResult) -> list[str]:
    """What step 5 did with the old lines of ``checkpoints``."""
    notes, lines = result.notes, []
    if notes.lines:
        where = "deleted" if notes.archive is None else f"moved to {notes.archive}"
        lines.append(
            f"{path}: {notes.lines} line(s) of {LogStore(path).file(CHECKPOINTS_FILE)} before its first checkpoint of "
            f"{result.after} records or more {where}"
        )
    if notes.left is not None:
        lines.append(f"{path}: the old lines of checkpoints are left for the next prune: {notes.left}")
    return lines
