"""Cosigned checkpoints in the log's directory: only verified cosignature lines are added, the signed text and
the log's own lines are never rewritten, ``checkpoints`` stays append-only with the newest checkpoint last
(the writer resumes from it), ``checkpoint`` follows; and the quorum over many notes of one checkpoint."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from witness_support import Cosigner, GrowingLog

from otel_route_shadow.logstore import Checkpointer, Cosigned, LogStore, read_witness_policy_file
from otel_route_shadow.tlog import (
    CosignatureError,
    Signer,
    WitnessPolicyError,
    add_cosignatures,
    attest_notes,
    parse_note,
    parse_witness_policy,
    sign_note,
    verify_cosignatures,
)

ORIGIN = "example.com/route-shadow/cosigned"
NOW = 1_800_000_000
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([21]) * 32))
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([22]) * 32))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([23]) * 32))
STRANGER = Cosigner("stranger.example/w", Ed25519PrivateKey.from_private_bytes(bytes([24]) * 32))
KEYS = [W1.verifier, W2.verifier]
TEXT = f"{ORIGIN}\n10\n{'A' * 43}=\n"
NOTE = sign_note(TEXT, [LOG])
POLICY = parse_witness_policy(
    f"log {LOG.verifier()}\nwitness one {W1.verifier}\nwitness two {W2.verifier}\ngroup both all one two\n"
    "quorum both\n"
)


# --- add_cosignatures ---------------------------------------------------------------------------------------


def test_verified_lines_are_added_after_the_notes_own_one_per_witness_key() -> None:
    first = add_cosignatures(NOTE, [W1.line(TEXT, NOW)], KEYS, now=NOW)
    assert first == NOTE + W1.line(TEXT, NOW)
    again = add_cosignatures(first, [W1.line(TEXT, NOW + 5), W2.line(TEXT, NOW)], KEYS, now=NOW)
    assert again == first + W2.line(TEXT, NOW)  # w1 keeps its first line
    found = verify_cosignatures(again, KEYS, now=NOW)
    assert {c.verifier.name for c in found.verified} == {W1.verifier.name, W2.verifier.name}


def test_lines_by_keys_not_given_and_future_timestamps_are_never_added() -> None:
    assert add_cosignatures(NOTE, [STRANGER.line(TEXT, NOW)], KEYS, now=NOW) == NOTE
    assert add_cosignatures(NOTE, [W1.line(TEXT, NOW + 3600)], KEYS, now=NOW) == NOTE
    assert add_cosignatures(NOTE, [W1.line(TEXT, NOW + 299)], KEYS, now=NOW) != NOTE  # within the skew


def test_a_line_that_does_not_verify_or_is_not_a_signature_line_refuses_the_merge() -> None:
    other_text = TEXT.replace("10", "11")
    with pytest.raises(CosignatureError):
        add_cosignatures(NOTE, [W1.line(other_text, NOW)], KEYS, now=NOW)
    with pytest.raises(CosignatureError):
        add_cosignatures(NOTE, ["not a signature line\n"], KEYS, now=NOW)


def test_an_unsigned_note_gets_no_cosignature() -> None:
    assert add_cosignatures(TEXT, [W1.line(TEXT, NOW)], KEYS, now=NOW) == TEXT


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["w1", "w2", "stranger", "garbage", "wrong-text"]), st.integers(0, 2 * NOW)
        ),
        max_size=6,
    )
)
def test_the_note_is_only_ever_extended_by_lines_that_verify(offers: list[tuple[str, int]]) -> None:
    makers = {"w1": W1, "w2": W2, "stranger": STRANGER}
    lines = []
    for kind, timestamp in offers:
        if kind in makers:
            lines.append(makers[kind].line(TEXT, timestamp))
        elif kind == "wrong-text":
            lines.append(W1.line(TEXT.replace("10", "12"), timestamp))
        else:
            lines.append("\u2014 garbage AAAA\n")
    try:
        merged = add_cosignatures(NOTE, lines, KEYS, now=NOW)
    except CosignatureError:
        return
    assert merged.startswith(NOTE) and parse_note(merged).text == TEXT
    added = parse_note(merged).signatures[1:]
    assert len({(s.name, s.key_id) for s in added}) == len(added)
    found = verify_cosignatures(merged, KEYS, now=NOW)
    assert len(found.verified) == len(added) and not found.refused


# --- LogStore.cosign ------------------------------------------------------------------------------------


def _text(note: str) -> str:
    return parse_note(note).text


def test_a_cosignature_appends_the_newest_entry_again_and_replaces_checkpoint(tmp_path: Path) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(10)
    directory = LogStore(log.chain)
    before = (Path(directory.path) / "checkpoints").read_bytes()
    assert directory.cosign(_text(note), [W1.line(_text(note), NOW)], KEYS, now=NOW) is Cosigned.ADDED
    after = (Path(directory.path) / "checkpoints").read_bytes()
    assert after.startswith(before)  # append-only: the signed entry stays as it was
    notes = directory.notes().notes
    assert notes == [note, note + W1.line(_text(note), NOW)]
    assert (Path(directory.path) / "checkpoint").read_text() == notes[-1]
    assert directory.cosign(_text(note), [W1.line(_text(note), NOW)], KEYS, now=NOW) is Cosigned.UNCHANGED
    assert directory.cosign(_text(note), [W2.line(_text(note), NOW)], KEYS, now=NOW) is Cosigned.ADDED
    assert len(parse_note(directory.notes().notes[-1]).signatures) == 3


def test_a_cosignature_returned_after_a_newer_checkpoint_was_published_is_stored_not_discarded(
    tmp_path: Path,
) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    old = log.grow(10)
    newer = log.grow(5)
    directory = LogStore(log.chain)
    published = (Path(directory.path) / "checkpoint").read_bytes()
    line = W1.line(_text(old), NOW)
    assert directory.cosign(_text(old), [line], KEYS, now=NOW) is Cosigned.ADDED_SUPERSEDED
    assert directory.notes().notes == [old, newer, old + line, newer]  # the last entry is still the newest
    assert directory.cosign(_text(old), [line], KEYS, now=NOW) is Cosigned.UNCHANGED
    assert (Path(directory.path) / "checkpoint").read_bytes() == published
    nxt = log.grow(5)  # a new writer process resumes from the newest checkpoint and signs on
    assert int(_text(nxt).split("\n")[1]) == 20
    assert not (Path(directory.path) / "refusals").exists()


def test_a_cosignature_of_a_checkpoint_checkpoints_does_not_hold_is_not_written(tmp_path: Path) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    newer = log.grow(15)
    directory = LogStore(log.chain)
    text = _text(newer).replace("\n15\n", "\n10\n")
    assert directory.cosign(text, [W1.line(text, NOW)], KEYS, now=NOW) is Cosigned.SUPERSEDED
    assert directory.notes().notes == [newer]


def test_a_bad_cosignature_is_rejected_and_nothing_is_written(tmp_path: Path) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(10)
    directory = LogStore(log.chain)
    forged = W1.line(_text(note).replace("\n10\n", "\n11\n"), NOW)
    assert directory.cosign(_text(note), [forged], KEYS, now=NOW) is Cosigned.REJECTED
    assert (
        directory.cosign(_text(note), [STRANGER.line(_text(note), NOW)], KEYS, now=NOW) is Cosigned.UNCHANGED
    )
    assert directory.notes().notes == [note]


def test_a_cosignature_waits_for_no_lock(tmp_path: Path) -> None:
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(10)
    directory = LogStore(log.chain)
    with directory.lock() as held:
        assert held
        assert directory.cosign(_text(note), [W1.line(_text(note), NOW)], KEYS, now=NOW) is Cosigned.BUSY
    assert directory.notes().notes == [note]


def test_the_writer_resumes_from_a_cosigned_entry_without_a_rebuild(tmp_path: Path) -> None:
    """Regression guard: a cosigned copy of the newest checkpoint is what a new writer process finds
    last in ``checkpoints``; it must extend that checkpoint from the state hint and sign the next one."""
    log = GrowingLog(tmp_path / "chain.jsonl", LOG)
    note = log.grow(300)
    directory = LogStore(log.chain)
    for witness in (W1, W2):
        assert (
            directory.cosign(_text(note), [witness.line(_text(note), NOW)], KEYS, now=NOW) is Cosigned.ADDED
        )
    state = (Path(directory.path) / "state").stat().st_mtime_ns
    nxt = log.grow(20)  # a fresh Checkpointer: the next process
    assert int(_text(nxt).split("\n")[1]) == 320
    assert not (Path(directory.path) / "refusals").exists()
    assert (Path(directory.path) / "state").stat().st_mtime_ns != state
    fresh = Checkpointer(str(log.chain), ORIGIN, LOG)
    assert fresh.checkpoint() is None and fresh.refused is None  # nothing new, and nothing refused


def test_witness_refusals_are_json_lines(tmp_path: Path) -> None:
    directory = LogStore(tmp_path / "chain.jsonl")
    os.makedirs(directory.path)
    directory.append_witness_refusal({"witness": "one", "cause": "bad-proof", "size": 3})
    directory.append_witness_refusal({"witness": "two", "cause": "forbidden", "size": 3})
    text = (Path(directory.path) / "witness-refusals").read_text()
    assert text == (
        '{"cause": "bad-proof", "size": 3, "witness": "one"}\n{"cause": "forbidden", "size": 3, "witness": "two"}\n'
    )


# --- the quorum over many notes -----------------------------------------------------------------------------


def test_notes_of_one_checkpoint_are_one_checkpoint_and_their_cosigners_add_up() -> None:
    first = NOTE + W1.line(TEXT, NOW)
    second = NOTE + W2.line(TEXT, NOW)
    bigger_text = TEXT.replace("\n10\n", "\n20\n")
    bigger = sign_note(bigger_text, [LOG]) + W1.line(bigger_text, NOW)
    report = attest_notes([NOTE, first, second, bigger], POLICY, now=NOW)
    [ten, twenty] = report.checkpoints
    assert ten.notes == (0, 1, 2) and ten.cosigned_by == ("one", "two") and ten.quorum.met
    assert twenty.cosigned_by == ("one",) and not twenty.quorum.met and twenty.quorum.missing == ("two",)
    assert report.largest == (("one", 20), ("two", 10))
    assert report.attested() is ten
    assert report.attested(lambda c: c.checkpoint.size != 10) is None
    assert report.newest() is twenty and report.problems == ()


def test_a_future_cosignature_and_a_strangers_never_count() -> None:
    note = NOTE + W1.line(TEXT, NOW + 3600) + STRANGER.line(TEXT, NOW) + W2.line(TEXT, NOW)
    [only] = attest_notes([note], POLICY, now=NOW).checkpoints
    assert only.cosigned_by == ("two",) and only.future == ("one",) and not only.quorum.met


def test_notes_that_do_not_authenticate_are_problems_that_count_for_nothing() -> None:
    forged = NOTE + W1.line(TEXT.replace("\n10\n", "\n11\n"), NOW)
    short = base64.b64encode(W1.verifier.key_id.to_bytes(4, "big") + bytes(10)).decode()
    malformed = NOTE + f"\u2014 w1.example/w {short}\n"  # w1's key id, 10 bytes instead of 72
    impostor = sign_note(TEXT, [Signer.generate(ORIGIN)]) + W1.line(TEXT, NOW) + W2.line(TEXT, NOW)
    report = attest_notes([forged, malformed, impostor], POLICY, now=NOW)
    assert report.checkpoints == () and report.attested() is None
    faults = [(p.index, p.fault, p.malformed) for p in report.problems]
    assert faults == [(0, "cosignature", False), (1, "cosignature", True), (2, "log-signature", False)]
    assert report.problems[0].witness == "one" and report.problems[0].size == 10


def _counting_log_verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every log-signature verification (``note.Verifier.verify``) from here on, by key name."""
    from otel_route_shadow.tlog import note as note_module

    calls: list[str] = []
    verify = note_module.Verifier.verify

    def counted(self: note_module.Verifier, message: bytes, signature: bytes) -> bool:
        calls.append(self.name)
        return verify(self, message, signature)

    monkeypatch.setattr(note_module.Verifier, "verify", counted)
    return calls


