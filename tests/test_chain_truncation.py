"""Every line the writer emits fits one C2SP tlog-tiles entry (at most 65,535 bytes without its LF):
oversize strings are cut and marked ``truncated``, and a payload no cut fits becomes a placeholder.
The record still verifies, and says what was cut."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_route_shadow.chain import (
    MAX_ENTRY_BYTES,
    MAX_SAFE_INTEGER,
    RULE_TRUNCATED,
    TRUNCATED_KIND,
    DecisionChain,
    PayloadTemplate,
    encode_payload,
    sanitize_payload,
    truncation,
    verify_chain,
)
from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.record import ENTRY_OVERHEAD, GENESIS_HASH, PAYLOAD_BUDGET, encode_record
from otel_route_shadow.chain.truncation import TRUNCATED_SUFFIX, cut_to_fit
from otel_route_shadow.core.redaction import REDACTED, redact_text


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def test_the_entry_overhead_is_what_a_line_adds_at_the_largest_seq() -> None:
    line, _ = encode_record(MAX_SAFE_INTEGER, GENESIS_HASH, b"", b"")
    assert len(line) - 1 == ENTRY_OVERHEAD == 215
    assert PAYLOAD_BUDGET + ENTRY_OVERHEAD == MAX_ENTRY_BYTES == 65_535


def test_a_payload_that_fits_is_untouched_and_one_byte_more_is_cut(tmp_path: Path) -> None:
    base = canonical_bytes({"kind": "k", "s": ""})
    fits = {"kind": "k", "s": "x" * (PAYLOAD_BUDGET - len(base) - 2)}  # "[]" for the marks
    encoded = encode_payload(fits, [])
    assert len(encoded.payload) + len(encoded.marks) == PAYLOAD_BUDGET
    assert encoded.payload == canonical_bytes(fits)
    over = {"kind": "k", "s": fits["s"] + "x"}
    cut = orjson.loads(encode_payload(over, []).payload)
    assert cut["s"].endswith(TRUNCATED_SUFFIX) and cut["kind"] == "k"
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    assert log.append(fits).redactions == ()
    record = log.append(over)
    assert [(m.path, m.rule) for m in record.redactions] == [("/s", RULE_TRUNCATED)]
    assert all(len(line) <= MAX_ENTRY_BYTES for line in _lines(path))
    assert len(_lines(path)[0]) == MAX_ENTRY_BYTES - len(str(MAX_SAFE_INTEGER)) + 1  # seq 0: one digit


def test_the_longest_strings_are_cut_to_one_common_length_and_short_ones_are_kept(tmp_path: Path) -> None:
    payload = {
        "kind": "route-shadow",
        "attributes": {"a": "a" * 50_000, "b": "b" * 40_000, "c": "c" * 20_000, "short": "kept"},
        "list": ["l" * 30_000, "tiny"],
    }
    record = DecisionChain(tmp_path / "chain.jsonl").append(payload)
    cut = record.payload
    assert cut["kind"] == "route-shadow" and cut["attributes"]["short"] == "kept" and cut["list"][1] == "tiny"
    lengths = {len(cut["attributes"][k]) for k in "abc"} | {len(cut["list"][0])}
    assert len(lengths) == 1  # one common length, the suffix included
    assert all(
        value.endswith(TRUNCATED_SUFFIX)
        for value in (*cut["attributes"].values(), cut["list"][0])
        if value != "kept"
    )
    marks = [(m.path, m.rule) for m in record.redactions]
    assert marks == sorted(
        [
            ("/attributes/a", "truncated"),
            ("/attributes/b", "truncated"),
            ("/attributes/c", "truncated"),
            ("/list/0", "truncated"),
        ]
    )
    assert verify_chain(tmp_path / "chain.jsonl").intact


def test_a_payload_no_cut_can_fit_becomes_a_placeholder_naming_what_was_cut(tmp_path: Path) -> None:
    payload = {"kind": "route-shadow", **{f"k{'x' * 200}{i}": i for i in range(400)}}  # long names, ints
    clean, _ = sanitize_payload(payload)
    original = canonical_bytes(clean)
    record = DecisionChain(tmp_path / "chain.jsonl").append(payload)
    assert record.payload == {
        "kind": TRUNCATED_KIND,
        "original_bytes": len(original),
        "original_kind": "route-shadow",
        "original_sha256": hashlib.sha256(original).hexdigest(),
    }
    assert [(m.path, m.rule) for m in record.redactions] == [("", RULE_TRUNCATED)]
    assert verify_chain(tmp_path / "chain.jsonl").intact


def test_a_cut_prefix_that_looks_like_a_credential_is_redacted() -> None:
    # "password=[REDACTED]" is clean (a value already redacted); cut inside the brackets, its prefix
    # "password=[RED" would be a credential pair.
    text = "y" * 200 + " before password=[REDACTED] after " + "y" * 200
    assert redact_text(text)[1] == 0
    payload = {"s": text}
    encoded = canonical_bytes(payload)
    for budget in range(170, len(encoded) + 2):  # above what the placeholder takes
        cut, marks = cut_to_fit(payload, [], encoded, budget)
        assert len(canonical_bytes(cut)) + len(canonical_bytes([m.to_dict() for m in marks])) <= budget
        if cut == payload:
            continue
        kept = cut["s"].removesuffix(TRUNCATED_SUFFIX)
        marked = ("/s", "credential") in [(m.path, m.rule) for m in marks]
        assert redact_text(kept)[1] == 0 or marked, kept  # no credential shape survives unmarked
    strings = list(truncation._strings(payload, ""))
    cap = len("y" * 200 + " before password=[RED") + len(TRUNCATED_SUFFIX)
    cuts, added = truncation._cuts(strings, cap)
    assert cuts["/s"].endswith("password=" + REDACTED + TRUNCATED_SUFFIX)
    assert sorted((m.path, m.rule) for m in added) == [("/s", "credential"), ("/s", "truncated")]


def test_a_template_whose_record_would_not_fit_is_cut_like_any_payload() -> None:
    template = PayloadTemplate({"kind": "route-shadow", "blob": "b" * 70_000}, ["trace_id"])
    encoded = template.encode(["abc123"])
    assert len(encoded.payload) + len(encoded.marks) <= PAYLOAD_BUDGET
    assert encoded == encode_payload(*sanitize_payload(template.payload(["abc123"])))
    small = PayloadTemplate({"kind": "route-shadow"}, ["trace_id"])
    assert small.encode(["abc123"]) == encode_payload(*sanitize_payload(small.payload(["abc123"])))


_keys = st.text(st.characters(max_codepoint=127), max_size=300)
_strings = st.one_of(
    st.text(max_size=40),
    st.builds(lambda c, n: c * n, st.characters(), st.integers(0, 90_000)),
    st.builds(lambda n: "\u0001" * n, st.integers(0, 30_000)),  # six bytes each once escaped
)
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER), _strings),
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(_keys, inner, max_size=6)),
    max_leaves=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.dictionaries(_keys, _values, min_size=1, max_size=8), st.integers(0, MAX_SAFE_INTEGER))
def test_no_line_the_writer_emits_exceeds_an_entry_and_the_record_verifies(
    payload: dict[str, Any], seq: int
) -> None:
    import tempfile

    clean, marks = sanitize_payload(payload)
    encoded = encode_payload(clean, marks)
    line, _ = encode_record(seq, GENESIS_HASH, encoded.payload, encoded.marks)
    assert len(line) - 1 <= MAX_ENTRY_BYTES
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "chain.jsonl"
        log = DecisionChain(path)
        record = log.append(payload)
        log.append({"after": True})
        lines = _lines(path)
        assert all(len(line) <= MAX_ENTRY_BYTES for line in lines)
        result = verify_chain(path, strict=True)
        assert result.intact and result.records == 2, result.describe()
        stored = orjson.loads(lines[0])
        assert stored["payload"] == record.payload
        cut = {m.path for m in record.redactions if m.rule == RULE_TRUNCATED}
        if len(canonical_bytes(clean)) + len(
            encoded.marks
        ) <= PAYLOAD_BUDGET and encoded.payload == canonical_bytes(clean):
            assert not cut and record.payload == clean
        for path_ in cut - {""}:
            value: Any = record.payload
            for token in path_.split("/")[1:]:
                token = token.replace("~1", "/").replace("~0", "~")
                value = value[int(token)] if isinstance(value, list) else value[token]
            assert value.endswith(TRUNCATED_SUFFIX)
