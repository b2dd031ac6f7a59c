"""The on-disk snapshot document: encoding, and verification that trusts nothing it reads.

One document format serves both ``current.json`` and every ``history/<revision>.json``, so a reader
that can verify one can verify all of them. ``docs/policy-store.md`` is the normative description;
this module is its executable twin. Problem messages never quote the file: a snapshot can be hand
edited, and whatever was typed into it must not leak into logs, spans or terminals.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from otel_route_shadow.core import (
    EncodedPolicies,
    RoutingAction,
    RoutingMatch,
    RoutingPolicy,
    canonical_json,
)
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "MAX_REVISION",
    "MAX_SNAPSHOT_BYTES",
    "SNAPSHOT_FORMAT",
    "SnapshotDocument",
    "SnapshotFormatError",
    "SnapshotPayload",
    "canonical_policy_dumps",
    "decode_snapshot",
    "encode_snapshot",
    "prepare_snapshot",
    "render_snapshot",
]

SNAPSHOT_FORMAT = "otel-route-shadow/policy-snapshot/v1"
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
"""Same bound as a policy file (about 100,000 policies in the snapshot's indented layout)."""
MAX_REVISION = 2**53 - 1
"""Revisions travel in JSON records of the decision chain, whose integers stay within +-(2**53 - 1)."""
MAX_SNAPSHOT_DEPTH = 8
"""Nesting accepted in a snapshot document; a valid one nests 5 deep (document, ``policies``, a
policy, its ``match`` or ``action``, their sets and maps)."""

_FIELDS = frozenset({"format", "revision", "content_hash", "saved_at", "policies"})
_HASH = re.compile(r"[0-9a-f]{64}")
_SAVED_AT = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]{1,9})?Z")
"""Matched whole (``fullmatch``): ASCII digits only, nothing after the ``Z``."""
_POLICIES: TypeAdapter[tuple[RoutingPolicy, ...]] = TypeAdapter(tuple[RoutingPolicy, ...])
"""Validates (and dumps) a whole array in one call: several times faster than one call per policy."""

_CHUNK = 16
"""Policies per parse, schema-check and dump call (reading) and per dump and encode call (saving).
One call over a whole array would hold the interpreter lock for all of it; a chunk's parsed objects
are dropped before the next chunk, so what a read or a save keeps is bytes, not objects the
garbage collector has to traverse."""
_JOIN = 1024
"""Policy encodings per join when a snapshot is hashed or rendered (a few hundred kilobytes)."""
_POLICIES_OPEN = b'  "policies": [\n    '
_POLICIES_SEP = b",\n    "
_POLICIES_CLOSE = b"\n  ],\n"

_SCHEMA_FIELDS = (
    frozenset(RoutingPolicy.model_fields)
    | frozenset(RoutingMatch.model_fields)
    | frozenset(RoutingAction.model_fields)
)


