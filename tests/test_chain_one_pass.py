"""One pass over the chain gives what the two passes gave: the chain's verdict and the checkpoints' verdicts.

``verify --checkpoint`` used to read the chain twice: the full verifier of docs/chain-format.md section 8
(every line parsed and checked), then the checkpoint verifier (every line's leaf hash; record hashes and
links from the largest authenticated checkpoint that holds on). The one pass hashes the lines below the
largest authenticated checkpoint as leaves only and checks the rest in full (section 13.7), reading the
lines below again only when that checkpoint does not hold. These tests hold it to a model of the two
passes, on random damage done to chains after their checkpoints were signed (written first against the
two passes, then kept).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chain_support import build_chain, forge, hash_of, relink, write_lines
from tlog_support import root_from_leaf_hashes

from otel_route_shadow.chain import GENESIS_HASH, VerifyResult, verify_chain
from otel_route_shadow.logstore import Checkpointer, ConsistencyReason, ConsistencyReport, check_chain
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.logstore.links import line_holds, record_hash_of
from otel_route_shadow.tlog import Signer, leaf_hash, parse_checkpoint, parse_note

ORIGIN = "example.com/route-shadow/one-pass"
SIGNER = Signer.generate(ORIGIN)
VERIFIER = str(SIGNER.verifier())
DAMAGES = ["none", "flip", "delete", "duplicate", "swap", "truncate", "torn", "forge", "relink"]


def _payload(i: int) -> dict[str, object]:
    if i % 7 == 3:  # a records-dropped event: the verdict counts them
        return {"count": i, "kind": "records-dropped"}
    return {"kind": "route-shadow", "n": i, "note": "x" * (i % 5) * 40}


_LINES: dict[int, list[bytes]] = {}


def _chain(count: int) -> list[bytes]:
    if count not in _LINES:
        with tempfile.TemporaryDirectory() as directory:
            _LINES[count] = build_chain(Path(directory) / "c.jsonl", count, _payload)
    return _LINES[count]


def _sign(chain: Path, lines: list[bytes], sizes: list[int]) -> list[str]:
    """Notes signed by the Checkpointer (which checks every line's record hash and link before it
    signs) over the intact chain's first ``size`` lines, tiles written beside the chain."""
    notes = []
    for size in sorted(set(sizes)):
        write_lines(chain, lines[:size])
        made = Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint()
        assert made is not None and made.size == size
        notes.append(made.note)
    return notes


def _damaged(lines: list[bytes], damage: str, at: int, byte: int) -> bytes:
    out = list(lines)
    i = at % len(out)
    if damage == "flip":
        raw = bytearray(b"".join(out))
        where = at % len(raw)
        raw[where] = byte if byte != raw[where] else (byte + 1) % 256
        return bytes(raw)
    if damage == "delete":
        del out[i]
    elif damage == "duplicate":
        out.insert(i, out[i])
    elif damage == "swap" and i + 1 < len(out):
        out[i], out[i + 1] = out[i + 1], out[i]
    elif damage == "truncate":
        out = out[:i]
    elif damage == "torn":
        out.append(out[i][: 1 + byte % (len(out[i]) - 1)])
    elif damage == "forge":  # a record replaced by one with a recomputed hash: the next one's link breaks
        prev = GENESIS_HASH if i == 0 else hash_of(out[i - 1])
        out[i], _ = forge(i, prev, {"kind": "route-shadow", "forged": True})
    elif damage == "relink":  # an edit covered by recomputing every hash after it
        out[i] = out[i].replace(b'"kind":"route-shadow"', b'"kind":"route-shadox"')
        out = relink(out, i)
    return b"".join(out)


# -- the model: what the two passes gave ------------------------------------------------------------


def _complete_lines(raw: bytes) -> list[bytes]:
    return raw.split(b"\n")[:-1]


def _vouched(report: ConsistencyReport, keyed: bool) -> int:
    return max((v.size or 0 for v in report.verdicts if v.ok), default=0) if keyed else 0


def _broken_from(lines: list[bytes], start: int) -> int | None:
    """The link pass: the first line at or after ``start`` whose record hash or link fails."""
    prev = GENESIS_HASH.encode() if start == 0 else record_hash_of(lines[start - 1])
    for seq in range(start, len(lines)):
        if not line_holds(lines[seq], prev, seq):
            return seq
        prev = record_hash_of(lines[seq])
    return None


def _expected_verdict(raw: bytes, note: str) -> ConsistencyReason:
    checkpoint = parse_checkpoint(parse_note(note).text)
    leaves = [leaf_hash(line) for line in _complete_lines(raw)]
    if checkpoint.size > len(leaves):
        return ConsistencyReason.TRUNCATED
    if root_from_leaf_hashes(leaves[: checkpoint.size]) == checkpoint.root:
        return ConsistencyReason.OK
    return ConsistencyReason.RECORD_CHANGED


def _one_pass(
    chain: Path, notes: list[str], keys: list[str], jobs: int
) -> tuple[VerifyResult, ConsistencyReport]:
    """The chain's verdict and the checkpoints' report, as ``verify --checkpoint`` computes them."""
    checked = check_chain(str(chain), notes, keys, jobs=jobs)
    assert checked.report == verify_against_checkpoints(str(chain), notes, keys, jobs=jobs)
    return checked.chain, checked.report


