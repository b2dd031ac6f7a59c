"""Row 4: appending to the large chain against appending to an empty one; fsync group commit.

4a. Each run opens a fresh ``DecisionChain`` (durability ``flush``) and appends ``append_calls``
    realistic payloads; the figure is the mean time per append, the first append (which reads the
    chain's tail to find its head) included. The large chain is truncated back to its cached size
    after each run, so it stays the same chain for the other rows (its records are never touched).
4b. ``fsync`` durability: 8 threads sharing one ``DecisionChain`` (as the plugin's exporter shares
    one per process) append concurrently, against one appender doing one fsync per record. Figures
    are records per second; reported, no target. A variant with 8 separate processes (one log each,
    coordinating through the file lock and the ``.sync`` watermark) is in the extras.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, paired, ratios, unavailable
from benchmarks.payloads import stamp


def _payloads(templates: list[dict[str, Any]], count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [stamp(templates[i % len(templates)], rng, 10_000_000 + i) for i in range(count)]


def _append_run(path: Path, payloads: list[dict[str, Any]], truncate_to: int | None) -> float:
    from otel_route_shadow.chain import DecisionChain

    try:
        start = time.perf_counter()
        log = DecisionChain(path, durability="flush")
        for payload in payloads:
            log.append(payload)
        elapsed = time.perf_counter() - start
        log.close()
    finally:
        if truncate_to is not None:
            os.truncate(path, truncate_to)
        else:
            path.unlink(missing_ok=True)
    return elapsed / len(payloads) * 1e6


def append_row(cfg: BenchConfig, context: BenchContext) -> Row:
    n = cfg.chain_records
    row = Row(
        id="4a",
        title="append to large chain vs empty",
        measured=f"append to a {n:,}-record chain (flush)",
        unit="us",
        baseline_label="to an empty chain",
        ratio_label="of empty",
        target=Target("<=", 3.0),
    )
    try:
        from otel_route_shadow.chain import DecisionChain  # noqa: F401
    except ImportError as exc:
        return unavailable(row, f"chain not landed: {exc}")
    try:
        chains = context.chains
        large = chains.large()
        size = large.stat().st_size
        payloads = _payloads(chains.templates, cfg.append_calls, seed=41)
        empty_dir = chains.empty_copy_dir("append-empty")
        empty = empty_dir / "chain.jsonl"
        _append_run(empty, payloads[:50], None)  # warm-up
        ours, base = paired(
            lambda: _append_run(large, payloads, size), lambda: _append_run(empty, payloads, None), cfg.runs
        )
        if large.stat().st_size != size:
            raise RuntimeError("the large chain was not restored to its size")
        row.ours, row.baseline, row.ratio, row.runs = (
            Stats.of(ours),
            Stats.of(base),
            ratios(ours, base),
            cfg.runs,
        )
        row.extras["appends_per_run"] = len(payloads)
        row.extras["first_append_us"] = {
            "large": round(_append_run(large, payloads[:1], size), 1),
            "empty": round(_append_run(empty, payloads[:1], None), 1),
        }
        row.notes.append("fresh DecisionChain per run, first append (tail read) included")
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def _threads_fsync(path: Path, payloads: list[dict[str, Any]], appenders: int) -> tuple[float, int]:
    from otel_route_shadow.chain import DecisionChain

    log = DecisionChain(path, durability="fsync")
    log.append(payloads[0])  # open the descriptors outside the timing
    share = [payloads[i::appenders] for i in range(appenders)]
    barrier = threading.Barrier(appenders + 1)

    def work(items: list[dict[str, Any]]) -> None:
        barrier.wait()
        for payload in items:
            log.append(payload)

    threads = [threading.Thread(target=work, args=(items,)) for items in share]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    fsyncs = log.fsyncs - 1
    log.close()
    return len(payloads) / elapsed, fsyncs


def _process_worker(path: str, items: list[dict[str, Any]], barrier: Any) -> None:
    from otel_route_shadow.chain import DecisionChain

    log = DecisionChain(path, durability="fsync")
    barrier.wait()
    for payload in items:
        log.append(payload)
    log.close()


def _processes_fsync(path: Path, payloads: list[dict[str, Any]], appenders: int) -> float:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(appenders + 1)
    procs = [
        ctx.Process(target=_process_worker, args=(str(path), payloads[i::appenders], barrier))
        for i in range(appenders)
    ]
    for proc in procs:
        proc.start()
    barrier.wait()
    start = time.perf_counter()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - start
    if any(proc.exitcode != 0 for proc in procs):
        raise RuntimeError("an fsync appender process failed")
    return len(payloads) / elapsed


def _sequential_fsync(path: Path, payloads: list[dict[str, Any]]) -> float:
    from otel_route_shadow.chain import DecisionChain

    log = DecisionChain(path, durability="fsync")
    log.append(payloads[0])
    start = time.perf_counter()
    for payload in payloads:
        log.append(payload)
    elapsed = time.perf_counter() - start
    log.close()
    return len(payloads) / elapsed


def fsync_row(cfg: BenchConfig, context: BenchContext) -> Row:
    k = cfg.fsync_appenders
    row = Row(
        id="4b",
        title="fsync group commit",
        measured=f"fsync mode, {k} concurrent appenders (threads)",
        unit="rec/s",
        baseline_label="1 appender, fsync per record",
        ratio_label="of 1 fsync/rec",
    )
    try:
        from otel_route_shadow.chain import DecisionChain  # noqa: F401
    except ImportError as exc:
        return unavailable(row, f"chain not landed: {exc}")
    try:
        chains = context.chains
        chains.large()  # templates
        payloads = _payloads(chains.templates, cfg.fsync_records, seed=43)
        directory = chains.empty_copy_dir("append-fsync")
        fsyncs: list[int] = []

        def fresh(name: str) -> Path:
            path = directory / name
            for leftover in directory.glob(name + "*"):
                leftover.unlink()
            return path

        def concurrent() -> float:
            rate, count = _threads_fsync(fresh("threads.jsonl"), payloads, k)
            fsyncs.append(count)
            return rate

        ours, base = paired(
            concurrent, lambda: _sequential_fsync(fresh("one.jsonl"), payloads), cfg.slow_runs
        )
        row.ours, row.baseline, row.ratio, row.runs = (
            Stats.of(ours),
            Stats.of(base),
            ratios(ours, base),
            cfg.slow_runs,
        )
        row.extras["records_per_run"] = len(payloads)
        row.extras["fsyncs_per_run_threads"] = fsyncs
        procs = [_processes_fsync(fresh("procs.jsonl"), payloads, k) for _ in range(cfg.slow_runs)]
        row.extras["processes_rec_per_s"] = Stats.of(procs).as_dict()
        row.notes.append(f"{k} threads share one DecisionChain; {k} processes variant in extras")
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    out = []
    if context.wants("4a"):
        out.append(append_row(cfg, context))
    if context.wants("4b"):
        out.append(fsync_row(cfg, context))
    return out
