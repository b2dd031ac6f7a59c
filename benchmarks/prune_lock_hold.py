"""How long ``prune`` holds the chain's lock (the lock every append waits for), against the whole prune.

``python -m benchmarks.prune_lock_hold [--records 50000] [--rounds 3] [--workdir DIR]``

A chain of ``--records`` records of about 2 KB each is written with ``DecisionChain`` and signed with the
``Checkpointer``, then cut once (``cut_signed``): one closed segment of every record, and a live file that
holds the anchor. Each round prunes a fresh copy of it below the anchor (``logstore.prune``, gzip, the
segment checked against the tiles and read back), timing the whole prune and, with
``time.perf_counter`` around each ``with`` of ``logstore.pruning._chain_lock``, the time the chain's lock
is held. Medians over the rounds. A diagnostic for ``docs/benchmarks.md`` (section 12d), never part of
``make bench``; it uses only ``otel_route_shadow``, so it runs against another checkout with
``PYTHONPATH=<checkout> python benchmarks/prune_lock_hold.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, PruneOptions, Retention, cut_signed, prune, pruning
from otel_route_shadow.tlog import Signer

_ORIGIN = "example.com/route-shadow/prune-lock-hold"


def _written(folder: Path, records: int, signer: Signer) -> Path:
    """A chain of ``records`` records in one closed segment, signed, its live file holding the anchor."""
    folder.mkdir(parents=True)
    chain = folder / "chain.jsonl"
    checkpointer = Checkpointer(str(chain), signer.name, signer)
    filler = "x" * 1800
    with DecisionChain(chain) as log:
        for n in range(records):
            log.append({"kind": "route-shadow", "n": n, "trace": f"{n:032x}", "context": filler})
            if (n + 1) % 4096 == 0:
                checkpointer.checkpoint()
    if cut_signed(checkpointer, 10.0) is None:
        raise SystemExit("the chain was not cut")
    return chain


def _timed_prune(chain: Path, records: int, signer: Signer) -> tuple[float, float]:
    """One prune below the anchor: (seconds in all, seconds with the chain's lock held)."""
    held: list[float] = []
    locked = pruning._chain_lock

    @contextlib.contextmanager
    def timed(chain_path: str, wait: float) -> Iterator[int]:
        with locked(chain_path, wait) as fd:
            start = time.perf_counter()
            try:
                yield fd
            finally:
                held.append(time.perf_counter() - start)

    options = PruneOptions([signer.verifier()], now=int(time.time()), command="prune_lock_hold")
    pruning._chain_lock = timed
    try:
        start = time.perf_counter()
        result = prune(str(chain), Retention(min_index=records), options)
        total = time.perf_counter() - start
    finally:
        pruning._chain_lock = locked
    if result.after != records:
        raise SystemExit(f"pruned to {result.after}, not {records}")
    return total, sum(held)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        signer = Signer.generate(_ORIGIN)
        pristine = _written(Path(work) / "pristine", args.records, signer)
        totals, helds = [], []
        for round_ in range(args.rounds):
            copy = Path(work) / f"round-{round_}"
            shutil.copytree(pristine.parent, copy)
            total, held = _timed_prune(copy / pristine.name, args.records, signer)
            totals.append(total)
            helds.append(held)
            shutil.rmtree(copy)
    print(
        f"prune of one segment of {args.records:,} records (gzip), median of {args.rounds}: "
        f"{statistics.median(totals):.3f} s in all, the chain's lock held {statistics.median(helds) * 1e3:.1f} ms "
        f"(rounds: {', '.join(f'{h * 1e3:.1f}' for h in helds)} ms held)"
    )


if __name__ == "__main__":
    main()
