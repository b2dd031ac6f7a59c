"""The record format of the decision chain: constants, records, payload sanitizing and line encoding.

``docs/chain-format.md`` is the normative description; this module is the reference implementation of
it, and the two are kept in step by the test vectors in ``tests/vectors/chain``.

Every value a record can hold is restricted so that RFC 8785 (JCS) and a plain sorted-keys JSON encoder
produce the same bytes: no floats, integers within +-(2**53-1), ASCII object keys, strings that are
valid Unicode (lone surrogates are replaced before anything is hashed). Under those rules the fast
``orjson`` encoding used here is byte-identical to :func:`otel_route_shadow.core.canonical.canonical_json`
(pinned by a property test), so an auditor can re-derive every digest with the standard library alone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from otel_route_shadow.core.redaction import (
    REDACTED,
    cannot_match,
    is_secret_key,
    json_pointer_token,
    redact_text,
    unique_key,
)

__all__ = [
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "MAX_LINE_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_SAFE_INTEGER",
    "QUARANTINE_KIND",
    "RULE_CREDENTIAL",
    "RULE_INVALID_UNICODE",
    "ChainCorruptError",
    "ChainError",
    "ChainFormatError",
    "ChainHead",
    "ChainPayloadError",
    "ChainRecord",
    "CleanCache",
    "PayloadTemplate",
    "RedactionMark",
    "canonical_bytes",
    "encode_record",
    "parse_record_line",
    "sanitize_payload",
]

FORMAT_VERSION: Final = 1
"""Value of the ``v`` member of every record this module writes and the only one it verifies."""

GENESIS_HASH: Final = "0" * 64
"""``prev_hash`` of the record with ``seq`` 0."""

MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""Longest record line (newline excluded) a writer emits and a verifier parses."""

MAX_PAYLOAD_DEPTH: Final = 32
"""Deepest nesting of objects and arrays inside a payload (the payload object itself is depth 1)."""

MAX_SAFE_INTEGER: Final = 2**53 - 1

RULE_CREDENTIAL: Final = "credential"
"""Redaction mark: a credential-shaped substring was replaced by ``[REDACTED]``."""

RULE_INVALID_UNICODE: Final = "invalid-unicode"
"""Redaction mark: lone surrogates were replaced by U+FFFD."""

RULES: Final = frozenset({RULE_CREDENTIAL, RULE_INVALID_UNICODE})

QUARANTINE_KIND: Final = "chain-quarantine"
"""``payload.kind`` of the chain event that records a quarantined torn tail."""

_OPTS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
LINE_OVERHEAD: Final = 320
"""Upper bound of the bytes a line adds to its encoded payload and redaction marks."""
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_CLEAN_CACHE_MAX: Final = 4096
_CLEAN_CACHE_STR_MAX: Final = 8192


class ChainError(Exception):
    """Base class of the chain's errors."""


class ChainPayloadError(ChainError, ValueError):
    """The payload holds a value the format cannot carry; nothing was written."""


class ChainCorruptError(ChainError):
    """The chain's last complete line is not a record, so there is no head to link to. Nothing was
    written; ``otel-route-shadow verify`` names the problem."""


class ChainFormatError(ChainError, ValueError):
    """A reader met a complete line that is not a record."""


@dataclass(frozen=True, slots=True)
class RedactionMark:
    """One field of the payload that the writer changed before hashing, and why (never what)."""

    path: str
    rule: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "rule": self.rule}


@dataclass(frozen=True, slots=True)
class ChainHead:
    """The last record of a chain: what the next record links to."""

    seq: int
    record_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "record_hash": self.record_hash}


@dataclass(frozen=True, slots=True)
class ChainRecord:
    """One record as written (or as read back)."""

    seq: int
    prev_hash: str
    payload: dict[str, Any]
    redactions: tuple[RedactionMark, ...]
    record_hash: str
    v: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object of its line (``record_hash`` included)."""
        return {
            "payload": self.payload,
            "prev_hash": self.prev_hash,
            "record_hash": self.record_hash,
            "redactions": [mark.to_dict() for mark in self.redactions],
            "seq": self.seq,
            "v": self.v,
        }

    def body(self) -> dict[str, Any]:
        """The object the record hash is computed over: the record without ``record_hash``."""
        return {
            "payload": self.payload,
            "prev_hash": self.prev_hash,
            "redactions": [mark.to_dict() for mark in self.redactions],
            "seq": self.seq,
            "v": self.v,
        }


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON form of a record value, via orjson.

    Byte-identical to ``core.canonical.canonical_json`` for every value a record can hold; raises
    ``TypeError`` (``orjson.JSONEncodeError``) for integers outside +-(2**53-1) and lone surrogates.
    """
    return orjson.dumps(value, option=_OPTS)


