"""Published test vectors (``tests/vectors/chain``): a valid chain, damaged variants with their expected
verdicts, and canonical-form vectors. Checked three ways: our ``verify``, an independent verifier written
from ``docs/chain-format.md`` with the standard library only, and regeneration (the committed files are
exactly what the writer produces today).

Regenerate after a deliberate format change with ``python tests/test_chain_vectors.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from otel_route_shadow.chain import DecisionChain, verify_chain
from otel_route_shadow.chain.backlog import dropped_event
from otel_route_shadow.chain.record import encode_record
from otel_route_shadow.core.canonical import canonical_json

VECTORS = Path(__file__).resolve().parent / "vectors" / "chain"

# -- building the vectors -----------------------------------------------------------------------------------

_TORN = b'{"payload":{"kind":"route-shadow","trace_id":"5f3c'


def _valid_payloads() -> list[dict[str, Any]]:
    return [
        {
            "kind": "route-shadow",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "span_id": "00f067aa0ba902b7",
            "start_time_unix_nano": "1790000000000000000",
            "attributes": {
                "route_shadow.outcome": "selected",
                "route_shadow.policy_source": "legacy-compatibility",
                "route_shadow.rung": 9,
                "route_shadow.legacy.mechanism": "role-dial",
                "route_shadow.legacy.detail": "provider=zai",
                "route_shadow.transport": "harness-direct",
                "route_shadow.agreed": True,
            },
        },
        {
            "kind": "route-shadow",
            "note": "credential in a context: ANTHROPIC_API_KEY=sk-ant-api03-EXAMPLEEXAMPLEEXAMPLE0123456789",
            "headers": {"authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"},
            "aws": ["AKIAIOSFODNN7EXAMPLE"],
        },
        {
            "kind": "route-shadow",
            "text": "na\u00efve \u2014 \u65e5\u672c\u8a9e \U0001f600",
            "controls": 'tab\tnl\ncr\r"quoted" back\\slash \x01 \x7f \u2028',
            "broken": "lone\ud800surrogate",
        },
        {
            "kind": "route-shadow",
            "max": 9007199254740991,
            "min": -9007199254740991,
            "zero": 0,
            "empty_list": [],
            "empty_object": {},
            "null": None,
            "flags": [True, False],
            "Order": {"b": 1, "a": 2, "B": 3, "_": 4, "~": 5, "a/b": 6},
        },
    ]


def json_bytes(value: Any) -> bytes:
    """Sorted-keys JSON: the canonical form inside the value domain, and outside it (a float, a
    non-ASCII name) what a writer that ignored the domain would produce."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build_vectors(out: Path) -> None:
    """Write every vector file and ``manifest.json`` into ``out``; deterministic."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*"):
        if stale.is_file():
            stale.unlink()
    cases: list[dict[str, Any]] = []

    # The valid chain, through the real writer: redaction, surrogate repair, and one torn-tail quarantine.
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "valid.jsonl"
        payloads = _valid_payloads()
        with DecisionChain(path) as log:
            for payload in payloads[:3]:
                log.append(payload)
        with path.open("ab") as handle:
            handle.write(_TORN)
        with DecisionChain(path) as log:
            log.append(payloads[3])
            log.append({"kind": "route-shadow", "last": True})
        for produced in Path(scratch).iterdir():
            if produced.name.endswith(".lost"):  # the writer's lost-record counter, not a vector
                continue
            shutil.copy(produced, out / produced.name)
    valid = (out / "valid.jsonl").read_bytes().splitlines(keepends=True)

    def variant(name: str, lines: list[bytes], expect: dict[str, Any], about: str) -> None:
        """``head_hash`` of the verified prefix: the record hash on line ``records`` of this file."""
        (out / name).write_bytes(b"".join(lines))

        def with_head(expected: dict[str, Any]) -> dict[str, Any]:
            verified = expected["records"]
            head_hash = record(lines[verified - 1])["record_hash"] if verified else None
            return {**expected, "head_hash": head_hash}

        case = {"file": name, "about": about, "dropped_records": 0, **with_head(expect)}
        if "strict" in expect:
            case["strict"] = with_head(expect["strict"])
        cases.append(case)

    def record(line: bytes) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def intact(records: int) -> dict[str, Any]:
        return {"verdict": "intact", "reason": None, "first_bad_seq": None, "line": None, "records": records}

    def broken(reason: str, seq: int, line: int) -> dict[str, Any]:
        return {
            "verdict": "broken",
            "reason": reason,
            "first_bad_seq": seq,
            "line": line,
            "records": line - 1,
        }

    head = record(valid[-1])
    cases.append(
        {
            "file": "valid.jsonl",
            "about": "six records: a redacted record, a repaired surrogate, a torn-tail quarantine event",
            "verdict": "intact",
            "reason": None,
            "first_bad_seq": None,
            "line": None,
            "records": len(valid),
            "head_hash": head["record_hash"],
            "dropped_records": 0,
        }
    )
    variant(
        "empty.jsonl",
        [],
        {
            "verdict": "intact",
            "reason": None,
            "first_bad_seq": None,
            "line": None,
            "records": 0,
        },
        "no records",
    )

    edited = list(valid)
    edited[2] = edited[2].replace(b"na\xc3\xafve", b"naive")
    variant("payload-edited.jsonl", edited, broken("hash-mismatch", 2, 3), "a payload string edited")

    edited = list(valid)
    at = edited[4].index(b'"record_hash":"') + 20
    edited[4] = edited[4][:at] + (b"0" if edited[4][at : at + 1] != b"0" else b"1") + edited[4][at + 1 :]
    variant("hash-edited.jsonl", edited, broken("hash-mismatch", 4, 5), "one digit of a record_hash edited")

    variant("record-removed.jsonl", valid[:3] + valid[4:], broken("record-removed", 3, 4), "record 3 deleted")
    variant(
        "records-swapped.jsonl",
        [valid[0], valid[2], valid[1], *valid[3:]],
        broken("reordered-or-duplicated", 1, 2),
        "records 1 and 2 swapped",
    )
    variant(
        "record-duplicated.jsonl",
        [*valid[:3], valid[2], *valid[3:]],
        broken("reordered-or-duplicated", 2, 4),
        "record 2 repeated",
    )
    forged, _ = encode_record(3, record(valid[2])["record_hash"], canonical_json({"kind": "forged"}), b"[]")
    variant(
        "forged-insert.jsonl",
        [*valid[:3], forged, *valid[3:]],
        broken("forked", 3, 5),
        "a record claiming seq 3, linked to record 2, hash recomputed, inserted before the real record 3",
    )
    variant(
        "forged-replace.jsonl",
        [*valid[:3], forged, *valid[4:]],
        broken("link-broken", 4, 5),
        "record 3 replaced by a forgery with a recomputed hash",
    )
    variant(
        "torn-tail.jsonl",
        [*valid, _TORN],
        {
            "verdict": "torn-tail",
            "reason": "torn-tail",
            "first_bad_seq": 6,
            "line": 7,
            "records": 6,
        },
        "an append cut short after the last record",
    )
    variant(
        "unparseable-line.jsonl",
        [*valid[:3], b"not json\n", *valid[3:]],
        broken("unparseable", 3, 4),
        "a line that is not JSON",
    )
    variant(
        "unknown-version.jsonl",
        [*valid[:5], valid[5].replace(b'"v":1,', b'"v":2,')],
        broken("unknown-version", 5, 6),
        "the last record claims format version 2",
    )
    variant(
        "not-canonical.jsonl",
        [*valid[:1], valid[1].replace(b'"seq":1,', b'"seq": 1,'), *valid[2:]],
        broken("malformed-record", 1, 2),
        "a space inserted: the line is not in canonical form",
    )

    prev = "0" * 64
    gap: list[bytes] = []
    for seq in (0, 1, 2, 4):
        line, prev = encode_record(seq, prev, canonical_json({"kind": "route-shadow", "n": seq}), b"[]")
        gap.append(line)
    variant("seq-gap.jsonl", gap, broken("seq-gap", 3, 4), "hashes link but seq jumps from 2 to 4")
    bad_genesis, _ = encode_record(0, "f" * 64, canonical_json({"kind": "route-shadow"}), b"[]")
    variant(
        "wrong-genesis.jsonl",
        [bad_genesis],
        broken("link-broken", 0, 1),
        "the first record does not link to the genesis value",
    )

    # The rules docs/chain-format.md section 8 settles, one vector each.
    variant(
        "byte-order-mark.jsonl",
        [b"\xef\xbb\xbf" + valid[0], *valid[1:]],
        broken("unparseable", 0, 1),
        "a UTF-8 byte order mark before the first record: not whitespace, not JSON",
    )
    variant(
        "duplicate-name.jsonl",
        [*valid[:2], valid[2].replace(b'{"payload":{', b'{"payload":{"kind":"route-shadow",', 1), *valid[3:]],
        broken("malformed-record", 2, 3),
        "a payload member name twice (same value): the line is not the layout of its parsed body",
    )
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "line-separators.jsonl"
        with DecisionChain(path) as log:
            log.append({"kind": "route-shadow", "text": "a\u2028b\u2029c\u0085d\u000be\u000cf"})
            log.append({"kind": "route-shadow", "after": True})
        separators = path.read_bytes().splitlines(keepends=True)
    variant(
        "line-separators.jsonl",
        [b"".join(separators[:-1]), separators[-1]],
        intact(2),
        "raw U+2028, U+2029 and U+0085 inside a string (and escaped VT, FF): lines end at 0x0A only",
    )
    prev = "0" * 64
    domain: list[bytes] = []
    for payload in ({"kind": "route-shadow"}, {"kind": "route-shadow", "ratio": 1.5}):
        line, prev = encode_record(len(domain), prev, json_bytes(payload), b"[]")
        domain.append(line)
    variant(
        "float-value.jsonl",
        domain,
        {**intact(2), "strict": broken("malformed-record", 1, 2)},
        "a number with a fraction, hashed correctly: outside the value domain; reported by the optional "
        "value-domain check (strict), accepted by a verifier that does not make it",
    )
    prev = "0" * 64
    domain = []
    for payload in ({"kind": "route-shadow"}, {"kind": "route-shadow", "cl\u00e9": 1}):
        line, prev = encode_record(len(domain), prev, json_bytes(payload), b"[]")
        domain.append(line)
    variant(
        "non-ascii-name.jsonl",
        domain,
        {**intact(2), "strict": broken("malformed-record", 1, 2)},
        "a non-ASCII member name in the payload, hashed correctly: as float-value.jsonl",
    )
    deep: Any = "bottom"
    for _ in range(40):
        deep = [deep]
    line, _ = encode_record(0, "0" * 64, json_bytes({"kind": "route-shadow", "deep": deep}), b"[]")
    variant(
        "deep-nesting.jsonl",
        [line],
        intact(1),
        "a payload nested 41 levels: the 32-level limit binds writers, not verifiers",
    )
    prev = "0" * 64
    gap = []
    for payload in (
        {"kind": "route-shadow", "n": 0},
        dropped_event(3, 1790000000000000000, 1790000000250000000),
        {"kind": "route-shadow", "n": 4},
    ):
        line, prev = encode_record(len(gap), prev, canonical_json(payload), b"[]")
        gap.append(line)
    variant(
        "records-dropped.jsonl",
        gap,
        {**intact(3), "dropped_records": 3},
        "a records-dropped event: the chain is intact and says 3 records were dropped",
    )

    # Lines that would exceed one tlog-tiles entry (65,535 bytes): cut by the real writer, and marked.
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "truncated.jsonl"
        with DecisionChain(path) as log:
            log.append({"kind": "route-shadow", "n": 0})
            log.append(
                {"kind": "route-shadow", "context": "c" * 50_000, "detail": "d" * 40_000, "short": "kept"}
            )
            log.append({"kind": "route-shadow", **{f"name-{i:03d}-{'k' * 160}": i for i in range(400)}})
        truncated = path.read_bytes().splitlines(keepends=True)
    variant(
        "truncated.jsonl",
        truncated,
        intact(3),
        "two strings cut to one common length (rule truncated), and a payload of long member names "
        "replaced by a record-truncated placeholder: every line at most 65,535 bytes",
    )

    (out / "manifest.json").write_text(
        json.dumps({"format_version": 1, "cases": cases}, indent=2, ensure_ascii=False) + "\n", "utf-8"
    )

    canonical_cases = [
        ("empty object", {}),
        ("key order is by code unit", {"b": 1, "a": 2, "B": 3, "_": 4, "~": 5, "aa": 6, "a/b": 7}),
        ("integers at the edge", [9007199254740991, -9007199254740991, 0, -1]),
        ("escapes", '"\\/\b\f\n\r\t\x00\x1f'),
        ("no escape for DEL, U+2028 and non-ASCII", "\x7f\u2028\u00e9\u65e5\U0001f600"),
        ("nesting", {"a": [{"b": None, "c": [True, False]}], "d": {}}),
        (
            "a record body",
            {"payload": {"kind": "route-shadow"}, "prev_hash": "0" * 64, "redactions": [], "seq": 0, "v": 1},
        ),
    ]
    with (out / "canonical.jsonl").open("wb") as handle:
        for name, value in canonical_cases:
            text = canonical_json(value)
            entry = {
                "name": name,
                "value": value,
                "canonical": text.decode("utf-8"),
                "sha256": hashlib.sha256(text).hexdigest(),
            }
            handle.write(canonical_json(entry) + b"\n")


# -- an independent verifier, written from docs/chain-format.md with the standard library only ---------------

GENESIS = "0" * 64
HEX64 = re.compile(r"[0-9a-f]{64}")
MEMBERS = {"v", "seq", "prev_hash", "payload", "redactions", "record_hash"}


def _canon(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _ints_ok(value: Any) -> bool:
    """Rule 4: every integer within +-(2**53-1)."""
    if type(value) is int:
        return -(2**53 - 1) <= value <= 2**53 - 1
    if isinstance(value, dict):
        return all(_ints_ok(v) for v in value.values())
    if isinstance(value, list):
        return all(_ints_ok(v) for v in value)
    return True


def _in_domain(value: Any) -> bool:
    """Rule 7, the optional value-domain check: no floats, ASCII member names."""
    if type(value) is float:
        return False
    if isinstance(value, dict):
        return all(k.isascii() and _in_domain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_in_domain(v) for v in value)
    return True


def _dropped(payload: dict[str, Any]) -> int:
    count = payload.get("count")
    return count if payload.get("kind") == "records-dropped" and type(count) is int and count >= 0 else 0


def _check(raw: bytes, strict: bool = False) -> tuple[str, Any]:
    """('ok', (seq, prev_hash, record_hash)) or ('bad', reason) for one line without its LF."""
    if len(raw) > 4 * 1024 * 1024:
        return "bad", "unparseable"
    try:
        obj = json.loads(raw.decode("utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "bad", "unparseable"
    if type(obj) is not dict or "v" not in obj:
        return "bad", "malformed-record"
    if type(obj["v"]) is not int or obj["v"] != 1:
        return "bad", "unknown-version"
    if set(obj) != MEMBERS:
        return "bad", "malformed-record"
    seq, prev, payload, marks, claimed = (
        obj["seq"],
        obj["prev_hash"],
        obj["payload"],
        obj["redactions"],
        obj["record_hash"],
    )
    if type(seq) is not int or seq < 0 or type(payload) is not dict or type(marks) is not list:
        return "bad", "malformed-record"
    if not (
        isinstance(prev, str)
        and HEX64.fullmatch(prev)
        and isinstance(claimed, str)
        and HEX64.fullmatch(claimed)
    ):
        return "bad", "malformed-record"
    keys = []
    for mark in marks:
        if (
            type(mark) is not dict
            or set(mark) != {"path", "rule"}
            or mark["rule"] not in ("credential", "invalid-unicode", "truncated")
        ):
            return "bad", "malformed-record"
        if not isinstance(mark["path"], str) or (mark["path"] and not mark["path"].startswith("/")):
            return "bad", "malformed-record"
        keys.append((mark["path"], mark["rule"]))
    if keys != sorted(set(keys)) or not _ints_ok(payload):
        return "bad", "malformed-record"
    body = {k: obj[k] for k in MEMBERS - {"record_hash"}}
    try:
        canonical = _canon(body)
    except ValueError:
        return "bad", "malformed-record"
    if raw != canonical[:-1] + b',"record_hash":"' + claimed.encode() + b'"}':
        return "bad", "malformed-record"
    if hashlib.sha256(canonical).hexdigest() != claimed:
        return "bad", "hash-mismatch"
    if strict and not _in_domain(payload):
        return "bad", "malformed-record"
    return "ok", (seq, prev, claimed, _dropped(payload))


def auditor_verify(path: Path, strict: bool = False) -> dict[str, Any]:
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    torn = data[len(complete) :]
    lines = complete.split(b"\n")[:-1]
    seq_expected, prev_expected, hashes, dropped = 0, GENESIS, [], 0

    def result(verdict: str, reason: str | None, seq: int | None, line: int | None) -> dict[str, Any]:
        return {
            "verdict": verdict,
            "reason": reason,
            "first_bad_seq": seq,
            "line": line,
            "records": len(hashes),
            "head_hash": hashes[-1] if hashes else None,
            "dropped_records": dropped,
        }

    for number, raw in enumerate(lines, start=1):
        status, value = _check(raw, strict)
        if status == "bad":
            return result("broken", value, seq_expected, number)
        seq, prev, record_hash, count = value
        if seq == seq_expected and prev == prev_expected:
            dropped += count
            hashes.append(record_hash)
            seq_expected, prev_expected = seq + 1, record_hash
            continue
        if seq == seq_expected:
            return result("broken", "link-broken", seq_expected, number)
        if seq < seq_expected:
            same = hashes[seq] == record_hash
            return result("broken", "reordered-or-duplicated" if same else "forked", seq, number)
        if prev == prev_expected:
            return result("broken", "seq-gap", seq_expected, number)
        later = any(
            status == "ok" and value[0] == seq_expected and value[1] == prev_expected
            for status, value in (_check(r, strict) for r in lines[number:])
        )
        return result(
            "broken", "reordered-or-duplicated" if later else "record-removed", seq_expected, number
        )
    if torn:
        return result("torn-tail", "torn-tail", seq_expected, len(lines) + 1)
    return result("intact", None, None, None)


# -- the tests ---------------------------------------------------------------------------------------------

MANIFEST = (
    json.loads((VECTORS / "manifest.json").read_text("utf-8"))["cases"]
    if (VECTORS / "manifest.json").exists()
    else []
)
FIELDS = ("verdict", "reason", "first_bad_seq", "line", "records", "head_hash")


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("case", MANIFEST, ids=[case["file"] for case in MANIFEST])
def test_vector_verdicts(case: dict[str, Any], strict: bool) -> None:
    """Both verifiers agree with the manifest; ``strict`` (the optional value-domain check) differs
    only where a case says so."""
    path = VECTORS / case["file"]
    expected = {k: case.get("strict", case)[k] if strict else case[k] for k in FIELDS}
    ours = verify_chain(path, strict=strict).to_dict()
    assert {k: ours[k] for k in FIELDS} == expected
    auditor = auditor_verify(path, strict)
    assert {k: auditor[k] for k in FIELDS} == expected
    if not strict:
        assert ours["dropped_records"] == auditor["dropped_records"] == case["dropped_records"]


SEGMENT_REASONS = {"anchor-mismatch", "segment-edited", "segment-misplaced", "segment-missing"}
"""Reasons about a chain of several files (docs/chain-format.md 14.4): a vector here is one file, so these
are tested on segmented chains in tests/test_chain_segments.py and tests/test_cli_exit_codes.py, and by
the vectors of tests/vectors/segments (tests/test_segment_vectors.py)."""


def test_vectors_cover_every_reason_class() -> None:
    from otel_route_shadow.chain import Reason

    one_file = {reason.value for reason in Reason} - SEGMENT_REASONS
    assert {case["reason"] for case in MANIFEST} - {None} == one_file
    assert {reason.value for reason in Reason} >= SEGMENT_REASONS


def test_canonical_vectors() -> None:
    for raw in (VECTORS / "canonical.jsonl").read_bytes().splitlines():
        entry = json.loads(raw)
        text = entry["canonical"].encode("utf-8")
        assert canonical_json(entry["value"]) == text == _canon(entry["value"])
        assert hashlib.sha256(text).hexdigest() == entry["sha256"]


def test_every_line_the_writer_made_fits_a_tlog_tiles_entry() -> None:
    """A tlog-tiles entry bundle prefixes each entry with a uint16 length: lines of at most 65,535 bytes."""
    lines = (VECTORS / "truncated.jsonl").read_bytes().split(b"\n")[:-1]
    assert max(map(len, lines)) <= 65_535
    marks = [json.loads(line)["redactions"] for line in lines]
    assert marks == [
        [],
        [{"path": "/context", "rule": "truncated"}, {"path": "/detail", "rule": "truncated"}],
        [{"path": "", "rule": "truncated"}],
    ]
    cut = json.loads(lines[1])["payload"]
    assert len(cut["context"]) == len(cut["detail"]) and cut["context"].endswith("[TRUNCATED]")
    assert cut["short"] == "kept"
    assert json.loads(lines[2])["payload"]["kind"] == "record-truncated"


def test_the_quarantine_in_the_valid_chain_is_complete() -> None:
    payloads = [json.loads(line)["payload"] for line in (VECTORS / "valid.jsonl").read_bytes().splitlines()]
    event = next(p for p in payloads if p.get("kind") == "chain-quarantine")
    quarantined = (VECTORS / event["file"]).read_bytes()
    assert quarantined == _TORN and hashlib.sha256(quarantined).hexdigest() == event["sha256"]


def test_the_worked_example_in_the_format_document_verifies(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "chain-format.md").read_text("utf-8")
    lines = [line.removeprefix("line    = ") for line in doc.splitlines() if '"record_hash":"' in line]
    lines = [line for line in lines if line.startswith('{"payload":')]
    assert len(lines) == 2
    path = tmp_path / "example.jsonl"
    path.write_text("".join(line + "\n" for line in lines), "utf-8")
    result = verify_chain(path)
    assert result.intact and result.records == 2
    assert auditor_verify(path)["verdict"] == "intact"
    assert "f28a7ff35bab716bb0a90c97c7769334fad25c2f2d50ac183519dae721bfee21" in lines[0]


def test_vectors_are_what_the_writer_produces_today(tmp_path: Path) -> None:
    build_vectors(tmp_path)
    committed = sorted(p.name for p in VECTORS.iterdir() if p.is_file() and p.name != "README.md")
    assert sorted(p.name for p in tmp_path.iterdir()) == committed
    for name in committed:
        assert (tmp_path / name).read_bytes() == (VECTORS / name).read_bytes(), name


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    build_vectors(VECTORS)
    print(f"wrote vectors to {VECTORS}", file=sys.stderr)
