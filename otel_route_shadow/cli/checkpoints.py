"""Shared command-line inputs for checkpoints: note files, verifier keys, authenticated checkpoints.

Every unusable input becomes a one-line ``CliError`` (exit 2) naming the file and the problem; a note
that does not authenticate (bad signature, unknown key, unsigned) is a finding (exit 1).
"""

from __future__ import annotations

import os
import sys

from otel_route_shadow.cli.common import EXIT_FINDING, CliError
from otel_route_shadow.files import FileRefused, read_regular
from otel_route_shadow.tlog import (
    AuthenticationError,
    Checkpoint,
    Malformed,
    NoteError,
    Verifier,
    authenticate,
    read_note_file,
)

__all__ = ["authenticated_checkpoint", "read_notes", "read_verifiers"]

_MAX_KEY_FILE = 4096


def read_notes(path: str) -> list[str]:
    """The notes of a checkpoint file (a chain's ``checkpoints`` file or one note)."""
    try:
        found = read_note_file(path)
    except FileNotFoundError:
        raise CliError(f"{path}: no such checkpoint file") from None
    except FileRefused as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or type(exc).__name__}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if found.skipped:
        lines = ", ".join(str(n) for n in found.skipped[:5]) + (" ..." if len(found.skipped) > 5 else "")
        if not found.notes:
            raise CliError(f"{path}: holds no checkpoint: line(s) {lines} not checkpoint entries")
        print(
            f"otel-route-shadow: note: {path}: line(s) {lines} not checkpoint entries (torn or foreign): skipped",
            file=sys.stderr,
        )
    return found.notes


def read_verifiers(values: list[str]) -> list[str]:
    """Verifier key strings, each given as the string itself or as a file holding it."""
    keys: list[str] = []
    for value in values:
        text = _key_text(value)
        try:
            Verifier.parse(text)
        except NoteError as exc:
            raise CliError(f"verifier key {_label(value)}: {exc}") from None
        keys.append(text)
    return keys


def _key_text(value: str) -> str:
    if "+" in value or not os.path.isfile(value):
        return value.strip()
    try:
        text = read_regular(value, _MAX_KEY_FILE).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        raise CliError(f"{value}: cannot read a verifier key from it") from None
    if text.startswith("PRIVATE+"):
        raise CliError(f"{value}: holds a signing key, not a verifier key")
    return text


def _label(value: str) -> str:
    return value if os.path.isfile(value) else "string"


def authenticated_checkpoint(note: str, keys: list[str], source: str) -> Checkpoint:
    """Open ``note`` with ``keys``; it must carry a valid signature by one of them (``tlog.authenticate``)."""
    verifiers = [Verifier.parse(key) for key in keys]
    try:
        return authenticate(note, verifiers).checkpoint
    except Malformed as exc:
        raise CliError(f"{source}: {exc}") from None
    except AuthenticationError as exc:
        raise CliError(f"{source}: {exc.reason}: {exc}", exit_code=EXIT_FINDING) from None
