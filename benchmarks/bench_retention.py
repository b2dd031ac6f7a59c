"""Rows 12d and 12e: the disk a chain with retention takes, against what the records it keeps and its tree
take.

The large chain and its log (row 6's tiles and checkpoint) are cut into closed segments of N/32 records
each (the last one the live file), then ``logstore.prune`` keeps the newest N/4 records (``--delete``:
archives go to cold storage, not counted). Measured: the bytes on disk of the live file, the segments
left and ``CHAIN.tlog/`` (tiles for all N records, checkpoints, ``pruned``); the baseline: the bytes of
the newest N/4 records plus the same log folder (the tree). Target <= 1.2x: pruning leaves at most one
segment beyond what the retention asks for, and nothing else.

Row 12e (the soak) writes N records through the writer as a host does: ``DecisionChain`` appends, the
``Checkpointer`` signs every N/256 records, a cut (``cut_signed``) when the plugin's default schedule
for a retention of N/4 records says so (``segment_schedule`` with no segment size set: the live file
holds N/64 records, counted from its size at the tree's mean record size), and after each cut the
host's retention (``HostRetention``, N/4 records, delete) prunes. Measured and baseline as in 12d, at
the end. What is kept is at most N/4 records plus two segments (the one the retention falls in, and the
live file written since the last cut): with segments of N/64 records, 1.125x of the records at most.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections import deque
from pathlib import Path

from benchmarks.bench_tlog import _prepared
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored
from benchmarks.payloads import stamp

SEGMENTS = 32
"""Segments the chain is cut into (the retention keeps a quarter: 8 of them, plus the one it falls in)."""


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    n = cfg.chain_records
    row = Row(
        id="12d",
        title="retention: disk after pruning to N/4",
        measured=f"live file + segments + log folder after prune --keep-records {n // 4:,} of {n:,}",
        unit="MB",
        baseline_label="the newest N/4 records' bytes + the log folder",
        ratio_label="of kept records + tree",
        target=Target("<=", 1.2),
    )
    soak = Row(
        id="12e",
        title="retention soak: N written with a retention of N/4",
        measured=f"live file + segments + log folder after {n:,} records written with a retention of {n // 4:,}",
        unit="MB",
        baseline_label="the newest N/4 records' bytes + the log folder",
        ratio_label="of kept records + tree",
        target=Target("<=", 1.2),
    )
    out = []
    if context.wants("12d"):
        try:
            out.append(_disk_row(cfg, context.chains.large(), n, row))
        except Exception as exc:
            out.append(errored(row, exc))
    if context.wants("12e"):
        try:
            out.append(_soak_row(cfg, context.chains.payload_templates(), n, soak))
        except Exception as exc:
            out.append(errored(soak, exc))
    return out


def _soak_row(cfg: BenchConfig, templates: list[dict[str, object]], n: int, row: Row) -> Row:
    from otel_route_shadow.chain import DecisionChain
    from otel_route_shadow.instrumentation.checkpointing import segment_schedule
    from otel_route_shadow.instrumentation.retention import HostRetention
    from otel_route_shadow.logstore import Checkpointer, cut_signed
    from otel_route_shadow.tlog import Signer

    folder = cfg.workdir / "retention-soak"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    chain = folder / "chain.jsonl"
    signer = Signer.generate("bench.example/route-shadow/soak")
    writer = Checkpointer(str(chain), signer.name, signer)
    retention = HostRetention(str(chain), n // 4, [signer.verifier()], delete=True)
    every = max(n // 256, 1)
    schedule = segment_schedule(str(chain), None, 0, n // 4, every)
    rng = random.Random(12)
    cuts = most = 0
    start = time.perf_counter()
    with DecisionChain(chain, durability="flush") as log:
        for seq in range(n):
            log.append(stamp(templates[seq % len(templates)], rng, seq))  # type: ignore[arg-type]
            if (seq + 1) % every:
                continue
            writer.checkpoint()
            if not schedule.due(writer.live_records, writer.offset):
                continue
            pruned = retention.last.after if retention.last is not None else 0
            most = max(most, seq + 1 + cuts - pruned)  # on disk before the cut: records and anchors
            if cut_signed(writer, 1.0) is not None:
                cuts += 1
                retention.due = True
                retention.apply()
    seconds = time.perf_counter() - start
    tree = _bytes(Path(str(chain) + ".tlog"))
    files = [*sorted(Path(str(chain) + ".segments").glob("*.jsonl")), chain]
    newest_lines: deque[int] = deque(maxlen=n // 4)  # the bytes of the newest N/4 lines, streamed
    records_kept = 0
    for path in files:
        with open(path, "rb") as lines:
            for line in lines:
                newest_lines.append(len(line))
                records_kept += 1
    newest = sum(newest_lines)
    ours = (_bytes(chain) + _bytes(Path(str(chain) + ".segments")) + tree) / 1e6
    kept = (newest + tree) / 1e6
    row.ours, row.baseline, row.ratio = Stats.of([ours]), Stats.of([kept]), Stats.of([ours / kept])
    row.runs = 1
    row.extras = {
        "write_seconds": round(seconds, 3),
        "tree_mb": round(tree / 1e6, 3),
        "cuts": cuts,
        "min_index": retention.last.after if retention.last is not None else 0,
        "records_kept": records_kept,
        "most_records_kept": most,
        "most_kept_ratio": round(most / (n // 4), 4),
        "segment_records": schedule.max_records,
    }
    shutil.rmtree(folder, ignore_errors=True)
    return row.judge()


def _disk_row(cfg: BenchConfig, large: Path, n: int, row: Row) -> Row:
    from otel_route_shadow.logstore import PruneOptions, Retention, prune
    from otel_route_shadow.tlog import Verifier

    _, _, key = _prepared(large)
    folder = cfg.workdir / "retention"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    chain = folder / "chain.jsonl"
    shutil.copytree(str(large) + ".tlog", str(chain) + ".tlog")
    offsets = _cut(large, chain, max(n // SEGMENTS, 1))
    options = PruneOptions([Verifier.parse(key)], delete=True, now=int(time.time()), command="bench")
    start = time.perf_counter()
    prune(str(chain), Retention(keep_records=n // 4), options)
    seconds = time.perf_counter() - start
    tree = _bytes(Path(str(chain) + ".tlog"))
    ours = (_bytes(chain) + _bytes(Path(str(chain) + ".segments")) + tree) / 1e6
    kept = (offsets[-1] - offsets[n - n // 4] + tree) / 1e6
    row.ours, row.baseline, row.ratio = Stats.of([ours]), Stats.of([kept]), Stats.of([ours / kept])
    row.runs = 1
    row.extras = {"prune_seconds": round(seconds, 3), "tree_mb": round(tree / 1e6, 3)}
    shutil.rmtree(folder, ignore_errors=True)
    return row.judge()


def _cut(source: Path, chain: Path, per: int) -> list[int]:
    """Write ``source`` as closed segments of ``per`` records and a live file; the line offsets."""
    segments = Path(str(chain) + ".segments")
    segments.mkdir()
    offsets = [0]
    out = None
    with open(source, "rb") as lines:
        for seq, line in enumerate(lines):
            if seq % per == 0:
                if out is not None:
                    out.close()
                out = open(segments / f"{seq:016d}.jsonl", "wb")  # noqa: SIM115 (closed at the next cut)
            out.write(line)
            offsets.append(offsets[-1] + len(line))
    if out is not None:
        out.close()
        os.replace(out.name, chain)  # the last segment is the live file
    return offsets


def _bytes(path: Path) -> int:
    """The bytes ``path`` takes on disk (a folder: every file below it)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())
