"""The README's ten-line host runs as written: its span is printed with the decision on it, and its chain
holds the same event and verifies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.cli import main

ROOT = Path(__file__).resolve().parents[1]


def readme_host() -> str:
    """The one Python block of the README's "A host in ten lines" section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## A host in ten lines", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "the README's host section should hold exactly one Python block"
    return blocks[0]


def test_the_readme_host_runs_as_written_and_its_chain_verifies(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(readme_host(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    span = json.loads(done.stdout)
    assert span["name"] == "invoke_agent adr_reviewer"
    attributes = span["attributes"]
    assert attributes["route_shadow.policy_source"] == "legacy-compatibility"
    assert attributes["route_shadow.legacy.mechanism"] == "role-dial"
    assert attributes["route_shadow.transport"] == "harness-direct"
    chain = tmp_path / "route-shadow" / "chain.jsonl"
    payloads = [payload for _, payload in iter_payloads(chain)]
    assert len(payloads) == 1
    assert payloads[0]["span_id"] == span["context"]["span_id"].removeprefix("0x")
    assert main(["verify", str(chain)]) == 0
