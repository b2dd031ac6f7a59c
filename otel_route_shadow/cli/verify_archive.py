"""``otel-route-shadow verify ARCHIVE --key VKEY [--checkpoint NOTE]``: an archived segment checked
offline against its ``.proof``, with no other file (docs/chain-format.md section 14.6).

An archive is a path ending in ``.gz`` or one with a ``.proof`` beside it (``logstore.proof_path``). The
proof's own note must be signed by a ``--key``; a ``--checkpoint`` file, when given, must hold a note,
signed by a ``--key`` too, of the same tree (origin, size and root): the proof can only show the range in
the tree it was made for. Exit codes: those of ``verify``.
"""

from __future__ import annotations

import argparse
import json
import os

from otel_route_shadow.cli.checkpoints import read_log_keys, read_notes
from otel_route_shadow.cli.common import CliError
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK
from otel_route_shadow.logstore import ArchiveProblem, check_archive, proof_path
from otel_route_shadow.tlog import KeyWindow, Malformed, checkpoint_of

__all__ = ["is_archive", "verify_archive"]

_ARCHIVE_REFUSES = (
    ("--witness-policy", "witness_policy"),
    ("--live-segment", "live_segment"),
    ("--strict", "strict"),
)
"""Options of ``verify`` whose checks an archive's is not (the others that go with them are refused before)."""


def is_archive(path: str) -> bool:
    """Whether ``verify`` checks ``path`` as an archived segment."""
    return path.endswith(".gz") or os.path.lexists(proof_path(path))


def verify_archive(args: argparse.Namespace, path: str) -> int:
    keys = read_log_keys(args.key, args.keys)
    if not keys:
        raise CliError(
            f"{path}: an archive is checked against its proof's note: give the log's --key or --keys"
        )
    given = next((name for name, on in _ARCHIVE_REFUSES if getattr(args, on)), None)
    if given is not None:
        raise CliError(f"{path}: an archive is checked with --key and --checkpoint, not {given}")
    try:
        doc, read = check_archive(path, [KeyWindow.parse(k) for k in keys], _given_note(args))
    except ArchiveProblem as exc:
        if not exc.finding:
            raise CliError(str(exc)) from None
        _say(args, path, {"intact": False, "problem": str(exc)}, f"{path}: REFUSED: {exc}")
        return EXIT_FINDING
    checkpoint = checkpoint_of(doc.checkpoint)
    summary = {
        "intact": True,
        "origin": doc.origin,
        "first": doc.first,
        "end": doc.end,
        "tree_size": checkpoint.size,
        "sha256": read.sha256,
    }
    _say(
        args,
        path,
        summary,
        f"{path}: OK: records [{doc.first}, {doc.end}) parse, link, and are exactly leaves [{doc.first}, "
        f"{doc.end}) of the signed tree of {checkpoint.size} records of {doc.origin}",
    )
    return EXIT_OK


def _given_note(args: argparse.Namespace) -> str | None:
    """The note of ``--checkpoint`` (the last of the file, or its only one); None without it."""
    files: list[str] = args.checkpoint or []
    notes = [note for file in files for note in read_notes(file)]
    if not notes:
        return None
    try:
        checkpoint_of(notes[-1])
    except Malformed as exc:
        raise CliError(f"--checkpoint: {exc}") from None
    return notes[-1]


def _say(args: argparse.Namespace, path: str, summary: dict[str, object], line: str) -> None:
    print(json.dumps({"archive": path, **summary}, sort_keys=True) if args.json else line)
