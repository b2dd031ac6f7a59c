"""Strict JSON reading for files that decide routes.

``json.loads`` silently keeps the last of two duplicate keys and accepts NaN; in a policy file either
is a way to smuggle a value past review, so both are errors here.
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Literal

__all__ = ["InputFileError", "StrictJSONError", "loads_strict", "read_text_bounded", "require_regular_file"]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")

StrictJSONKind = Literal["syntax", "duplicate-key", "constant", "other"]


class StrictJSONError(ValueError):
    """The text is not strict JSON; the message says where and why, never echoing values.

    ``kind`` lets a caller that must not echo even a key name (the snapshot store, whose problems
    reach logs and spans) describe the failure without the message.
    """

    def __init__(self, message: str, kind: StrictJSONKind = "other") -> None:
        super().__init__(message)
        self.kind: StrictJSONKind = kind


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJSONError(f"duplicate key {key[:64]!r}", "duplicate-key")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise StrictJSONError(f"non-standard JSON constant {name}", "constant")


def _lone_surrogate(value: Any) -> bool:
    """True when a string anywhere in ``value`` (keys included) holds a lone surrogate (no valid
    Unicode text does: a pair of ``\\u`` escapes decodes to one character)."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


def loads_strict(text: str | bytes) -> Any:
    """Parse strict JSON: no duplicate keys, no NaN/Infinity, no lone surrogate escapes."""
    value = _loads(text)
    escaped = text if isinstance(text, str) else text.decode("utf-8", "replace")
    if _SURROGATE_ESCAPE.search(escaped) and _lone_surrogate(value):
        raise StrictJSONError("invalid JSON: a lone surrogate escape (not valid Unicode text)", "syntax")
    return value


def _loads(text: str | bytes) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_no_constants)
    except StrictJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", "syntax"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise StrictJSONError(f"invalid JSON: {type(exc).__name__}") from None


class InputFileError(ValueError):
    """A file cannot be read as text at all; the message is one line naming the file."""


def require_regular_file(path: str | os.PathLike[str]) -> None:
    """Refuse what is not a regular file (``/dev/zero``, a FIFO, a directory) before it is read.

    Opened without blocking (a FIFO with no writer would hang an ``open``) and checked with ``fstat``.
    Raises :class:`InputFileError` (one line naming the file); ``FileNotFoundError`` is said as such.
    """
    source = os.fspath(path)
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputFileError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{source}: is a directory") from None
    except OSError as exc:
        raise InputFileError(f"{source}: cannot read: {exc.strerror or type(exc).__name__}") from None
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if stat.S_ISDIR(mode):
        raise InputFileError(f"{source}: is a directory")
    if not stat.S_ISREG(mode):
        raise InputFileError(f"{source}: not a regular file ({_kind(mode)}); refusing to read it")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def read_text_bounded(path: str | os.PathLike[str], max_bytes: int) -> str:
    """Read a UTF-8 regular file of at most ``max_bytes``; an oversized file is refused before it is
    read, and so is anything that is not a regular file."""
    source = os.fspath(path)
    require_regular_file(source)
    try:
        with open(source, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > max_bytes:
                raise InputFileError(f"{source}: larger than {max_bytes} bytes")
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputFileError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise InputFileError(f"{source}: is a directory") from None
    except OSError as exc:
        raise InputFileError(f"{source}: cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > max_bytes:  # a file that grew, or one fstat cannot size (a FIFO)
        raise InputFileError(f"{source}: larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{source}: not UTF-8 (byte {exc.start})") from None
