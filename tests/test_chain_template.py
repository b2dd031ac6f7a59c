"""One way to turn an observation into record bytes: the sanitizing walk and the canonical encoder.
A ``PayloadTemplate`` caches that encoding for a shape the plugin appends many times; these tests pin
that a templated record is byte for byte the record ``DecisionChain.append`` writes for the same
payload, redactions included."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.chain import (
    ChainPayloadError,
    DecisionChain,
    PayloadTemplate,
    canonical_bytes,
    encode_payload,
    sanitize_payload,
)
from otel_route_shadow.shadow.record import record_payload, record_template, record_tokens

CREDENTIAL = "ghp_" + "Cx" * 18

_values = st.one_of(
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.text(max_size=20),
    st.sampled_from([CREDENTIAL, f"Bearer {CREDENTIAL}", "x\ud800y", "password=hunter2", "slot0", '"slot1"']),
)
_attributes = st.dictionaries(
    st.sampled_from(
        ["route_shadow.outcome", "route_shadow.rung", "gen_ai.agent.name", "route_shadow.token", "other.key"]
    ),
    _values,
    max_size=5,
)
_ids = st.tuples(
    st.integers(0, 2**128 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
)


@given(_attributes, _ids)
def test_a_templated_payload_is_the_sanitized_canonical_payload(
    attributes: dict[str, object], ids: tuple[int, int, int, int]
) -> None:
    template = record_template(attributes)
    assert template is not None
    expected = encode_payload(*sanitize_payload(record_payload(*ids[:3], attributes, ids[3])))
    assert template.encode(record_tokens(*ids)) == expected


def test_a_templated_record_is_the_line_append_writes(tmp_path: Path) -> None:
    attributes = {
        "route_shadow.outcome": "selected",
        "route_shadow.token": CREDENTIAL,
        "gen_ai.agent.name": "a\ud800",
    }
    template = record_template(attributes)
    assert template is not None
    plain, templated = DecisionChain(tmp_path / "a.jsonl"), DecisionChain(tmp_path / "b.jsonl")
    for n in range(3):
        ids = (n + 1, n + 2, 1_790_000_000_000_000_000 + n, 1_500_000 * n)
        record = plain.append(record_payload(*ids[:3], attributes, ids[3]))
        assert record.redactions  # the credential and the surrogate were marked
        templated.submit(template.encode(record_tokens(*ids)))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_slot_takes_only_a_token() -> None:
    template = PayloadTemplate({"kind": "route-shadow"}, ["trace_id"])
    for bad in ("", "a b", "é", CREDENTIAL, "AKIA" + "B" * 16):
        with pytest.raises(ChainPayloadError):
            template.encode([bad])
    with pytest.raises(ChainPayloadError):
        template.encode(["a", "b"])
    assert template.encode(["abc123"]).payload == canonical_bytes(
        {"kind": "route-shadow", "trace_id": "abc123"}
    )


def test_slots_must_be_new_plain_keys() -> None:
    for fixed, slots in (
        ({"kind": "x"}, ["kind"]),
        ({"kind": "x"}, ["api_key"]),
        ({"kind": "x"}, ["a", "a"]),
    ):
        with pytest.raises(ChainPayloadError):
            PayloadTemplate(fixed, slots)


def test_a_fixed_value_that_looks_like_a_marker_does_not_confuse_the_template() -> None:
    template = PayloadTemplate({"a": "slot0", "b": ["slot1", "xslot0"], "slot0": 1}, ["z", "c"])
    assert template.encode(["T", "C"]).payload == canonical_bytes(
        {"a": "slot0", "b": ["slot1", "xslot0"], "slot0": 1, "z": "T", "c": "C"}
    )


def test_attributes_the_chain_cannot_carry_have_no_template() -> None:
    assert record_template({"route_shadow.rung": 2**60}) is None