# ---------------------------------------------------------------------------------------------------
# Sanitizing: validate, coerce, repair and redact a payload in one walk.


class CleanCache:
    """Short strings already found clean, kept by a writer across appends (payload keys and enum-like
    values repeat in every record). Keys and values are kept apart: a key is clean only when it also
    does not name a credential. The pure core keeps no such state; the shell may."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.values: set[str] = set()


class SanitizedMapping(dict[str, Any]):
    """A mapping :func:`sanitized_mapping` found clean, read-only from then on.

    A writer that appends the same sub-mapping over and over (the plugin's span attributes, one
    mapping per distinct decision) sanitizes and encodes it once; the walk then takes it as it is,
    and the encoder splices in its canonical bytes.
    """

    __slots__ = ("_fragment",)

    def __init__(self, clean: Mapping[str, Any]) -> None:
        super().__init__(clean)
        self._fragment = orjson.Fragment(canonical_bytes(self))

    @property
    def fragment(self) -> orjson.Fragment:
        """The mapping's canonical JSON, ready to be embedded in a larger canonical document."""
        return self._fragment

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a sanitized mapping is read-only")

    __setitem__ = _read_only
    __delitem__ = _read_only
    __ior__ = _read_only
    clear = _read_only
    pop = _read_only
    popitem = _read_only
    setdefault = _read_only
    update = _read_only


def sanitized_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """``value`` sanitized; a read-only :class:`SanitizedMapping` when nothing had to change (a
    redacted one stays a plain dict, so every record that carries it is marked again)."""
    clean, marks = sanitize_payload(value)
    return clean if marks else SanitizedMapping(clean)


def sanitize_payload(
    payload: Mapping[str, Any], *, clean_cache: CleanCache | None = None
) -> tuple[dict[str, Any], list[RedactionMark]]:
    """Return a plain-JSON copy of ``payload`` that the format can carry, and its redaction marks.

    Strings (object keys included) are scrubbed of credential-shaped substrings and of lone surrogates;
    a non-empty string under a key naming a credential is replaced whole.
    ``str``/``int`` subclasses (enum members) become plain values, tuples become arrays, mappings become
    objects. Anything else, floats above all, raises :class:`ChainPayloadError` naming the field.
    """
    if not isinstance(payload, Mapping):
        raise ChainPayloadError(f"payload must be a mapping, not {type(payload).__name__}")
    marks: list[RedactionMark] = []
    clean = _walk_mapping(payload, "", 1, marks, clean_cache)
    if len(marks) > 1:
        marks = sorted(set(marks), key=lambda mark: (mark.path, mark.rule))
    return clean, marks


