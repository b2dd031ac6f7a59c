"""``serve --witness-policy``: a checkpoint is served without the cosignature lines that claim one of the
policy's witness keys and do not verify. Whoever can write the log folder could add such a line, and a
client holding that witness's key (ours, or Go's ``note.Open``) rejects the whole checkpoint for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from serve_support import get, serving
from tlog_support import ORIGIN, append, log_dir
from witness_support import Cosigner

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, PublishedLog
from otel_route_shadow.server import LogSite, Request
from otel_route_shadow.tlog import (
    CosignatureError,
    Signer,
    Verifier,
    authenticate,
    parse_note,
    sign_note,
    verify_cosignatures,
    without_false_cosignatures,
)

NOW = 1_800_000_000
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([31]) * 32))
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([32]) * 32))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([33]) * 32))
FORGER = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([34]) * 32))
STRANGER = Cosigner("stranger.example/w", Ed25519PrivateKey.from_private_bytes(bytes([35]) * 32))
WITNESSES = [W1.verifier, W2.verifier]
TEXT = f"{ORIGIN}\n10\n{'A' * 43}=\n"
NOTE = sign_note(TEXT, [LOG])


def _forged(cosigner: Cosigner, text: str) -> str:
    """A line claiming ``W1``'s key (its name and key id) signed by another key."""
    return cosigner.line(text, NOW, key_id=W1.verifier.key_id)


# --- the rule -----------------------------------------------------------------------------------------------


def test_a_line_claiming_a_witness_key_that_does_not_verify_is_left_out_and_named() -> None:
    note = NOTE + _forged(FORGER, TEXT) + W2.line(TEXT, NOW)
    with pytest.raises(CosignatureError):  # what a client holding w1's key does with the note as stored
        verify_cosignatures(note, WITNESSES, now=NOW)
    served, dropped = without_false_cosignatures(note, WITNESSES)
    assert served == NOTE + W2.line(TEXT, NOW)
    assert dropped == (f"{W1.verifier.name}+{W1.verifier.key_id:08x}",)
    assert [c.verifier for c in verify_cosignatures(served, WITNESSES, now=NOW).verified] == [W2.verifier]


def test_true_lines_and_lines_by_keys_not_given_are_kept_byte_for_byte() -> None:
    note = NOTE + STRANGER.line(TEXT, NOW) + W1.line(TEXT, NOW + 10**6)  # a future timestamp still verifies
    assert without_false_cosignatures(note, WITNESSES) == (note, ())
    assert without_false_cosignatures(TEXT, WITNESSES) == (TEXT, ())  # an unsigned note


def test_a_note_left_with_no_line_is_its_text() -> None:
    served, dropped = without_false_cosignatures(TEXT + "\n" + _forged(FORGER, TEXT), WITNESSES)
    assert served == TEXT and len(dropped) == 1


@given(st.lists(st.sampled_from(["true1", "true2", "forged", "stranger"]), max_size=6))
def test_what_is_kept_verifies_for_every_client_and_is_every_line_but_the_false_ones(
    kinds: list[str],
) -> None:
    made = {
        "true1": W1.line(TEXT, NOW),
        "true2": W2.line(TEXT, NOW),
        "forged": _forged(FORGER, TEXT),
        "stranger": STRANGER.line(TEXT, NOW),
    }
    note = NOTE + "".join(made[k] for k in kinds)
    served, dropped = without_false_cosignatures(note, WITNESSES)
    assert served == NOTE + "".join(made[k] for k in kinds if k != "forged")
    assert len(dropped) == kinds.count("forged")
    verify_cosignatures(served, WITNESSES, now=NOW)  # never raises
    assert authenticate(served, [Verifier.parse(str(LOG.verifier()))]).checkpoint.size == 10


def test_a_malformed_note_is_a_cosignature_error() -> None:
    with pytest.raises(CosignatureError):
        without_false_cosignatures(TEXT + "\nnot a signature line\n", WITNESSES)


