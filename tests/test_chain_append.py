"""Appending: genesis and links, the head read from disk, restarts, redaction before hashing, and what
the writer refuses."""

from __future__ import annotations

import enum
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_chain_support import build_chain, plugin_payload

from otel_route_shadow.chain import (
    GENESIS_HASH,
    MAX_ENTRY_BYTES,
    ChainCorruptError,
    ChainHead,
    ChainPayloadError,
    DecisionChain,
    EncodedPayload,
    iter_payloads,
    iter_records,
    verify_chain,
)
from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.group_commit import read_watermark
from otel_route_shadow.chain.record import encode_record
from otel_route_shadow.core.canonical import canonical_json, digest

TAIL_WINDOW = 8 * 1024  # the first probe back from the end (`lines.complete_end`)
SECRET = "sk-ant-api03-" + "Zq9_x-Y8" * 11 + "AA"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_records_link_from_genesis(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    first = log.append({"kind": "route-shadow", "n": 1})
    second = log.append({"kind": "route-shadow", "n": 2})
    assert (first.seq, first.prev_hash) == (0, GENESIS_HASH)
    assert (second.seq, second.prev_hash) == (1, first.record_hash)
    assert log.head() == ChainHead(1, second.record_hash)
    on_disk = _lines(path)
    assert on_disk[0] == first.to_dict() and on_disk[1] == second.to_dict()
    # The record hash is the documented digest: SHA-256 of the canonical JSON of the record body.
    assert first.record_hash == digest(first.body())
    assert path.read_bytes().splitlines()[0] == canonical_json(first.body())[:-1] + (
        b',"record_hash":"' + first.record_hash.encode() + b'"}'
    )
    result = log.verify()
    assert result.intact and result.records == 2 and result.head_hash == second.record_hash


def test_a_restarted_process_continues_the_same_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 5)
    head = DecisionChain(path).head()
    record = DecisionChain(path).append(plugin_payload(5))
    assert head is not None
    assert (record.seq, record.prev_hash) == (5, head.record_hash)
    assert verify_chain(path).records == 6


def test_instances_interleave_without_forking(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    logs = [DecisionChain(path) for _ in range(3)]
    for i in range(30):
        logs[i % 3 if i % 5 else 0].append({"i": i})
    result = verify_chain(path)
    assert result.intact and result.records == 30
    assert [r.seq for r in iter_records(path)] == list(range(30))


def test_head_is_read_from_disk_when_another_writer_appended(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    mine, other = DecisionChain(path), DecisionChain(path)
    mine.append({"who": "mine"})
    other.append({"who": "other"})
    record = mine.append({"who": "mine again"})
    assert record.seq == 2
    assert record.prev_hash == _lines(path)[1]["record_hash"]


def test_head_recovery_reads_a_bounded_tail(tmp_path: Path, pread_bytes: list[int]) -> None:
    """A fresh writer on a long chain reads a few kilobytes from its end, not the chain."""
    path = tmp_path / "chain.jsonl"
    build_chain(path, 3000)
    pread_bytes.clear()  # what building the chain read
    read = pread_bytes
    record = DecisionChain(path).append({"late": True})
    assert record.seq == 3000
    assert sum(read) <= 3 * TAIL_WINDOW  # a probe for the last LF, one for the one before, the line
    assert path.stat().st_size > 100 * sum(read)


def test_head_recovery_widens_the_window_for_a_huge_last_record_an_older_writer_made(tmp_path: Path) -> None:
    """Writers before the entry bound wrote lines up to 4 MiB: a chain ending in one still continues."""
    path = tmp_path / "chain.jsonl"
    small = DecisionChain(path).append({"small": 1})
    big, big_hash = encode_record(1, small.record_hash, canonical_bytes({"big": "x" * (3 << 20)}), b"[]")
    with path.open("ab") as handle:
        handle.write(big)
    assert len(big) > 100 * TAIL_WINDOW
    fresh = DecisionChain(path)
    assert fresh.head() == ChainHead(1, big_hash)
    assert fresh.append({"after": "big"}).prev_hash == big_hash
    assert verify_chain(path).intact


def test_a_planted_credential_never_reaches_the_file_and_the_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    log.append(plugin_payload(0))
    payload = plugin_payload(1)
    payload["attributes"]["route_shadow.context"] = f'{{"env": "ANTHROPIC_API_KEY={SECRET}"}}'
    payload["attributes"][f"header {SECRET}"] = "x"
    payload["note"] = ["ok", "Authorization: Bearer abcdef0123456789", {"password": "hunter2"}]
    payload["pem"] = (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    )
    record = log.append(payload)
    log.append(plugin_payload(2))
    raw = path.read_bytes()
    for needle in (SECRET.encode(), SECRET[-12:].encode(), b"hunter2", b"abcdef0123456789", b"MIIEvQIBADAN"):
        assert needle not in raw
    assert [(m.path, m.rule) for m in record.redactions] == [
        ("/attributes/header [REDACTED]", "credential"),
        ("/attributes/route_shadow.context", "credential"),
        ("/note/1", "credential"),
        ("/note/2/password", "credential"),
        ("/pem", "credential"),
    ]
    assert record.payload["note"][2] == {"password": "[REDACTED]"}
    result = verify_chain(path)
    assert result.intact and result.records == 3
    assert _lines(path)[1]["redactions"] == [m.to_dict() for m in record.redactions]


def test_lone_surrogates_are_replaced_and_marked(tmp_path: Path) -> None:
    log = DecisionChain(tmp_path / "chain.jsonl")
    record = log.append({"s": "bad\ud800end", "ok": "fine\U0001f600"})
    assert record.payload == {"s": "bad\ufffdend", "ok": "fine\U0001f600"}
    assert [(m.path, m.rule) for m in record.redactions] == [("/s", "invalid-unicode")]
    assert log.verify().intact


class _Outcome(enum.StrEnum):
    SELECTED = "selected"


class _Rung(enum.IntEnum):
    NINE = 9


def test_enum_members_and_tuples_become_plain_json(tmp_path: Path) -> None:
    log = DecisionChain(tmp_path / "chain.jsonl")
    record = log.append(
        {"outcome": _Outcome.SELECTED, "rung": _Rung.NINE, "t": (1, "a"), _Outcome.SELECTED: 1}
    )
    assert record.payload == {"outcome": "selected", "rung": 9, "t": [1, "a"], "selected": 1}
    assert type(record.payload["outcome"]) is str and type(record.payload["rung"]) is int
    assert log.verify().intact


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"x": 1.5}, "float 1.5 at /x"),
        ({"a": [0, {"b": 2.0}]}, "float 2.0 at /a/1/b"),
        ({"t": 1_790_000_000_000_000_000}, "decimal strings"),
        ({"t": -(2**53)}, "outside"),
        ({"caf\u00e9": 1}, "ASCII"),
        ({1: "x"}, "keys must be strings"),
        ({"b": b"bytes"}, "unsupported value of type bytes at /b"),
        ({"s": {1, 2}}, "unsupported value of type set"),
        ({"o": object()}, "unsupported value of type object"),
    ],
)
def test_values_the_format_cannot_carry_are_refused(tmp_path: Path, payload: Any, message: str) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    with pytest.raises(ChainPayloadError, match=message):
        log.append(payload)
    assert not path.exists() or path.stat().st_size == 0
    assert isinstance(ChainPayloadError("x"), ValueError)


