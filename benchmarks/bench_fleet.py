"""Row 11: the fleet report (``analysis.fleet``, ``analysis.monitor``).

The large chain's records are dealt into ``H`` host logs (100 in the full run, 4 in ``--quick``), each
with its own origin, signing key and checkpoint over all of it:

* 11a: ``build_fleet_report(H logs, --key each)`` against ``build_report(the large chain)``, each as
  shipped (the fleet in ``fleet.fleet_jobs`` worker processes, one chain verified in a worker beside
  its reading): the same records, one report; target <= 1.2x. In ``extras``, the same two in one
  process each (``jobs=1`` against ``concurrent=False``), and the fleet's default ``jobs`` here;
* 11b: the fleet report with ``jobs=2`` against ``jobs=1`` (the speed-up; target >= 1.7x on two CPUs),
  with what bounds it, in ``extras``: the CPU seconds of the ``jobs=2`` run in this process (the serial
  part: reading checkpoints, deriving the figures once over the logs' counts) and in its worker
  processes (checking and counting the logs), the speed-up these allow on two idle CPUs, and what the
  machine gave a pure-CPU task split the same way at the same moment (``machine_speedup``; below 2 when
  other jobs hold the CPUs) with the load average;
* 11c: ``follow_fleet`` extending a state file after 1% new records per log, against a full run
  (``rebuild=True``) over the same logs, both in one process (``jobs=1``: a rerun's work is this
  process's; the row weighs the work, not the CPUs); target <= 5% of the full run. A fourth side, the
  full run with its default ``jobs``, is in ``extras`` (``of_full_default_jobs``). A third side, interleaved, reruns
  from a state already at the new checkpoints (no new record: what reading, checking, restoring, deriving
  and writing the state costs alone), in ``extras`` as ``nothing_new_s`` and ``nothing_new_of_full``
  (median, min, max of the per-run ratios to the full run);
* 11d: one log of a tenth of the large chain's records (a busy host's), checkpointed and signed, read
  through ``otel-route-shadow serve`` on loopback (``build_fleet_report([url], fetch=...)``: its
  checkpoint, then every entry bundle, the root judged) against the same log read locally
  (``build_fleet_report([path])``), both with its key; target <= 1.5x. The server runs in its own
  process, started and asked for one bundle (its entry index built) before the timed runs.

Sides are interleaved with their order rotated each run; ``--only 11c`` deals and times 11c alone (11a
and 11b share their fleet), ``--only 11d`` 11d.
"""

from __future__ import annotations

import importlib
import os
import resource
import shutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, interleaved, ratios, timed, unavailable

FULL_HOSTS = 100
QUICK_HOSTS = 4


def _deal(large: Path, folder: Path, hosts: int, *, keep: float = 1.0) -> tuple[list[Any], list[Path]]:
    """``hosts`` logs under ``folder`` holding the large chain's records dealt in runs (the first
    ``keep`` share of each host's part), each checkpointed; their signers and paths."""
    from otel_route_shadow.chain import DecisionChain, iter_payloads
    from otel_route_shadow.tlog import Signer

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    payloads = [payload for _, payload in iter_payloads(large)]
    per = len(payloads) // hosts
    signers, paths = [], []
    for host in range(hosts):
        origin = f"host{host:03d}.example/route-shadow"
        path = folder / f"host{host:03d}.jsonl"
        part = payloads[host * per : (host + 1) * per]
        with DecisionChain(path) as log:
            for payload in part[: int(len(part) * keep)]:
                log.append(payload)
        signer = Signer.generate(origin)
        _checkpoint(path, origin, signer)
        signers.append(signer)
        paths.append(path)
    return signers, paths


def _checkpoint(path: Path, origin: str, signer: Any) -> None:
    from otel_route_shadow.logstore import Checkpointer

    checkpointer = Checkpointer(str(path), origin, signer)
    for _ in range(10_000):  # bounded: a few calls per log (each call extends by a bounded slice)
        checkpointer.checkpoint()
        if not checkpointer.behind:
            return
    raise RuntimeError(f"{path}: the checkpointer did not catch up")


