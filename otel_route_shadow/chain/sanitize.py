"""Sanitizing a payload before it is hashed: validate, coerce, repair and redact it in one walk.

``docs/chain-format.md`` section 6 is the normative description. The walk is the only way a value
enters a record: :func:`otel_route_shadow.chain.record.encode_payload` runs it on every payload, and a
:class:`~otel_route_shadow.chain.record.PayloadTemplate` runs it once on the fixed part of a shape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_route_shadow.chain.canonical import MAX_SAFE_INTEGER
from otel_route_shadow.chain.errors import ChainPayloadError
from otel_route_shadow.core import (
    REDACTED,
    cannot_match,
    is_secret_key,
    json_pointer_token,
    redact_text,
    unique_key,
)

__all__ = [
    "MAX_PAYLOAD_DEPTH",
    "RULES",
    "RULE_CREDENTIAL",
    "RULE_INVALID_UNICODE",
    "RULE_TRUNCATED",
    "RedactionMark",
    "redact_string",
    "sanitize_payload",
]

MAX_PAYLOAD_DEPTH: Final = 32
"""Deepest nesting of objects and arrays inside a payload (the payload object itself is depth 1)."""

RULE_CREDENTIAL: Final = "credential"
"""Redaction mark: a credential-shaped substring was replaced by ``[REDACTED]``."""

RULE_INVALID_UNICODE: Final = "invalid-unicode"
"""Redaction mark: lone surrogates were replaced by U+FFFD."""

RULE_TRUNCATED: Final = "truncated"
"""Redaction mark: a string was cut to fit the record in a tlog-tiles entry (it ends with
``[TRUNCATED]``), or, at the path ``""``, the payload was replaced by a placeholder
(``docs/chain-format.md`` section 6)."""

RULES: Final = frozenset({RULE_CREDENTIAL, RULE_INVALID_UNICODE, RULE_TRUNCATED})

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_REMEMBERED_LENGTHS: Final = range(8, 65_537)
_CLEAN_LIMIT: Final = 4096
_CLEAN: dict[str, None] = {}
"""Strings of :data:`_REMEMBERED_LENGTHS` that :func:`redact_text` found clean (see :func:`redact_string`)."""


@dataclass(frozen=True, slots=True)
class RedactionMark:
    """One field of the payload that the writer changed before hashing, and why (never what)."""

    path: str
    rule: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "rule": self.rule}


def sanitize_payload(payload: Mapping[str, Any]) -> tuple[dict[str, Any], list[RedactionMark]]:
    """Return a plain-JSON copy of ``payload`` that the format can carry, and its redaction marks.

    Strings (object keys included) are scrubbed of credential-shaped substrings and of lone surrogates;
    a non-empty string under a key naming a credential is replaced whole.
    ``str``/``int`` subclasses (enum members) become plain values, tuples become arrays, mappings become
    objects. Anything else, floats above all, raises :class:`ChainPayloadError` naming the field.
    """
    if not isinstance(payload, Mapping):
        raise ChainPayloadError(f"payload must be a mapping, not {type(payload).__name__}")
    marks: list[RedactionMark] = []
    clean = _walk_mapping(payload, "", 1, marks)
    if len(marks) > 1:
        marks = sorted(set(marks), key=lambda mark: (mark.path, mark.rule))
    return clean, marks


def _walk_mapping(
    value: Mapping[Any, Any], path: str, depth: int, marks: list[RedactionMark]
) -> dict[str, Any]:
    if depth > MAX_PAYLOAD_DEPTH:
        raise ChainPayloadError(f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels at {path or '/'}")
    out: dict[str, Any] = {}
    suffixes: dict[str, int] = {}  # unique_key's memo for this mapping: one try per renamed key
    for raw_key, raw_item in value.items():
        key, redacted = _clean_key(raw_key, path, out, suffixes)
        item = raw_item
        if _is_secret_key(key) and isinstance(item, str) and item and item != REDACTED:
            item = REDACTED
            redacted = True
        if redacted:
            marks.append(RedactionMark(f"{path}/{json_pointer_token(key)}", RULE_CREDENTIAL))
        out[key] = _walk_value(item, _child(path, key), depth, marks)
    return out


def _clean_key(
    raw_key: Any, path: str, taken: Mapping[str, Any], suffixes: dict[str, int]
) -> tuple[str, bool]:
    """The key as written, and whether it was changed (scrubbed, or renamed apart from a twin). A key
    refused is never quoted: it may hold anything."""
    if not isinstance(raw_key, str):
        raise ChainPayloadError(
            f"object keys must be strings; a {type(raw_key).__name__} key at {path or '/'}"
        )
    key = str.__str__(raw_key)
    if not key.isascii():
        raise ChainPayloadError(f"object keys must be ASCII; a key at {path or '/'} is not")
    new_key, count = redact_string(key)
    if new_key in taken:
        # Only a scrubbed key can collide; keep both fields rather than let one overwrite the other.
        return unique_key(new_key, taken, suffixes), True
    return new_key, count > 0


def _walk_value(item: Any, path: str, depth: int, marks: list[RedactionMark]) -> Any:
    """``item`` (at ``path``, inside a container at ``depth``) as a plain value of the domain."""
    cls = item.__class__
    if cls is str:
        return _clean_str(item, path, marks)
    if cls is int:
        return _check_int(item, path)
    if cls is bool or item is None:
        return item
    if isinstance(item, Mapping):
        return _walk_mapping(item, path, depth + 1, marks)
    if isinstance(item, list | tuple):
        return _walk_array(item, path, depth + 1, marks)
    if cls is float:
        raise ChainPayloadError(
            f"float {item!r} at {path}: the chain holds no floats (RFC 8785 and a sorted-keys "
            "encoder would disagree on them); record a string or a scaled integer"
        )
    if isinstance(item, bool | int | str):  # an enum member: its plain value
        plain = (
            bool(item)
            if isinstance(item, bool)
            else int(item)
            if isinstance(item, int)
            else str.__str__(item)
        )
        return _walk_value(plain, path, depth, marks)
    raise ChainPayloadError(
        f"unsupported value of type {type(item).__name__} at {path}; allowed: str, int, bool, None, list, dict"
    )


def _check_int(item: int, path: str) -> int:
    if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
        return item
    raise ChainPayloadError(
        f"integer {item} at {path} is outside +-(2**53-1); encode 64-bit values such "
        "as nanosecond timestamps as decimal strings (as OTLP/JSON does)"
    )


def _walk_array(
    items: list[Any] | tuple[Any, ...], path: str, depth: int, marks: list[RedactionMark]
) -> list[Any]:
    if depth > MAX_PAYLOAD_DEPTH:
        raise ChainPayloadError(f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels at {path}")
    return [_walk_value(item, f"{path}/{index}", depth, marks) for index, item in enumerate(items)]


def _child(parent: str, token: str) -> str:
    return f"{parent}/{json_pointer_token(token)}"


def _clean_str(text: str, path: str, marks: list[RedactionMark]) -> str:
    new = text
    if not text.isascii() and _SURROGATE.search(text) is not None:
        new = _SURROGATE.sub("\ufffd", text)
        marks.append(RedactionMark(path, RULE_INVALID_UNICODE))
    new, count = redact_string(new)
    if count:
        marks.append(RedactionMark(path, RULE_CREDENTIAL))
    return new


def redact_string(text: str) -> tuple[str, int]:
    """:func:`redact_text`, skipping strings already seen clean.

    A writer appends the same strings over and over (the attribute names of every record, and each
    decision's ``route_shadow.context``), so strings found clean are remembered (at most
    ``_CLEAN_LIMIT`` of 8 bytes to 64 KiB; the set is emptied when full). Only clean strings are
    kept, so no string that held a credential outlives its payload here. What it saves is in
    ``docs/benchmarks.md`` ("Caches, windows and threads").
    """
    if cannot_match(text):
        return text, 0
    if text in _CLEAN:
        return text, 0
    new, count = redact_text(text)
    if count == 0 and len(text) in _REMEMBERED_LENGTHS:
        if len(_CLEAN) >= _CLEAN_LIMIT:
            _CLEAN.clear()
        _CLEAN[text] = None
    return new, count


_is_secret_key = functools.lru_cache(maxsize=1024)(is_secret_key)
"""``is_secret_key``, remembered: a writer sees the same few dozen attribute names on every record
(see ``docs/benchmarks.md``, "Caches, windows and threads")."""
