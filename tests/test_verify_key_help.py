"""`verify --help` says what `--key` alone does: it proves the chain against its own checkpoints (the
help called it the key "for --checkpoint", as if it did nothing without one)."""

from __future__ import annotations

import pytest

from otel_route_shadow.cli import main


def test_verify_key_help_says_it_checks_the_chains_own_checkpoints(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    options = text.split("options:", 1)[1]
    key_help = options.split("--key VKEY", 1)[1].split("--keys FILE", 1)[0]
    assert "for --checkpoint" not in key_help
    assert "CHAIN.tlog/checkpoints" in key_help
