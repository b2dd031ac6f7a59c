"""The canonical form: the orjson fast path is byte-identical to ``core.canonical.canonical_json`` on every
value a record can hold, both agree with RFC 8785 (JCS) there, and a record line is exactly what the
format document says."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.chain import (
    GENESIS_HASH,
    MAX_SAFE_INTEGER,
    DecisionChain,
    canonical_bytes,
    sanitize_payload,
    verify_chain,
)
from otel_route_shadow.chain.record import encode_payload, encode_record
from otel_route_shadow.core.canonical import canonical_json, digest

# -- an RFC 8785 serializer for the record value domain, written from the RFC -------------------------


def _jcs_string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _utf16_key(key: str) -> list[int]:
    data = key.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def jcs(value: Any) -> bytes:
    """RFC 8785 for null, booleans, integers of at most 53 bits, strings, arrays and objects."""

    def encode(item: Any) -> str:
        if item is None:
            return "null"
        if item is True:
            return "true"
        if item is False:
            return "false"
        if isinstance(item, int):
            return str(item)
        if isinstance(item, str):
            return _jcs_string(item)
        if isinstance(item, list):
            return "[" + ",".join(encode(x) for x in item) + "]"
        if isinstance(item, dict):
            keys = sorted(item, key=_utf16_key)
            return "{" + ",".join(f"{_jcs_string(k)}:{encode(item[k])}" for k in keys) + "}"
        raise TypeError(type(item))

    return encode(value).encode("utf-8")


# -- the value domain ---------------------------------------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
_KEYS = st.text(st.characters(max_codepoint=127), max_size=12)
_INTS = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
_LEAVES = st.one_of(
    st.none(), st.booleans(), _INTS, _TEXT, st.sampled_from(["\u2028", "\x7f", "\x00", "😀", '"\\/'])
)
RECORD_VALUES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(_KEYS, children, max_size=5)),
    max_leaves=40,
)
PAYLOADS = st.dictionaries(_KEYS, RECORD_VALUES, max_size=6)


@given(RECORD_VALUES)
def test_fast_path_is_byte_identical_to_canonical_json(value: Any) -> None:
    assert canonical_bytes(value) == canonical_json(value)


@given(RECORD_VALUES)
def test_canonical_json_is_rfc8785_on_record_values(value: Any) -> None:
    assert canonical_json(value) == jcs(value)


def test_where_the_encoders_would_disagree_is_outside_the_domain() -> None:
    """Why the rules exclude floats and non-ASCII keys: here a sorted-keys encoder and JCS differ."""
    assert canonical_json(1.0) != jcs_float(1.0)
    assert canonical_json(1e20) != jcs_float(1e20)
    keys = {"\ue000": 1, "\U0001f600": 2}  # code point order vs UTF-16 code unit order
    assert canonical_json(keys) != jcs(keys)


def jcs_float(value: float) -> bytes:
    # ECMAScript Number::toString for the two values used above.
    return {1.0: b"1", 1e20: b"100000000000000000000"}[value]


@given(
    PAYLOADS, st.integers(min_value=0, max_value=MAX_SAFE_INTEGER), st.sampled_from([GENESIS_HASH, "ab" * 32])
)
def test_a_record_line_is_the_documented_layout(payload: dict[str, Any], seq: int, prev: str) -> None:
    clean, marks = sanitize_payload(payload)
    payload_bytes, marks_bytes = encode_payload(clean, marks)
    line, record_hash = encode_record(seq, prev, payload_bytes, marks_bytes)
    body = {
        "payload": clean,
        "prev_hash": prev,
        "redactions": [m.to_dict() for m in marks],
        "seq": seq,
        "v": 1,
    }
    assert record_hash == digest(body) == hashlib.sha256(canonical_json(body)).hexdigest()
    assert line == canonical_json(body)[:-1] + b',"record_hash":"' + record_hash.encode() + b'"}\n'
    assert json.loads(line) == {**body, "record_hash": record_hash}


_ANY = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        _INTS,
        st.text(max_size=20),  # lone surrogates included
        st.sampled_from(["password=x", "sk-ant-api03-" + "a" * 30, "AKIAIOSFODNN7EXAMPLE"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.one_of(_KEYS, st.sampled_from(["token", "x-api-key"])), children, max_size=4),
    ),
    max_leaves=25,
)


@given(st.dictionaries(_KEYS, _ANY, max_size=5))
def test_sanitized_payloads_are_always_inside_the_domain(payload: dict[str, Any]) -> None:
    clean, marks = sanitize_payload(payload)
    assert canonical_bytes(clean) == canonical_json(clean) == jcs(clean)
    assert [(m.path, m.rule) for m in marks] == sorted({(m.path, m.rule) for m in marks})
    again, more = sanitize_payload(clean)
    assert again == clean and more == []  # sanitizing is idempotent


@given(st.lists(PAYLOADS, min_size=1, max_size=4))
def test_any_domain_payloads_make_a_verifying_chain(
    tmp_path_factory: Any, payloads: list[dict[str, Any]]
) -> None:
    path = tmp_path_factory.mktemp("chain") / "chain.jsonl"
    with DecisionChain(path) as log:
        for payload in payloads:
            log.append(payload)
    result = verify_chain(path, strict=True)
    assert result.intact and result.records == len(payloads)