# --- serve ----------------------------------------------------------------------------------------------------


def _log(directory: Path) -> tuple[Path, str]:
    """A signed log of 300 records and its published checkpoint's text."""
    directory.mkdir()
    chain = directory / "chain.jsonl"
    writer = Checkpointer(str(chain), ORIGIN, LOG)
    append(chain, 300, writer, every=300)
    note = (log_dir(chain) / "checkpoint").read_text()
    return chain, parse_note(note).text


def _plant(chain: Path, *lines: str) -> None:
    """Add signature lines to the published checkpoint, as whoever can write the log folder could."""
    path = log_dir(chain) / "checkpoint"
    path.write_text(path.read_text() + "".join(lines))


def test_the_site_serves_the_checkpoint_without_a_forged_line_and_logs_it_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain, text = _log(tmp_path / "log")
    _plant(chain, W1.line(text, NOW), _forged(FORGER, text), W2.line(text, NOW))
    keys = [Verifier.parse(str(LOG.verifier()))]
    site = LogSite([PublishedLog(str(chain), keys, WITNESSES)])
    request = Request("GET", f"/{ORIGIN}/checkpoint", (1, 1), {})
    with caplog.at_level("WARNING", logger="otel_route_shadow.server"):
        first, second = site.respond(request), site.respond(request)
    assert first.status == 200 and first.body == second.body
    served = first.body.decode()
    assert _forged(FORGER, text) not in served
    found = verify_cosignatures(served, WITNESSES, now=NOW)
    assert {c.verifier.name for c in found.verified} == {"w1.example/w", "w2.example/w"}
    warned = [r.getMessage() for r in caplog.records if "do not verify" in r.getMessage()]
    assert len(warned) == 1 and f"w1.example/w+{W1.verifier.key_id:08x}" in warned[0]
    # Without witness keys the note is served as stored: the reason for the option.
    plain = LogSite([PublishedLog(str(chain), keys)]).respond(request)
    with pytest.raises(CosignatureError):
        verify_cosignatures(plain.body.decode(), WITNESSES, now=NOW)


def test_the_command_takes_the_policys_witnesses_and_its_log_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain, text = _log(tmp_path / "log")
    _plant(chain, _forged(FORGER, text), W2.line(text, NOW))
    policy = tmp_path / "policy"
    policy.write_text(
        f"log {LOG.verifier()}\nwitness one {W1.verifier}\nwitness two {W2.verifier}\nquorum two\n"
    )
    with serving([chain], "--witness-policy", str(policy), workdir=tmp_path) as served:
        status, _, body = get(served.urls[ORIGIN] + "checkpoint")
    assert status == 200
    assert body.decode() == sign_note(text, [LOG]) + W2.line(text, NOW)
    assert "do not verify" in served.log() and f"+{W1.verifier.key_id:08x}" in served.log()
    other = Signer.generate(ORIGIN)  # the policy's log key is a --key: another key's checkpoint is refused
    (log_dir(chain) / "checkpoint").write_text(sign_note(text, [other]))
    assert main(["serve", str(chain), "--listen", "127.0.0.1:0", "--witness-policy", str(policy)]) == 2
    assert "does not authenticate" in capsys.readouterr().err


def test_the_command_refuses_a_policy_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain, _ = _log(tmp_path / "log")
    policy = tmp_path / "policy"
    policy.write_text("witness one not-a-key\nquorum one\n")
    assert main(["serve", str(chain), "--listen", "127.0.0.1:0", "--witness-policy", str(policy)]) == 2
    assert f"--witness-policy {policy}" in capsys.readouterr().err
    policy.write_text(f"witness one {W1.verifier}\nquorum one\n")  # no log line, no --key
    assert main(["serve", str(chain), "--listen", "127.0.0.1:0", "--witness-policy", str(policy)]) == 2
    assert "no `log` line and no --key" in capsys.readouterr().err
