"""A restarted writer is never led into a fork by what it finds on its own disk (docs/chain-format.md 13.6).

Each test signs a log, then plays an attacker with write access to ``<chain>.tlog/``: a base64 character
of the newest note in ``checkpoints`` changed, ``checkpoints`` (and ``checkpoint``) deleted, and the
chain cut a few records below the newest checkpoint and grown again (a fork). A new ``Checkpointer`` is a
new process: it must refuse (logged once, recorded in ``refusals``) and sign nothing inconsistent with
what it signed, until the operator acknowledges that very refusal (``otel-route-shadow acknowledge``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tlog_support import ORIGIN, append, lines, log_dir, notes

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, LogStore
from otel_route_shadow.tlog import Signer, authenticate

SIGNER = Signer.generate(ORIGIN)


def _writer(chain: Path) -> Checkpointer:
    return Checkpointer(str(chain), ORIGIN, SIGNER)


def _signed_400(tmp_path: Path) -> Path:
    chain = tmp_path / "chain.jsonl"
    append(chain, 400, _writer(chain), every=100)
    return chain


def _verified_sizes(chain: Path) -> list[int]:
    found = []
    for note in notes(chain):
        try:
            found.append(authenticate(note, [SIGNER.verifier()]).checkpoint.size)
        except ValueError:
            continue
    return found


def _refusals(chain: Path) -> list[dict[str, object]]:
    path = log_dir(chain) / "refusals"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _change_a_base64_character_of_the_newest_note(chain: Path) -> None:
    path = log_dir(chain) / "checkpoints"
    entries = path.read_text().splitlines(keepends=True)
    note = json.loads(entries[-1])["note"]
    at = note.rindex(" ") + 20  # inside the signature's base64
    changed = note[:at] + ("A" if note[at] != "A" else "B") + note[at + 1 :]
    entries[-1] = json.dumps({"note": changed}) + "\n"
    path.write_text("".join(entries))


def _cut_and_grow(chain: Path, keep: int, grow: int) -> None:
    intact = lines(chain)
    chain.write_bytes(b"".join(line + b"\n" for line in intact[:keep]))
    append(chain, grow, start=100_000)


def test_a_restarted_writer_refuses_when_the_newest_checkpoint_does_not_verify_with_its_own_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = _signed_400(tmp_path)
    _change_a_base64_character_of_the_newest_note(chain)
    (log_dir(chain) / "checkpoint").unlink()
    _cut_and_grow(chain, 395, 5)
    writer = _writer(chain)
    made = append(chain, 400, writer, every=100, start=200_000)
    assert made == [] and writer.refused == "unverified-checkpoint"
    assert _verified_sizes(chain) == [100, 200, 300]
    assert [(r["reason"], r["tree_size"]) for r in _refusals(chain)] == [("unverified-checkpoint", 400)]
    assert sum("not signing checkpoints" in r.message for r in caplog.records) == 1
    again = _writer(chain)  # the next process refuses too, and records nothing twice
    assert again.checkpoint() is None and again.refused == "unverified-checkpoint"
    assert len(_refusals(chain)) == 1


def test_a_restarted_writer_refuses_when_checkpoints_and_checkpoint_are_deleted_but_state_shows_a_signed_size(
    tmp_path: Path,
) -> None:
    chain = _signed_400(tmp_path)
    (log_dir(chain) / "checkpoints").unlink()
    (log_dir(chain) / "checkpoint").unlink()
    _cut_and_grow(chain, 395, 5)
    writer = _writer(chain)
    assert append(chain, 400, writer, every=100, start=200_000) == []
    assert writer.refused == "rolled-back"
    assert not (log_dir(chain) / "checkpoints").exists()
    assert [(r["reason"], r["tree_size"]) for r in _refusals(chain)] == [("rolled-back", 300)]


def test_deleting_checkpoints_alone_leaves_the_published_checkpoint_as_the_anchor(tmp_path: Path) -> None:
    chain = _signed_400(tmp_path)
    (log_dir(chain) / "checkpoints").unlink()
    _cut_and_grow(chain, 395, 5)
    writer = _writer(chain)
    assert append(chain, 400, writer, every=100, start=200_000) == []
    assert writer.refused in {"rewritten", "truncated"}
    assert not (log_dir(chain) / "checkpoints").exists()


def test_an_older_note_appended_again_does_not_hide_the_larger_one_signed_before_it(tmp_path: Path) -> None:
    """The 300 note appended to ``checkpoints`` again (nothing deleted), ``checkpoint`` removed, the chain
    rewritten above 300: the newest entry is an authentic 300, but 400 was signed before it."""
    chain = _signed_400(tmp_path)
    path = log_dir(chain) / "checkpoints"
    entries = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*entries, entries[2]]))
    (log_dir(chain) / "checkpoint").unlink()
    _cut_and_grow(chain, 300, 150)
    writer = _writer(chain)
    assert append(chain, 100, writer, every=100, start=200_000) == []
    assert writer.refused in {"rewritten", "truncated"}
    assert _verified_sizes(chain) == [100, 200, 300, 400, 300]


def test_an_older_entry_claiming_more_than_the_newest_must_verify(tmp_path: Path) -> None:
    """An entry of ``checkpoints`` before the newest that claims a larger size than it and does not
    verify is an ``unverified-checkpoint`` refusal, as the newest entry's would be."""
    chain = _signed_400(tmp_path)
    path = log_dir(chain) / "checkpoints"
    entries = path.read_text().splitlines(keepends=True)
    forged = json.loads(entries[-1])["note"].replace("\n400\n", "\n1000\n", 1)
    path.write_text("".join([*entries[:-1], json.dumps({"note": forged}) + "\n", entries[-1]]))
    writer = _writer(chain)
    assert append(chain, 100, writer, every=100) == []
    assert writer.refused == "unverified-checkpoint"
    assert [(r["reason"], r["tree_size"]) for r in _refusals(chain)] == [("unverified-checkpoint", 1000)]


