"""Key files: a signer key written once with mode 0600, read back by the plugin.

The file holds the Go-style signer string (``PRIVATE+KEY+...``) and a final LF. It is created with
``O_CREAT | O_EXCL`` (never overwriting a key) and mode 0600. Errors name the path and the problem,
never the file's content.
"""

from __future__ import annotations

import os

from otel_route_shadow.tlog.note import NoteError, Signer

__all__ = ["KeyFileError", "generate_key_file", "read_signer_file"]

_MAX_KEY_FILE = 4096


class KeyFileError(ValueError):
    """A key file that cannot be written or read as a signer key. The message never holds key bytes."""


def generate_key_file(name: str, path: str) -> Signer:
    """Create a new Ed25519 signer called ``name`` and write it to a new file at ``path`` (mode 0600)."""
    try:
        signer = Signer.generate(name)
    except NoteError as exc:
        raise KeyFileError(str(exc)) from None
    data = (signer.secret_string() + "\n").encode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        raise KeyFileError(f"{path}: already exists (a key file is never overwritten)") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create: {exc.strerror or type(exc).__name__}") from None
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return signer


def read_signer_file(path: str) -> Signer:
    """Read a signer key file; ``KeyFileError`` names the path and the problem only."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_KEY_FILE + 1)
    except OSError as exc:
        raise KeyFileError(
            f"{path}: cannot read the signing key: {exc.strerror or type(exc).__name__}"
        ) from None
    if len(data) > _MAX_KEY_FILE:
        raise KeyFileError(f"{path}: too large for a signing key file")
    try:
        return Signer.parse(data.decode("ascii"))
    except (NoteError, UnicodeDecodeError, ValueError) as exc:
        reason = str(exc) if isinstance(exc, NoteError) else "not an ASCII key string"
        raise KeyFileError(f"{path}: not a signing key: {reason}") from None
