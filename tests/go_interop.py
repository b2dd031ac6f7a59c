"""Running a Go interop program (tests/interop/, or a module under it) on a JSON payload, with Go's caches
outside the repository."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

INTEROP = Path(__file__).parent / "interop"
# A module of its own at torchwood v0.6.1 (the release litewitness is built from): its Client's entries check.
TORCHWOOD_V061 = INTEROP / "torchwood-v0.6.1"
# A module of its own at torchwood v0.10.0 (ML-DSA-44 cosignatures), which needs Go 1.27: the go command takes
# that toolchain from the Go module proxy (GO_1_27), for this module only.
TORCHWOOD_V0100 = INTEROP / "torchwood-v0.10.0"
GO_1_27 = "go1.27.3"


def run_go_interop(
    payload: dict[str, Any], directory: Path, module: Path = INTEROP, toolchain: str | None = None
) -> str:
    """Write ``payload`` to ``directory``, run ``module``'s program on it (with the Go ``toolchain`` when
    given, else GOTOOLCHAIN or the machine's Go), assert it passed; its output."""
    data = directory / "interop.json"
    data.write_text(json.dumps(payload), encoding="utf-8")
    env = {
        **os.environ,
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": toolchain or os.environ.get("GOTOOLCHAIN", "local"),
    }
    done = subprocess.run(
        ["go", "run", ".", str(data)], cwd=module, env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