def _grow(large: Path, paths: list[Path], signers: list[Any], hosts: int) -> int:
    """Append each host's last 1% (the records :func:`_deal` left out) and checkpoint again."""
    from otel_route_shadow.chain import DecisionChain, iter_payloads

    payloads = [payload for _, payload in iter_payloads(large)]
    per = len(payloads) // hosts
    added = 0
    for host, (path, signer) in enumerate(zip(paths, signers, strict=True)):
        part = payloads[host * per : (host + 1) * per]
        with DecisionChain(path) as log:
            for payload in part[int(len(part) * 0.99) :]:
                log.append(payload)
                added += 1
        _checkpoint(path, f"host{host:03d}.example/route-shadow", signer)
    return added


CALIBRATION_STEPS = 1_000_000
"""Loop steps of one pure-CPU calibration task (about 50 ms on this machine's CPUs)."""


def _spin(steps: int) -> int:
    total = 0
    for i in range(steps):
        total += i * i
    return total


def _machine_speedup(tasks: int) -> tuple[float, float]:
    """What two worker processes give a pure-CPU task split in ``tasks`` pieces right now (the serial
    time over the pool's, its workers already started), and the seconds the pool took to start (the
    same fork pool as ``--jobs 2``, which starts one to check the logs and one to count them)."""
    from otel_route_shadow.processes import mp_context

    work = [CALIBRATION_STEPS] * tasks
    serial = timed(lambda: [_spin(steps) for steps in work])
    with ProcessPoolExecutor(max_workers=2, mp_context=mp_context()) as pool:
        start = timed(lambda: list(pool.map(_spin, [0, 0])))
        pooled = timed(lambda: list(pool.map(_spin, work)))
    return (serial / pooled if pooled > 0 else 0.0), start


def _cpu_split(fn: Callable[[], object]) -> tuple[float, float]:
    """CPU seconds (user + system) ``fn`` spends in this process and in the worker processes it joins."""
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    fn()
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own, workers = (
        a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before, strict=True)
    )
    return own, workers


