"""Row 3: ``verify`` against the minimal reference loop, ``--jobs 2`` against one process, and the peak
memory of ``verify`` on the large chain.

* 3a/3b run in this process on the same (page-cached) large chain, the three sides interleaved with
  their order rotated each run: the reference loop (``benchmarks.chainfile.reference_verify``: orjson
  parse, re-canonicalize with orjson, sha256, compare; nothing else), ``RoutingAuditLog.verify(jobs=1)``
  and ``RoutingAuditLog.verify(jobs=2)``. Figures are throughput in thousands of records per second.
* 3c runs ``otel-route-shadow verify CHAIN`` (the CLI's ``main``) in a child process and reads the
  child's peak resident set size from ``os.wait4`` (``ru_maxrss``, KiB on Linux). The baseline shown is
  the same command on a 1,000-record chain: the interpreter, the imports and the CLI's fixed cost.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.chainfile import reference_verify, write_chain
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, interleaved, ratios, timed, unavailable


def _verify_fn(path: Path, jobs: int) -> Any:
    from otel_route_shadow.chain import RoutingAuditLog

    def run() -> None:
        result = RoutingAuditLog(path).verify(jobs=jobs)
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
        from otel_route_shadow.chain import RoutingAuditLog  # noqa: F401
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
    return [ref_row.judge(), jobs_row.judge()]


_CLI_CHILD = (
    "import sys\n"
    "from otel_route_shadow.cli import main\n"
    "sys.exit(main(['verify', sys.argv[1], '--jobs', sys.argv[2]]))\n"
)
_API_CHILD = (
    "import sys\n"
    "from otel_route_shadow.chain import RoutingAuditLog\n"
    "sys.exit(0 if RoutingAuditLog(sys.argv[1]).verify(jobs=int(sys.argv[2])).intact else 1)\n"
)


def cli_has_verify() -> bool:
    """Whether ``otel-route-shadow verify`` exists yet (its issue may land after this harness)."""
    try:
        from otel_route_shadow.cli import build_parser

        with contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args(["verify", "chain.jsonl", "--jobs", "1"])
    except (SystemExit, Exception):
        return False
    return True


def peak_rss_mb(path: Path, jobs: int = 1, cli: bool = True) -> tuple[float, int]:
    """Peak RSS (MB) of verifying ``path`` in a child process, and the child's exit code: the CLI
    (``otel-route-shadow verify PATH --jobs N``) or, when ``cli`` is false, ``RoutingAuditLog.verify``."""
    process = subprocess.Popen(
        [sys.executable, "-c", _CLI_CHILD if cli else _API_CHILD, str(path), str(jobs)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, process.returncode


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
        from otel_route_shadow.chain import RoutingAuditLog  # noqa: F401
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
            mb, code = peak_rss_mb(path, cli=cli)
            if code != 0:
                raise RuntimeError(f"verify exited {code} on the benchmark chain (cli={cli})")
            ours.append(mb)
            base.append(peak_rss_mb(small, cli=cli)[0])
        row.ours, row.baseline, row.runs = Stats.of(ours), Stats.of(base), len(ours)
        row.ratio = ratios(ours, base)
        row.ratio_label = "of 1k"
        two, code = peak_rss_mb(path, jobs=2, cli=cli)
        row.extras["peak_rss_mb_jobs2_largest_process"] = round(two, 1)
        row.extras["chain_bytes"] = path.stat().st_size
        row.extras["measured_via"] = (
            "otel-route-shadow verify (CLI main)" if cli else "RoutingAuditLog.verify"
        )
        if cli:
            row.notes.append("child process running `otel-route-shadow verify`; ru_maxrss from os.wait4")
        else:
            row.notes.append(
                "CLI `verify` not available yet: child process running RoutingAuditLog(chain).verify(); "
                "ru_maxrss from os.wait4"
            )
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    return [*throughput_rows(cfg, context), memory_row(cfg, context)]
