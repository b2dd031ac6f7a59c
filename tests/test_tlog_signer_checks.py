"""The signer checks what it signs: a line whose record hash or link fails is never covered by a checkpoint.

The Checkpointer signs up to the line before the first broken one, then refuses (``broken-link``, with
the seq), logs once and never signs past it, in this process or a later one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_chain_support import build_chain, edited, forge, hash_of, write_lines
from tlog_support import root_from_leaf_hashes

from otel_route_shadow.chain import GENESIS_HASH
from otel_route_shadow.logstore import Checkpointer, read_note_file
from otel_route_shadow.tlog import leaf_hash

ORIGIN = "example.com/route-shadow/signer-checks"


def _payload(i: int) -> dict[str, object]:
    return {"kind": "route-shadow", "n": i}


def _sizes(chain: Path) -> list[int]:
    notes = read_note_file(str(chain) + ".tlog/checkpoints").notes
    return [int(note.split("\n")[1]) for note in notes]


def _refusals(chain: Path) -> list[dict[str, object]]:
    path = Path(str(chain) + ".tlog/refusals")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _relinked_wrongly(lines: list[bytes], seq: int) -> list[bytes]:
    """Line ``seq`` replaced by a record whose own hash holds but whose link points elsewhere."""
    out = list(lines)
    out[seq], _ = forge(seq, GENESIS_HASH if seq else "f" * 64, _payload(seq))
    return out


def _unquoted(lines: list[bytes], seq: int) -> list[bytes]:
    """Line ``seq`` ends ``<hash>\x00}`` instead of ``<hash>"}``: its 64 hex digits still match."""
    out = list(lines)
    out[seq] = out[seq][:-3] + b"\x00}\n"
    return out


def _renumbered(lines: list[bytes], seq: int) -> list[bytes]:
    """Line ``seq`` replaced by a record whose own hash and link hold but whose seq is 1000: ``verify``
    without a key finds the gap, and with one relies on this check below the signed size."""
    out = list(lines)
    out[seq], _ = forge(1000, hash_of(lines[seq - 1]), _payload(seq))
    return out


@pytest.mark.parametrize(
    "damage",
    [edited, _relinked_wrongly, _unquoted, _renumbered],
    ids=["edited-record", "broken-link", "closing-quote-changed", "another-seq"],
)
def test_a_broken_line_is_never_signed_but_the_lines_before_it_are(
    tmp_path: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 50, _payload)
    write_lines(chain, damage(lines, 30))  # type: ignore[operator]
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    made = checkpointer.checkpoint()
    assert made is not None and made.size == 30
    assert made.root == root_from_leaf_hashes([leaf_hash(line.rstrip(b"\n")) for line in lines[:30]])
    assert checkpointer.refused == "broken-link"
    for _ in range(3):
        assert checkpointer.checkpoint() is None  # never one past seq 30
    assert checkpointer.last is made
    assert _sizes(chain) == [30]
    assert [(r["reason"], r["seq"]) for r in _refusals(chain)] == [("broken-link", 30)]
    assert sum("not signing checkpoints" in r.message for r in caplog.records) == 1
    # A later process resumes at seq 30 and refuses the same line again: never signs past it.
    again = Checkpointer(str(chain), ORIGIN, None)
    assert again.checkpoint() is None and again.refused == "broken-link"
    assert _sizes(chain) == [30]


def test_a_broken_first_record_is_refused_with_nothing_signed(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 5, _payload)
    write_lines(chain, _relinked_wrongly(lines, 0))  # seq 0 must link to GENESIS
    checkpointer = Checkpointer(str(chain), ORIGIN, None)
    assert checkpointer.checkpoint() is None
    assert checkpointer.refused == "broken-link"
    assert [(r["reason"], r["seq"]) for r in _refusals(chain)] == [("broken-link", 0)]
    assert not Path(str(chain) + ".tlog/checkpoints").exists()


def test_a_resumed_tree_checks_its_first_new_line_against_the_last_line_it_hashed(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 41, _payload)
    write_lines(chain, lines[:40])
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint()
    assert made is not None and made.size == 40
    # Linked to line 38, not to line 39 (the last one the stored tree hashed): its own hash holds.
    wrong, _ = forge(40, hash_of(lines[38]), _payload(40))
    write_lines(chain, [*lines[:40], wrong])
    resumed = Checkpointer(str(chain), ORIGIN, None)
    assert resumed.checkpoint() is None and resumed.refused == "broken-link"
    assert [(r["reason"], r["seq"]) for r in _refusals(chain)] == [("broken-link", 40)]
    # The right continuation is signed by the next process.
    write_lines(chain, lines)
    made = Checkpointer(str(chain), ORIGIN, None).checkpoint()
    assert made is not None and made.size == 41
    assert _sizes(chain) == [40, 41]


def test_a_broken_line_beyond_the_bounded_window_is_found_on_a_later_call(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    lines = build_chain(chain, 60, _payload)
    write_lines(chain, edited(lines, 45))
    checkpointer = Checkpointer(str(chain), ORIGIN, None, max_leaves=20)
    checkpointer.checkpoint()
    checkpointer.checkpoint()
    assert checkpointer.refused is None
    checkpointer.checkpoint()
    assert checkpointer.refused == "broken-link"
    assert _sizes(chain) == [20, 40, 45]
