"""Shared command-line inputs for checkpoints: note files, verifier keys, authenticated checkpoints.

Every problem becomes a one-line ``CliError`` (exit 2) naming the file and the problem.
"""

from __future__ import annotations

import os

from otel_route_shadow.cli.common import CliError
from otel_route_shadow.tlog import (
    Checkpoint,
    CheckpointError,
    NoteError,
    Verifier,
    open_note,
    parse_checkpoint,
    read_checkpoint_file,
)

__all__ = ["authenticated_checkpoint", "read_notes", "read_verifiers"]

_MAX_KEY_FILE = 4096


def read_notes(path: str) -> list[str]:
    """The notes of a checkpoint file (a chain's ``checkpoints`` file or one note)."""
    try:
        return read_checkpoint_file(path)
    except FileNotFoundError:
        raise CliError(f"{path}: no such checkpoint file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a checkpoint file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or type(exc).__name__}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None


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
        with open(value, "rb") as handle:
            data = handle.read(_MAX_KEY_FILE + 1)
        text = data.decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        raise CliError(f"{value}: cannot read a verifier key from it") from None
    if text.startswith("PRIVATE+"):
        raise CliError(f"{value}: holds a signing key, not a verifier key")
    return text


def _label(value: str) -> str:
    return value if os.path.isfile(value) else "string"


def authenticated_checkpoint(note: str, keys: list[str], source: str) -> Checkpoint:
    """Open ``note`` with ``keys``; it must carry a valid signature by one of them."""
    verifiers = [Verifier.parse(key) for key in keys]
    try:
        opened = open_note(note, verifiers)
        checkpoint = parse_checkpoint(opened.text)
    except (NoteError, CheckpointError) as exc:
        raise CliError(f"{source}: {exc}") from None
    if not opened.verified_by:
        if opened.unknown:
            raise CliError(
                f"{source}: signed only by unknown keys ({', '.join(opened.unknown)})", exit_code=1
            )
        raise CliError(f"{source}: the checkpoint is not signed", exit_code=1)
    return checkpoint
