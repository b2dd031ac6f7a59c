"""``python -m benchmarks [--quick] [--only IDS] [--records N] [--workdir DIR] [--out FILE] [--markdown]``.

Prints the table and writes the JSON (``benchmarks/results/bench-<timestamp>[-quick].json`` and
``latest[-quick].json`` unless ``--out`` is given). Exit status: 0 when every row ran (whatever its
result: a failed target is a finding, reported in the table), 2 when a row could not be measured
because the harness or the measured code raised.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import orjson

from benchmarks.config import BenchConfig
from benchmarks.harness import ERROR, RESULTS_DIR, Row, errored, machine, render_table

Group = tuple[str, tuple[str, ...], Callable[..., list[Row]]]


def _groups() -> list[Group]:
    from benchmarks import (
        bench_append,
        bench_audit,
        bench_explain,
        bench_fleet,
        bench_policy,
        bench_redaction,
        bench_reports,
        bench_resolver,
        bench_retention,
        bench_seam,
        bench_segments,
        bench_serve,
        bench_tlog,
        bench_verify,
        bench_witness,
    )

    return [
        ("seam", ("1", "1c", "1d", "1e"), bench_seam.rows),
        ("resolver", ("2a", "2b"), bench_resolver.rows),
        ("explain", ("2c", "2d"), bench_explain.rows),
        ("redaction", ("2e",), bench_redaction.rows),
        ("verify", ("3a", "3b", "3c"), bench_verify.rows),
        ("append", ("4a", "4b"), bench_append.rows),
        ("reports", ("5a", "5b"), bench_reports.rows),
        ("tlog", ("6a", "6b", "6c", "6d"), bench_tlog.rows),
        ("audit", ("7",), bench_audit.rows),
        ("policy", ("8a", "8b", "8c", "8d", "8e", "8f", "8g"), bench_policy.rows),
        ("serve", ("9a", "9b", "9c", "9d"), bench_serve.rows),
        ("witness", ("10a", "10b", "10c", "10d", "10e"), bench_witness.rows),
        ("fleet", ("11a", "11b", "11c", "11d"), bench_fleet.rows),
        ("segments", ("12a", "12b"), bench_segments.rows),
        ("retention", ("12d", "12e"), bench_retention.rows),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (seconds, not minutes)")
    parser.add_argument("--only", metavar="IDS", help="comma-separated row ids or groups (e.g. 1,2a,verify)")
    parser.add_argument(
        "--workdir", type=Path, help="where chains and stores go (default benchmarks/results)"
    )
    parser.add_argument("--out", type=Path, help="JSON output file (default benchmarks/results/...)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument(
        "--records",
        type=int,
        metavar="N",
        help="records in the large chain (a smaller scale than the 1M rows)",
    )
    args = parser.parse_args(argv)

    workdir = args.workdir or RESULTS_DIR / ("work-quick" if args.quick else "work")
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = BenchConfig.smoke(workdir) if args.quick else BenchConfig.full(workdir)
    if args.records:
        cfg = dataclasses.replace(cfg, chain_records=args.records)
    wanted = {item.strip() for item in args.only.split(",")} if args.only else None

    started = datetime.now(UTC)
    info = machine()
    mode = "quick (smoke sizes: the figures say nothing about the targets)" if cfg.quick else "full"
    print(f"otel-route-shadow benchmarks, {mode}", file=sys.stderr)
    print(
        f"{started:%Y-%m-%d %H:%M} UTC, {info['cpu']}, {info['cpus']} CPUs, Python {info['python']}",
        file=sys.stderr,
    )

    from benchmarks.context import BenchContext

    context = BenchContext(cfg, wanted)
    rows: list[Row] = []
    timings: dict[str, float] = {}
    loads: dict[str, list[float]] = {}
    for name, ids, build in _groups():
        if wanted is not None and name not in wanted and not wanted.intersection(ids):
            continue
        context.only = None if wanted is None or name in wanted else wanted
        print(f"  running {name} ({', '.join(ids)}) ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            built = build(cfg, context)
        except Exception as exc:
            built = [errored(Row(id=ids[0], title=name, measured=name, unit=""), exc)]
        timings[name] = round(time.perf_counter() - start, 1)
        loads[name] = [round(value, 2) for value in os.getloadavg()]
        if wanted is not None and name not in wanted:
            built = [row for row in built if row.id in wanted]
        for row in built:
            print(
                f"    {row.id}: {row.status}"
                + (f" ({row.notes[-1]})" if row.status != "pass" and row.notes else ""),
                file=sys.stderr,
                flush=True,
            )
        rows.extend(built)

    finished = datetime.now(UTC)
    table = render_table(rows, markdown=args.markdown)
    print()
    print(
        f"otel-route-shadow benchmarks ({'quick' if cfg.quick else 'full'}), {started:%Y-%m-%d} on {info['cpu']}"
        f" ({info['cpus']} CPUs), Python {info['python']}"
    )
    print(table)
    document = {
        "mode": "quick" if cfg.quick else "full",
        "started": started.isoformat(),
        "finished": finished.isoformat(),
        "machine": info,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()},
        "group_seconds": timings,
        "loadavg_after_group": loads,
        "chain": context.describe(),
        "rows": [row.as_dict() for row in rows],
        "table": render_table(rows, markdown=True),
    }
    out = args.out
    if out is None:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        suffix = "-quick" if cfg.quick else ""
        out = RESULTS_DIR / f"bench-{started:%Y%m%d-%H%M%S}{suffix}.json"
        (RESULTS_DIR / f"latest{suffix}.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    print(f"\nJSON: {out}  ({(finished - started).total_seconds():.0f} s)")
    return 2 if any(row.status == ERROR for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
