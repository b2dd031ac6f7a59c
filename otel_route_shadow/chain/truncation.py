"""Keeping every record line within one tlog-tiles entry: oversize values cut, and marked.

A C2SP tlog-tiles entry bundle prefixes each entry with a big-endian uint16 length, so an entry (a
chain line without its LF) is at most 65,535 bytes. ``docs/chain-format.md`` section 6 says what a
writer does to a payload that would make a longer line, and this module does it:

1. **Strings cut.** The longest string values (never member names) are cut, all to one common
   length, the longest that makes the line fit: each keeps a prefix of whole characters and ends with
   ``[TRUNCATED]``, and the record's ``redactions`` names it with the rule ``truncated``. The kept
   prefix is scanned for credentials again (a prefix of a clean string can look like one).
2. **Placeholder.** When cutting every string is not enough (long member names, very many small
   values), the payload is replaced by ``{"kind": "record-truncated", ...}``: the size and SHA-256 of
   the canonical payload that was cut, and its ``kind``; the marks are the one ``{"path": "",
   "rule": "truncated"}``.

Verifiers do not re-run this: as with redaction, the marks are bound by the record hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, Final, NamedTuple

from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.sanitize import (
    RULE_CREDENTIAL,
    RULE_TRUNCATED,
    RedactionMark,
    redact_string,
)
from otel_route_shadow.core import json_pointer_token

__all__ = ["TRUNCATED_KIND", "TRUNCATED_SUFFIX", "cut_to_fit"]

TRUNCATED_SUFFIX: Final = "[TRUNCATED]"
"""What a cut string ends with."""

TRUNCATED_KIND: Final = "record-truncated"
"""``payload.kind`` of the placeholder that replaces a payload no cut of its strings could fit."""

_KIND_CHARS: Final = 64
"""The longest ``kind`` the placeholder repeats (a longer one is left out)."""

_ATTEMPTS: Final = 3
"""Plans tried before the placeholder: a kept prefix that needed redaction can come out longer."""

_SUFFIX_BYTES: Final = len(TRUNCATED_SUFFIX)


def cut_to_fit(
    payload: dict[str, Any], marks: list[RedactionMark], encoded: bytes, budget: int
) -> tuple[dict[str, Any], list[RedactionMark]]:
    """A payload and marks whose canonical forms together take at most ``budget`` bytes.

    ``payload`` is a sanitized payload, ``marks`` its redaction marks and ``encoded`` its canonical
    bytes. Returns them unchanged when they fit; otherwise cut strings (with their marks added), or
    the placeholder. ``payload`` is never modified.
    """
    if len(encoded) + len(_marks_bytes(marks)) <= budget:
        return payload, marks
    strings = list(_strings(payload, ""))
    target = budget
    for _ in range(_ATTEMPTS):
        size = len(encoded) + len(_marks_bytes(marks))
        cap = _common_length(strings, size - target)
        if cap is None:
            break
        cuts, added = _cuts(strings, cap)
        cut = _replace(payload, "", cuts)
        merged = sorted({*marks, *added}, key=lambda mark: (mark.path, mark.rule))
        over = len(canonical_bytes(cut)) + len(_marks_bytes(merged)) - budget
        if over <= 0:
            return cut, merged
        target -= over
    return _placeholder(payload, encoded), [RedactionMark("", RULE_TRUNCATED)]


def _marks_bytes(marks: list[RedactionMark]) -> bytes:
    return canonical_bytes([mark.to_dict() for mark in marks])


class _Text(NamedTuple):
    """A string value of the payload: where, what, its encoded length (quotes excluded), and the
    bytes a ``truncated`` mark for it adds to the marks (its comma included)."""

    path: str
    text: str
    length: int
    mark_cost: int


def _strings(value: Any, path: str) -> Iterator[_Text]:
    """Every string value of ``value``, in document order."""
    if value.__class__ is str:
        cost = len(canonical_bytes({"path": path, "rule": RULE_TRUNCATED})) + 1
        yield _Text(path, value, len(canonical_bytes(value)) - 2, cost)
    elif value.__class__ is dict:
        for key, item in value.items():
            yield from _strings(item, f"{path}/{json_pointer_token(key)}")
    elif value.__class__ is list:
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}/{index}")


def _saving(strings: list[_Text], cap: int) -> int:
    """Bytes saved by cutting every string that gains from it to at most ``cap`` encoded bytes."""
    return sum(max(0, text.length - cap - text.mark_cost) for text in strings)


def _common_length(strings: list[_Text], excess: int) -> int | None:
    """The longest common length (encoded bytes, suffix included) to cut strings to that saves at
    least ``excess`` bytes, or None when even cutting every string to its suffix does not."""
    if not strings or _saving(strings, _SUFFIX_BYTES) < excess:
        return None
    low, high = _SUFFIX_BYTES, max(text.length for text in strings)
    while low < high:
        middle = (low + high + 1) // 2
        if _saving(strings, middle) >= excess:
            low = middle
        else:
            high = middle - 1
    return low


def _cuts(strings: list[_Text], cap: int) -> tuple[dict[str, str], list[RedactionMark]]:
    """The cut strings by pointer, and the marks that say so."""
    cuts: dict[str, str] = {}
    marks: list[RedactionMark] = []
    for text in strings:
        if text.length - cap - text.mark_cost <= 0:
            continue
        kept, redacted = redact_string(_prefix(text.text, cap - _SUFFIX_BYTES))
        cuts[text.path] = kept + TRUNCATED_SUFFIX
        marks.append(RedactionMark(text.path, RULE_TRUNCATED))
        if redacted:
            marks.append(RedactionMark(text.path, RULE_CREDENTIAL))
    return cuts, marks


def _prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose canonical encoding (quotes excluded) takes at most
    ``limit`` bytes; whole characters, never half an escape."""
    low, high = 0, min(len(text), limit)  # every character takes at least one byte
    while low < high:
        middle = (low + high + 1) // 2
        if len(canonical_bytes(text[:middle])) - 2 <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _replace(value: Any, path: str, cuts: dict[str, str]) -> Any:
    """``value`` with the strings at the pointers of ``cuts`` replaced (a copy; shared where unchanged)."""
    if value.__class__ is str:
        return cuts.get(path, value)
    if value.__class__ is dict:
        return {key: _replace(item, f"{path}/{json_pointer_token(key)}", cuts) for key, item in value.items()}
    if value.__class__ is list:
        return [_replace(item, f"{path}/{index}", cuts) for index, item in enumerate(value)]
    return value


def _placeholder(payload: dict[str, Any], encoded: bytes) -> dict[str, Any]:
    """What stands for a payload that no cut of its strings fits: the size and digest of its
    canonical bytes, and its ``kind`` when that is a short string."""
    placeholder: dict[str, Any] = {
        "kind": TRUNCATED_KIND,
        "original_bytes": len(encoded),
        "original_sha256": hashlib.sha256(encoded).hexdigest(),
    }
    kind = payload.get("kind")
    if kind.__class__ is str and len(kind) <= _KIND_CHARS:
        placeholder["original_kind"] = kind
    return placeholder