class SnapshotFormatError(ValueError):
    """A snapshot document that must not be trusted.

    ``kind`` is a stable code for machines (``invalid-json``, ``wrong-schema``, ``hash-mismatch``,
    ``not-canonical``, ``not-utf8``); the message is for people.
    ``claimed_revision`` is what the document says about itself when that much could be read: useful
    to an operator and to the revision high-water mark, never cited by a decision.
    """

    def __init__(self, kind: str, message: str, claimed_revision: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.claimed_revision = claimed_revision


@dataclass(frozen=True)
class SnapshotDocument:
    """A verified snapshot: its hash matches its policies, which are canonical and valid.

    ``policies`` holds each policy's canonical encoding (an ``EncodedPolicies``), in stored order."""

    revision: int
    content_hash: str
    saved_at: str
    policies: EncodedPolicies


def _array_digest(encodings: Sequence[bytes]) -> str:
    """SHA-256 of the canonical JSON array whose elements have these canonical encodings, hashed
    :data:`_JOIN` elements at a time (no one call copies or hashes the whole array)."""
    hasher = hashlib.sha256(b"[")
    for start in range(0, len(encodings), _JOIN):
        if start:
            hasher.update(b",")
        hasher.update(b",".join(encodings[start : start + _JOIN]))
    hasher.update(b"]")
    return hasher.hexdigest()


def canonical_policy_dumps(policies: Sequence[RoutingPolicy]) -> list[Any]:
    """The ``policies`` array as stored: every field present, sorted by canonical encoding.

    Storing the array in exactly the order and form the hash is computed over lets a reader recompute
    ``content_hash`` as the SHA-256 of the canonical JSON of the array, with no model code at all.
    """
    dumps = _POLICIES.dump_python(tuple(policies), mode="json")
    return [dump for _, dump in sorted(((canonical_json(d), d) for d in dumps), key=lambda pair: pair[0])]


@dataclass(frozen=True)
class SnapshotPayload:
    """A policy set prepared for storage once: canonical order, each element's encoding, the hash."""

    policies: Sequence[RoutingPolicy]
    """In stored order (sorted by canonical encoding), as a load of the written file returns them."""
    encodings: tuple[bytes, ...]
    content_hash: str


def prepare_snapshot(policies: Sequence[RoutingPolicy]) -> SnapshotPayload:
    """Dump and encode the set :data:`_CHUNK` policies at a time, then sort the encodings; its hash
    equals ``policy_set_hash(policies)``. Equal policies have equal encodings, so sorting the bytes
    alone gives the stored order."""
    ordered = tuple(policies)
    encodings: list[bytes] = []
    for start in range(0, len(ordered), _CHUNK):
        dumps = _POLICIES.dump_python(ordered[start : start + _CHUNK], mode="json")
        encodings.extend(canonical_json(dump) for dump in dumps)
    encodings.sort()
    stored = tuple(encodings)
    return SnapshotPayload(
        policies=EncodedPolicies(stored), encodings=stored, content_hash=_array_digest(stored)
    )


def _field(name: str, value: Any) -> bytes:
    return b"  " + json.dumps(name).encode() + b": " + json.dumps(value, ensure_ascii=False).encode("utf-8")


def _envelope(revision: int, saved_at: str, content_hash: str) -> tuple[bytes, bytes]:
    """What :func:`render_snapshot` writes before the first policy line (ending with
    :data:`_POLICIES_OPEN`) and after the last one (starting with :data:`_POLICIES_CLOSE`)."""
    before = b"{\n" + _field("content_hash", content_hash) + b",\n" + _field("format", SNAPSHOT_FORMAT)
    after = _field("revision", revision) + b",\n" + _field("saved_at", saved_at) + b"\n}\n"
    return before + b",\n" + _POLICIES_OPEN, _POLICIES_CLOSE + after


def render_snapshot(revision: int, saved_at: str, payload: SnapshotPayload) -> bytes:
    """The document's bytes: sorted keys, one field per line and one policy per line.

    Each policy line is the policy's canonical encoding, so an operator can ``cat``, ``grep`` and
    ``diff`` it; the hash does not depend on the layout, because it is computed over the re-encoded
    ``policies`` array, not over the file's bytes. Written by hand (``json.dumps`` with ``indent``
    runs the pure-Python encoder), the policy lines joined :data:`_JOIN` at a time.
    """
    encodings = payload.encodings
    if not encodings:
        fields = (
            _field("content_hash", payload.content_hash),
            _field("format", SNAPSHOT_FORMAT),
            b'  "policies": []',
            _field("revision", revision),
            _field("saved_at", saved_at),
        )
        return b"{\n" + b",\n".join(fields) + b"\n}\n"
    before, after = _envelope(revision, saved_at, payload.content_hash)
    pieces = [
        _POLICIES_SEP.join(encodings[start : start + _JOIN]) for start in range(0, len(encodings), _JOIN)
    ]
    return b"".join((before, _POLICIES_SEP.join(pieces), after))


def encode_snapshot(revision: int, saved_at: str, policies: Sequence[RoutingPolicy]) -> tuple[bytes, str]:
    """The document's bytes and its ``content_hash`` (equal to ``policy_set_hash(policies)``)."""
    payload = prepare_snapshot(policies)
    return render_snapshot(revision, saved_at, payload), payload.content_hash


def _safe_loc(loc: tuple[int | str, ...]) -> str:
    # Field names of our own schema are safe to print; a key someone typed into the file is not.
    parts = [str(item) if isinstance(item, int) or item in _SCHEMA_FIELDS else "<key>" for item in loc]
    return ".".join(parts) or "<policy>"


def _schema_message(index: int, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    first = errors[0] if errors else {"loc": (), "type": "invalid"}
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"policy at index {index}: field {_safe_loc(tuple(first['loc']))}: {first['type']}{more}"


def _claimed(document: Any) -> int | None:
    revision = document.get("revision") if isinstance(document, dict) else None
    if isinstance(revision, int) and not isinstance(revision, bool) and 1 <= revision <= MAX_REVISION:
        return revision
    return None


def _parse_json(data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotFormatError("not-utf8", f"not UTF-8 (byte {exc.start})") from None
    try:
        return loads_strict(text, max_depth=MAX_SNAPSHOT_DEPTH)
    except StrictJSONError as exc:
        if exc.kind == "duplicate-key":
            message = "invalid JSON: duplicate key"
        elif exc.kind == "constant":
            message = "invalid JSON: NaN or Infinity"
        else:
            message = str(exc)  # positions and the parser's expectation only, never input text
        raise SnapshotFormatError("invalid-json", message) from None


def _check_envelope(document: Any) -> None:
    claimed = _claimed(document)
    if not isinstance(document, dict):
        raise SnapshotFormatError("wrong-schema", "expected a JSON object")
    missing = sorted(_FIELDS - set(document))
    if missing:
        raise SnapshotFormatError("wrong-schema", f"missing field(s): {', '.join(missing)}", claimed)
    extra = len(set(document) - _FIELDS)
    if extra:
        raise SnapshotFormatError("wrong-schema", f"{extra} unexpected field(s)", claimed)
    if document["format"] != SNAPSHOT_FORMAT:
        raise SnapshotFormatError("wrong-schema", f"format is not {SNAPSHOT_FORMAT}", claimed)
    if claimed is None:
        raise SnapshotFormatError("wrong-schema", f"revision must be an integer in 1..{MAX_REVISION}")
    content_hash = document["content_hash"]
    if not isinstance(content_hash, str) or not _HASH.fullmatch(content_hash):
        raise SnapshotFormatError("wrong-schema", "content_hash must be 64 lower-case hex digits", claimed)
    if not _is_saved_at(document["saved_at"]):
        raise SnapshotFormatError("wrong-schema", "saved_at must be an RFC 3339 UTC timestamp", claimed)
    if not isinstance(document["policies"], list):
        raise SnapshotFormatError("wrong-schema", "policies must be an array", claimed)


def _is_saved_at(value: Any) -> bool:
    """``value`` is an RFC 3339 UTC timestamp as ``save`` writes it, of a real date and time."""
    found = _SAVED_AT.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        return False
    try:
        year, month, day, hour, minute, second = (int(part) for part in found.groups())
        datetime(year, month, day, hour, minute, second)
    except ValueError:  # month 13, February 30, hour 24 ...
        return False
    return True


def _models(raw_policies: list[Any], revision: int) -> tuple[RoutingPolicy, ...]:
    try:
        return _POLICIES.validate_python(raw_policies)
    except ValidationError:
        pass
    for index, item in enumerate(raw_policies):  # the slow path, only to name the first bad policy
        try:
            RoutingPolicy.model_validate(item)
        except ValidationError as exc:
            raise SnapshotFormatError("wrong-schema", _schema_message(index, exc), revision) from None
    raise SnapshotFormatError("wrong-schema", "policies do not validate", revision)  # pragma: no cover


def _check_hash(
    raw_policies: list[Any], policies: tuple[RoutingPolicy, ...], recorded: str, revision: int
) -> list[bytes]:
    """The canonical encodings of the stored policies, once they hash to ``recorded`` and are the
    canonical form; else :class:`SnapshotFormatError`."""
    try:
        encodings = [canonical_json(item) for item in raw_policies]
    except (TypeError, ValueError):  # pragma: no cover - the schema admits only JSON-safe values
        raise SnapshotFormatError("wrong-schema", "policies are not canonical JSON", revision) from None
    computed = _array_digest(encodings)
    if computed != recorded:
        raise SnapshotFormatError(
            "hash-mismatch",
            f"content_hash does not match the policies (recorded {recorded[:12]}, computed {computed[:12]})",
            revision,
        )
    in_order = all(a <= b for a, b in pairwise(encodings))
    if not in_order or list(_POLICIES.dump_python(policies, mode="json")) != raw_policies:
        raise SnapshotFormatError(
            "not-canonical",
            "policies are not in canonical form (every field present, sets sorted, array sorted)",
            revision,
        )
    return encodings


def _split_rendered(data: bytes) -> tuple[Any, list[bytes]] | None:
    """The envelope (parsed, with an empty ``policies`` array) and the policy lines (unparsed) of a
    document laid out as :func:`render_snapshot` writes it; None for any other layout (canonical
    JSON has no raw newline, so the lines split exactly). Exactness does not rest on the split:
    :func:`_fast_decode` accepts the result only if it renders back to the very bytes read."""
    start = data.find(_POLICIES_OPEN)
    end = data.rfind(_POLICIES_CLOSE)
    if start < 0 or end < start + len(_POLICIES_OPEN):
        return None
    envelope = orjson.loads(data[:start] + b'  "policies": [],\n' + data[end + len(_POLICIES_CLOSE) :])
    lines: list[bytes] = []
    position = start + len(_POLICIES_OPEN)
    while (cut := data.find(_POLICIES_SEP, position, end)) >= 0:
        lines.append(data[position:cut])
        position = cut + len(_POLICIES_SEP)
    lines.append(data[position:end])
    return envelope, lines


def _decode_chunk(lines: list[bytes]) -> list[bytes] | None:
    """Parse, schema-check and re-encode a few policy lines; None unless each dumps back to what
    was parsed and is its own canonical encoding. Only the encodings are kept: the parsed objects
    and the models die with the chunk."""
    raw = [orjson.loads(line) for line in lines]
    policies = _POLICIES.validate_python(raw)
    if list(_POLICIES.dump_python(policies, mode="json")) != raw:
        return None
    encodings = [orjson.dumps(item, option=orjson.OPT_SORT_KEYS) for item in raw]
    return encodings if encodings == lines else None


def _decode_lines(lines: list[bytes]) -> tuple[bytes, ...] | None:
    encodings: list[bytes] = []
    for start in range(0, len(lines), _CHUNK):
        decoded = _decode_chunk(lines[start : start + _CHUNK])
        if decoded is None:
            return None
        encodings.extend(decoded)
    return tuple(encodings)


def _fast_decode(data: bytes) -> SnapshotDocument | None:
    """The common case, a file exactly as :func:`render_snapshot` wrote it, in a fraction of the time.

    ``orjson`` parses and re-encodes (several times faster than the strict parser and the canonical
    encoder), and the result counts only if re-rendering the parsed document gives back the very
    bytes read: that proves there was no duplicate key, no ``NaN`` and no stray layout, and that each
    policy line is its own canonical encoding (``save`` wrote it so; ``orjson`` with sorted keys and
    the canonical encoder agree on every schema-valid value, a property test checks). Anything else
    returns None and the strict path decides, with its exact problem kind. The lines are decoded
    :data:`_CHUNK` at a time, and only their encodings are kept.
    """
    try:
        split = _split_rendered(data)
        if split is None:
            return None
        document, lines = split
        _check_envelope(document)
        encodings = _decode_lines(lines)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, SnapshotFormatError, ValidationError):
        return None
    if encodings is None:
        return None
    recorded: str = document["content_hash"]
    if _array_digest(encodings) != recorded or any(a > b for a, b in pairwise(encodings)):
        return None
    before, after = _envelope(document["revision"], document["saved_at"], recorded)
    # The envelope holds _POLICIES_OPEN only at its end and _POLICIES_CLOSE only at its start, so
    # these two checks pin the split points: the bytes are the envelope around the lines, each
    # line its own canonical encoding (_decode_chunk), exactly as render_snapshot writes them.
    if not (data.startswith(before) and data.endswith(after)):
        return None
    policies = EncodedPolicies(encodings)
    return SnapshotDocument(
        revision=document["revision"], content_hash=recorded, saved_at=document["saved_at"], policies=policies
    )


def decode_snapshot(data: bytes) -> SnapshotDocument:
    """Verify a snapshot document; :class:`SnapshotFormatError` on anything that does not hold.

    Checks, in order: strict JSON, the envelope, every policy against the schema, the hash over the
    stored array, and that the stored array is the canonical form (so the hash covers every field of
    every policy, defaults included). The set is *not* re-validated: ``save`` refused any set with
    an error before it wrote, and the hash says this is that set (see "Trusted by its hash" in
    ``docs/policy-store.md``); the resolver stays total on any set that passes the schema.
    """
    fast = _fast_decode(data)
    if fast is not None:
        return fast
    document = _parse_json(data)
    _check_envelope(document)
    revision: int = document["revision"]
    raw_policies: list[Any] = document["policies"]
    policies = _models(raw_policies, revision)
    recorded: str = document["content_hash"]
    encodings = _check_hash(raw_policies, policies, recorded, revision)
    return SnapshotDocument(
        revision=revision,
        content_hash=recorded,
        saved_at=document["saved_at"],
        policies=EncodedPolicies(encodings),
    )
