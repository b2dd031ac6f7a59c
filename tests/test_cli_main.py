"""The command line's own surface: version, help, unknown commands."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

from otel_route_shadow import __version__
from otel_route_shadow.cli import main


def test_version_matches_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"otel-route-shadow {__version__}"
    assert version("otel-route-shadow") == __version__


def test_every_command_has_help() -> None:
    for command in ("explain", "policy", "verify", "demo", "audit", "report", "whatif", "matrix"):
        done = subprocess.run(
            [sys.executable, "-m", "otel_route_shadow.cli", command, "--help"], capture_output=True, text=True
        )
        assert done.returncode == 0, command
        assert "usage:" in done.stdout


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["frobnicate"])
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