def test_nesting_and_size_limits(tmp_path: Path) -> None:
    log = DecisionChain(tmp_path / "chain.jsonl")
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["d"] = {}
        node = node["d"]
    with pytest.raises(ChainPayloadError, match="deeper"):
        log.append(deep)
    with pytest.raises(ChainPayloadError, match="exceed"):  # made by hand, not by encode_payload
        log.submit(EncodedPayload(canonical_bytes({"big": "x" * MAX_ENTRY_BYTES}), b"[]"))
    with pytest.raises(ChainPayloadError, match="mapping"):
        log.append(["not", "a", "mapping"])  # type: ignore[arg-type]
    log.append({"ok": 1})
    assert log.verify().records == 1


def test_a_corrupt_last_line_refuses_the_append(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    with path.open("ab") as handle:
        handle.write(b"this is not a record\n")
    size = path.stat().st_size
    with pytest.raises(ChainCorruptError, match="not a record"):
        DecisionChain(path).append({"x": 1})
    assert path.stat().st_size == size


def test_a_replaced_file_is_followed(tmp_path: Path) -> None:
    """A descriptor that outlived its path would write where no reader looks."""
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    log.append({"n": 0})
    os.replace(path, tmp_path / "moved.jsonl")
    record = log.append({"n": 1})
    assert record.seq == 0  # a new file at the path: a new chain
    assert verify_chain(path).records == 1
    assert verify_chain(tmp_path / "moved.jsonl").records == 1


def test_fork_child_continues_the_parents_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    log.append({"who": "parent"})
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            log.append({"who": "child"})
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    log.append({"who": "parent again"})
    assert [p["who"] for _, p in iter_payloads(path)] == ["parent", "child", "parent again"]
    assert verify_chain(path).intact


def test_readers_stream_and_skip_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 4)
    with path.open("ab") as handle:
        handle.write(b'{"payload":{"half')
    assert [seq for seq, _ in iter_payloads(path)] == [0, 1, 2, 3]
    assert [r.seq for r in iter_records(path)] == [0, 1, 2, 3]
    assert DecisionChain(path).head() == ChainHead(3, _lines_complete(path)[-1]["record_hash"])
    assert path.read_bytes().endswith(b"half")  # head() reads; it never repairs


def _lines_complete(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]


def test_empty_and_missing_chains(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    assert log.head() is None
    with pytest.raises(FileNotFoundError):
        log.verify()
    path.touch()
    assert log.verify().intact and log.verify().records == 0
    assert list(iter_payloads(path)) == []


def test_durability_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        DecisionChain(tmp_path / "c.jsonl", durability="sometimes")  # type: ignore[arg-type]


def test_fsync_mode_appends_and_records_a_watermark(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, durability="fsync")
    for i in range(5):
        log.append({"i": i})
    assert log.fsyncs == 5  # one appender, nothing to share
    fd = os.open(f"{path}.sync", os.O_RDONLY)
    try:
        watermark = read_watermark(fd)
    finally:
        os.close(fd)
    assert watermark == (path.stat().st_dev, path.stat().st_ino, path.stat().st_size)
    assert verify_chain(path).intact


def test_record_hash_is_independent_of_key_order(tmp_path: Path) -> None:
    a = DecisionChain(tmp_path / "a.jsonl").append({"x": 1, "y": {"b": 2, "a": 1}})
    b = DecisionChain(tmp_path / "b.jsonl").append({"y": {"a": 1, "b": 2}, "x": 1})
    assert a.record_hash == b.record_hash
    assert hashlib.sha256(canonical_json(a.body())).hexdigest() == a.record_hash


def test_routing_audit_log_the_adrs_name_is_a_deprecated_alias_of_decision_chain() -> None:
    import otel_route_shadow.chain as chain

    with pytest.warns(DeprecationWarning, match="use DecisionChain"):
        assert chain.RoutingAuditLog is DecisionChain
    with pytest.raises(AttributeError):
        _ = chain.NoSuchName