def test_a_log_signature_the_caller_verified_is_not_verified_again(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = [NOTE + W1.line(TEXT, NOW) + W2.line(TEXT, NOW)]
    calls = _counting_log_verifications(monkeypatch)
    again = attest_notes(notes, POLICY, now=NOW)
    assert calls == [ORIGIN]
    calls.clear()
    skipped = attest_notes(notes, POLICY, now=NOW, log_verified={0: (str(LOG.verifier()),)})
    assert calls == []
    assert skipped == again and skipped.attested() is not None


def test_a_checkpoint_skips_a_log_key_only_when_it_verified_every_one_of_its_notes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two notes of one checkpoint: the caller verified the log's signature on the first only, so the
    notes checked together verify it again (a forged log line on the second note is still found)."""
    signature = NOTE[len(TEXT) + 1 :]
    forged = signature[:-10] + ("A" if signature[-10] != "A" else "B") + signature[-9:]
    notes = [NOTE + W1.line(TEXT, NOW), TEXT + "\n" + forged + W2.line(TEXT, NOW)]
    calls = _counting_log_verifications(monkeypatch)
    report = attest_notes(notes, POLICY, now=NOW, log_verified={0: (str(LOG.verifier()),)})
    assert calls  # verified again
    assert [(p.index, p.fault) for p in report.problems] == [(1, "log-signature")]
    [only] = report.checkpoints
    assert only.notes == (0,) and only.cosigned_by == ("one",)


# --- the policy file ----------------------------------------------------------------------------------------


def test_a_policy_file_is_read_bounded_and_never_blocks(tmp_path: Path) -> None:
    good = tmp_path / "policy"
    good.write_text(f"log {LOG.verifier()}\nwitness one {W1.verifier}\nquorum one\n")
    assert read_witness_policy_file(good).quorum == "one"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, problem in (
        (tmp_path / "missing", "no such file"),
        (fifo, "FIFO"),
        (tmp_path, "directory"),
    ):
        with pytest.raises(WitnessPolicyError, match=problem):
            read_witness_policy_file(path)
    huge = tmp_path / "huge"
    huge.write_bytes(b"#" * (300 * 1024))
    with pytest.raises(WitnessPolicyError):
        read_witness_policy_file(huge)


@pytest.mark.parametrize("size", ["\u00b2", "\u0663"], ids=["superscript-two", "arabic-indic-three"])
def test_a_note_whose_size_is_not_ascii_digits_is_a_problem_not_a_crash_or_a_size(size: str) -> None:
    """``str.isdigit`` holds for "²" (``int`` then raised: the pure core raised out of ``attest_notes``)
    and for "٣" (read as size 3)."""
    note = NOTE.replace("\n10\n", f"\n{size}\n", 1)
    report = attest_notes([note], POLICY, now=NOW)
    assert report.checkpoints == () and [p.size for p in report.problems] == [None]
