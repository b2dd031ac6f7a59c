"""The record layout of the decision chain: constants, records, payload encoding, lines.

``docs/chain-format.md`` is the normative description; this module is the reference implementation of
it, and the two are kept in step by the test vectors in ``tests/vectors/chain``.

There is one way to turn a payload into record bytes: :func:`sanitize_payload`, then
:func:`canonical_bytes`, with what would not fit one tlog-tiles entry cut and marked
(:func:`encode_payload`, ``chain.truncation``). A :class:`PayloadTemplate` is that same encoding
done once for a shape appended many times, with a few token slots filled per record; its bytes are
cut out of the canonical encoding of the whole payload, so they are identical by construction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import orjson

from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.errors import ChainFormatError, ChainPayloadError
from otel_route_shadow.chain.sanitize import RULES, RedactionMark, sanitize_payload
from otel_route_shadow.chain.truncation import cut_to_fit
from otel_route_shadow.core import cannot_match, is_secret_key

__all__ = [
    "DROPPED_KIND",
    "ENTRY_OVERHEAD",
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "MAX_ENTRY_BYTES",
    "MAX_LINE_BYTES",
    "PAYLOAD_BUDGET",
    "QUARANTINE_KIND",
    "ChainHead",
    "ChainRecord",
    "EncodedPayload",
    "LineWriter",
    "PayloadTemplate",
    "encode_payload",
    "encode_record",
    "fit_payload",
    "parse_record_line",
    "record_shape_problem",
    "version_problem",
]

FORMAT_VERSION: Final = 1
"""Value of the ``v`` member of every record this module writes and the only one it verifies."""

GENESIS_HASH: Final = "0" * 64
"""``prev_hash`` of the record with ``seq`` 0."""

MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""Longest record line (newline excluded) a verifier parses and a reader buffers. Writers before
:data:`MAX_ENTRY_BYTES` wrote lines up to this long, and such chains still verify."""

MAX_ENTRY_BYTES: Final = 65_535
"""Longest record line (newline excluded) a writer emits: a C2SP tlog-tiles entry, whose length in an
entry bundle is a big-endian uint16 (``docs/chain-format.md`` sections 1 and 6)."""

ENTRY_OVERHEAD: Final = 215
"""Bytes a line adds to its canonical payload and redaction marks, with a ``seq`` of 16 digits (the
most a value of the domain has)."""

PAYLOAD_BUDGET: Final = MAX_ENTRY_BYTES - ENTRY_OVERHEAD
"""Most bytes the canonical payload and redaction marks of one record may take together."""

QUARANTINE_KIND: Final = "chain-quarantine"
"""``payload.kind`` of the chain event that records a quarantined torn tail."""

DROPPED_KIND: Final = "records-dropped"
"""``payload.kind`` of the chain event that records seam records a writer had to drop (its bounded
backlog was full while another process held the chain's lock)."""

EMPTY_MARKS: Final = b"[]"

_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_FIELDS: Final = frozenset({"v", "seq", "prev_hash", "payload", "redactions", "record_hash"})


class ChainHead(NamedTuple):
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
        return {**self.body(), "record_hash": self.record_hash}

    def body(self) -> dict[str, Any]:
        """The object the record hash is computed over: the record without ``record_hash``."""
        return {
            "payload": self.payload,
            "prev_hash": self.prev_hash,
            "redactions": [mark.to_dict() for mark in self.redactions],
            "seq": self.seq,
            "v": self.v,
        }


class EncodedPayload(NamedTuple):
    """A sanitized payload and its redaction marks in canonical form: a record without its place."""

    payload: bytes
    marks: bytes


LineWriter = Callable[[int, ChainHead | None, int, EncodedPayload], tuple[ChainHead, int]]
"""Appends one entry as a record at ``size`` after ``head`` on the chain's descriptor (the writer's one
door for every line: ``DecisionChain._write_line``)."""


def encode_payload(payload: dict[str, Any], marks: list[RedactionMark]) -> EncodedPayload:
    """Canonical bytes of a payload :func:`sanitize_payload` returned, and of its redaction marks,
    cut to fit one tlog-tiles entry when they would not (:func:`fit_payload`)."""
    return fit_payload(payload, marks)[2]


