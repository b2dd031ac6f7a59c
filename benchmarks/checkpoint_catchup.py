"""What the checkpointer's own-line hand-over and its thread save: one background checkpoint, timed alone.

``python -m benchmarks.checkpoint_catchup [--records N] [--runs N]``

A diagnostic for ``docs/benchmarks.md`` ("Caches, windows and threads"), never part of ``make bench``.
A chain of ``--records`` plugin-sized records (about 2.7 KB each) is checkpointed (signed, durable), then
``--records`` more are appended through a ``DecisionChain`` whose listener keeps every ``WrittenLine``,
and one more checkpoint is timed, wall and CPU, with the kept lines handed over (as the plugin's appends
do) and without them (the lines read back from the chain and checked, as before). The wall time is what a
spawn would wait for if the checkpoint ran inside it instead of in the checkpointer's thread; the CPU
difference is what the hand-over saves. Median of ``--runs``, each on a fresh chain.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from otel_route_shadow.chain import DecisionChain, WrittenLine
from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import Signer

_ORIGIN = "bench.example/route-shadow/catchup"
_PAYLOAD = {
    "kind": "route-shadow",
    "attributes": {"route_shadow.context": "x" * 600, **{f"route_shadow.a{i}": "v" * 60 for i in range(30)}},
}


def _one(work: Path, records: int, handed: bool) -> tuple[float, float]:
    chain = work / "chain.jsonl"
    written: list[WrittenLine] = []
    log = DecisionChain(str(chain), durability="flush", listener=written.append)
    checkpointer = Checkpointer(str(chain), _ORIGIN, Signer.generate(_ORIGIN))
    for _ in range(records):
        log.append(_PAYLOAD)
    checkpointer.checkpoint(appended=list(written))
    written.clear()
    for _ in range(records):
        log.append(_PAYLOAD)
    wall, cpu = time.perf_counter(), time.process_time()
    made = checkpointer.checkpoint(appended=list(written) if handed else ())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if made is None or made.size != 2 * records:
        raise RuntimeError(f"the timed checkpoint did not cover {2 * records} records: {made}")
    return wall * 1e3, cpu * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.checkpoint_catchup", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--records", type=int, default=1000, help="new records per timed checkpoint")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    print("| lines | wall, median [min-max] | CPU, median |")
    print("|---|---|---|")
    for handed in (True, False):
        walls, cpus = [], []
        for _ in range(args.runs):
            work = Path(tempfile.mkdtemp(prefix="catchup-"))
            try:
                wall, cpu = _one(work, args.records, handed)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            walls.append(wall)
            cpus.append(cpu)
        label = "handed over" if handed else "read back from the chain"
        print(
            f"| {label} | {statistics.median(walls):.1f} ms [{min(walls):.1f}-{max(walls):.1f}] "
            f"| {statistics.median(cpus):.1f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