def test_a_witness_holding_a_larger_size_than_every_authenticated_checkpoint_is_a_refusal(
    tmp_path: Path,
) -> None:
    chain = _signed_400(tmp_path)
    for name in ("checkpoints", "checkpoint", "state"):
        (log_dir(chain) / name).unlink()
    writer = _writer(chain)
    writer.witness_floor = lambda: 400
    assert append(chain, 100, writer, every=100, start=400) == []
    assert writer.refused == "rolled-back"
    assert _refusals(chain)[-1]["tree_size"] == 400


def test_nothing_is_signed_while_the_witnesses_are_being_asked(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    writer = _writer(chain)
    answer: list[int | None] = [None]
    writer.witness_floor = lambda: answer[0]
    assert append(chain, 100, writer, every=50) == []
    assert writer.behind and writer.refused is None
    answer[0] = 0
    assert [c.size for c in append(chain, 1, writer, start=100)] == [101]


def test_an_acknowledged_refusal_lets_the_writer_sign_on_and_only_that_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = _signed_400(tmp_path)
    _change_a_base64_character_of_the_newest_note(chain)
    (log_dir(chain) / "checkpoint").unlink()
    assert main(["acknowledge", str(chain)]) == 1  # nothing refused yet
    assert _writer(chain).checkpoint() is None
    assert main(["acknowledge", str(chain)]) == 0
    out = capsys.readouterr().out
    assert "unverified-checkpoint" in out and "400" in out
    made = append(chain, 100, _writer(chain), every=100, start=400)
    assert [c.size for c in made] == [500]
    _change_a_base64_character_of_the_newest_note(chain)  # another note changed: refused again
    (log_dir(chain) / "checkpoint").unlink()
    writer = _writer(chain)
    assert writer.checkpoint() is None and writer.refused == "unverified-checkpoint"


def test_a_refusal_of_the_chain_itself_cannot_be_acknowledged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = _signed_400(tmp_path)
    _cut_and_grow(chain, 395, 5)
    assert _writer(chain).checkpoint() is None
    assert main(["acknowledge", str(chain)]) == 2
    assert "cannot be acknowledged" in capsys.readouterr().err
    assert not (log_dir(chain) / "acknowledged").exists()


def test_acknowledging_a_chain_that_has_no_log_folder_is_a_usage_error_not_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A mistyped path said "no refusal to acknowledge" (exit 1), as for a log with nothing refused.
    assert main(["acknowledge", str(tmp_path / "no-such-dir" / "chain.jsonl")]) == 2
    assert "no log folder" in capsys.readouterr().err
    chain = _signed_400(tmp_path)
    assert main(["acknowledge", str(chain)]) == 1
    assert "no refusal to acknowledge" in capsys.readouterr().out


def test_the_published_checkpoint_is_not_read_through_a_link(tmp_path: Path) -> None:
    """``checkpoint`` is read one way, following no link below the log folder (13.4); the writer's
    anchor read it following one."""
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.logstore.anchoring import published_note

    chain = _signed_400(tmp_path)
    store = LogStore(chain)
    assert published_note(store) == notes(chain)[-1]
    elsewhere = tmp_path / "elsewhere"
    (log_dir(chain) / "checkpoint").rename(elsewhere)
    (log_dir(chain) / "checkpoint").symlink_to(elsewhere)
    assert published_note(store) is None


def test_a_running_writer_anchors_on_a_larger_tree_another_process_signed_since(tmp_path: Path) -> None:
    """The largest note was found once per writer: a writer running before another process signed 400
    never took it in, and the replay of the 300 note above let it sign a fork of 400."""
    chain = tmp_path / "chain.jsonl"
    running = _writer(chain)
    append(chain, 300, running, every=100)
    append(chain, 100, _writer(chain), every=100, start=1000)  # another process signs 400
    path = log_dir(chain) / "checkpoints"
    entries = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*entries, entries[2]]))
    (log_dir(chain) / "checkpoint").unlink()
    _cut_and_grow(chain, 300, 150)
    assert running.checkpoint() is None and running.refused in {"rewritten", "truncated", "fork"}
    assert _verified_sizes(chain) == [100, 200, 300, 400, 300]


