"""``verify_against_checkpoints`` hashes each line only below the largest authenticated checkpoint that holds.

Lines are checked in full from that checkpoint's size on (line S's link against line S-1's record
hash); without keys, or when no checkpoint holds, every line is checked as before.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chain_support import build_chain, build_old_chain, edited, forge, hash_of, write_lines
from tlog_support import root_from_leaf_hashes

from otel_route_shadow.chain import GENESIS_HASH, leaf_hashes, verify_chain, verify_pass
from otel_route_shadow.chain import parallel as chain_parallel
from otel_route_shadow.lines import read_line_blocks
from otel_route_shadow.logstore import Checkpointer, ConsistencyReason, chain_tree
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.logstore.integrity import TreeSink
from otel_route_shadow.logstore.links import line_holds, record_hash_of
from otel_route_shadow.tlog import (
    Checkpoint,
    Signer,
    leaf_hash,
    parse_checkpoint,
    parse_note,
    sign_note,
    tree_hash,
)

ORIGIN = "example.com/route-shadow/fast-path"
SIGNER = Signer.generate(ORIGIN)
VERIFIER = str(SIGNER.verifier())


def _plain(i: int) -> dict[str, object]:
    return {"kind": "route-shadow", "n": i}


def _tricky(i: int) -> dict[str, object]:
    # A payload member named like the record's own: the block fast path gives way to the exact walk.
    return {"kind": "route-shadow", "n": i, "prev_hash": "f" * 64, "note": 'say "prev_hash":"x"'}


def _signed_at(chain: Path, lines: list[bytes], size: int) -> str:
    """The note the Checkpointer signs over the first ``size`` lines; the chain then holds ``lines``."""
    write_lines(chain, lines[:size])
    made = Checkpointer(str(chain), ORIGIN, SIGNER).checkpoint()
    assert made is not None and made.size == size
    write_lines(chain, lines)
    return made.note


def test_a_broken_record_beyond_the_checkpoint_is_broken_chain_with_its_seq(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 60, _plain)
    note = _signed_at(chain, lines, 40)
    write_lines(chain, edited(lines, 50))
    report = verify_against_checkpoints(str(chain), [note], [VERIFIER])
    assert report.reason is ConsistencyReason.BROKEN_CHAIN and report.chain_broken_seq == 50
    assert [v.reason for v in report.verdicts] == [ConsistencyReason.OK]
    assert (report.checkpointed_size, report.unprotected, report.authenticated) == (40, 20, True)


@pytest.mark.parametrize("payload", [_plain, _tricky], ids=["plain", "tricky-payload"])
def test_a_broken_link_at_exactly_the_checkpoint_size_is_found(tmp_path: Path, payload: object) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 60, payload)
    note = _signed_at(chain, lines, 40)
    relinked = list(lines)
    # Line 40's own hash holds, but it links to line 38 instead of line 39 (the last signed line).
    relinked[40], _ = forge(40, hash_of(lines[38]), payload(40))  # type: ignore[operator]
    write_lines(chain, relinked)
    report = verify_against_checkpoints(str(chain), [note], [VERIFIER])
    assert report.reason is ConsistencyReason.BROKEN_CHAIN and report.chain_broken_seq == 40


def test_an_edit_below_the_checkpoint_is_record_changed_as_before(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 60, _plain)
    note = _signed_at(chain, lines, 40)
    write_lines(chain, edited(lines, 12))
    report = verify_against_checkpoints(str(chain), [note], [VERIFIER])
    assert report.reason is ConsistencyReason.RECORD_CHANGED and report.first_bad_seq == 12
    assert report.chain_broken_seq == 12  # no checkpoint holds: every line was checked


def _note_over(lines: list[bytes], size: int, signers: list[Signer]) -> str:
    """A note over the first ``size`` lines as they are now, by a signer that checks nothing."""
    root = root_from_leaf_hashes([leaf_hash(line.rstrip(b"\n")) for line in lines[:size]])
    return sign_note(Checkpoint(ORIGIN, size, root).text(), signers)


def test_without_keys_every_line_is_checked_even_below_a_holding_checkpoint(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = edited(build_chain(chain, 60, _plain), 10)
    write_lines(chain, lines)
    note = _note_over(lines, 40, [SIGNER])
    report = verify_against_checkpoints(str(chain), [note], [])
    assert [v.reason for v in report.verdicts] == [ConsistencyReason.OK] and not report.authenticated
    assert report.reason is ConsistencyReason.BROKEN_CHAIN and report.chain_broken_seq == 10


def test_when_no_checkpoint_is_authenticated_every_line_is_checked(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = edited(build_chain(chain, 60, _plain), 10)
    write_lines(chain, lines)
    stranger = Signer.generate("stranger.example/route-shadow")
    report = verify_against_checkpoints(str(chain), [_note_over(lines, 40, [stranger])], [VERIFIER])
    assert [v.reason for v in report.verdicts] == [ConsistencyReason.UNKNOWN_KEY]
    assert report.chain_broken_seq == 10


def test_below_an_authenticated_checkpoint_the_signers_check_is_relied_on(tmp_path: Path) -> None:
    """The documented trust: a key that signed a broken line vouched for it (the Checkpointer never
    does); the lines beyond its checkpoint are still checked."""
    chain = tmp_path / "chain.jsonl"
    lines = edited(build_chain(chain, 60, _plain), 10)
    write_lines(chain, lines)
    report = verify_against_checkpoints(str(chain), [_note_over(lines, 40, [SIGNER])], [VERIFIER])
    assert report.ok and report.chain_broken_seq is None and report.checkpointed_size == 40
    write_lines(chain, edited(lines, 45))
    report = verify_against_checkpoints(str(chain), [_note_over(lines, 40, [SIGNER])], [VERIFIER])
    assert report.chain_broken_seq == 45


def _broken_by_definition(lines: list[bytes], start: int) -> int | None:
    prev = GENESIS_HASH.encode() if start == 0 else record_hash_of(lines[start - 1].rstrip(b"\n"))
    for seq in range(start, len(lines)):
        line = lines[seq].rstrip(b"\n")
        if not line_holds(line, prev, seq):
            return seq
        prev = record_hash_of(line)
    return None


@pytest.fixture
def parallel_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chain_parallel, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("jobs", [1, 3])
def test_the_pass_from_any_seq_finds_the_first_broken_line_by_definition(tmp_path: Path, jobs: int) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = edited(build_chain(chain, 120, _tricky), 70)
    write_lines(chain, lines)
    for start in range(122):
        expected = _broken_by_definition(lines, min(start, 120))
        result = verify_pass(chain, jobs=jobs, unchecked=start).result
        assert (None if result.intact else result.first_bad_seq) == expected, start
        assert result.records == (120 if expected is None else expected)


_CHAINS: dict[str, list[bytes]] = {}  # filled lazily: one chain per payload kind


def _chain_lines(kind: str) -> list[bytes]:
    if kind not in _CHAINS:
        with tempfile.TemporaryDirectory() as directory:
            _CHAINS[kind] = build_chain(
                Path(directory) / "c.jsonl", 24, _plain if kind == "plain" else _tricky
            )
    return _CHAINS[kind]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["plain", "tricky"]), st.data())
def test_the_fast_path_and_the_full_scan_agree_after_any_single_byte_edit(
    kind: str, data: st.DataObject
) -> None:
    lines = _chain_lines(kind)
    count = data.draw(st.integers(1, len(lines)), label="records")
    size = data.draw(st.integers(1, count), label="checkpoint size")
    raw = bytearray(b"".join(lines[:count]))
    at = data.draw(st.integers(0, len(raw) - 1), label="offset")
    raw[at] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]), label="byte")
    with tempfile.TemporaryDirectory() as directory:
        chain = Path(directory) / "chain.jsonl"
        note = _signed_at(chain, lines[:count], size)
        chain.write_bytes(bytes(raw))
        fast = verify_against_checkpoints(str(chain), [note], [VERIFIER])
        full, tree = verify_chain(chain), chain_tree(str(chain))
        signed = parse_checkpoint(parse_note(note).text)
        holds = size <= tree.size and tree_hash(tree, size) == signed.root
        assert fast.ok == (holds and full.verdict.value != "broken")
        if at < len(raw) - 1:  # only a changed final LF can pass: the last line is then a torn tail
            assert not fast.ok


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30), st.integers(1, 48))
def test_the_reused_buffer_gives_every_line_as_a_leaf_whatever_the_block_size(
    lines: list[bytes], block_bytes: int
) -> None:
    """Lines longer than the buffer grow it; a line's tail moves to the front for the next read."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "lines"
        path.write_bytes(b"".join(line + b"\n" for line in lines) + b"torn")
        end = path.stat().st_size - 4
        got: list[bytes] = []
        offsets: list[int] = []
        with open(path, "rb", buffering=0) as handle:
            for offset, buffer, stop in read_line_blocks(handle, 0, end, block_bytes):
                offsets.append(offset)
                got.append(leaf_hashes(buffer, stop))
        assert b"".join(got) == b"".join(leaf_hash(line) for line in lines)
        data = path.read_bytes()
        assert all(offset == 0 or data[offset - 1 : offset] == b"\n" for offset in offsets)


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("chunk_levels", [0, 1, 3, 5])
@pytest.mark.parametrize(("count", "jobs"), [(1, 2), (2, 2), (7, 2), (64, 2), (200, 3), (299, 2)])
def test_the_tree_built_in_worker_processes_is_the_tree_built_here(
    tmp_path: Path, count: int, jobs: int, chunk_levels: int
) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain, count, _plain)
    sink = TreeSink(chunk_levels)
    assert verify_pass(chain, jobs=jobs, leaves=sink).result.intact
    tree = sink.tree()
    here = chain_tree(str(chain))
    assert tree.levels == here.levels and here.size == count
    assert tree_hash(tree, count) == root_from_leaf_hashes([here.node(0, i) for i in range(count)])


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("jobs", [1, 2])
def test_line_bounds_are_found_past_the_first_probe_in_lines_and_a_torn_tail_longer_than_it(
    tmp_path: Path, jobs: int
) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_old_chain(chain, 12, lambda i: {"kind": "route-shadow", "n": i, "blob": "x" * 150_000})
    with open(chain, "ab") as handle:
        handle.write(b'{"torn' + b"y" * 200_000)  # longer than the first 64 KiB read from the end
    sink = TreeSink()
    result = verify_pass(chain, jobs=jobs, unchecked=5, leaves=sink).result
    assert sink.tree().levels[0] == b"".join(leaf_hash(line.rstrip(b"\n")) for line in lines)
    assert result.bytes_verified == sum(map(len, lines)) and result.records == 12


@pytest.mark.parametrize("payload", [_plain, _tricky], ids=["block-fast-path", "exact-walk"])
def test_a_line_whose_closing_quote_was_changed_is_broken(tmp_path: Path, payload: object) -> None:
    """The exact check compared the 64 hex digits but not the ``"}`` after them: a line ending
    ``<hash>\\x00}`` passed it (the block fast path, which compares ``"}`` too, did not)."""
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 3, payload)
    broken = list(lines)
    broken[2] = lines[2][:-3] + b"\x00}\n"
    write_lines(chain, broken)
    assert verify_chain(chain).first_bad_seq == 2
    note = _signed_at(chain, lines[:1], 1)
    write_lines(chain, broken)
    assert verify_against_checkpoints(str(chain), [note], [VERIFIER]).chain_broken_seq == 2
