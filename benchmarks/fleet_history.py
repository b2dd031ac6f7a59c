"""Row 11c's rerun over fewer, longer logs: what a rerun costs when each log holds more history.

``python -m benchmarks.fleet_history [--hosts 10] [--runs 3] [--workdir DIR]``

The large chain of ``make bench`` (1,000,000 records, generated or reused under ``--workdir``) is dealt
into ``--hosts`` logs exactly as row 11c deals it into 100 (``bench_fleet._followed_fleet``: 99% of each
log's records checkpointed and followed into a state file, then the last 1% appended and checkpointed),
and the same three sides are timed, interleaved: the rerun from the state, the full run, and the rerun
with nothing new. With 10 hosts each log holds ten times row 11c's records and about as many distinct
cells and decision keys, so the rerun's fixed part (the state) is a tenth of row 11c's while the full run
reads as many records. A diagnostic for ``docs/benchmarks.md`` (row 11c), never part of ``make bench``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.bench_fleet import _followed_fleet
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import RESULTS_DIR, Row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fleet_history", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--hosts", type=int, default=10, help="logs the large chain is dealt into")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side")
    parser.add_argument("--workdir", type=Path, default=RESULTS_DIR / "work")
    args = parser.parse_args(argv)
    cfg = BenchConfig.full(args.workdir)
    large = BenchContext(cfg).chains.large()
    row = Row(id="11c", title="incremental rerun, 1% new", measured="", unit="s")
    _followed_fleet(large, cfg.workdir / "fleet-history", args.hosts, args.runs, row)
    assert row.ours is not None and row.baseline is not None and row.ratio is not None
    print(
        f"{args.hosts} logs of {cfg.chain_records // args.hosts:,} records, {row.extras['new_records']:,} new"
    )
    print(f"rerun {row.ours.median:.3f} s, full run {row.baseline.median:.2f} s (medians of {args.runs})")
    print(f"rerun / full run, per run: {', '.join(f'{v:.4f}' for v in row.ratio.values)}")
    print(
        f"nothing new: {row.extras['nothing_new_s']} s, of the full run {row.extras['nothing_new_of_full']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
