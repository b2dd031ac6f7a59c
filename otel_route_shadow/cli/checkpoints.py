"""Shared command-line inputs for checkpoints: note files, verifier keys (``--key``), key-set files
(``--keys``: a rotated log's keys with the tree sizes each is valid for), authenticated checkpoints.

Every unusable input becomes a one-line ``CliError`` (exit 2) naming the file and the problem; a note
that does not authenticate (bad signature, unknown key, unsigned) is a finding (exit 1).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from otel_route_shadow.cli.common import CliError, read_text_file
from otel_route_shadow.cli.exit_codes import EXIT_FINDING
from otel_route_shadow.files import FileRefused, read_regular
from otel_route_shadow.logstore import (
    CHECKPOINT_FILE,
    CHECKPOINTS_FILE,
    MAX_NOTE_FILE,
    LogStore,
    NoteFile,
    read_note_file,
)
from otel_route_shadow.tlog import (
    MAX_KEY_SET_BYTES,
    AuthenticationError,
    Checkpoint,
    KeySetError,
    KeyWindow,
    Malformed,
    NoteError,
    Verifier,
    authenticate,
    parse_key_set,
)

__all__ = [
    "add_key_options",
    "authenticated_checkpoint",
    "read_log_keys",
    "read_notes",
    "read_published_note",
    "read_verifiers",
]

KEYS_HELP = (
    "the log's key set (a rotated key): one verifier key a line with the tree sizes it is valid for, "
    '`<vkey> <from_size> [<until_size>]` (docs/auditing.md, "Rotating keys")'
)

_MAX_KEY_FILE = 4096


def read_published_note(store: LogStore) -> str | None:
    """The note of the log's own ``checkpoint``, read the one way it is read (:meth:`LogStore.checkpoint_file`:
    bounded, no link followed); None when there is none, empty when it is."""
    path = store.file(CHECKPOINT_FILE)
    try:
        return store.checkpoint_file().decode("utf-8")
    except FileNotFoundError:
        return None
    except FileRefused as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or type(exc).__name__}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8") from None


def read_notes(path: str) -> list[str]:
    """The notes of a checkpoint file the user names (a chain's ``checkpoints`` file or one note)."""
    return _notes(path, lambda: read_note_file(path, newest=True))


def read_log_notes(store: LogStore) -> list[str]:
    """The notes of the log's own ``checkpoints`` file, read through its store (:meth:`LogStore.notes`)."""
    return _notes(store.file(CHECKPOINTS_FILE), store.notes)


def _notes(path: str, read: Callable[[], NoteFile]) -> list[str]:
    try:
        found = read()
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
    if found.older_bytes and not found.notes:
        raise CliError(
            f"{path}: holds no checkpoint in its last {MAX_NOTE_FILE} bytes (the {found.older_bytes} bytes "
            "before them were not read)"
        )
    if found.older_bytes:
        print(
            f"otel-route-shadow: note: {path}: its first {found.older_bytes} bytes (the oldest checkpoints, "
            f"more than {MAX_NOTE_FILE} bytes before its end) were not read: they are not checked",
            file=sys.stderr,
        )
    return found.notes


def read_verifiers(values: list[str]) -> list[str]:
    """Verifier key strings (``--key``), each given as the string itself (``name+id+key``) or as a file
    holding one. A message never repeats a key given inline (it could be a signing key pasted by
    mistake); a path that is not a regular file (a FIFO, a device) is refused by name without blocking."""
    return [_verifier_key(value) for value in values]


def _verifier_key(value: str) -> str:
    if value.count("+") >= 2:
        text, where = value.strip(), "--key"
    else:
        text, where = _key_file_text(value), f"--key {value}"
    if text.startswith("PRIVATE+"):
        raise CliError(f"{where}: this is a signing key; give its verifier key (never share the signing key)")
    try:
        Verifier.parse(text)
    except NoteError as exc:
        raise CliError(f"{where}: not a verifier key (name+id+key): {exc}") from None
    return text


def add_key_options(parser: Any, key_help: str | None) -> None:
    """The ``--key VKEY`` option with ``key_help`` (none without it) and ``--keys FILE``, each repeatable,
    read together with :func:`read_log_keys`."""
    if key_help is not None:
        parser.add_argument("--key", action="append", default=[], metavar="VKEY", help=key_help)
    keys_help = KEYS_HELP if key_help is None else KEYS_HELP + "; beside or instead of --key"
    parser.add_argument("--keys", action="append", default=[], metavar="FILE", help=keys_help)


def read_log_keys(keys: list[str], key_sets: list[str]) -> list[str]:
    """The log keys of ``--key`` (:func:`read_verifiers`) and ``--keys`` files: key strings
    ``tlog.KeyWindow.parse`` reads, each key once; a key in a key-set file keeps its window (its bare
    ``--key`` is dropped)."""
    windows = [window for path in key_sets for window in _key_set(path)]
    windowed = {str(window.verifier) for window in windows}
    bare = [key for key in read_verifiers(keys) if key not in windowed]
    return [*dict.fromkeys(bare), *(str(window) for window in windows)]


def _key_set(path: str) -> tuple[KeyWindow, ...]:
    text = read_text_file(path, max_bytes=MAX_KEY_SET_BYTES)
    try:
        return parse_key_set(text.encode("utf-8"))
    except KeySetError as exc:
        raise CliError(f"--keys {path}: {exc}") from None


def _key_file_text(path: str) -> str:
    try:
        return read_regular(path, _MAX_KEY_FILE).decode("ascii").strip()
    except FileNotFoundError:
        raise CliError(f"--key {path}: no such file, and not a verifier key (name+id+key)") from None
    except FileRefused as exc:
        raise CliError(f"--key {exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"--key {path}: not a verifier key (not ASCII)") from None


def authenticated_checkpoint(note: str, keys: list[str], source: str) -> Checkpoint:
    """Open ``note`` with ``keys`` (key strings, see :func:`read_log_keys`); it must carry a valid
    signature by one of them valid for its size (``tlog.authenticate``)."""
    verifiers = [KeyWindow.parse(key) for key in keys]
    try:
        return authenticate(note, verifiers).checkpoint
    except Malformed as exc:
        raise CliError(f"{source}: {exc}") from None
    except AuthenticationError as exc:
        raise CliError(f"{source}: {exc.reason}: {exc}", exit_code=EXIT_FINDING) from None