def _walk_mapping(
    value: Mapping[Any, Any], path: str, depth: int, marks: list[RedactionMark], cache: CleanCache | None
) -> dict[str, Any]:
    if depth > MAX_PAYLOAD_DEPTH:
        raise ChainPayloadError(f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels at {path or '/'}")
    out: dict[str, Any] = {}
    for raw_key, raw_item in value.items():
        key = raw_key
        item = raw_item
        if key.__class__ is not str:
            if not isinstance(key, str):
                raise ChainPayloadError(
                    f"object keys must be strings; {type(key).__name__} key {key!r} at {path or '/'}"
                )
            key = str.__str__(key)
        if not key.isascii():
            raise ChainPayloadError(f"object keys must be ASCII; key {key!r} at {path or '/'}")
        new_key = key
        redacted = False
        secret = False
        if cache is None or key not in cache.keys:
            new_key, count = redact_text(key)
            redacted = count > 0
            secret = is_secret_key(new_key)
            if not redacted and not secret and cache is not None:
                _remember(cache.keys, key)
        if new_key in out:
            # Only a scrubbed key can collide; keep both fields rather than let one overwrite the other.
            new_key = unique_key(new_key, out)
            redacted = True
        if secret and isinstance(item, str) and item and item != REDACTED:
            item = REDACTED
            redacted = True
        if redacted:
            marks.append(RedactionMark(f"{path}/{json_pointer_token(new_key)}", RULE_CREDENTIAL))
        out[new_key] = _walk_value(item, path, new_key, depth, marks, cache)
    return out


def _walk_value(
    item: Any, parent: str, token: str, depth: int, marks: list[RedactionMark], cache: CleanCache | None
) -> Any:
    cls = item.__class__
    if cls is str:
        if cache is not None and item in cache.values:
            return item
        return _clean_str(item, parent, token, marks, cache)
    if cls is int:
        if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            return item
        raise ChainPayloadError(
            f"integer {item} at {_child(parent, token)} is outside +-(2**53-1); encode 64-bit values such "
            "as nanosecond timestamps as decimal strings (as OTLP/JSON does)"
        )
    if cls is bool or item is None:
        return item
    if cls is SanitizedMapping:
        return item
    if cls is dict or isinstance(item, Mapping):
        return _walk_mapping(item, _child(parent, token), depth + 1, marks, cache)
    if cls is list or cls is tuple:
        return _walk_array(item, _child(parent, token), depth + 1, marks, cache)
    if cls is float:
        raise ChainPayloadError(
            f"float {item!r} at {_child(parent, token)}: the chain holds no floats (RFC 8785 and a sorted-keys "
            "encoder would disagree on them); record a string or a scaled integer"
        )
    if isinstance(item, bool):  # pragma: no cover - bool cannot be subclassed
        return bool(item)
    if isinstance(item, int):
        return _walk_value(int(item), parent, token, depth, marks, cache)
    if isinstance(item, str):
        return _walk_value(str.__str__(item), parent, token, depth, marks, cache)
    if isinstance(item, list | tuple):
        return _walk_array(item, _child(parent, token), depth + 1, marks, cache)
    raise ChainPayloadError(
        f"unsupported value of type {type(item).__name__} at {_child(parent, token)}; allowed: str, int, "
        "bool, None, list, dict"
    )


def _walk_array(
    items: list[Any] | tuple[Any, ...],
    path: str,
    depth: int,
    marks: list[RedactionMark],
    cache: CleanCache | None,
) -> list[Any]:
    if depth > MAX_PAYLOAD_DEPTH:
        raise ChainPayloadError(f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels at {path}")
    return [_walk_value(item, path, str(index), depth, marks, cache) for index, item in enumerate(items)]


def _child(parent: str, token: str) -> str:
    return f"{parent}/{json_pointer_token(token)}"


def _clean_str(
    text: str, parent: str, token: str, marks: list[RedactionMark], cache: CleanCache | None
) -> str:
    new = text
    if not text.isascii() and _SURROGATE.search(text) is not None:
        new = _SURROGATE.sub("\ufffd", text)
        marks.append(RedactionMark(_child(parent, token), RULE_INVALID_UNICODE))
    new, count = redact_text(new)
    if count:
        marks.append(RedactionMark(_child(parent, token), RULE_CREDENTIAL))
    elif new is text and cache is not None and not text.isalnum():
        # Letters and digits alone are re-checked at C speed; remembering them would let unique ids
        # (trace and span ids, timestamps) flush the strings that do repeat.
        _remember(cache.values, text)
    return new


def _remember(cache: set[str], text: str) -> None:
    if len(text) <= _CLEAN_CACHE_STR_MAX:
        if len(cache) >= _CLEAN_CACHE_MAX:
            cache.clear()
        cache.add(text)


# ---------------------------------------------------------------------------------------------------
# Encoding and parsing lines.


def encode_known_clean(payload: Mapping[str, Any], cache: CleanCache) -> bytes | None:
    """The canonical bytes of a payload that :func:`sanitize_payload` would return unchanged and
    unmarked, decided in one flat pass; None sends the payload through the full walk.

    Eligible is a plain dict whose keys the writer already found clean and whose values are each a
    :class:`SanitizedMapping`, a bool, None, an int in range, or a string the writer already found
    clean or that no pattern can match (``cannot_match``: an ASCII hex id, a decimal timestamp). That
    is the shape of every seam record after the first: a writer's hot path should not walk it.
    """
    if payload.__class__ is not dict:
        return None
    keys, values = cache.keys, cache.values
    spliced: dict[str, Any] = {}
    for key, item in payload.items():
        if key.__class__ is not str or key not in keys:
            return None
        cls = item.__class__
        if cls is SanitizedMapping:
            spliced[key] = item.fragment
            continue
        if cls is str:
            if item not in values and not (item.isascii() and cannot_match(item)):
                return None
        elif cls is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return None
        elif cls is not bool and item is not None:
            return None
        spliced[key] = item
    return orjson.dumps(spliced, option=_OPTS)


class PayloadTemplate:
    """A payload shape appended over and over: fixed fields sanitized and encoded once, and a few
    *token* slots filled per record (ids, timestamps).

    A token is a non-empty ASCII string of letters and digits that no redaction pattern can match
    (``cannot_match``): it needs neither scrubbing nor JSON escaping, so a record's canonical payload
    is the template's pre-encoded pieces joined around its tokens, with no walk and no encoder. The
    pieces are cut out of the canonical encoding of the whole payload, so they are canonical by
    construction. Raises :class:`ChainPayloadError` for fixed fields that would need redaction or
    repair (append those with ``append``) and for slot names that are not plain keys.
    """

    __slots__ = ("_fixed", "_order", "_skeleton", "slots")

    def __init__(self, fixed: Mapping[str, Any], slots: Sequence[str]) -> None:
        clean, marks = sanitize_payload({**fixed, **dict.fromkeys(slots, "")})
        if (
            marks
            or len(set(slots)) != len(slots)
            or set(slots) & set(fixed)
            or clean.keys() != {*fixed, *slots}
        ):
            raise ChainPayloadError(
                "a template's fields must need no redaction and its slots must be new keys"
            )
        for slot in slots:
            if not slot.isascii() or is_secret_key(slot):
                raise ChainPayloadError(f"slot {slot!r} is not a plain key")
        markers = [f"slot{index}" for index in range(len(slots))]
        while True:
            encoded = canonical_bytes({**clean, **dict(zip(slots, markers, strict=True))})
            quoted = [f'"{marker}"'.encode("ascii") for marker in markers]
            if all(encoded.count(marker) == 1 for marker in quoted):
                break
            markers = [f"x{marker}" for marker in markers]  # a fixed value happened to contain one
        positions = sorted((encoded.index(marker), index) for index, marker in enumerate(quoted))
        pieces, cursor = [], 0
        for position, index in positions:
            pieces.append(encoded[cursor : position + 1])  # up to and including the opening quote
            cursor = position + len(quoted[index]) - 1  # from the closing quote on
        pieces.append(encoded[cursor:])
        self.slots: tuple[str, ...] = tuple(slots)
        self._fixed = {key: value for key, value in clean.items() if key not in self.slots}
        self._order = tuple(index for _, index in positions)
        self._skeleton: tuple[bytes, ...] = tuple(part for piece in pieces for part in (piece, b""))[:-1]

    def encode(self, tokens: Sequence[str]) -> bytes:
        """The canonical payload bytes with ``tokens`` in the slots (in ``slots`` order)."""
        try:
            joined = "".join(tokens)
        except TypeError:
            raise ChainPayloadError(f"tokens must be strings, not {tokens!r}") from None
        # One check for all: letters and digits alone that cannot match as a whole cannot match in
        # any part either (cannot_match asks for under five characters, or for no "A").
        if (
            len(tokens) != len(self.slots)
            or "" in tokens
            or not (joined.isascii() and joined.isalnum() and cannot_match(joined))
        ):
            self._check(tokens)
        parts = list(self._skeleton)  # the pieces, with a hole for each token
        hole = 1
        for index in self._order:
            parts[hole] = tokens[index].encode("ascii")
            hole += 2
        return b"".join(parts)

    def _check(self, tokens: Sequence[str]) -> None:
        if len(tokens) != len(self.slots):
            raise ChainPayloadError(f"expected {len(self.slots)} tokens, got {len(tokens)}")
        for token in tokens:
            if not (token and token.isascii() and token.isalnum() and cannot_match(token)):
                raise ChainPayloadError(
                    f"a slot takes a token (ASCII letters and digits, no credential shape), not {token!r}"
                )

    def payload(self, tokens: Sequence[str]) -> dict[str, Any]:
        """The payload as a plain mapping (what a reader gets back)."""
        return {**self._fixed, **dict(zip(self.slots, tokens, strict=True))}


EMPTY_MARKS: Final = b"[]"


def encode_payload(payload: dict[str, Any], marks: list[RedactionMark]) -> tuple[bytes, bytes]:
    """Canonical bytes of a sanitized payload and of its redaction marks (computed outside the lock)."""
    if any(item.__class__ is SanitizedMapping for item in payload.values()):
        payload = {
            key: item.fragment if item.__class__ is SanitizedMapping else item
            for key, item in payload.items()
        }
    try:
        payload_bytes = orjson.dumps(payload, option=_OPTS)
    except TypeError as exc:  # pragma: no cover - sanitize_payload rejects everything orjson would
        raise ChainPayloadError(f"payload cannot be encoded: {exc}") from None
    marks_bytes = orjson.dumps([mark.to_dict() for mark in marks], option=_OPTS) if marks else EMPTY_MARKS
    return payload_bytes, marks_bytes


def encode_record(seq: int, prev_hash: str, payload_bytes: bytes, marks_bytes: bytes) -> tuple[bytes, str]:
    """The record line (newline included) and its record hash.

    The body is assembled from pre-encoded parts in sorted key order (payload, prev_hash, redactions,
    seq, v), which is exactly its canonical form; the line is that body with ``record_hash`` appended as
    its last member.
    """
    body = b"".join(
        (
            b'{"payload":',
            payload_bytes,
            b',"prev_hash":"',
            prev_hash.encode("ascii"),
            b'","redactions":',
            marks_bytes,
            b',"seq":',
            str(seq).encode("ascii"),
            b',"v":1}',
        )
    )
    record_hash = hashlib.sha256(body).hexdigest()
    line = b"".join((body[:-1], b',"record_hash":"', record_hash.encode("ascii"), b'"}\n'))
    return line, record_hash


def parse_record_line(line: bytes) -> ChainRecord:
    """Parse one line (without its newline) into a record, checking shape but not hashes or links.

    Raises :class:`ChainFormatError`. Verification lives in ``_verify``; this is for readers that have
    already verified, or that only need the head.
    """
    if len(line) > MAX_LINE_BYTES:
        raise ChainFormatError(f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ChainFormatError(f"not JSON: {exc}") from None
    problem = record_shape_problem(obj)
    if problem is not None:
        raise ChainFormatError(problem)
    return ChainRecord(
        seq=obj["seq"],
        prev_hash=obj["prev_hash"],
        payload=obj["payload"],
        redactions=tuple(RedactionMark(m["path"], m["rule"]) for m in obj["redactions"]),
        record_hash=obj["record_hash"],
        v=obj["v"],
    )


_FIELDS: Final = frozenset({"v", "seq", "prev_hash", "payload", "redactions", "record_hash"})


def version_problem(obj: Any) -> tuple[bool, str] | None:
    """``(is_unknown_version, message)`` when the object is not a record of this version, else None."""
    if obj.__class__ is not dict:
        return False, f"a record is a JSON object, not {_json_type(obj)}"
    if "v" not in obj:
        return False, "no format version member 'v'"
    version = obj["v"]
    if version.__class__ is not int or version != FORMAT_VERSION:
        return True, f"format version {orjson.dumps(version).decode()[:40]} is not {FORMAT_VERSION}"
    return None


def record_shape_problem(obj: Any) -> str | None:
    """Why ``obj`` is not a well-formed version-1 record (members and their types), or None."""
    version = version_problem(obj)
    if version is not None:
        return version[1]
    keys = set(obj)
    if keys != _FIELDS:
        missing = sorted(_FIELDS - keys)
        extra = sorted(keys - _FIELDS)
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(k[:40] for k in extra[:5]))
        return "record members: " + "; ".join(parts)
    seq = obj["seq"]
    if seq.__class__ is not int or seq < 0:
        return f"seq must be a non-negative integer, not {_json_type(seq)}"
    for name in ("prev_hash", "record_hash"):
        value = obj[name]
        if value.__class__ is not str or _HEX64.fullmatch(value) is None:
            return f"{name} must be 64 lower-case hex digits"
    if obj["payload"].__class__ is not dict:
        return f"payload must be an object, not {_json_type(obj['payload'])}"
    return redactions_problem(obj["redactions"])


def redactions_problem(marks: Any) -> str | None:
    """Why ``marks`` is not a valid ``redactions`` array (objects ``{path, rule}``, sorted, unique)."""
    if marks.__class__ is not list:
        return f"redactions must be an array, not {_json_type(marks)}"
    previous: tuple[str, str] | None = None
    for mark in marks:
        if mark.__class__ is not dict or set(mark) != {"path", "rule"}:
            return "each redaction mark is an object with exactly 'path' and 'rule'"
        path, rule = mark["path"], mark["rule"]
        if path.__class__ is not str or rule.__class__ is not str:
            return "redaction mark path and rule must be strings"
        if rule not in RULES:
            return f"unknown redaction rule {rule[:40]!r}"
        if path and not path.startswith("/"):
            return f"redaction path {path[:40]!r} is not a JSON pointer"
        key = (path, rule)
        if previous is not None and key <= previous:
            return "redaction marks must be sorted by (path, rule) without duplicates"
        previous = key
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction or exponent"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
