"""Key files: a signer key written once with mode 0600, read back by the plugin; and witness trust
policy files (C2SP tlog-policy text, parsed by ``tlog.parse_witness_policy``).

A key file holds Go-style signer strings (``PRIVATE+KEY+...``), one a line, each ending in LF:
``key generate`` writes one. During a key rotation the operator appends the new key (the same name,
the log's origin) and the writer signs every checkpoint with each key of the file, then removes the
old line (docs/operating.md, "Rotating the log's key"). A file is written durably with mode 0600 and
never replaces an existing file (``files.write_atomic(exclusive=True)``); it is read bounded, a FIFO
or any other non-regular file is refused without blocking, and, as ssh does with a private key, a file
its group or others may read is refused (``files.read_regular(private=True)``). Errors name the path,
the line number and the problem, never the file's content.
"""

from __future__ import annotations

import os
from typing import Final

from otel_route_shadow.core import redact_text
from otel_route_shadow.files import FileRefused, read_regular, write_atomic
from otel_route_shadow.tlog import (
    MAX_POLICY_BYTES,
    NoteError,
    Signer,
    WitnessPolicy,
    WitnessPolicyError,
    parse_witness_policy,
)

__all__ = ["KeyFileError", "generate_key_file", "read_signing_keys", "read_witness_policy_file"]

_MAX_KEY_FILE = 4096
MAX_SIGNING_KEYS = 4
"""The most keys one key file holds (a rotation needs two)."""


class KeyFileError(ValueError):
    """A key file that cannot be written or read as a signer key. The message never holds key bytes."""


def generate_key_file(name: str, path: str) -> Signer:
    """Create a new Ed25519 signer called ``name`` and write it to a new file at ``path`` (mode 0600).

    The name is the log's origin, so it must read as one: a schema-less URL (C2SP tlog-checkpoint)
    whose ``/``-separated parts are neither empty nor ``.`` or ``..`` and whose first part starts with
    a letter or a digit (``.``, ``..`` and ``-`` are refused)."""
    _check_origin(name)
    try:
        signer = Signer.generate(name)
    except NoteError as exc:
        raise KeyFileError(str(exc)) from None
    data = (signer.secret_string() + "\n").encode("ascii")
    try:
        write_atomic(path, data, mode=0o600, exclusive=True)
    except FileExistsError:
        raise KeyFileError(f"{path}: already exists (a key file is never overwritten)") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create: {exc.strerror or type(exc).__name__}") from None
    return signer


_CREDENTIAL_NAME: Final = (
    "the key's name, the log's origin published in every checkpoint, looks like a credential (spans and "
    "records would show it redacted)"
)


def _check_origin(name: str) -> None:
    parts = name.split("/")
    if redact_text(name)[1]:
        raise KeyFileError(_CREDENTIAL_NAME)
    if any(part in ("", ".", "..") for part in parts) or not name[:1].isalnum():
        raise KeyFileError(
            "a key name is the log's origin, a schema-less URL such as example.com/route-shadow/host-a: "
            "it starts with a letter or a digit, and no part between slashes is empty, '.' or '..'"
        )


def read_signing_keys(path: str) -> tuple[Signer, ...]:
    """The signer keys of a key file (one at least, all of one name, none twice, a name that does not look
    like a credential); ``KeyFileError`` names the path, the line and the problem only."""
    try:
        data = read_regular(path, _MAX_KEY_FILE, private=True)
    except FileRefused as exc:
        raise KeyFileError(f"{path}: cannot read the signing key: {exc.problem}") from None
    except OSError as exc:
        raise KeyFileError(
            f"{path}: cannot read the signing key: {exc.strerror or type(exc).__name__}"
        ) from None
    try:
        lines = data.decode("ascii").strip("\n").split("\n")
    except UnicodeDecodeError:
        raise KeyFileError(f"{path}: not a signing key: not an ASCII key string") from None
    if len(lines) > MAX_SIGNING_KEYS:
        raise KeyFileError(f"{path}: more than {MAX_SIGNING_KEYS} signing keys")
    signers = tuple(_signer(path, number, line) for number, line in enumerate(lines, 1))
    if len({s.name for s in signers}) > 1:
        raise KeyFileError(
            f"{path}: the keys have different names (a log's keys are all named for its origin)"
        )
    if len({s.key_id for s in signers}) < len(signers):
        raise KeyFileError(f"{path}: a key appears twice")
    if redact_text(signers[0].name)[1]:
        raise KeyFileError(f"{path}: {_CREDENTIAL_NAME}")
    return signers


def _signer(path: str, number: int, line: str) -> Signer:
    where = path if number == 1 else f"{path} line {number}"
    try:
        return Signer.parse(line)
    except (NoteError, ValueError) as exc:
        reason = str(exc) if isinstance(exc, NoteError) else "not a key string"
        raise KeyFileError(f"{where}: not a signing key: {reason}") from None


def read_witness_policy_file(path: str | os.PathLike[str]) -> WitnessPolicy:
    """Read and parse the policy file ``path`` (bounded; a FIFO or any other non-regular file is refused
    without blocking). Every problem is one :class:`WitnessPolicyError` (the caller names the path)."""
    try:
        data = read_regular(path, MAX_POLICY_BYTES + 1)
    except FileNotFoundError:
        raise WitnessPolicyError(None, "no such file") from None
    except FileRefused as exc:
        raise WitnessPolicyError(None, exc.problem) from None
    except OSError as exc:
        raise WitnessPolicyError(None, f"cannot read: {exc.strerror or type(exc).__name__}") from None
    return parse_witness_policy(data)
