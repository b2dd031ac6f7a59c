"""A command that reads a chain to judge it holds the prune lock shared while it runs
(``logstore.prune_lock``): a prune waits for it, and it for a prune, each within its bound; ``serve``
and ``prune`` itself never take it."""

from __future__ import annotations

import contextlib
import fcntl
import resource
from pathlib import Path

import pytest
from test_segment_writer import SIGNER, written_cut_twice

from otel_route_shadow.cli import build_parser, main
from otel_route_shadow.cli import common as cli_common
from otel_route_shadow.cli import verify as verify_command
from otel_route_shadow.instrumentation.retention import HostRetention
from otel_route_shadow.logstore import PruneOptions, PruneRefused, Retention, prune, prunes_held_off
from otel_route_shadow.logstore import prune_lock as prune_lock_module
from otel_route_shadow.logstore.prune_lock import segments_lock


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """A chain of 1,200 records cut after 300 and 700, pruned below 300, checkpointed."""
    path = tmp_path / "chain.jsonl"
    written_cut_twice(path)
    assert prune(str(path), Retention(min_index=300), PruneOptions([SIGNER.verifier()])).after == 300
    return path


def test_verify_while_the_hosts_retention_prunes_says_intact_and_the_prune_comes_after(
    chain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # verify read the pruned file (minimum index 300), a host's retention then pruned below 700 and removed
    # the segment from 300: verify found the chain's first file at seq 700 and said BROKEN (segment-missing,
    # checkpoints truncated), exit 1, of a chain nobody had touched.
    read = verify_command._pruned
    tried: list[str] = []

    def read_then_retention(path: str) -> object:
        found = read(path)
        try:
            prune(path, Retention(min_index=700), PruneOptions([SIGNER.verifier()], wait=0.0))
        except PruneRefused as refused:
            tried.append(refused.kind)
        return found

    monkeypatch.setattr(verify_command, "_pruned", read_then_retention)
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0
    out = capsys.readouterr().out
    assert tried == ["busy"] and "BROKEN" not in out and "pruned below seq 300" in out
    # The retention's next try, once verify ended, prunes.
    assert prune(str(chain), Retention(min_index=700), PruneOptions([SIGNER.verifier()], wait=0.0)).after == 700


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "{chain}"],
        ["prove", "{chain}", "--seq", "400"],
        ["report", "{chain}"],
        ["whatif", "{chain}", "--policies", "{policies}"],
        ["matrix", "--policies", "{policies}", "--chain", "{chain}"],
        ["audit", "{chain}", "--backend", "http://127.0.0.1:9/"],
        ["report", "{folder}"],
        ["whatif", "{folder}", "--policies", "{policies}"],
    ],
    ids=lambda argv: argv[0] + (" of a folder" if argv[1] == "{folder}" else ""),
)
def test_a_command_reading_a_chain_waits_for_a_running_prune_and_then_says_so_reading_nothing(
    chain: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    policies = chain.parent / "policies.json"
    policies.write_text('{"policies": []}')
    monkeypatch.setattr(prune_lock_module, "READ_WAIT_S", 0.05)
    with segments_lock(str(chain), fcntl.LOCK_EX, 0.0) as held:  # a prune running
        assert held is True
        code = main([part.format(chain=chain, policies=policies, folder=chain.parent) for part in argv])
    err = capsys.readouterr().err
    assert code == 2 and f"{chain}: a prune of this chain is running (waited 0.05 s); nothing was read" in err


def test_serve_prune_and_the_commands_that_write_never_hold_prunes_off(chain: Path) -> None:
    parser = build_parser()
    for argv in (["serve", str(chain)], ["prune", str(chain)], ["rotate", str(chain)], ["acknowledge", str(chain)]):
        assert not getattr(parser.parse_args(argv), "reads_chains", False), argv[0]
    assert parser.parse_args(["verify", str(chain)]).reads_chains


def test_prunes_held_off_passes_over_a_chain_never_cut_and_a_folder_it_cannot_open(tmp_path: Path) -> None:
    never_cut = tmp_path / "never.jsonl"
    never_cut.write_bytes(b"")
    not_a_folder = tmp_path / "file.jsonl"
    Path(str(not_a_folder) + ".segments").write_bytes(b"not a folder")
    with prunes_held_off([str(never_cut), str(not_a_folder)], wait=0.0):
        pass


def test_a_fleet_of_more_cut_chains_than_the_open_files_allowed_holds_the_lock_of_each() -> None:
    # One lock descriptor per cut chain: a folder of a thousand hosts' chains under a soft limit of 1,024
    # open files would have run out of descriptors, the rest read unlocked and the chains not opened.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"a hard limit of {hard} open files leaves no room to raise the soft one")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        cli_common._room_for(1000)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 1000 + 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_hosts_retention_held_off_again_after_a_prune_says_so_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "busy" was logged once per process: a retention held off by readers for good after one prune had
    # gone through let the disk grow with nothing said.
    chain = tmp_path / "chain.jsonl"
    written_cut_twice(chain)
    retention = HostRetention(str(chain), 600, [SIGNER.verifier()], delete=True)
    outcomes: list[object] = []
    for held in (True, False, True):
        retention.due = True
        with segments_lock(str(chain), fcntl.LOCK_SH, 0.0) if held else contextlib.nullcontext():  # a verify
            outcomes.append(retention.apply())
    assert outcomes[0] is None and outcomes[1] is not None and outcomes[2] is None
    assert caplog.text.count("not pruned (busy)") == 2
