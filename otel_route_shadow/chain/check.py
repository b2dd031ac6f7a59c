"""Checking one line of the chain: the exact check, and the hot loop that may decline to decide.

The hot loop (:func:`fast_run`) does what a minimal verifier must do anyway (parse, re-canonicalize,
hash, compare) plus a handful of cheap identity checks. Whenever a line does not pass *every* check, it
stops and the caller hands the line to :func:`check_line`, which re-does the work slowly and precisely
and either accepts the line or says exactly what is wrong with it. The hot loop is therefore allowed to
be conservative, never lenient. The rules are those of ``docs/chain-format.md`` section 8.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

import orjson

from otel_route_shadow.chain.canonical import CANONICAL_OPTIONS, canonical_bytes
from otel_route_shadow.chain.record import (
    DROPPED_KIND,
    MAX_LINE_BYTES,
    record_shape_problem,
    version_problem,
)
from otel_route_shadow.chain.result import Reason

__all__ = [
    "DROPPED_PREFIX",
    "RECORD_HASH_TAIL",
    "Bad",
    "Good",
    "check_line",
    "fast_run",
    "record_hash_of",
    "too_long",
]

RECORD_HASH_TAIL: Final = len(',"record_hash":""}') + 64
"""The bytes that end every line: the ``record_hash`` member (its key and 64 hex digits) and ``}``."""
DROPPED_PREFIX: Final = b'{"payload":{"count":'
"""How every ``records-dropped`` event's line begins (its payload's first member in sorted order):
the hot loop hands such lines to the exact check, which counts the event."""


@dataclass(frozen=True, slots=True)
class Bad:
    reason: Reason
    detail: str


@dataclass(frozen=True, slots=True)
class Good:
    seq: int
    prev_hash: str
    record_hash: str
    dropped: int = -1
    """The ``count`` of a ``records-dropped`` event; -1 for any other record."""


def check_line(line: bytes, strict: bool = False) -> Good | Bad:
    """Everything about one line except its links to its neighbours.

    ``strict`` also walks the payload for values no conforming writer emits but that canonical
    re-encoding cannot see: floats and non-ASCII object keys (on which RFC 8785 and a sorted-keys
    encoder disagree). The record hash covers them, so they cannot be introduced into a verified chain
    without recomputing hashes; the walk costs about as much as the rest of the check, hence opt-in.
    """
    obj = _parse_record(line)
    if isinstance(obj, Bad):
        return obj
    record_hash: str = obj.pop("record_hash")
    bad = _hash_problem(line, obj, record_hash)
    if bad is None and strict:
        problem = _value_problem(obj["payload"], "")
        bad = None if problem is None else Bad(Reason.MALFORMED_RECORD, problem)
    if bad is not None:
        return bad
    return Good(obj["seq"], obj["prev_hash"], record_hash, _dropped_count(obj["payload"]))


def _parse_record(line: bytes) -> dict[str, Any] | Bad:
    """Rules 1 to 4 of the check order (``docs/chain-format.md`` section 8): the line as a record
    object of this version, or why it is not one."""
    if len(line) > MAX_LINE_BYTES:
        return Bad(Reason.UNPARSEABLE, f"line of {len(line)} bytes exceeds the {MAX_LINE_BYTES}-byte limit")
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return Bad(Reason.UNPARSEABLE, _decode_detail(line, exc))
    version = version_problem(obj)
    if version is not None:
        unknown, message = version
        return Bad(Reason.UNKNOWN_VERSION if unknown else Reason.MALFORMED_RECORD, message)
    problem = record_shape_problem(obj)
    if problem is not None:
        return Bad(Reason.MALFORMED_RECORD, problem)
    record: dict[str, Any] = obj
    return record


def _hash_problem(line: bytes, body_obj: dict[str, Any], record_hash: str) -> Bad | None:
    """Rules 5 and 6: the line is the layout of its canonical body, and the body hashes to
    ``record_hash``."""
    try:
        body = canonical_bytes(body_obj)
    except TypeError as exc:
        return Bad(Reason.MALFORMED_RECORD, f"not encodable in canonical form: {exc}")
    if line != b"".join((body[:-1], b',"record_hash":"', record_hash.encode("ascii"), b'"}')):
        return Bad(Reason.MALFORMED_RECORD, "line is not the canonical form of its record")
    if hashlib.sha256(body).hexdigest() != record_hash:
        return Bad(Reason.HASH_MISMATCH, "record content does not match its record_hash")
    return None


def _dropped_count(payload: dict[str, Any]) -> int:
    """The ``count`` of a well-formed ``records-dropped`` event, else -1."""
    count = payload.get("count")
    if payload.get("kind") == DROPPED_KIND and count.__class__ is int and count >= 0:
        return int(count)
    return -1


def _value_problem(value: Any, path: str) -> str | None:
    """A payload value outside the format's value set (see ``docs/chain-format.md``), or None."""
    cls = value.__class__
    if cls is float:
        return f"payload holds a number with a fraction or exponent at {path or '/'}"
    if cls is dict:
        for key, item in value.items():
            if not key.isascii():
                return f"payload holds a non-ASCII object key at {path or '/'}"
            problem = _value_problem(item, f"{path}/{key.replace('~', '~0').replace('/', '~1')}")
            if problem is not None:
                return problem
    elif cls is list:
        for index, item in enumerate(value):
            problem = _value_problem(item, f"{path}/{index}")
            if problem is not None:
                return problem
    return None


def _decode_detail(line: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"not UTF-8 (byte {err.start})"
    if not line.strip():
        return "empty line"
    return f"not JSON: {str(exc)[:120]}"


def fast_run(lines: list[bytes], start: int, stop: int, seq: int, prev: str) -> tuple[int, str, int]:
    """Verify ``lines[start:stop]`` the quick way for as long as every check passes; return the next
    expected seq and prev_hash and the index of the first line it declined (``stop`` if none).

    A conservative, never lenient, subset of :func:`check_line` plus the links: a record with
    redaction marks, a ``records-dropped`` event, or anything unusual goes to the exact check."""
    loads, dumps, sha, opts, cut = (
        orjson.loads,
        orjson.dumps,
        hashlib.sha256,
        CANONICAL_OPTIONS,
        -RECORD_HASH_TAIL,
    )
    no_marks: list[Any] = []
    index = start
    for line in lines if start == 0 and stop == len(lines) else lines[start:stop]:
        try:
            rec = loads(line)
            claimed = rec.pop("record_hash")
            body = dumps(rec, option=opts)
            got = rec["seq"]
            if (
                sha(body).hexdigest() != claimed
                or got != seq
                or rec["prev_hash"] != prev
                or got.__class__ is not int
                or line[:cut] != body[:-1]
                or not line.endswith(b'"}')
                or not body.endswith(b',"v":1}')
                or not body.startswith(b'{"payload":{')
                or len(rec) != 5
                or rec["redactions"] != no_marks
                or line.startswith(DROPPED_PREFIX)
            ):
                break
        except Exception:
            break
        prev = claimed
        seq += 1
        index += 1
    return seq, prev, index


def record_hash_of(line: bytes) -> bytes:
    """The record hash a line carries (its last 64 hex digits before ``"}``, ASCII), unchecked."""
    return line[-66:-2]


def too_long() -> Bad:
    return Bad(Reason.UNPARSEABLE, f"line exceeds the {MAX_LINE_BYTES}-byte limit")