def fit_payload(
    payload: dict[str, Any], marks: list[RedactionMark]
) -> tuple[dict[str, Any], list[RedactionMark], EncodedPayload]:
    """The payload and marks as they will be recorded, and their canonical bytes.

    They are ``payload`` and ``marks`` themselves unless the line would be longer than
    :data:`MAX_ENTRY_BYTES`: then the longest strings are cut, or the payload is replaced by a
    placeholder, and marked (``chain.truncation``).
    """
    encoded = _encode(payload, marks)
    if len(encoded.payload) + len(encoded.marks) <= PAYLOAD_BUDGET:
        return payload, marks, encoded
    payload, marks = cut_to_fit(payload, marks, encoded.payload, PAYLOAD_BUDGET)
    return payload, marks, _encode(payload, marks)


def _encode(payload: dict[str, Any], marks: list[RedactionMark]) -> EncodedPayload:
    try:
        payload_bytes = canonical_bytes(payload)
    except TypeError as exc:  # pragma: no cover - sanitize_payload rejects everything orjson would
        raise ChainPayloadError(f"payload cannot be encoded: {exc}") from None
    marks_bytes = canonical_bytes([mark.to_dict() for mark in marks]) if marks else EMPTY_MARKS
    return EncodedPayload(payload_bytes, marks_bytes)


class PayloadTemplate:
    """A payload shape appended over and over: fixed fields sanitized and encoded once, and a few
    *token* slots filled per record (ids, timestamps).

    A token is a non-empty ASCII string of letters and digits that no redaction pattern can match
    (``cannot_match``): it needs neither scrubbing nor JSON escaping, so a record's canonical payload
    is the template's pre-encoded pieces joined around its tokens. The pieces are cut out of the
    canonical encoding of the whole sanitized payload and the marks are the fixed fields' own, so
    ``encode(tokens)`` is byte for byte ``encode_payload(*sanitize_payload(payload(tokens)))``
    (pinned by tests). The walk and the encoder run once per shape, not once per record (see
    ``docs/benchmarks.md``, "Caches, windows and threads"). Raises :class:`ChainPayloadError` for
    fixed fields the format cannot carry and for slot names that are not new plain keys.
    """

    __slots__ = ("_fixed", "_mark_list", "_marks", "_order", "_skeleton", "slots")

    def __init__(self, fixed: Mapping[str, Any], slots: Sequence[str]) -> None:
        _check_slots(fixed, slots)
        clean, marks = sanitize_payload({**fixed, **dict.fromkeys(slots, "")})
        if clean.keys() != {*fixed, *slots}:
            raise ChainPayloadError("a template's field names must need no redaction")
        encoded, quoted = _encode_with_markers(clean, slots)
        positions = sorted((encoded.index(marker), index) for index, marker in enumerate(quoted))
        pieces, cursor = [], 0
        for position, index in positions:
            pieces.append(encoded[cursor : position + 1])  # up to and including the opening quote
            cursor = position + len(quoted[index]) - 1  # from the closing quote on
        pieces.append(encoded[cursor:])
        self.slots: tuple[str, ...] = tuple(slots)
        self._fixed = {key: value for key, value in clean.items() if key not in self.slots}
        self._mark_list = marks
        self._marks = _encode({}, marks).marks
        self._order = tuple(index for _, index in positions)
        self._skeleton: tuple[bytes, ...] = tuple(part for piece in pieces for part in (piece, b""))[:-1]
        """The pieces, with a hole between two for each slot's token (in the order the slots appear)."""

    def encode(self, tokens: Sequence[str]) -> EncodedPayload:
        """The canonical payload with ``tokens`` in the slots (in ``slots`` order), and its marks;
        cut as :func:`encode_payload` cuts it when it would not fit one entry."""
        _check_tokens(tokens, len(self.slots))
        parts = list(self._skeleton)
        # The tokens are ASCII letters and digits (just checked): one encode for all, split apart.
        parts[1::2] = " ".join(map(tokens.__getitem__, self._order)).encode("ascii").split()
        payload = b"".join(parts)
        if len(payload) + len(self._marks) > PAYLOAD_BUDGET:
            return encode_payload(self.payload(tokens), self._mark_list)
        return EncodedPayload(payload, self._marks)

    def payload(self, tokens: Sequence[str]) -> dict[str, Any]:
        """The payload as a plain mapping (what a reader gets back)."""
        return {**self._fixed, **dict(zip(self.slots, tokens, strict=True))}


def _check_slots(fixed: Mapping[str, Any], slots: Sequence[str]) -> None:
    if len(set(slots)) != len(slots) or set(slots) & set(fixed):
        raise ChainPayloadError("a template's slots must be distinct new keys")
    for slot in slots:
        if not (isinstance(slot, str) and slot.isascii()) or is_secret_key(slot):
            raise ChainPayloadError(f"slot {slot!r} is not a plain key")


