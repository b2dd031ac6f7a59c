"""Rotating a log's signing key: the key file holds the old and the new key during a transition window,
every checkpoint then carries both signatures, and a restarted writer anchors on a note signed by either
(docs/operating.md, "Rotating the log's key"); a note signed by neither is still refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tlog_support import ORIGIN, append, key_file, log_dir, notes

from otel_route_shadow.instrumentation.checkpointing import scheduled_checkpointer
from otel_route_shadow.logstore import (
    Acknowledgement,
    Checkpointer,
    KeyFileError,
    LogStore,
    acknowledge_last_refusal,
    read_signing_keys,
)
from otel_route_shadow.tlog import KeyWindow, Signer, authenticate, parse_note, sign_note

OLD = Signer.generate(ORIGIN)
NEW = Signer.generate(ORIGIN)


def restarted(chain: Path, keys: str) -> Checkpointer:
    """A new writer process's checkpointer, its keys read from the key file."""
    return Checkpointer(str(chain), ORIGIN, read_signing_keys(keys))


def signers_of(note: str) -> set[int]:
    return {signature.key_id for signature in parse_note(note).signatures}


def refusals(chain: Path) -> list[str]:
    path = log_dir(chain) / "refusals"
    return [json.loads(line)["reason"] for line in path.read_text().splitlines()] if path.exists() else []


def test_a_writer_rotated_through_a_window_restarts_without_refusal_and_signs_with_both_keys(
    tmp_path: Path,
) -> None:
    chain, keys = tmp_path / "chain.jsonl", tmp_path / "log.key"
    append(chain, 200, restarted(chain, key_file(keys, OLD)), every=100)
    window = append(chain, 200, restarted(chain, key_file(keys, OLD, NEW)), every=100, start=200)
    after = append(chain, 200, restarted(chain, key_file(keys, NEW)), every=100, start=400)
    assert [c.size for c in window] == [300, 400] and [c.size for c in after] == [500, 600]
    assert refusals(chain) == []
    assert [signers_of(c.note) for c in window] == [{OLD.key_id, NEW.key_id}] * 2
    assert [signers_of(c.note) for c in after] == [{NEW.key_id}] * 2
    key_set = [KeyWindow(OLD.verifier(), 0, 401), KeyWindow(NEW.verifier(), 300)]
    assert [authenticate(note, key_set).checkpoint.size for note in notes(chain)] == [
        100,
        200,
        300,
        400,
        500,
        600,
    ]


def test_a_newest_note_signed_by_neither_key_of_the_writer_is_still_refused(tmp_path: Path) -> None:
    chain, keys = tmp_path / "chain.jsonl", tmp_path / "log.key"
    append(chain, 200, restarted(chain, key_file(keys, OLD)), every=100)
    path = log_dir(chain) / "checkpoints"
    entries = path.read_text().splitlines(keepends=True)
    text = parse_note(json.loads(entries[-1])["note"]).text
    stranger = Signer.generate(ORIGIN)  # same name, a key the writer does not hold
    entries[-1] = json.dumps({"note": sign_note(text, [stranger])}) + "\n"
    path.write_text("".join(entries))
    (log_dir(chain) / "checkpoint").unlink()
    writer = restarted(chain, key_file(keys, OLD, NEW))
    assert append(chain, 100, writer, every=100, start=200) == []
    assert writer.refused == "unverified-checkpoint" and refusals(chain) == ["unverified-checkpoint"]


def test_a_key_replaced_without_a_transition_window_is_refused(tmp_path: Path) -> None:
    chain, keys = tmp_path / "chain.jsonl", tmp_path / "log.key"
    append(chain, 200, restarted(chain, key_file(keys, OLD)), every=100)
    writer = restarted(chain, key_file(keys, NEW))
    assert append(chain, 100, writer, every=100, start=200) == []
    assert writer.refused == "unverified-checkpoint"


def test_a_key_replaced_without_a_window_signs_on_once_acknowledged(tmp_path: Path) -> None:
    # docs/operating.md: the refusal holds "until otel-route-shadow acknowledge CHAIN". The state's
    # previous tree (a size the old key signed) was then a rolled-back refusal, whose acknowledgement
    # brought the unverified one back: the writer never signed again.
    chain, keys = tmp_path / "chain.jsonl", tmp_path / "log.key"
    append(chain, 200, restarted(chain, key_file(keys, OLD)), every=100)
    assert append(chain, 100, restarted(chain, key_file(keys, NEW)), every=100, start=200) == []
    assert isinstance(acknowledge_last_refusal(LogStore(str(chain))), Acknowledgement)
    writer = restarted(chain, key_file(keys, NEW))
    made = append(chain, 100, writer, every=100, start=300)
    assert writer.refused is None and refusals(chain) == ["unverified-checkpoint"]
    assert [c.size for c in made] == [400] and signers_of(made[0].note) == {NEW.key_id}
    after = append(chain, 100, restarted(chain, key_file(keys, NEW)), every=100, start=400)
    assert [c.size for c in after] == [500] and refusals(chain) == ["unverified-checkpoint"]


def test_a_key_file_holding_keys_of_two_names_is_refused(tmp_path: Path) -> None:
    keys = key_file(tmp_path / "log.key", OLD, Signer.generate("example.com/another-log"))
    with pytest.raises(KeyFileError, match="different names"):
        read_signing_keys(keys)


def test_a_key_file_holding_one_key_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="twice"):
        read_signing_keys(key_file(tmp_path / "log.key", OLD, OLD))


def test_a_key_file_holding_more_keys_than_a_rotation_needs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="more than 4"):
        read_signing_keys(key_file(tmp_path / "log.key", *(Signer.generate(ORIGIN) for _ in range(5))))


def test_a_bad_second_key_line_is_named_by_number_and_never_echoed(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    secret = OLD.secret_string()
    key_file(path, OLD)
    path.write_text(secret + "\n" + secret[:-4] + "AAAA\n")
    with pytest.raises(KeyFileError) as caught:
        read_signing_keys(str(path))
    assert "line 2: not a signing key" in str(caught.value)
    assert secret.split("+", 4)[4][:12] not in str(caught.value)


def test_the_plugin_signs_with_every_key_of_its_key_file(tmp_path: Path) -> None:
    chain, keys = tmp_path / "chain.jsonl", tmp_path / "log.key"
    scheduled = scheduled_checkpointer(str(chain), signing_key=key_file(keys, OLD, NEW))
    try:
        append(chain, 10)
        made = scheduled.checkpoint_now()
    finally:
        scheduled.close()
    assert made is not None and made.size == 10 and made.key_name == ORIGIN
    assert signers_of(made.note) == {OLD.key_id, NEW.key_id}
