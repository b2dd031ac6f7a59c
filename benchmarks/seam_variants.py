"""What-if prototypes for row 1: how the seam row moves under designs the code does not have.

``python -m benchmarks.seam_variants [--variants NAMES] [--rounds N] [--quick] [--workdir DIR]``

Each variant runs row 1 (``bench_seam.seam_rows``, unchanged) in a fresh process with one change
patched into the plugin in that process only. The variants take turns, round after round, so that
all of them see the same moments of the machine; the table gives each variant's ratio against a bare
span and against the row's baseline (the same seam with its append cut to the floor) per round, with
the medians. A diagnostic for a design decision (issue 17), never part of ``make bench``; the
patches are prototypes, not candidate code:

* ``shipped``: the code as it is.
* ``checkpoints-deferred``: checkpointing configured past the row (every 100 million records or
  once a day), through the documented environment settings.
* ``no-append``: ``DecisionChain.submit`` does nothing. What the span and the enrichment cost alone.
* ``minimal-append``: the append replaced by its irreducible steps, on a side file: ``flock``, a
  ``stat`` of the path, SHA-256 of the payload bytes, one ``write`` of them, unlock. The floor of any
  design that writes a linked record per spawn in the caller's thread.
* ``lock-held``: the chain's file lock taken once and never given back (every later ``flock`` a
  no-op): what holding the lock across calls could buy at most.
* ``writer-thread``: ``submit`` hands the record to one writer thread. Each timed run of the row
  ends by waiting until that thread has written everything it was handed, so the figure includes
  the writes (without that wait the queue grows without bound and the figure measures a queue).
* the patches of ``benchmarks.chain_patches`` (``listener``, ``no-head-cache``,
  ``no-recheck-window``, ``no-clean-memo``, ``no-secret-key-memo``, ``no-template``): each cache and
  window of the chain's append path switched off, for ``docs/benchmarks.md`` ("Caches, windows and
  threads");
* the patches of ``benchmarks.runtime_patches`` (``no-memo``, ``no-decision-memo``,
  ``no-sanitize-memo``, ``export-path``, ``chain-reopened``, ``recheck-every-call``): the same for
  the instrumentation's seam path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.chain_patches import PATCHES
from benchmarks.config import BenchConfig
from benchmarks.harness import RESULTS_DIR
from benchmarks.runtime_patches import PATCHES as RUNTIME_PATCHES

VARIANTS = (
    "shipped",
    "checkpoints-deferred",
    "no-append",
    "minimal-append",
    "lock-held",
    "writer-thread",
    *PATCHES,
    *RUNTIME_PATCHES,
)
DEFERRED_ENV = {
    "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS": "100000000",
    "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS": "86400",
}


def _no_append() -> Callable[[], dict[str, int]]:
    from otel_route_shadow.chain.log import DecisionChain

    DecisionChain.submit = lambda self, encoded: None  # type: ignore[assignment,method-assign,misc]
    return dict


def _minimal_append(workdir: Path) -> Callable[[], dict[str, int]]:
    import fcntl
    import hashlib

    from otel_route_shadow.chain.log import DecisionChain

    side = str(workdir / "minimal-append.jsonl")
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)

    def submit(self: Any, encoded: Any) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            os.stat(side)
            digest = hashlib.sha256(encoded.payload).hexdigest().encode("ascii")
            os.write(fd, encoded.payload + digest + b"\n")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    DecisionChain.submit = submit  # type: ignore[method-assign]
    return lambda: {"side_file_lines": _count_lines(side)}


class _HeldFlock:
    """``fcntl`` with a ``flock`` that takes each descriptor's lock once and never gives it back."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._held: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def flock(self, fd: int, operation: int) -> None:
        if operation & self._real.LOCK_UN or fd in self._held:
            return
        self._real.flock(fd, operation)
        self._held.add(fd)


def _lock_held() -> Callable[[], dict[str, int]]:
    import fcntl

    from otel_route_shadow import locking
    from otel_route_shadow.chain import log

    held = _HeldFlock(fcntl)
    log.fcntl = held  # type: ignore[assignment]
    locking.fcntl = held  # type: ignore[assignment]
    return dict


