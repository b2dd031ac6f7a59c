"""The command line of the verifiable log: key generate, prove, verify-proof, verify --checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from tlog_support import append, key_file

from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, KeyFileError, read_signing_keys
from otel_route_shadow.tlog import Signer

VECTORS = Path(__file__).parent / "vectors" / "tlog"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def signed_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str, Path]:
    key = tmp_path / "log.key"
    code, out, _ = run(["key", "generate", "--name", "example.com/cli", "--out", str(key)], capsys)
    assert code == 0
    chain = tmp_path / "chain.jsonl"
    checkpointer = Checkpointer(str(chain), "example.com/cli", read_signing_keys(str(key))[0])
    append(chain, 300, checkpointer, every=50)
    return chain, out.strip(), key


def test_key_generate_writes_0600_never_overwrites_and_prints_only_the_verifier(
    signed_chain: tuple[Path, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, verifier, key = signed_chain
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert verifier.startswith("example.com/cli+") and "PRIVATE" not in verifier
    before = key.read_bytes()
    code, out, err = run(["key", "generate", "--name", "example.com/cli", "--out", str(key)], capsys)
    assert (code, out) == (2, "") and "already exists" in err and err.count("\n") == 1
    assert key.read_bytes() == before
    code, _, err = run(["key", "generate", "--name", "bad name", "--out", str(key) + "2"], capsys)
    assert code == 2 and "key name" in err


def test_key_verifier_prints_again_what_key_generate_printed_and_never_the_signing_key(
    signed_chain: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No command printed the verifier key of a key file again: an operator who lost what key generate
    # printed could not hand it to an auditor or a witness.
    _, verifier, key = signed_chain
    assert run(["key", "verifier", str(key)], capsys) == (0, verifier + "\n", "")
    rotated = key_file(tmp_path / "rotated.key", *read_signing_keys(str(key)), Signer.generate("example.com/cli"))
    code, out, err = run(["key", "verifier", rotated], capsys)
    assert (code, err) == (0, "") and out.splitlines()[0] == verifier and len(out.splitlines()) == 2
    printed = out
    credential = key_file(tmp_path / "credential.key", Signer.generate("example.com/ghp_" + "Cx" * 18))
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo)
    open_key = key_file(tmp_path / "open.key", *read_signing_keys(str(key)))
    os.chmod(open_key, 0o644)
    for path, problem in ((credential, "looks like a credential"), (str(fifo), "is a FIFO"), (open_key, "too open")):
        code, out, err = run(["key", "verifier", path], capsys)
        assert (code, out) == (2, "") and problem in err and err.count("\n") == 1, err
        assert "CxCxCx" not in err
        printed += err
    assert "PRIVATE" not in printed
    for line in Path(rotated).read_text().splitlines():
        assert line.split("+", 4)[4][2:] not in printed  # the seed, past the key type's byte


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606])
def test_a_signing_key_readable_by_group_or_others_is_refused_as_ssh_does(
    signed_chain: tuple[Path, str, Path], mode: int
) -> None:
    """A key of mode 0644 was used silently; ssh refuses such a private key."""
    _, _, key = signed_chain
    key.chmod(mode)
    with pytest.raises(KeyFileError, match=f"permissions {mode:04o} are too open") as caught:
        read_signing_keys(str(key))[0]
    assert "PRIVATE" not in str(caught.value) and f"chmod 600 {key}" in str(caught.value)
    key.chmod(0o400)
    assert read_signing_keys(str(key))[0].name == "example.com/cli"


def test_a_host_with_an_open_signing_key_runs_and_checkpoints_unsigned(
    signed_chain: tuple[Path, str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from test_analysis_support import context

    from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

    _, _, key = signed_chain
    key.chmod(0o644)
    chain = tmp_path / "host.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=TracerProvider(), chain_path=chain, seams=(), signing_key=key, checkpoint_records=1
    )
    try:
        with shadow_spawn(
            context("acme/x", "planner", "agentic", "zai", "role-dial"), seam="canary"
        ) as record:
            assert record is not None
    finally:
        instrumentor.uninstrument()
    refusals = [r.getMessage() for r in caplog.records if "too open" in r.getMessage()]
    assert len(refusals) == 1 and "checkpoints unsigned" in refusals[0]
    checkpoint = (tmp_path / "host.jsonl.tlog" / "checkpoint").read_text()
    assert "\n\n\u2014 " not in checkpoint  # no signature line: unsigned


def test_prove_and_verify_proof_round_trip(
    signed_chain: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain, verifier, _ = signed_chain
    latest = str(chain) + ".tlog/checkpoint"
    code, out, _ = run(["prove", str(chain), "--seq", "123"], capsys)
    assert code == 0
    proof = tmp_path / "proof.json"
    proof.write_text(out)
    assert json.loads(out)["tree_size"] == 300
    record = tmp_path / "record.line"
    record.write_bytes(chain.read_bytes().splitlines(keepends=True)[123])
    argv = ["verify-proof", "--proof", str(proof), "--checkpoint", latest, "--key", verifier]
    code, out, _ = run([*argv, "--record", str(record)], capsys)
    assert code == 0 and "seq 123" in out
    record.write_bytes(chain.read_bytes().splitlines(keepends=True)[124])
    code, out, _ = run([*argv, "--record", str(record)], capsys)
    assert code == 1 and "NOT" in out
    code, out, _ = run(["prove", str(chain), "--from", "100", "--to", "250"], capsys)
    assert code == 0
    proof.write_text(out)
    code, out, _ = run(argv, capsys)
    assert code == 1 and "no checkpoint of size 250" in out
    code, out, _ = run(["prove", str(chain), "--from", "100"], capsys)
    proof.write_text(out)
    code, out, _ = run(argv, capsys)
    assert code == 0 and "prefix" in out


def test_verify_with_checkpoints_names_the_attack_and_the_unprotected_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verifier = (VECTORS / "verifier.txt").read_text().strip()
    chain = tmp_path / "chain.jsonl"
    shutil.copy(VECTORS / "rewritten-recomputed.jsonl", chain)
    shutil.copytree(VECTORS / "chain.jsonl.tlog", tmp_path / "chain.jsonl.tlog")
    code, out, _ = run(["verify", str(chain), "--key", verifier], capsys)
    assert code == 1
    assert "intact: 40 records" in out  # the links alone hold
    assert "CHECKPOINTS BROKEN: record-changed, first changed seq 25" in out
    assert "20 of 40 records lie beyond the largest verified checkpoint" in out
    code, out, _ = run(["verify", str(chain), "--key", verifier, "--json"], capsys)
    report = json.loads(out)["checkpoints"]
    assert (report["reason"], report["first_bad_seq"], report["unprotected"]) == ("record-changed", 25, 20)
    shutil.copy(VECTORS / "chain.jsonl", chain)
    code, out, _ = run(
        ["verify", str(chain), "--checkpoint", str(chain) + ".tlog/checkpoints", "--key", verifier], capsys
    )
    assert code == 0 and "consistent with 4 checkpoint(s), largest size 40" in out


def test_a_signature_by_an_unknown_key_is_never_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = VECTORS / "chain.jsonl"
    code, _, _ = run(
        ["key", "generate", "--name", "example.com/route-shadow/vectors", "--out", str(tmp_path / "k")],
        capsys,
    )
    other = capsys.readouterr().out or ""
    code, out, _ = run(
        ["key", "generate", "--name", "example.com/route-shadow/vectors", "--out", str(tmp_path / "k2")],
        capsys,
    )
    code, out, _ = run(["verify", str(chain), "--key", out.strip()], capsys)
    assert code == 1 and "unknown-key" in out
    del other


@pytest.mark.parametrize(
    ("files", "argv_of", "needle"),
    [
        (
            {"c": "not a checkpoint\n"},
            lambda p: ["verify", str(VECTORS / "chain.jsonl"), "--checkpoint", p["c"]],
            "checkpoint 1: a checkpoint has 3 lines",
        ),
        (
            {"c": '{"note": 5}\n'},
            lambda p: ["verify", str(VECTORS / "chain.jsonl"), "--checkpoint", p["c"]],
            "line(s) 1",
        ),
        ({}, lambda p: ["verify", str(VECTORS / "chain.jsonl"), "--key", "name+zz+AAAA"], "verifier key"),
        (
            {"k": "PRIVATE+KEY+x+00000000+AAAA\n"},
            lambda p: ["verify", str(VECTORS / "chain.jsonl"), "--key", p["k"]],
            "signing key",
        ),
        (
            {"p": "{"},
            lambda p: [
                "verify-proof",
                "--proof",
                p["p"],
                "--checkpoint",
                str(VECTORS / "fork-note.txt"),
                "--key",
                str(VECTORS / "verifier.txt"),
            ],
            "not a proof",
        ),
        (
            {
                "p": '{"kind": "inclusion", "origin": "o", "seq": -1, "tree_size": 1, "leaf_hash": "x", "proof": []}'
            },
            lambda p: [
                "verify-proof",
                "--proof",
                p["p"],
                "--checkpoint",
                str(VECTORS / "fork-note.txt"),
                "--key",
                str(VECTORS / "verifier.txt"),
            ],
            "not a proof",
        ),
        (
            {"n": "origin\n12\nnot base64!\n"},
            lambda p: [
                "verify-proof",
                "--proof",
                str(VECTORS / "inclusion-seq7.json"),
                "--checkpoint",
                p["n"],
                "--key",
                str(VECTORS / "verifier.txt"),
            ],
            "root",
        ),
        (
            {"n": "o\n1\n" + "A" * 43 + "=\n\nno dash\n"},
            lambda p: [
                "verify-proof",
                "--proof",
                str(VECTORS / "inclusion-seq7.json"),
                "--checkpoint",
                p["n"],
                "--key",
                str(VECTORS / "verifier.txt"),
            ],
            "em dash",
        ),
        (
            {},
            lambda p: [
                "prove",
                str(VECTORS / "chain.jsonl"),
                "--seq",
                "40",
                "--checkpoint",
                str(VECTORS / "chain.jsonl.tlog" / "checkpoints"),
            ],
            "leaf 40",
        ),
        (
            {},
            lambda p: [
                "prove",
                str(VECTORS / "chain.jsonl"),
                "--seq",
                "3",
                "--checkpoint",
                str(VECTORS / "fork-note.txt"),
            ],
            "do not give the checkpoint's root",
        ),
        ({}, lambda p: ["prove", "/nonexistent/chain.jsonl", "--seq", "0"], "no such"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], argv_of: object, needle: str
) -> None:
    paths = {}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths[name] = str(tmp_path / name)
    code, out, err = run(argv_of(paths), capsys)  # type: ignore[operator]
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert needle in err


def test_verify_never_calls_partial_tiles_removed_for_a_full_tile_missing_after_a_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checkpoints at 150 and 300: the full tile 0/000 replaces the partial 000.p/150 (tlog-tiles removes
    it). The chain cut to 200 lines, the writer refuses; verify then found 150 the largest checkpoint
    that holds and reported 000.p/150 "missing". The full tile's first 150 hashes stand in for it."""
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.tlog import Signer

    signer = Signer.generate("example.com/route-shadow/partials")
    chain = tmp_path / "chain.jsonl"
    append(chain, 300, Checkpointer(str(chain), signer.name, signer), every=150)
    tiles = Path(LogStore(chain).path) / "tile" / "0"
    assert (tiles / "000").is_file() and not (tiles / "000.p").exists()
    chain.write_bytes(b"".join(chain.read_bytes().splitlines(keepends=True)[:200]))
    writer = Checkpointer(str(chain), signer.name, signer)
    assert writer.checkpoint() is None and writer.refused is not None
    code, out, _ = run(["verify", str(chain), "--key", str(signer.verifier()), "--json"], capsys)
    assert code == 1  # the checkpoint of 300 no longer holds: a finding, named as such
    report = json.loads(out)["checkpoints"]
    assert report["tiles"]["missing"] == [] and report["tiles"]["damaged"] == [], report["tiles"]
    shutil.rmtree(tiles / "000.p", ignore_errors=True)  # the writer's rebuild before refusing wrote it back
    (tiles / "000").write_bytes(b"\0" * 32 * 256)  # a full tile that does not hold them is still damage
    code, out, _ = run(["verify", str(chain), "--key", str(signer.verifier()), "--json"], capsys)
    assert json.loads(out)["checkpoints"]["tiles"]["damaged"] == [
        "tile/0/000: does not hold the hashes of the signed tree"
    ]


