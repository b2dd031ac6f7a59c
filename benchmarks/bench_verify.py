"""Row 3: ``verify`` against the minimal reference loop, ``--jobs 2`` against one process, and the peak
memory of ``verify`` on the large chain.

* 3a/3b run in this process on the same (page-cached) large chain, the three sides interleaved with
  their order rotated each run: the reference loop (``benchmarks.chainfile.reference_verify``: orjson
  parse, re-canonicalize with orjson, sha256, compare; nothing else), ``DecisionChain.verify(jobs=1)``
  and ``DecisionChain.verify(jobs=2)``. Figures are throughput in thousands of records per second.
* 3c runs ``otel-route-shadow verify CHAIN`` (the CLI's ``main``) in a child process, which reports
  its own peak resident set size (``VmHWM``). The baseline shown is
  the same command on a 1,000-record chain: the interpreter, the imports and the CLI's fixed cost.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks.chainfile import reference_verify, write_chain
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, interleaved, ratios, timed, unavailable


def _verify_fn(path: Path, jobs: int) -> Any:
    from otel_route_shadow.chain import DecisionChain

    def run() -> None:
        result = DecisionChain(path).verify(jobs=jobs)
        if not result.intact:
            raise RuntimeError(f"verify rejected the benchmark chain: {result.reason}")

    return run


def _kilo_rps(records: int, seconds: list[float]) -> list[float]:
    return [records / s / 1000 for s in seconds]


def throughput_rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    n = cfg.chain_records
    ref_row = Row(
        id="3a",
        title="verify vs reference loop",
        measured=f"verify (1 process), {n:,}-record chain",
        unit="k rec/s",
        baseline_label="reference loop",
        ratio_label="of ref",
        target=Target(">=", 0.75),
    )
    jobs_row = Row(
        id="3b",
        title="verify --jobs 2 vs 1",
        measured=f"verify --jobs 2, {n:,}-record chain",
        unit="k rec/s",
        baseline_label="--jobs 1",
        ratio_label="of 1 job",
        target=Target(">", 1.5),
    )
    try:
        from otel_route_shadow.chain import DecisionChain  # noqa: F401
    except ImportError as exc:
        return [
            unavailable(ref_row, f"chain not landed: {exc}"),
            unavailable(jobs_row, f"chain not landed: {exc}"),
        ]
    try:
        path = context.chains.large()
        reference_verify(path)  # warm the page cache; both sides then read from memory
        one, two = _verify_fn(path, 1), _verify_fn(path, 2)
        runs = cfg.slow_runs
        times = interleaved(
            {
                "ref": lambda: timed(lambda: reference_verify(path)),
                "one": lambda: timed(one),
                "two": lambda: timed(two),
            },
            runs,
        )
    except Exception as exc:
        return [errored(ref_row, exc), errored(jobs_row, exc)]
    ref_rps, one_rps, two_rps = (_kilo_rps(n, times[k]) for k in ("ref", "one", "two"))
    ref_row.ours, ref_row.baseline, ref_row.ratio, ref_row.runs = (
        Stats.of(one_rps),
        Stats.of(ref_rps),
        ratios(one_rps, ref_rps),
        runs,
    )
    ref_row.notes.append("same process, same page-cached chain, same orjson; sides interleaved")
    jobs_row.ours, jobs_row.baseline, jobs_row.ratio, jobs_row.runs = (
        Stats.of(two_rps),
        Stats.of(one_rps),
        ratios(two_rps, one_rps),
        runs,
    )
    jobs_row.extras["cpus_available"] = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    )
    jobs_row.extras["loadavg_after"] = os.getloadavg()
    jobs_row.extras["threads_in_process"] = threading.active_count()
    return [ref_row.judge(), jobs_row.judge()]


_CHILD = """
import json, resource, sys
path, jobs, out, how = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
if how == "cli":
    from otel_route_shadow.cli import main
    code = main(["verify", path, "--jobs", jobs, "--no-progress"])
else:
    from otel_route_shadow.chain import DecisionChain
    code = 0 if DecisionChain(path).verify(jobs=int(jobs)).intact else 1
hwm = None
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(out, "w") as handle:
    json.dump({"self_kb": hwm, "children_kb": children}, handle)
sys.exit(code)
"""


def cli_has_verify() -> bool:
    """Whether ``otel-route-shadow verify`` exists yet (its issue may land after this harness)."""
    try:
        from otel_route_shadow.cli import build_parser

        with contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args(["verify", "chain.jsonl", "--jobs", "1"])
    except (SystemExit, Exception):
        return False
    return True


def peak_rss_mb(path: Path, jobs: int = 1, cli: bool = True) -> tuple[float, float, int]:
    """Peak RSS of verifying ``path`` in a child process: ``(child MB, largest worker MB, exit code)``.

    The child runs the CLI (``otel-route-shadow verify PATH --jobs N``) or, when ``cli`` is false,
    ``DecisionChain.verify``, then reports its own ``VmHWM`` from ``/proc/self/status`` (the high-water
    mark of its address space since ``exec``). ``ru_maxrss`` as seen by this parent would not do: Linux
    carries the pre-``exec`` high-water mark of the forked copy of *this* (large) process into it.
    Workers (``--jobs 2``) are the child's children: their peak is ``RUSAGE_CHILDREN`` in the child.
    """
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak.json"
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path), str(jobs), str(report), "cli" if cli else "api"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        if proc.returncode != 0 or not report.exists():
            raise RuntimeError(f"verify child exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
        peaks = json.loads(report.read_text())
    return peaks["self_kb"] / 1024, peaks["children_kb"] / 1024, proc.returncode


def memory_row(cfg: BenchConfig, context: BenchContext) -> Row:
    n = cfg.chain_records
    row = Row(
        id="3c",
        title="verify peak memory",
        measured=f"verify peak RSS, {n:,}-record chain",
        unit="MB",
        baseline_label="same on 1k records",
        target=Target("<=", 100.0, on="ours", unit="MB"),
    )
    try:
        from otel_route_shadow.chain import DecisionChain  # noqa: F401
    except ImportError as exc:
        return unavailable(row, f"chain not landed: {exc}")
    try:
        path = context.chains.large()
        small = context.chains.workdir / "chains" / "small-1k.jsonl"
        write_chain(small, context.chains.templates, 1000)
        cli = cli_has_verify()
        ours: list[float] = []
        base: list[float] = []
        for _ in range(2 if not cfg.quick else 1):
            ours.append(peak_rss_mb(path, cli=cli)[0])
            base.append(peak_rss_mb(small, cli=cli)[0])
        row.ours, row.baseline, row.runs = Stats.of(ours), Stats.of(base), len(ours)
        row.ratio = ratios(ours, base)
        row.ratio_label = "of 1k"
        main_mb, worker_mb, _ = peak_rss_mb(path, jobs=2, cli=cli)
        row.extras["jobs2_peak_rss_mb"] = {"main": round(main_mb, 1), "largest_worker": round(worker_mb, 1)}
        row.extras["chain_bytes"] = path.stat().st_size
        row.extras["measured_via"] = "otel-route-shadow verify (CLI main)" if cli else "DecisionChain.verify"
        if cli:
            row.notes.append("child process running `otel-route-shadow verify`; its VmHWM")
        else:
            row.notes.append(
                "CLI `verify` not available yet: child process running DecisionChain(chain).verify(); "
                "its VmHWM"
            )
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    out = []
    if context.wants("3a") or context.wants("3b"):
        out.extend(throughput_rows(cfg, context))
    if context.wants("3c"):
        out.append(memory_row(cfg, context))
    return out
