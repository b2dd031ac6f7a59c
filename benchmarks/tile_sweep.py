"""What the writer's look at its stored full tiles costs per checkpoint.

``python -m benchmarks.tile_sweep [--records N] [--runs N]``

A diagnostic for ``docs/benchmarks.md`` ("Caches, windows and threads"), never part of ``make bench``.
A chain of ``--records`` small records is checkpointed (signed); then ``--runs`` times a fresh
``TileReader`` of the signed tree reads its edge (what a checkpoint reads anyway) and one
``TileSweep.check`` (``SWEEP_TILES`` full tiles, in turn) is timed. Median, min and max in ms.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, TileSweep
from otel_route_shadow.tlog import Signer, TileReader

_ORIGIN = "bench.example/route-shadow/sweep"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tile_sweep")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tile-sweep-"))
    try:
        chain = folder / "chain.jsonl"
        with DecisionChain(chain) as log:
            for n in range(args.records):
                log.append({"kind": "route-shadow", "n": n})
        writer = Checkpointer(str(chain), _ORIGIN, Signer.generate(_ORIGIN))
        while writer.checkpoint() is not None or writer.behind:
            pass
        made = writer.last
        assert made is not None
        sweep, times = TileSweep(), []
        for _ in range(args.runs):
            reader = TileReader(writer.directory, made.size, made.root)
            reader.edge()
            start = time.perf_counter()
            sweep.check(reader)
            times.append((time.perf_counter() - start) * 1000)
        print(
            f"{made.size} leaves: one sweep, ms: median {statistics.median(times):.3f} "
            f"[{min(times):.3f}-{max(times):.3f}] over {args.runs} runs"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