def _encode_with_markers(clean: dict[str, Any], slots: Sequence[str]) -> tuple[bytes, list[bytes]]:
    """The canonical payload with a unique quoted marker in each slot, and the markers."""
    markers = [f"slot{index}" for index in range(len(slots))]
    while True:
        encoded = canonical_bytes({**clean, **dict(zip(slots, markers, strict=True))})
        quoted = [f'"{marker}"'.encode("ascii") for marker in markers]
        if all(encoded.count(marker) == 1 for marker in quoted):
            return encoded, quoted
        markers = [f"x{marker}" for marker in markers]  # a fixed value happened to contain one


def _check_tokens(tokens: Sequence[str], count: int) -> None:
    """Raise unless ``tokens`` are ``count`` tokens (see :class:`PayloadTemplate`)."""
    try:
        joined = "".join(tokens)
    except TypeError:
        raise ChainPayloadError(f"tokens must be strings, not {tokens!r}") from None
    # One check for all: letters and digits alone that cannot match as a whole cannot match in
    # any part either (cannot_match asks for under five characters, or for no "A").
    if (
        len(tokens) == count
        and "" not in tokens
        and joined.isascii()
        and joined.isalnum()
        and cannot_match(joined)
    ):
        return
    if len(tokens) != count:
        raise ChainPayloadError(f"expected {count} tokens, got {len(tokens)}")
    for token in tokens:
        if not (token and token.isascii() and token.isalnum() and cannot_match(token)):
            raise ChainPayloadError(
                f"a slot takes a token (ASCII letters and digits, no credential shape), not {token!r}"
            )


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

    Raises :class:`ChainFormatError`. Verification lives in ``chain.verify``; this is for readers that
    have already verified, or that only need the head.
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
    for check in (_members_problem, _seq_problem, _hashes_problem, _payload_problem):
        problem = check(obj)
        if problem is not None:
            return problem
    return redactions_problem(obj["redactions"])


def _members_problem(obj: dict[str, Any]) -> str | None:
    keys = set(obj)
    if keys == _FIELDS:
        return None
    missing = sorted(_FIELDS - keys)
    extra = sorted(keys - _FIELDS)
    parts = []
    if missing:
        parts.append("missing " + ", ".join(missing))
    if extra:
        parts.append("unexpected " + ", ".join(k[:40] for k in extra[:5]))
    return "record members: " + "; ".join(parts)


def _seq_problem(obj: dict[str, Any]) -> str | None:
    seq = obj["seq"]
    if seq.__class__ is not int or seq < 0:
        return f"seq must be a non-negative integer, not {_json_type(seq)}"
    return None


def _hashes_problem(obj: dict[str, Any]) -> str | None:
    for name in ("prev_hash", "record_hash"):
        value = obj[name]
        if value.__class__ is not str or _HEX64.fullmatch(value) is None:
            return f"{name} must be 64 lower-case hex digits"
    return None


def _payload_problem(obj: dict[str, Any]) -> str | None:
    if obj["payload"].__class__ is not dict:
        return f"payload must be an object, not {_json_type(obj['payload'])}"
    return None


def redactions_problem(marks: Any) -> str | None:
    """Why ``marks`` is not a valid ``redactions`` array (objects ``{path, rule}``, sorted, unique)."""
    if marks.__class__ is not list:
        return f"redactions must be an array, not {_json_type(marks)}"
    previous: tuple[str, str] | None = None
    for mark in marks:
        problem = _mark_problem(mark)
        if problem is not None:
            return problem
        key = (mark["path"], mark["rule"])
        if previous is not None and key <= previous:
            return "redaction marks must be sorted by (path, rule) without duplicates"
        previous = key
    return None


def _mark_problem(mark: Any) -> str | None:
    if mark.__class__ is not dict or set(mark) != {"path", "rule"}:
        return "each redaction mark is an object with exactly 'path' and 'rule'"
    path, rule = mark["path"], mark["rule"]
    if path.__class__ is not str or rule.__class__ is not str:
        return "redaction mark path and rule must be strings"
    if rule not in RULES:
        return f"unknown redaction rule {rule[:40]!r}"
    if path and not path.startswith("/"):
        return f"redaction path {path[:40]!r} is not a JSON pointer"
    return None


_JSON_TYPES: Final = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number with a fraction or exponent"),
    (str, "a string"),
    (list, "an array"),
)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for cls, name in _JSON_TYPES:
        if isinstance(value, cls):
            return name
    return "an object"
