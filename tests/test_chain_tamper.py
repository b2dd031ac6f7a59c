"""The tamper corpus: every edit names the right verdict, reason class, first bad seq and line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from test_chain_support import build_chain, forge, plugin_payload, write_lines

from otel_route_shadow.chain import Reason, Verdict, verify_chain

N = 8

Tamper = Callable[[list[bytes]], list[bytes]]


def _sub(lines: list[bytes], index: int, pattern: bytes, replacement: bytes) -> list[bytes]:
    out = list(lines)
    new, count = re.subn(pattern, replacement, out[index], count=1)
    assert count == 1, (pattern, out[index])
    out[index] = new
    return out


def _flip_hex(field: bytes, index: int) -> Tamper:
    """Change one hex digit inside ``field``'s 64-hex value of record ``index``."""

    def tamper(lines: list[bytes]) -> list[bytes]:
        out = list(lines)
        line = out[index]
        at = line.index(b'"' + field + b'":"') + len(field) + 4 + 10
        flipped = b"1" if line[at : at + 1] != b"1" else b"2"
        out[index] = line[:at] + flipped + line[at + 1 :]
        return out

    return tamper


def _forged_insert(lines: list[bytes], at: int) -> list[bytes]:
    """Insert, before record ``at``, a record claiming seq ``at`` linked to ``at - 1``, hash recomputed."""
    prev = orjson.loads(lines[at - 1])["record_hash"]
    forged, _ = forge(at, prev, {"kind": "route-shadow", "forged": True})
    return [*lines[:at], forged, *lines[at:]]


def _forged_replace(lines: list[bytes], at: int) -> list[bytes]:
    prev = orjson.loads(lines[at - 1])["record_hash"]
    forged, _ = forge(at, prev, {"kind": "route-shadow", "forged": True})
    return [*lines[:at], forged, *lines[at + 1 :]]


