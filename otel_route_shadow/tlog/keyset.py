"""A log's key set: its verifier keys, each with the tree sizes it is valid for.

A log that rotates its signing key signs with the old and the new key during a transition (a signed
note may carry several signatures), then with the new key only. A verifier learns this from a key-set
file, one key a line::

    <verifier key> <from_size> [<until_size>]

The key is valid for checkpoints of sizes ``from_size <= n < until_size`` (no ``until_size``: from
``from_size`` on). Sizes are decimal without a sign or leading zeros, below 2**63; ``until_size`` is
larger than ``from_size``. Fields are separated by one space; a line that is empty or starts with
``#`` is skipped; a key appears on one line only. :func:`parse_key_set` is strict: a bad line is a
:class:`KeySetError` naming its line number and the problem, never the line itself (a signing key
pasted by mistake is never echoed). ``tlog.authenticate`` applies the windows (docs/auditing.md,
"Rotating keys").
"""

from __future__ import annotations

import dataclasses
from typing import Final

from otel_route_shadow.tlog.note import NoteError, Verifier

__all__ = ["MAX_KEY_SET_BYTES", "KeySetError", "KeyWindow", "LogKey", "parse_key_set"]

MAX_KEY_SET_BYTES: Final = 64 * 1024
"""The largest key-set file read (a key line is about 100 bytes)."""
_MAX_SIZE: Final = 2**63


class KeySetError(NoteError):
    """A key-set text that cannot be used; ``line`` is its 1-based line number (None: the whole text)."""

    def __init__(self, line: int | None, problem: str) -> None:
        super().__init__(problem if line is None else f"line {line}: {problem}")
        self.line = line
        self.problem = problem


@dataclasses.dataclass(frozen=True, slots=True)
class KeyWindow:
    """A verifier key and the checkpoint sizes it is valid for: ``from_size <= n < until_size``
    (``until_size`` None: no end). ``str`` gives the key-set line; :meth:`parse` reads one, or a bare
    verifier key (valid for every size)."""

    verifier: Verifier
    from_size: int = 0
    until_size: int | None = None

    def contains(self, size: int) -> bool:
        return self.from_size <= size and (self.until_size is None or size < self.until_size)

    def __str__(self) -> str:
        until = "" if self.until_size is None else f" {self.until_size}"
        return f"{self.verifier} {self.from_size}{until}"

    @classmethod
    def parse(cls, text: str) -> KeyWindow:
        """A key-set line or a bare verifier key; raises :class:`KeySetError` (``line`` None)."""
        fields = text.split(" ")
        if fields[0].startswith("PRIVATE+"):
            raise KeySetError(None, "a signing key: give its verifier key (never share the signing key)")
        if len(fields) > 3 or "" in fields:
            raise KeySetError(None, "expected <verifier key> <from_size> [<until_size>], one space apart")
        try:
            verifier = Verifier.parse(fields[0])
        except NoteError as exc:
            raise KeySetError(None, f"not a verifier key (name+id+key): {exc}") from None
        sizes = [_size(field) for field in fields[1:]]
        window = cls(verifier, *sizes)
        if window.until_size is not None and window.until_size <= window.from_size:
            raise KeySetError(None, "until_size must be larger than from_size")
        return window


LogKey = Verifier | KeyWindow
"""A log's verifier key, valid for every size (a ``Verifier``) or for its window (a ``KeyWindow``)."""


def _size(field: str) -> int:
    if not field.isascii() or not field.isdigit() or (len(field) > 1 and field[0] == "0"):
        raise KeySetError(None, "a size is a decimal number without sign or leading zeros")
    value = int(field)
    if value >= _MAX_SIZE:
        raise KeySetError(None, "a size must be below 2**63")
    return value


def parse_key_set(data: bytes) -> tuple[KeyWindow, ...]:
    """The key windows of a key-set file (see the module). Raises :class:`KeySetError`."""
    if len(data) > MAX_KEY_SET_BYTES:
        raise KeySetError(None, f"larger than {MAX_KEY_SET_BYTES} bytes")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KeySetError(None, "not ASCII text") from None
    if "\r" in text or "\t" in text:
        raise KeySetError(None, "holds a carriage return or a tab (one space between fields, LF lines)")
    windows: list[KeyWindow] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#"):
            continue
        if len(line.split(" ")) < 2 and not line.startswith("PRIVATE+"):
            raise KeySetError(number, "expected <verifier key> <from_size> [<until_size>], one space apart")
        try:
            window = KeyWindow.parse(line)
        except KeySetError as exc:
            raise KeySetError(number, exc.problem) from None
        key = str(window.verifier)
        if key in seen:
            raise KeySetError(number, f"the key of line {seen[key]} again (one line a key)")
        seen[key] = number
        windows.append(window)
    if not windows:
        raise KeySetError(None, "no key")
    return tuple(windows)