def test_two_unverified_entries_need_one_acknowledgement_not_one_each_in_turn(tmp_path: Path) -> None:
    """A newest entry and an earlier one claiming more, neither by the log's key: refused at each in
    turn, each acknowledgement replacing the other, the writer never signed again."""
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.tlog import Checkpoint, sign_note

    chain = tmp_path / "chain.jsonl"
    append(chain, 20, _writer(chain), every=10)
    other = Signer.generate(ORIGIN)
    store = LogStore(str(chain))
    store.append_note(sign_note(Checkpoint(ORIGIN, 5000, b"\x01" * 32).text(), [other]))
    store.append_note(sign_note(Checkpoint(ORIGIN, 25, b"\x02" * 32).text(), [other]))
    append(chain, 5, start=100)
    first = _writer(chain)
    assert first.checkpoint() is None and first.refused == "unverified-checkpoint"
    assert main(["acknowledge", str(chain)]) == 0
    assert _writer(chain).checkpoint() is not None


def test_the_largest_note_is_the_newest_entry_of_its_size() -> None:
    """A cosigned checkpoint is appended again: the largest note is that newest entry, the one the
    writer verifies anyway, not the first of its size (verified again at every call)."""
    import tempfile

    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.logstore.anchoring import OwnNotes, newest_of_origin
    from otel_route_shadow.tlog import sign_note

    chain = Path(tempfile.mkdtemp()) / "chain.jsonl"
    append(chain, 20, _writer(chain), every=10)
    store = LogStore(str(chain))
    text = notes(chain)[-1].split("\n\n", 1)[0] + "\n"
    store.append_note(sign_note(text, [SIGNER, Signer.generate("witness.example/w")]))  # one more line
    own = OwnNotes(store, ORIGIN, [SIGNER.verifier()])
    assert own.largest() == newest_of_origin(store, ORIGIN) == notes(chain)[-1]


def _many_notes(tmp_path: Path, count: int) -> tuple[LogStore, list[int]]:
    """A store whose ``checkpoints`` holds ``count`` signed notes of growing sizes (no chain needed:
    only the notes are read), and the sizes."""
    import hashlib

    from otel_route_shadow.tlog import Checkpoint, sign_note

    store = LogStore(str(tmp_path / "chain.jsonl"))
    Path(store.path).mkdir()
    sizes = [10 * i for i in range(1, count + 1)]
    with open(store.file("checkpoints"), "w", encoding="utf-8") as out:
        for size in sizes:
            root = hashlib.sha256(str(size).encode()).digest()
            out.write(json.dumps({"note": sign_note(Checkpoint(ORIGIN, size, root).text(), [SIGNER])}) + "\n")
    return store, sizes