# (name, tamper, verdict, reason, first_bad_seq, line)
CASES: list[tuple[str, Tamper, Verdict, Reason, int, int]] = [
    (
        "payload byte flipped",
        lambda ls: _sub(ls, 3, b'"route_shadow.outcome":"selected"', b'"route_shadow.outcome":"selectee"'),
        Verdict.BROKEN,
        Reason.HASH_MISMATCH,
        3,
        4,
    ),
    (
        "payload int edited",
        lambda ls: _sub(ls, 2, rb'"route_shadow.rung":2', b'"route_shadow.rung":9'),
        Verdict.BROKEN,
        Reason.HASH_MISMATCH,
        2,
        3,
    ),
    (
        "payload bool flipped",
        lambda ls: _sub(ls, 5, b'"route_shadow.agreed":true', b'"route_shadow.agreed":false'),
        Verdict.BROKEN,
        Reason.HASH_MISMATCH,
        5,
        6,
    ),
    (
        "seq digit flipped",
        lambda ls: _sub(ls, 4, rb'"seq":4,', b'"seq":7,'),
        Verdict.BROKEN,
        Reason.HASH_MISMATCH,
        4,
        5,
    ),
    ("prev_hash digit flipped", _flip_hex(b"prev_hash", 6), Verdict.BROKEN, Reason.HASH_MISMATCH, 6, 7),
    ("record_hash digit flipped", _flip_hex(b"record_hash", 1), Verdict.BROKEN, Reason.HASH_MISMATCH, 1, 2),
    (
        "redaction mark added",
        lambda ls: _sub(ls, 3, rb'"redactions":\[\]', b'"redactions":[{"path":"/kind","rule":"credential"}]'),
        Verdict.BROKEN,
        Reason.HASH_MISMATCH,
        3,
        4,
    ),
    (
        "format version changed",
        lambda ls: _sub(ls, 2, rb'"v":1,', b'"v":2,'),
        Verdict.BROKEN,
        Reason.UNKNOWN_VERSION,
        2,
        3,
    ),
    ("record deleted", lambda ls: ls[:3] + ls[4:], Verdict.BROKEN, Reason.RECORD_REMOVED, 3, 4),
    ("first record deleted", lambda ls: ls[1:], Verdict.BROKEN, Reason.RECORD_REMOVED, 0, 1),
    ("two records deleted", lambda ls: ls[:2] + ls[4:], Verdict.BROKEN, Reason.RECORD_REMOVED, 2, 3),
    (
        "record duplicated",
        lambda ls: [*ls[:4], ls[3], *ls[4:]],
        Verdict.BROKEN,
        Reason.REORDERED_OR_DUPLICATED,
        3,
        5,
    ),
    (
        "last record duplicated",
        lambda ls: [*ls, ls[-1]],
        Verdict.BROKEN,
        Reason.REORDERED_OR_DUPLICATED,
        N - 1,
        N + 1,
    ),
    (
        "neighbours swapped",
        lambda ls: [*ls[:3], ls[4], ls[3], *ls[5:]],
        Verdict.BROKEN,
        Reason.REORDERED_OR_DUPLICATED,
        3,
        4,
    ),
    (
        "distant records swapped",
        lambda ls: [*ls[:1], ls[6], *ls[2:6], ls[1], *ls[7:]],
        Verdict.BROKEN,
        Reason.REORDERED_OR_DUPLICATED,
        1,
        2,
    ),
    (
        "record moved to the end",
        lambda ls: [*ls[:2], *ls[3:], ls[2]],
        Verdict.BROKEN,
        Reason.REORDERED_OR_DUPLICATED,
        2,
        3,
    ),
    (
        "truncated mid-line at the end",
        lambda ls: [*ls[:-1], ls[-1][: len(ls[-1]) // 2]],
        Verdict.TORN_TAIL,
        Reason.TORN_TAIL,
        N - 1,
        N,
    ),
    (
        "newline of the last line removed",
        lambda ls: [*ls[:-1], ls[-1][:-1]],
        Verdict.TORN_TAIL,
        Reason.TORN_TAIL,
        N - 1,
        N,
    ),
    (
        "truncated mid-line in the middle",
        lambda ls: [*ls[:5], ls[5][:40] + b"\n", *ls[6:]],
        Verdict.BROKEN,
        Reason.UNPARSEABLE,
        5,
        6,
    ),
    (
        "forged record inserted (hash recomputed)",
        lambda ls: _forged_insert(ls, 4),
        Verdict.BROKEN,
        Reason.FORKED,
        4,
        6,
    ),
    (
        "record replaced by a forgery (hash recomputed)",
        lambda ls: _forged_replace(ls, 4),
        Verdict.BROKEN,
        Reason.LINK_BROKEN,
        5,
        6,
    ),
    (
        "whitespace inserted",
        lambda ls: _sub(ls, 2, rb'"seq":2,', b'"seq": 2,'),
        Verdict.BROKEN,
        Reason.MALFORMED_RECORD,
        2,
        3,
    ),
    (
        "keys reordered",
        lambda ls: _sub(ls, 2, rb'"seq":2,"v":1', b'"v":1,"seq":2'),
        Verdict.BROKEN,
        Reason.MALFORMED_RECORD,
        2,
        3,
    ),
    (
        "duplicate key",
        lambda ls: _sub(ls, 2, rb'"seq":2,', b'"seq":2,"seq":2,'),
        Verdict.BROKEN,
        Reason.MALFORMED_RECORD,
        2,
        3,
    ),
    (
        "member removed",
        lambda ls: _sub(ls, 2, rb'"redactions":\[\],', b""),
        Verdict.BROKEN,
        Reason.MALFORMED_RECORD,
        2,
        3,
    ),
    (
        "garbage line inserted",
        lambda ls: [*ls[:3], b"hello\n", *ls[3:]],
        Verdict.BROKEN,
        Reason.UNPARSEABLE,
        3,
        4,
    ),
    ("blank line inserted", lambda ls: [*ls[:3], b"\n", *ls[3:]], Verdict.BROKEN, Reason.UNPARSEABLE, 3, 4),
    (
        "CRLF line ending",
        lambda ls: [*ls[:3], ls[3][:-1] + b"\r\n", *ls[4:]],
        Verdict.BROKEN,
        Reason.MALFORMED_RECORD,
        3,
        4,
    ),
]


@pytest.fixture
def chain(tmp_path: Path) -> tuple[Path, list[bytes]]:
    path = tmp_path / "chain.jsonl"
    return path, build_chain(path, N)


@pytest.mark.parametrize(
    ("name", "tamper", "verdict", "reason", "seq", "line"), CASES, ids=[case[0] for case in CASES]
)
def test_tamper_corpus(
    chain: tuple[Path, list[bytes]],
    name: str,
    tamper: Tamper,
    verdict: Verdict,
    reason: Reason,
    seq: int,
    line: int,
) -> None:
    path, lines = chain
    assert verify_chain(path).intact
    write_lines(path, tamper(lines))
    result = verify_chain(path)
    assert (result.verdict, result.reason, result.first_bad_seq, result.line) == (
        verdict,
        reason,
        seq,
        line,
    ), (
        name,
        result.describe(),
    )
    assert not result.intact
    # The verified prefix is reported honestly: every record before the bad line is counted.
    assert result.records == line - 1
    assert result.detail
    # Strict mode (every line checked the slow, exact way) agrees with the default walk.
    assert verify_chain(path, strict=True).to_dict() == result.to_dict()


def test_seq_gap_with_intact_links(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    prev = "0" * 64
    lines = []
    for seq in (0, 1, 2, 5, 6):
        line, prev = forge(seq, prev, plugin_payload(seq))
        lines.append(line)
    write_lines(path, lines)
    result = verify_chain(path)
    assert (result.reason, result.first_bad_seq, result.line) == (Reason.SEQ_GAP, 3, 4)


def test_wrong_genesis_is_a_broken_link(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    line, _ = forge(0, "1" * 64, plugin_payload(0))
    write_lines(path, [line])
    result = verify_chain(path)
    assert (result.reason, result.first_bad_seq, result.line) == (Reason.LINK_BROKEN, 0, 1)


def test_removing_trailing_records_is_invisible_without_an_anchor(chain: tuple[Path, list[bytes]]) -> None:
    """Documented limit: a chain cut at a record boundary verifies; only the head hash, compared with
    an external witness (the trace backend, a published head), reveals the cut."""
    path, lines = chain
    head = verify_chain(path).head_hash
    write_lines(path, lines[:-2])
    result = verify_chain(path)
    assert result.intact and result.records == N - 2
    assert result.head_hash != head


def test_every_single_byte_change_is_detected(tmp_path: Path) -> None:
    """Change each byte of a small chain to another value: the chain never still verifies intact."""
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, 2, lambda i: {"k": "v" * i, "n": i, "b": True, "z": None, "l": [1, "x"]})
    data = b"".join(lines)
    for position in range(len(data)):
        original = data[position]
        for replacement in {original ^ 0x01, ord("0") if original != ord("0") else ord("1"), ord(" ")} - {
            original
        }:
            path.write_bytes(data[:position] + bytes([replacement]) + data[position + 1 :])
            result = verify_chain(path)
            assert not result.intact, (position, chr(original), chr(replacement))


# --- Checkpoint-backed detection (issue 12): the attacks a hash chain alone cannot see ------------------

TLOG_VECTORS = Path(__file__).parent / "vectors" / "tlog"


def _tlog_manifest() -> dict[str, object]:
    return orjson.loads((TLOG_VECTORS / "manifest.json").read_bytes())  # type: ignore[no-any-return]


def _tlog_notes() -> list[str]:
    from otel_route_shadow.logstore import read_note_file

    return read_note_file(str(TLOG_VECTORS / "chain.jsonl.tlog" / "checkpoints")).notes


@pytest.mark.parametrize("attack", sorted(_tlog_manifest()["attacks"]))  # type: ignore[call-overload]
def test_checkpoints_detect_what_the_chain_alone_misses(attack: str) -> None:
    """Truncation, head pruning with re-linking, a rewrite with recomputed hashes and a forged insert
    all leave the hash chain intact; the signed checkpoints catch each below the last checkpoint."""
    from otel_route_shadow.logstore.consistency import verify_against_checkpoints

    expected = _tlog_manifest()["attacks"][attack]  # type: ignore[index]
    path = TLOG_VECTORS / attack
    assert verify_chain(path).intact, "the attack must be invisible to the chain alone"
    verifier = (TLOG_VECTORS / "verifier.txt").read_text().strip()
    report = verify_against_checkpoints(
        str(path), _tlog_notes(), [verifier], tiles_dir=str(TLOG_VECTORS / "chain.jsonl.tlog")
    )
    assert not report.ok
    assert report.reason.value == expected["reason"]
    assert report.first_bad_seq == expected["first_bad_seq"]
    assert report.checkpointed_size == expected["checkpointed_size"]
    assert report.chain_size == len(path.read_bytes().splitlines())


def test_the_untouched_vector_chain_is_consistent_with_every_checkpoint() -> None:
    from otel_route_shadow.logstore.consistency import verify_against_checkpoints

    verifier = (TLOG_VECTORS / "verifier.txt").read_text().strip()
    report = verify_against_checkpoints(str(TLOG_VECTORS / "chain.jsonl"), _tlog_notes(), [verifier])
    assert report.ok and report.authenticated
    assert (report.checkpointed_size, report.chain_size, report.unprotected) == (40, 40, 0)
    assert [v.size for v in report.verdicts] == [10, 20, 30, 40]


@pytest.mark.parametrize("note_file", sorted(_tlog_manifest()["notes"]))  # type: ignore[call-overload]
def test_forked_forged_and_foreign_checkpoints_are_named(note_file: str) -> None:
    from otel_route_shadow.logstore.consistency import verify_against_checkpoints

    expected = _tlog_manifest()["notes"][note_file]  # type: ignore[index]
    verifier = (TLOG_VECTORS / "verifier.txt").read_text().strip()
    extra = (TLOG_VECTORS / note_file).read_text()
    report = verify_against_checkpoints(
        str(TLOG_VECTORS / "chain.jsonl"), [*_tlog_notes(), extra], [verifier]
    )
    assert not report.ok
    assert report.reason.value == expected
    assert report.verdicts[-1].reason.value == expected
    assert all(v.ok for v in report.verdicts[:-1])


def test_two_checkpoints_that_contradict_each_other_are_a_fork_even_when_the_chain_matches_neither(
    tmp_path: Path,
) -> None:
    """A rewritten chain matches none of the checkpoints; a fork note of size 20 still contradicts the
    size-40 checkpoint whose signed root the stored tiles reproduce."""
    from otel_route_shadow.logstore.consistency import verify_against_checkpoints

    verifier = (TLOG_VECTORS / "verifier.txt").read_text().strip()
    notes = [*_tlog_notes(), (TLOG_VECTORS / "fork-note.txt").read_text()]
    report = verify_against_checkpoints(
        str(TLOG_VECTORS / "head-pruned-relinked.jsonl"),
        notes,
        [verifier],
        tiles_dir=str(TLOG_VECTORS / "chain.jsonl.tlog"),
    )
    reasons = [v.reason.value for v in report.verdicts]
    assert reasons == ["record-changed"] * 3 + ["truncated", "fork"]
    assert report.first_bad_seq == 0
