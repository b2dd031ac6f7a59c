"""Rows 2c and 2d: ``otel-route-shadow explain`` of the largest context its bounds admit, time and
peak RSS.

A context is at most 4 MiB (``cli.common.MAX_LINE_BYTES``) and holds at most ``core.MAX_ACCOUNTS``
accounts; the largest admitted one here has both (``MAX_ACCOUNTS`` accounts whose ids fill the
4 MiB). Each figure comes from a child process running the CLI's ``main``: the time of ``main`` (the
interpreter's start and the package's import are the same for every input, and reported apart) and
the child's ``VmHWM``. The baseline is the same child explaining a small context (two accounts).
The issue's context (62 MB, 1.15 M accounts), refused at its size, is timed into the extras.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, ratios

_CHILD = """
import json, sys, time
started = time.perf_counter()
from otel_route_shadow.cli import main
imported = time.perf_counter()
code = main(["explain", "--context", sys.argv[1]])
done = time.perf_counter()
hwm = None
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
with open(sys.argv[2], "w") as handle:
    json.dump({"import_s": imported - started, "main_s": done - imported, "hwm_kb": hwm, "code": code}, handle)
"""


def _context(accounts: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "repo": "acme/widgets",
        "role": "triager",
        "request_face": "one-shot",
        "requirement": "fast",
        "accounts": accounts,
        "legacy_route": {
            "provider": "zai",
            "model": "glm-4.5-air",
            "account": accounts[0]["id"] if accounts else None,
            "transport": "direct-http",
            "mechanism": "role-dial",
        },
    }


def _accounts(count: int, id_length: int) -> list[dict[str, str]]:
    return [
        {"id": f"a{n}-".ljust(id_length, "x"), "provider": ("zai", "anthropic")[n % 2], "state": "available"}
        for n in range(count)
    ]


def largest_context(limit_bytes: int, accounts: int) -> bytes:
    """The context of ``accounts`` accounts whose ids are as long as ``limit_bytes`` allows."""
    low, high = 8, 4096  # an id is at most 4096 characters
    while low < high:
        middle = (low + high + 1) // 2
        if len(json.dumps(_context(_accounts(accounts, middle)))) <= limit_bytes:
            low = middle
        else:
            high = middle - 1
    return json.dumps(_context(_accounts(accounts, low))).encode()


def issue_context() -> bytes:
    """The issue's context: 1.15 M accounts in about 62 MB."""
    accounts = [{"id": f"a{n}", "provider": "zai", "state": "available"} for n in range(1_150_000)]
    return json.dumps(_context(accounts), separators=(",", ":")).encode()


def explain_child(path: Path) -> dict[str, Any]:
    """One child process explaining ``path``: its import and ``main`` times, peak RSS and exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "explain.json"
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path), str(report)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        if not report.exists():
            raise RuntimeError(f"explain child exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
        result: dict[str, Any] = json.loads(report.read_text())
    return result


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    from otel_route_shadow.cli.common import MAX_LINE_BYTES
    from otel_route_shadow.core import MAX_ACCOUNTS

    time_row = Row(
        id="2c",
        title="explain of the largest admitted context",
        measured=f"explain, {MAX_ACCOUNTS:,} accounts in {MAX_LINE_BYTES / 2**20:g} MiB (CLI main)",
        unit="s",
        baseline_label="2 accounts",
        ratio_label="of 2 accounts",
        target=Target("<=", 1.0, on="ours", unit="s"),
    )
    memory_row = Row(
        id="2d",
        title="explain peak memory, largest admitted context",
        measured=f"explain peak RSS, {MAX_ACCOUNTS:,} accounts in {MAX_LINE_BYTES / 2**20:g} MiB",
        unit="MB",
        baseline_label="2 accounts",
        ratio_label="of 2 accounts",
        target=Target("<=", 200.0, on="ours", unit="MB"),
    )
    try:
        work = context.chains.workdir / "explain"
        work.mkdir(parents=True, exist_ok=True)
        large, small = work / "largest-context.json", work / "small-context.json"
        large.write_bytes(largest_context(MAX_LINE_BYTES, MAX_ACCOUNTS))
        small.write_bytes(json.dumps(_context(_accounts(2, 12))).encode())
        runs = cfg.runs if not cfg.quick else 2
        ours: list[dict[str, Any]] = []
        base: list[dict[str, Any]] = []
        for _ in range(runs):
            ours.append(explain_child(large))
            base.append(explain_child(small))
        if any(run["code"] != 0 for run in ours + base):
            raise RuntimeError(
                f"explain refused a context it admits: exit {[r['code'] for r in ours + base]}"
            )
        ours_s, base_s = [r["main_s"] for r in ours], [r["main_s"] for r in base]
        ours_mb, base_mb = [r["hwm_kb"] / 1024 for r in ours], [r["hwm_kb"] / 1024 for r in base]
        time_row.ours, time_row.baseline, time_row.ratio = (
            Stats.of(ours_s),
            Stats.of(base_s),
            ratios(ours_s, base_s),
        )
        memory_row.ours, memory_row.baseline = Stats.of(ours_mb), Stats.of(base_mb)
        memory_row.ratio = ratios(ours_mb, base_mb)
        time_row.runs = memory_row.runs = runs
        time_row.extras["context_bytes"] = large.stat().st_size
        time_row.extras["import_s"] = Stats.of([r["import_s"] for r in ours]).as_dict()
        time_row.notes.append(
            "the time of the CLI's main in a child; the import (same for any input) in extras"
        )
        if not cfg.quick:
            issue = work / "issue-context.json"
            issue.write_bytes(issue_context())
            refused = explain_child(issue)
            time_row.extras["issue_context"] = {
                "bytes": issue.stat().st_size,
                "exit": refused["code"],
                "main_s": round(refused["main_s"], 4),
                "peak_rss_mb": round(refused["hwm_kb"] / 1024, 1),
            }
            issue.unlink()
    except Exception as exc:
        return [errored(time_row, exc), errored(memory_row, exc)]
    return [time_row.judge(), memory_row.judge()]