def _writer_thread() -> Callable[[], dict[str, int]]:
    import queue

    from benchmarks import bench_seam
    from otel_route_shadow.chain.log import DecisionChain

    handed: queue.SimpleQueue[Any] = queue.SimpleQueue()
    errors = [0]
    original = DecisionChain.submit

    def write_all() -> None:
        while True:
            item = handed.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                original(*item)
            except Exception:
                errors[0] += 1

    threading.Thread(target=write_all, name="seam-variants-writer", daemon=True).start()
    DecisionChain.submit = lambda self, encoded: handed.put((self, encoded))  # type: ignore[assignment,method-assign,misc,func-returns-value]

    def drained(calls: Any) -> Callable[[], float]:
        import time

        def run() -> float:
            start = time.perf_counter()
            for call in calls:
                call()
            done = threading.Event()
            handed.put(done)
            done.wait()
            return (time.perf_counter() - start) / len(calls) * 1e6

        return run

    bench_seam._per_call = drained  # type: ignore[assignment]
    return lambda: {"writer_errors": errors[0]}


def _count_lines(path: str) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def run_one(variant: str, cfg: BenchConfig) -> dict[str, Any]:
    """Patch this process for ``variant``, run row 1 once, and return its figures."""
    from benchmarks import bench_seam

    probe: Callable[[], dict[str, int]] = dict
    # A patch is entered on this stack, which holds it until the row has run: a context manager
    # left unreferenced is collected at once, and its generator's close undoes the patch.
    with contextlib.ExitStack() as patches:
        if variant == "no-append":
            probe = _no_append()
        elif variant == "minimal-append":
            probe = _minimal_append(cfg.workdir)
        elif variant == "lock-held":
            probe = _lock_held()
        elif variant == "writer-thread":
            probe = _writer_thread()
        elif variant == "checkpoints-deferred":
            os.environ.update(DEFERRED_ENV)
        elif variant in PATCHES or variant in RUNTIME_PATCHES:
            probe = patches.enter_context((PATCHES.get(variant) or RUNTIME_PATCHES[variant])())
        elif variant != "shipped":
            raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
        row = bench_seam.seam_rows(cfg, tail=False)[0]
        figures = probe()
    extras = row.extras
    return {
        "variant": variant,
        "ratio": None if row.ratio is None else row.ratio.median,
        "ours_us": None if row.ours is None else row.ours.median,
        "floor_us": None if row.baseline is None else row.baseline.median,
        "ratio_vs_bare": extras.get("ratio_vs_bare_span"),
        "bare_us": extras.get("bare_span_us"),
        "chain_records": extras.get("chain_records_appended"),
        "expected_records": extras.get("expected_records"),
        "contained_errors": extras.get("contained_errors"),
        "notes": row.notes,
        **figures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.seam_variants", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma-separated, from: " + ", ".join(VARIANTS)
    )
    parser.add_argument("--rounds", type=int, default=2, help="turns each variant takes (default 2)")
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (the figures mean nothing)")
    parser.add_argument("--workdir", type=Path, default=RESULTS_DIR / "seam-variants")
    parser.add_argument("--child", metavar="VARIANT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    cfg = BenchConfig.smoke(args.workdir) if args.quick else BenchConfig.full(args.workdir)
    if args.child:
        print(json.dumps(run_one(args.child, cfg)))
        return 0
    variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants: {', '.join(unknown)}")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for round_ in range(args.rounds):
        for variant in variants[round_ % len(variants) :] + variants[: round_ % len(variants)]:
            command = [
                sys.executable,
                "-m",
                "benchmarks.seam_variants",
                "--child",
                variant,
                "--workdir",
                str(args.workdir),
            ]
            command += ["--quick"] if args.quick else []
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{variant}: failed\n{done.stderr}", file=sys.stderr)
                return 2
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results[variant].append(result)
            print(json.dumps(result), file=sys.stderr)
    print("| variant | vs bare span, per round | median | vs bare span + floor, per round | median |")
    print("|---|---|---|---|---|")
    for variant, runs in results.items():
        cells = []
        for key in ("ratio_vs_bare", "ratio"):
            figures = [run[key] for run in runs if run[key] is not None]
            cells.append(", ".join(f"{figure:.2f}x" for figure in figures))
            cells.append(f"{statistics.median(figures):.2f}x" if figures else "-")
        print(f"| {variant} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
