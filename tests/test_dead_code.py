"""No dead code in the package: vulture (at 60% confidence, its most thorough) finds nothing that the
allow-list of framework-used names does not explain."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def test_vulture_finds_no_dead_code_in_the_package() -> None:
    if shutil.which("vulture", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("vulture is a test dependency (pyproject [test]); reinstall with make .venv/.installed")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vulture",
            "otel_route_shadow",
            "tests/vulture_allowlist.py",
            "--min-confidence",
            "60",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dead_code_check_catches_an_unused_function(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def used() -> int:\n    return 1\n\n\ndef unused() -> int:\n    return 2\n\n\nused()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "vulture", str(tmp_path / "m.py"), "--min-confidence", "60"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "unused function 'unused'" in done.stdout