def _bounds(row: Row, one: Callable[[], object], two: Callable[[], object], hosts: int) -> None:
    """What limits 11b, into ``row.extras`` (see the module docstring)."""
    load_before = os.getloadavg()[0]
    serial_cpu = sum(_cpu_split(one))
    own, workers = _cpu_split(two)
    calibration = sorted(_machine_speedup(max(hosts, 8)) for _ in range(3))
    row.extras.update(
        {
            "jobs1_cpu_s": round(serial_cpu, 3),
            "jobs2_main_process_cpu_s": round(own, 3),
            "jobs2_worker_cpu_s": round(workers, 3),
            "bound_on_two_idle_cpus": round(serial_cpu / (own + workers / 2), 2) if own + workers else None,
            "machine_speedup": round(calibration[1][0], 2),
            "pool_start_s": round(calibration[1][1], 3),
            "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        }
    )


def _whole_fleet(large: Path, work: Path, hosts: int, runs: int, fleet_row: Row, jobs_row: Row) -> None:
    """Rows 11a and 11b: the fleet report of the dealt logs against one chain, and with ``jobs=2``."""
    from otel_route_shadow.analysis import build_fleet_report, build_report
    from otel_route_shadow.analysis.fleet import fleet_jobs

    signers, paths = _deal(large, work / "whole", hosts)
    keys = [signer.verifier() for signer in signers]
    folder = [str(work / "whole")]
    times = interleaved(
        {
            "single": lambda: timed(lambda: build_report(large)),
            "fleet": lambda: timed(lambda: build_fleet_report(folder, verifiers=keys)),
            "single_one_process": lambda: timed(lambda: build_report(large, concurrent=False)),
            "fleet1": lambda: timed(lambda: build_fleet_report(folder, verifiers=keys, jobs=1)),
            "fleet2": lambda: timed(lambda: build_fleet_report(folder, verifiers=keys, jobs=2)),
        },
        runs,
    )
    fleet_row.ours, fleet_row.baseline = Stats.of(times["fleet"]), Stats.of(times["single"])
    fleet_row.ratio, fleet_row.runs = ratios(times["fleet"], times["single"]), runs
    one = ratios(times["fleet1"], times["single_one_process"])
    fleet_row.extras["default_jobs"] = fleet_jobs([_pending(path) for path in paths], None)
    fleet_row.extras["one_process_each_s"] = [
        round(Stats.of(times["fleet1"]).median, 3),
        round(Stats.of(times["single_one_process"]).median, 3),
    ]
    fleet_row.extras["one_process_each_ratio"] = [round(v, 3) for v in (one.median, one.min, one.max)]
    jobs_row.ours, jobs_row.baseline = Stats.of(times["fleet2"]), Stats.of(times["fleet1"])
    jobs_row.ratio, jobs_row.runs = ratios(times["fleet1"], times["fleet2"]), runs
    _bounds(
        jobs_row,
        lambda: build_fleet_report(folder, verifiers=keys, jobs=1),
        lambda: build_fleet_report(folder, verifiers=keys, jobs=2),
        hosts,
    )


def _pending(path: Path) -> Any:
    from otel_route_shadow.analysis.fleet import prepare_log

    return prepare_log(str(path), [], None)


def _followed_fleet(large: Path, work: Path, hosts: int, runs: int, follow_row: Row) -> None:
    """Row 11c: a rerun extending the state after 1% new records per log, against a full run."""
    from otel_route_shadow.analysis import follow_fleet

    signers, paths = _deal(large, work / "grown", hosts, keep=0.99)
    keys = [signer.verifier() for signer in signers]
    grown = [str(work / "grown")]
    saved, state, full_state = work / "state-99.json", work / "state.json", work / "state-full.json"
    settled = work / "state-100.json"
    follow_fleet(grown, str(saved), verifiers=keys)
    follow_row.extras["new_records"] = _grow(large, paths, signers, hosts)
    shutil.copyfile(saved, settled)
    follow_fleet(grown, str(settled), verifiers=keys)

    def incremental(start: Path) -> None:
        shutil.copyfile(start, state)
        report = follow_fleet(grown, str(state), verifiers=keys, jobs=1)
        if report.fleet is None or report.fleet.followed is None or report.fleet.followed.rebuilt:
            raise RuntimeError("the rerun did not extend every log from the state")

    def full(jobs: int | None) -> None:
        follow_fleet(grown, str(full_state), verifiers=keys, rebuild=True, jobs=jobs)

    follow = interleaved(
        {
            "incremental": lambda: timed(lambda: incremental(saved)),
            "full": lambda: timed(lambda: full(1)),
            "nothing_new": lambda: timed(lambda: incremental(settled)),
            "full_default": lambda: timed(lambda: full(None)),
        },
        runs,
    )
    follow_row.ours, follow_row.baseline = Stats.of(follow["incremental"]), Stats.of(follow["full"])
    follow_row.ratio, follow_row.runs = ratios(follow["incremental"], follow["full"]), runs
    floor = ratios(follow["nothing_new"], follow["full"])
    follow_row.extras["nothing_new_s"] = round(Stats.of(follow["nothing_new"]).median, 3)
    follow_row.extras["nothing_new_of_full"] = [round(v, 4) for v in (floor.median, floor.min, floor.max)]
    defaults = ratios(follow["incremental"], follow["full_default"])
    follow_row.extras["full_default_jobs_s"] = round(Stats.of(follow["full_default"]).median, 3)
    follow_row.extras["of_full_default_jobs"] = [
        round(v, 4) for v in (defaults.median, defaults.min, defaults.max)
    ]


def _served_log(large: Path, work: Path, records: int, runs: int, row: Row) -> None:
    """Row 11d: one log of ``records`` records read through ``serve`` on loopback against read locally."""
    from itertools import islice

    from benchmarks.bench_serve import _serve_argv, _Server
    from otel_route_shadow.analysis import build_fleet_report
    from otel_route_shadow.chain import DecisionChain, iter_payloads
    from otel_route_shadow.cli.fleet import remote_fetch
    from otel_route_shadow.tlog import Signer

    folder = work / "served"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    path, origin = folder / "busy.jsonl", "busy.example/route-shadow"
    with DecisionChain(path) as log:
        for _, payload in islice(iter_payloads(large), records):
            log.append(payload)
    signer = Signer.generate(origin)
    _checkpoint(path, origin, signer)
    key = signer.verifier()
    server = _Server(_serve_argv(path, str(key)))
    try:
        url = f"http://{server.address[0]}:{server.address[1]}{server.prefix}"
        fetch = remote_fetch(60.0)
        served = build_fleet_report([url], verifiers=[key], fetch=fetch)  # the server's entry index built
        local = build_fleet_report([str(path)], verifiers=[key])
        if (
            served.fleet is None
            or served.fleet.excluded
            or served.as_dict()["totals"] != local.as_dict()["totals"]
        ):
            raise RuntimeError("the served log does not give the local log's figures")
        times = interleaved(
            {
                "served": lambda: timed(lambda: build_fleet_report([url], verifiers=[key], fetch=fetch)),
                "local": lambda: timed(lambda: build_fleet_report([str(path)], verifiers=[key])),
            },
            runs,
        )
    finally:
        server.stop()
    row.ours, row.baseline = Stats.of(times["served"]), Stats.of(times["local"])
    row.ratio, row.runs = ratios(times["served"], times["local"]), runs
    row.extras["records"] = records
    row.extras["bundles"] = -(-records // 256)


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    hosts = QUICK_HOSTS if cfg.quick else FULL_HOSTS
    n = cfg.chain_records
    fleet_row = Row(
        id="11a",
        title="fleet report vs one chain",
        measured=f"report over {hosts} logs of {n // hosts:,} records",
        unit="s",
        baseline_label=f"report, one {n:,}-record chain",
        ratio_label="of one chain",
        target=Target("<=", 1.2),
    )
    jobs_row = Row(
        id="11b",
        title="fleet report --jobs 2",
        measured=f"--jobs 2 over {hosts} logs",
        unit="s",
        baseline_label="--jobs 1",
        ratio_label="speed-up",
        target=Target(">=", 1.7),
    )
    follow_row = Row(
        id="11c",
        title="incremental rerun, 1% new",
        measured=f"--state rerun, {hosts} logs, 1% new records",
        unit="s",
        baseline_label="full run",
        ratio_label="of a full run",
        target=Target("<=", 0.05),
    )
    served_row = Row(
        id="11d",
        title="a log through serve vs read locally",
        measured=f"report of one {n // 10:,}-record log through serve on loopback",
        unit="s",
        baseline_label="the same log read locally",
        ratio_label="served / local",
        target=Target("<=", 1.5),
    )
    every = (fleet_row, jobs_row, follow_row, served_row)
    try:
        importlib.import_module("otel_route_shadow.analysis")
    except ImportError as exc:
        why = f"analysis not importable yet: {exc}"
        return [unavailable(row, why) for row in every]
    try:
        large = context.chains.large()
        work = cfg.workdir / "fleet"
        if context.wants("11a") or context.wants("11b"):
            _whole_fleet(large, work, hosts, cfg.slow_runs, fleet_row, jobs_row)
        if context.wants("11c"):
            _followed_fleet(large, work, hosts, cfg.slow_runs, follow_row)
        if context.wants("11d"):
            _served_log(large, work, n // 10, cfg.slow_runs, served_row)
        for row in every:
            row.notes.append("in process; each log verified against its signed checkpoint (--key per host)")
    except Exception as exc:
        return [errored(row, exc) for row in every]
    return [row.judge() for row in every]