def test_the_note_a_cut_asks_for_is_read_from_the_end_of_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a cut asks for the note just signed with the chain's lock held, and ``signed`` read
    and authenticated the whole of ``checkpoints`` newest last (0.87 s at 86,400 notes, appenders
    waiting). It now reads back from the end: the newest line only."""
    from otel_route_shadow.logstore import store as store_module
    from otel_route_shadow.logstore.anchoring import OwnNotes

    store, sizes = _many_notes(tmp_path, 300)
    read: list[bytes] = []
    entry = store_module.entry_note
    monkeypatch.setattr(store_module, "entry_note", lambda line: read.append(line) or entry(line))
    own = OwnNotes(store, ORIGIN, [SIGNER.verifier()])
    note = own.signed(sizes[-1])
    assert note is not None and note.split("\n")[1] == str(sizes[-1])
    assert len(read) == 1
    assert own.signed(sizes[0]) is not None and own.signed(5) is None  # an older one, and none


def test_the_largest_note_parses_only_claims_that_could_be_it_and_gives_the_published_sizes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the first ``largest`` parsed every note of ``checkpoints`` as a checkpoint, and
    ``published_sizes`` read and parsed the whole file again (1.5 s and 1.4 s at 86,400 notes, in the
    host's process). Now the notes are read once, newest first, and only a claim at least as large as
    the largest found is parsed; a forged larger claim that does not parse is not the largest. The
    sizes are taken once and not kept after (a host writing a checkpoint every 10 s for a year would
    hold three million)."""
    from otel_route_shadow.logstore import anchoring
    from otel_route_shadow.logstore.anchoring import OwnNotes

    store, sizes = _many_notes(tmp_path, 300)
    parsed: list[str] = []
    checkpoint_of = anchoring.checkpoint_of
    monkeypatch.setattr(anchoring, "checkpoint_of", lambda note: parsed.append(note) or checkpoint_of(note))
    own = OwnNotes(store, ORIGIN, [SIGNER.verifier()])
    largest = own.largest()
    assert largest is not None and largest.split("\n")[1] == str(sizes[-1]) and len(parsed) == 1
    reads: list[object] = []
    notes_from = store.notes_from
    monkeypatch.setattr(store, "notes_from", lambda offset: reads.append(offset) or notes_from(offset))
    assert own.take_published_sizes() == set(sizes) and reads == [reads[0]]  # only what was appended since
    assert notes_from(reads[0])[0] == []
    store.append_note(f"{ORIGIN}\n999999\nnot a checkpoint\n")
    older = next(n for n in notes(tmp_path / "chain.jsonl") if n.split("\n")[1] == "20")
    store.append_note(older)
    assert own.largest() == largest and own.take_published_sizes() == set()  # taken once, none kept


def test_a_note_claiming_a_size_too_long_to_read_never_hides_the_largest(tmp_path: Path) -> None:
    """Regression: a note's claimed size was read with ``int()`` on any run of digits, and Python refuses
    more than 4,300: the first read of ``checkpoints`` raised past the point it had moved its offset to,
    so the largest note signed was never taken in (an older note appended after it became the anchor),
    and the writer's check of the newest note raised at every call, a refusal no one could acknowledge."""
    from otel_route_shadow.logstore.anchoring import OwnNotes, claimed_size

    store, sizes = _many_notes(tmp_path, 5)
    forged = f"{ORIGIN}\n{'9' * 5000}\nnot a checkpoint\n"
    store.append_note(forged)
    store.append_note(next(n for n in notes(tmp_path / "chain.jsonl") if n.split("\n")[1] == "20"))
    own = OwnNotes(store, ORIGIN, [SIGNER.verifier()])
    largest = own.largest()
    assert largest is not None and largest.split("\n")[1] == str(sizes[-1])
    assert claimed_size(forged) == -1 and claimed_size(f"{ORIGIN}\n007\nx\n") == -1
