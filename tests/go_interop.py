"""Running the Go interop program (tests/interop/) on a JSON payload, with Go's caches outside the repository."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

INTEROP = Path(__file__).parent / "interop"


def run_go_interop(payload: dict[str, Any], directory: Path) -> str:
    """Write ``payload`` to ``directory``, run the program on it, assert it passed; its output."""
    data = directory / "interop.json"
    data.write_text(json.dumps(payload), encoding="utf-8")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "local")}
    done = subprocess.run(
        ["go", "run", ".", str(data)], cwd=INTEROP, env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