def test_verify_reads_the_newest_checkpoints_of_a_file_past_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``checkpoints`` only grows (a note a checkpoint, again per cosignature): past the readers' bound
    (64 MiB, about nine days of a checkpoint every 10 s with two witnesses) ``verify --key`` exited 2.
    It reads the newest notes and says the oldest were not read (the bound made small here)."""
    from functools import partial

    from otel_route_shadow.logstore import LogStore, read_note_file, store
    from otel_route_shadow.tlog import Signer

    signer = Signer.generate("example.com/route-shadow/long")
    chain = tmp_path / "chain.jsonl"
    append(chain, 300, Checkpointer(str(chain), signer.name, signer), every=30)
    size = Path(LogStore(chain).file("checkpoints")).stat().st_size
    monkeypatch.setattr(store, "read_note_file", partial(read_note_file, max_bytes=size // 2))
    code, _, err = run(["verify", str(chain), "--key", str(signer.verifier())], capsys)
    assert code == 0, err
    assert "were not read: they are not checked" in err and "the oldest checkpoints" in err


def test_the_newest_notes_of_a_checkpoints_file_start_at_a_line(tmp_path: Path) -> None:
    from otel_route_shadow.files import FileRefused, read_newest
    from otel_route_shadow.logstore import read_note_file

    path = tmp_path / "checkpoints"
    lines = [json.dumps({"note": f"o\n{n}\nroot\n"}).encode() + b"\n" for n in range(10)]
    path.write_bytes(b"".join(lines))
    whole = len(b"".join(lines))
    assert read_newest(path, whole) == (b"".join(lines), 0)
    data, older = read_newest(path, len(lines[0]) * 3 + 5)  # three lines and a piece of one before
    assert data == b"".join(lines[-3:]) and older == whole - len(data)
    found = read_note_file(path, len(lines[0]) * 3 + 5, newest=True)
    assert [note.split("\n")[1] for note in found.notes] == ["7", "8", "9"] and found.older_bytes == older
    with pytest.raises(FileRefused, match="larger than"):
        read_note_file(path, len(lines[0]) * 3 + 5)
    assert read_newest(path, 5) == (b"", whole)  # one line longer than the bound: nothing


@pytest.mark.parametrize("command", [["verify", "--key"], ["prove", "--seq", "7"]])
def test_verify_and_prove_read_the_log_checkpoint_as_serve_does_no_link_and_one_bound(
    signed_chain: tuple[Path, str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    chain, verifier, _ = signed_chain
    argv = [command[0], str(chain), *command[1:], *([verifier] if command[-1] == "--key" else [])]
    latest = Path(str(chain) + ".tlog/checkpoint")
    note = latest.read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(note)
    latest.unlink()
    latest.symlink_to(elsewhere)  # a link below the log folder: serve refuses it, so do the others
    code, _, err = run(argv, capsys)
    assert code == 2 and "checkpoint" in err and "link" in err
    latest.unlink()
    latest.write_bytes(note + b"\n" * (1 << 20))  # past the one bound every reader of the file has
    code, _, err = run(argv, capsys)
    assert code == 2 and "larger than 1048576 bytes" in err
    latest.write_bytes(note)
    assert run(argv, capsys)[0] == 0
