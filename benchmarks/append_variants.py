"""Rows 4a and 4b with and without each cache and window of the chain's append path.

``python -m benchmarks.append_variants [--variants NAMES] [--pairs N] [--block N] [--quick] [--workdir DIR]``

Row 4a's measured side (``bench_append._append_run``: a fresh ``DecisionChain`` appending realistic
payloads to the large chain, truncated back after each run) is timed in blocks of ``--block``
appends; row 4b's (``bench_append._threads_fsync``: 8 threads sharing one ``fsync`` log) in blocks of
its 400 records (variant ``no-durable-memo``). Each block of a variant (one patch of
``benchmarks.chain_patches`` entered for that block only) is paired with a block of the shipped code
right before or after it (the order alternates), in one process, the variants taking turns. The figure per variant is the median of its per-pair ratios,
with the shipped and patched µs per append: on a busy machine, pairs this close are the only
comparison that holds. A diagnostic for ``docs/benchmarks.md`` ("Caches, windows and threads"),
never part of ``make bench``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchmarks.chain_patches import PATCHES
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import RESULTS_DIR

VARIANTS = tuple(name for name in PATCHES if name != "no-template")
FSYNC_VARIANTS = frozenset({"no-durable-memo"})


def measure(cfg: BenchConfig, variants: list[str], pairs: int, block: int) -> dict[str, dict[str, float]]:
    """``{variant: {ratio, shipped_us, patched_us}}``, medians over ``pairs`` pairs each."""
    from benchmarks.bench_append import _append_run, _payloads, _threads_fsync

    chains = BenchContext(cfg, {"4a"}).chains
    large = chains.large()
    size = large.stat().st_size
    payloads = _payloads(chains.templates, block, seed=41)
    fsync_payloads = _payloads(chains.templates, cfg.fsync_records, seed=43)
    fsync_path = cfg.workdir / "append-variants-fsync.jsonl"

    def run(name: str) -> float:
        """µs per record of one block of the row the variant belongs to."""
        if name not in FSYNC_VARIANTS:
            return _append_run(large, payloads, size)
        try:
            rate, _ = _threads_fsync(fsync_path, fsync_payloads, cfg.fsync_appenders)
        finally:
            for leftover in (fsync_path, Path(f"{fsync_path}.sync")):
                leftover.unlink(missing_ok=True)
        return 1e6 / rate

    run(variants[0])  # warm-up
    shipped: dict[str, list[float]] = {name: [] for name in variants}
    patched: dict[str, list[float]] = {name: [] for name in variants}
    for pair in range(pairs):
        for name in variants[pair % len(variants) :] + variants[: pair % len(variants)]:
            if pair % 2:
                with PATCHES[name]():
                    patched[name].append(run(name))
                shipped[name].append(run(name))
            else:
                shipped[name].append(run(name))
                with PATCHES[name]():
                    patched[name].append(run(name))
    if large.stat().st_size != size:
        raise RuntimeError("the large chain was not restored to its size")
    return {
        name: {
            "ratio": statistics.median(p / s for p, s in zip(patched[name], shipped[name], strict=True)),
            "shipped_us": statistics.median(shipped[name]),
            "patched_us": statistics.median(patched[name]),
        }
        for name in variants
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.append_variants", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS)
    )
    parser.add_argument("--pairs", type=int, default=31, help="pairs of blocks per variant (default 31)")
    parser.add_argument("--block", type=int, default=400, help="appends per block (default 400)")
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (the figures mean nothing)")
    parser.add_argument("--workdir", type=Path, default=RESULTS_DIR / "work")
    args = parser.parse_args(argv)
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants: {', '.join(unknown)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    cfg = BenchConfig.smoke(args.workdir) if args.quick else BenchConfig.full(args.workdir)
    results = measure(cfg, variants, args.pairs, args.block)
    print("| variant | of shipped (median of pairs) | shipped µs per record | patched µs per record |")
    print("|---|---|---|---|")
    for name, figures in results.items():
        print(
            f"| {name} | {figures['ratio']:.2f}x | {figures['shipped_us']:.1f} | {figures['patched_us']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
