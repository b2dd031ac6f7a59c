"""The writer's fast lane (``encode_known_clean``) is a shortcut, never a different answer: whenever
it takes a payload, the full sanitizing walk would have returned that payload unchanged and unmarked,
with the same canonical bytes."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.chain import (
    ChainPayloadError,
    PayloadTemplate,
    RoutingAuditLog,
    canonical_bytes,
    sanitized_mapping,
    verify_chain,
)
from otel_route_shadow.chain.format import CleanCache, encode_known_clean, encode_payload, sanitize_payload

CREDENTIALS = ["sk-ant-api03-" + "Qk9" * 14, "AKIACANARYCANARY1234", "password=hunter2", "ghp_" + "Cx" * 18]

_texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(CREDENTIALS),
    st.sampled_from(["\ud800", "a\udfffb", "AKIA", "0123456789abcdef", "1764470400000000000", "Zq"]),
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**60), 2**60), _texts, st.floats(allow_nan=False)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
)
_keys = st.one_of(st.text(max_size=8), st.sampled_from(["token", "api_key", "kind", "trace_id"]))


def _frozen(value: dict[str, Any]) -> Any:
    try:
        return sanitized_mapping(value)
    except Exception:
        return value


_top_values = st.one_of(
    _texts, _scalars, _values, st.dictionaries(st.text(max_size=5), _texts, max_size=3).map(_frozen)
)
_payloads = st.dictionaries(_keys, _top_values, max_size=6)


@settings(max_examples=300)
@given(_payloads, _payloads)
def test_the_fast_lane_agrees_with_the_walk(warm_up: dict[str, Any], payload: dict[str, Any]) -> None:
    cache = CleanCache()
    for seen in (warm_up, payload):
        with contextlib.suppress(Exception):
            sanitize_payload(seen, clean_cache=cache)  # what earlier appends taught the writer
    fast = encode_known_clean(payload, cache)
    if fast is None:
        return
    clean, marks = sanitize_payload(payload)
    assert marks == []
    assert clean == payload
    assert fast == encode_payload(clean, marks)[0] == canonical_bytes(clean)


def _seam_payload(n: int) -> dict[str, Any]:
    attributes = sanitized_mapping(
        {"route_shadow.seam": "agentic", "route_shadow.rung": 3, "route_shadow.agreed": True}
    )
    return {
        "attributes": attributes,
        "kind": "route-shadow",
        "span_id": f"{n * 7919:016x}",
        "start_time_unix_nano": str(1764470400000000000 + n),
        "trace_id": f"{n * 104729:032x}",
    }


def test_every_seam_record_after_the_first_takes_the_fast_lane(tmp_path: Path) -> None:
    log = RoutingAuditLog(tmp_path / "chain.jsonl")
    log.append(_seam_payload(1))
    for n in range(2, 50):
        assert encode_known_clean(_seam_payload(n), log._clean_cache) is not None
        log.append(_seam_payload(n))
    assert verify_chain(tmp_path / "chain.jsonl").intact


def test_a_credential_in_a_top_level_field_still_takes_the_walk(tmp_path: Path) -> None:
    log = RoutingAuditLog(tmp_path / "chain.jsonl")
    log.append(_seam_payload(1))
    payload = {**_seam_payload(2), "trace_id": CREDENTIALS[1]}
    assert encode_known_clean(payload, log._clean_cache) is None
    record = log.append(payload)
    assert [mark.path for mark in record.redactions] == ["/trace_id"]
    assert CREDENTIALS[1] not in (tmp_path / "chain.jsonl").read_text()


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        "\ud800",
        "a\udfffb",
        2**53,
        -(2**53),
        1.5,
        CREDENTIALS[1],
        CREDENTIALS[2],
        {"a": 1},
        [1],
        _Text("plain"),
        ("t",),
    ],
    ids=repr,
)
def test_values_the_walk_would_change_or_refuse_are_left_to_it(value: Any) -> None:
    cache = CleanCache()
    cache.keys.add("k")
    assert encode_known_clean({"k": value}, cache) is None


@pytest.mark.parametrize(
    "value", [None, True, 0, 2**53 - 1, "abc", "0123456789abcdef", "1764470400000000000"], ids=repr
)
def test_plain_values_under_a_known_key_take_the_fast_lane(value: Any) -> None:
    cache = CleanCache()
    cache.keys.add("k")
    assert encode_known_clean({"k": value}, cache) == canonical_bytes({"k": value})


def test_an_unknown_key_is_left_to_the_walk() -> None:
    assert encode_known_clean({"api_key": "abc"}, CleanCache()) is None


# -- templates ---------------------------------------------------------------------------------------

_tokens = st.one_of(
    st.text("0123456789abcdef", min_size=1, max_size=32),
    st.text("0123456789", min_size=1, max_size=20),
    st.sampled_from(["A", "AK", "AKIA", "Zz9", "route"]),
)


@settings(max_examples=200)
@given(
    st.dictionaries(st.text("abcdefghij_.", min_size=1, max_size=10), _values, max_size=5),
    st.lists(
        st.sampled_from(["trace_id", "span_id", "a", "zz", "start"]), min_size=1, max_size=3, unique=True
    ),
    st.data(),
)
def test_a_template_encodes_what_the_walk_and_encoder_would(
    fixed: dict[str, Any], slots: list[str], data: st.DataObject
) -> None:
    fixed = {key: value for key, value in fixed.items() if key not in slots}
    frozen = _frozen(fixed)
    try:
        template = PayloadTemplate({"attributes": frozen, "kind": "route-shadow"}, slots)
    except ChainPayloadError:
        try:
            marks = sanitize_payload({"attributes": frozen})[1]
        except ChainPayloadError:
            return  # the walk refuses it too
        assert marks, "refused a template that needed no redaction"
        return
    tokens = data.draw(st.lists(_tokens, min_size=len(slots), max_size=len(slots)))
    payload = template.payload(tokens)
    clean, marks = sanitize_payload(payload)
    assert marks == [] and clean == payload
    assert template.encode(tokens) == canonical_bytes(clean)


@pytest.mark.parametrize(
    "token", ["", "ab-c", "a b", "é", "AKIACANARYCANARY1234", "\ud800", 7, None], ids=repr
)
def test_a_template_refuses_anything_but_a_token(token: Any) -> None:
    template = PayloadTemplate({"kind": "route-shadow"}, ["trace_id"])
    with pytest.raises(ChainPayloadError):
        template.encode([token])


def test_a_template_refuses_fixed_fields_that_need_redaction_and_bad_slots() -> None:
    with pytest.raises(ChainPayloadError):
        PayloadTemplate({"note": CREDENTIALS[0]}, ["trace_id"])
    with pytest.raises(ChainPayloadError):
        PayloadTemplate({"kind": "x"}, ["kind"])  # a slot must be a new key
    with pytest.raises(ChainPayloadError):
        PayloadTemplate({"kind": "x"}, ["api_key"])  # a key naming a credential is never a slot
    with pytest.raises(ChainPayloadError):
        PayloadTemplate({"kind": "x"}, ["a", "a"])


def test_a_fixed_value_that_looks_like_a_slot_marker_does_not_confuse_the_template() -> None:
    template = PayloadTemplate({"a": "slot0", "b": ["slot1", "xslot0"], "slot0": 1}, ["z", "c"])
    tokens = ["123", "abc"]
    assert template.encode(tokens) == canonical_bytes(template.payload(tokens))


def test_a_templated_append_writes_the_same_line_as_a_plain_one(tmp_path: Path) -> None:
    plain, fast = RoutingAuditLog(tmp_path / "a.jsonl"), RoutingAuditLog(tmp_path / "b.jsonl")
    template = PayloadTemplate(
        {k: v for k, v in _seam_payload(0).items() if k in ("attributes", "kind")},
        ["trace_id", "span_id", "start_time_unix_nano"],
    )
    for n in range(1, 20):
        payload = _seam_payload(n)
        record = plain.append(payload)
        head = fast.append_templated(
            template, [payload["trace_id"], payload["span_id"], payload["start_time_unix_nano"]]
        )
        assert (head.seq, head.record_hash) == (record.seq, record.record_hash)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert verify_chain(tmp_path / "b.jsonl").intact