@pytest.fixture
def parallel_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_route_shadow.chain import parallel

    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.usefixtures("parallel_everywhere")
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    count=st.integers(1, 40),
    sizes=st.lists(st.integers(1, 40), max_size=2),
    damage=st.sampled_from(DAMAGES),
    at=st.integers(0, 1 << 20),
    byte=st.integers(0, 255),
    keyed=st.booleans(),
    jobs=st.sampled_from([1, 2]),
)
def test_one_pass_gives_the_verdicts_of_the_two_passes_on_a_damaged_chain(
    count: int, sizes: list[int], damage: str, at: int, byte: int, keyed: bool, jobs: int
) -> None:
    lines = _chain(count)
    sizes = [min(size, count) for size in sizes]
    with tempfile.TemporaryDirectory() as directory:
        chain = Path(directory) / "chain.jsonl"
        notes = _sign(chain, lines, sizes)
        raw = _damaged(lines, damage, at, byte) if damage != "none" else b"".join(lines)
        chain.write_bytes(raw)
        result, report = _one_pass(chain, notes, [VERIFIER] if keyed else [], jobs)
        full = verify_chain(chain)
    complete = _complete_lines(raw)
    # The chain's verdict: as the full verifier of section 8 gives it.
    assert result.to_dict() == full.to_dict()
    # Each checkpoint's verdict: the root of the chain's leaves at its size.
    assert [v.reason for v in report.verdicts] == [_expected_verdict(raw, note) for note in notes]
    assert report.chain_size == len(complete)
    # Record hashes and links: checked from the largest authenticated checkpoint that holds.
    assert report.chain_broken_seq == _broken_from(complete, _vouched(report, keyed))
    for verdict in report.verdicts:  # the tiles are intact: a changed record is located exactly
        if verdict.reason is ConsistencyReason.RECORD_CHANGED:
            assert verdict.size is not None
            signed = [line.rstrip(b"\n") for line in lines[: verdict.size]]
            assert verdict.first_bad_seq == next(i for i, line in enumerate(signed) if complete[i] != line)


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """Spies: the ``unchecked`` of every pass over the chain, and the lines each checked in full."""
    from otel_route_shadow.chain import scan as chain_scan
    from otel_route_shadow.logstore import consistency

    passes: list[int] = []
    checked: list[int] = []
    real_pass, real_check = consistency.verify_pass, chain_scan.check_lines

    def spy_pass(*args: Any, **kwargs: Any) -> Any:
        passes.append(kwargs.get("unchecked", 0))
        return real_pass(*args, **kwargs)

    def spy_check(lines: list[bytes], *args: Any) -> Any:
        checked.append(len(lines))
        return real_check(lines, *args)

    monkeypatch.setattr(consistency, "verify_pass", spy_pass)
    monkeypatch.setattr(chain_scan, "check_lines", spy_check)
    return passes, checked


def test_below_a_holding_checkpoint_the_one_read_hashes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _chain(40)
    chain = tmp_path / "chain.jsonl"
    notes = _sign(chain, lines, [10, 30])
    write_lines(chain, lines)
    passes, checked = _count_reads(monkeypatch)
    checked_chain = check_chain(str(chain), notes, [VERIFIER])
    assert checked_chain.report.ok and checked_chain.chain.intact and checked_chain.chain.records == 40
    assert passes == [30] and sum(checked) == 10  # one read; lines 30..39 checked in full
    assert checked_chain.marked_offset == sum(map(len, lines[:30]))
    assert checked_chain.chain.to_dict() == verify_chain(chain).to_dict()


def test_when_the_largest_checkpoint_does_not_hold_the_lines_below_are_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _chain(40)
    chain = tmp_path / "chain.jsonl"
    notes = _sign(chain, lines, [10, 30])
    chain.write_bytes(_damaged(lines, "forge", 20, 0))
    passes, _ = _count_reads(monkeypatch)
    checked_chain = check_chain(str(chain), notes, [VERIFIER])
    assert [v.reason for v in checked_chain.report.verdicts] == [
        ConsistencyReason.OK,
        ConsistencyReason.RECORD_CHANGED,
    ]
    assert passes == [30, 10]  # the second read checks from the checkpoint that holds
    assert checked_chain.chain.first_bad_seq == 21 and checked_chain.report.chain_broken_seq == 21
    assert checked_chain.chain.to_dict() == verify_chain(chain).to_dict()


def test_without_keys_or_with_strict_every_line_is_checked_in_the_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _chain(40)
    chain = tmp_path / "chain.jsonl"
    notes = _sign(chain, lines, [30])
    write_lines(chain, lines)
    passes, checked = _count_reads(monkeypatch)
    assert check_chain(str(chain), notes, []).report.ok
    assert check_chain(str(chain), notes, [VERIFIER], strict=True).report.ok
    assert passes == [0, 0] and sum(checked) == 80


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("unchecked", [0, 10, 30])
def test_a_line_too_long_to_buffer_ends_the_leaves_in_one_process_or_several(
    tmp_path: Path, unchecked: int
) -> None:
    from otel_route_shadow.chain import MAX_LINE_BYTES, verify_pass
    from otel_route_shadow.logstore.integrity import TreeSink

    lines = _chain(40)
    chain = tmp_path / "chain.jsonl"
    write_lines(chain, [*lines[:20], b"{" + b"x" * (MAX_LINE_BYTES + 10) + b"}\n", *lines[20:]])
    seen = []
    for jobs in (1, 2):
        sink = TreeSink(chunk_levels=2)
        result = verify_pass(chain, jobs=jobs, unchecked=unchecked, leaves=sink).result
        seen.append((result.to_dict(), sink.tree().levels[0]))
    assert seen[0] == seen[1]
    result_dict, leaves = seen[0]
    assert (result_dict["first_bad_seq"], result_dict["reason"]) == (20, "unparseable")
    assert leaves == b"".join(leaf_hash(line.rstrip(b"\n")) for line in lines[:20])
