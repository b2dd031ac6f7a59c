"""Go interop of a key rotation: Go's ``golang.org/x/mod/sumdb/note`` opens the dual-signed checkpoints of
the transition window with either key alone (signatures by other keys are ignored, as C2SP signed-note
says), and refuses the old key's verifier a checkpoint the new key alone signed. The existing program in
tests/interop/ is run once per verifier key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from go_interop import run_go_interop
from tlog_support import ORIGIN, append, notes

from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import Signer, parse_note

OLD = Signer.generate(ORIGIN)
NEW = Signer.generate(ORIGIN)


@pytest.mark.skipif(shutil.which("go") is None, reason="the go command is not installed (CI has it)")
def test_go_opens_the_dual_signed_checkpoints_with_either_key(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    append(chain, 100, Checkpointer(str(chain), ORIGIN, OLD), every=100)
    append(chain, 200, Checkpointer(str(chain), ORIGIN, (OLD, NEW)), every=100, start=100)
    append(chain, 100, Checkpointer(str(chain), ORIGIN, NEW), every=100, start=300)
    before, *during, after = notes(chain)
    assert [len(parse_note(note).signatures) for note in during] == [2, 2]
    for key, good, bad in ((OLD, [before], [after]), (NEW, [after], [before])):
        payload = {"verifier": str(key.verifier()), "notes": [*good, *during], "bad_notes": bad}
        output = run_go_interop(payload, tmp_path)
        assert "4 checks, 0 failed" in output, output
