"""Rows 8a-8e: policy validation and the store at scale (issue 16 part 2, issue 18 Speed).

8a/8b ``policy save`` of 8,000 and of 80,000 disjoint policies (fresh store each run: validate,
hash, encode, write, read back); 8b's ratio is its time over 8a's, measured in the same run (10x the
policies; near-linear growth is a ratio near 10). 8c a host's first spawn after such a save, as the
host sees it: an instrumented host (demo seams, re-check window 0) that resolved against revision 1,
the save of revision 2, then its next seam call; extras: when revision 2 is in use, a spawn while it
is read, and what reading it inside the spawn (the old way) costs. 8d/8e
``validate_policies`` (what ``policy check`` runs) on 8,000 policies spread over every rung with
unreachable ones, and on 8,000 catch-alls that all conflict (the issue's 16-million-line case).
8f/8g (issue 25): the longest gap of a ticker thread that wakes every millisecond, while the process
loads and indexes a 50,000-policy snapshot (8f), and while ``policy save`` writes a new revision from
another process and the host then reads it (8g); extras: the same ticker while the process runs plain
Python (the machine's floor), and while the host calls ``save`` itself on a set it holds.
"""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, ratios, timed
from benchmarks.resolver_data import FACES, ROLES, make_contexts, make_policies
from otel_route_shadow.core import PolicyIndex, ReasonCode, RoutingPolicy, explain, validate_policies
from otel_route_shadow.store import RoutingPolicyStore

_ACTIONS = (
    {"provider_lock": "zai-harness", "requirement_map": {"high-reasoning": "glm-5.1", "fast": "glm-4.5-air"}},
    {"provider_lock": "anthropic-harness", "requirement_map": {"high-reasoning": "claude-opus-4-5"}},
    {"account_pool": ["anthropic-a", "zai-a"]},
)


def disjoint_policies(n: int) -> list[RoutingPolicy]:
    """``n`` policies no two of which overlap: each names its own repository (rungs 1 to 4)."""
    policies = []
    for i in range(n):
        match: dict[str, list[str]] = {"repo_ids": [f"org{i % 97}/repo-{i}"]}
        shape = i % 4
        if shape == 1:
            match["roles"] = [ROLES[i % len(ROLES)]]
        elif shape == 2:
            match["principal_ids"] = [f"loop_{i % 50}"]
        elif shape == 3:
            match["request_faces"] = [FACES[i % 2]]
        policies.append(
            RoutingPolicy.model_validate(
                {"id": f"d{i:06d}", "priority": i % 100, "match": match, "action": _ACTIONS[i % 3]}
            )
        )
    return policies


def conflicting_catch_alls(n: int) -> list[RoutingPolicy]:
    return [RoutingPolicy.model_validate({"id": f"c{i:06d}", "action": _ACTIONS[i % 2]}) for i in range(n)]


def _save_once(policies: list[RoutingPolicy], workdir: Path) -> float:
    root = Path(tempfile.mkdtemp(prefix="policy-save-", dir=workdir))
    try:
        return timed(lambda: RoutingPolicyStore(root / "store").save(policies))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def save_rows(cfg: BenchConfig) -> list[Row]:
    small_n, large_n = cfg.policy_save_small, cfg.policy_save_large
    small = Row(
        id="8a",
        title="policy save",
        measured=f"RoutingPolicyStore.save, {small_n:,} disjoint policies, fresh store",
        unit="s",
        baseline_label="(none: target on ours)",
        target=Target("<=", 2.0, on="ours", unit="s"),
    )
    large = Row(
        id="8b",
        title="policy save growth",
        measured=f"RoutingPolicyStore.save, {large_n:,} disjoint policies, fresh store",
        unit="s",
        baseline_label=f"save of {small_n:,} (8a)",
        ratio_label="slower",
        target=Target("<=", 1.5 * large_n / small_n),
    )
    try:
        small_set, large_set = disjoint_policies(small_n), disjoint_policies(large_n)
        workdir = cfg.workdir
        workdir.mkdir(parents=True, exist_ok=True)
        runs = cfg.slow_runs
        ours_small, ours_large = [], []
        for _ in range(runs):
            ours_small.append(_save_once(small_set, workdir))
            ours_large.append(_save_once(large_set, workdir))
        small.ours, small.runs = Stats.of(ours_small), runs
        large.ours, large.baseline, large.runs = Stats.of(ours_large), Stats.of(ours_small), runs
        large.ratio = ratios(ours_large, ours_small)
        large.notes.append(f"target: growth at most 1.5x linear ({large_n // small_n}x the policies)")
    except Exception as exc:
        return [errored(small, exc), errored(large, exc)]
    return [small.judge(), large.judge()]


class _HostAfterSave:
    """A host instrumented with the demo seams over a store holding revision 1 of ``n`` policies."""

    def __init__(self, root: Path, n: int) -> None:
        from opentelemetry.sdk.trace import TracerProvider

        from otel_route_shadow.demo import factory
        from otel_route_shadow.instrumentation import RouteShadowInstrumentor, SeamSpec

        self.root, self.n, self.factory = root, n, factory
        RoutingPolicyStore(root / "store").save(disjoint_policies(n))
        self.provider = TracerProvider()
        self.instrumentor = RouteShadowInstrumentor()
        seams = tuple(
            SeamSpec(target=target, request_face=face, extractor=factory.extract_job, name=name)
            for name, (target, face) in factory.SEAMS.items()
        )
        self.instrumentor.instrument(
            tracer_provider=self.provider,
            seams=seams,
            chain_path=root / "chain.jsonl",
            store=root / "store",
            durability="flush",
            snapshot_recheck_ms=0,  # every spawn looks at the store: the save is seen at once
        )
        self.job = factory.plan_jobs(1, factory.FactorySettings())[0]

    @property
    def prefetch(self) -> Any:
        runtime = self.instrumentor.runtime
        assert runtime is not None
        return runtime.prefetch

    def spawn(self) -> None:
        self.factory.dispatch(self.job)

    def close(self) -> None:
        self.instrumentor.uninstrument()
        self.provider.shutdown()


def _one_save_and_spawn(workdir: Path, n: int) -> tuple[float, float, list[float]]:
    """(first spawn after the save, until the new revision is in use, the spawns made back to back
    while the read ran), ms."""
    root = Path(tempfile.mkdtemp(prefix="policy-spawn-", dir=workdir))
    host = None
    try:
        host = _HostAfterSave(root, n)
        assert host.prefetch.wait(60.0)  # the first read, started at instrument time
        # A host that has run on revision 1 for a while: its store verdict is cached (the store
        # caches one only once its files are older than its racy window, 1 s).
        time.sleep(RoutingPolicyStore.racy_window_ns / 1e9 + 0.2)
        host.spawn()
        assert host.prefetch.wait(60.0)
        host.spawn()
        assert not host.prefetch.running, "the store verdict should be cached by now"
        RoutingPolicyStore(root / "store").save(disjoint_policies(n + 1))  # revision 2
        started = time.perf_counter()
        first = timed(host.spawn)
        during = []
        while host.prefetch.running:  # no forced collection here: the host's own GC runs as it would
            spawn_start = time.perf_counter()
            host.spawn()
            during.append((time.perf_counter() - spawn_start) * 1000)
        assert host.prefetch.wait(60.0)
        switched = time.perf_counter() - started
        return first * 1000, switched * 1000, during
    finally:
        if host is not None:
            host.close()
        shutil.rmtree(root, ignore_errors=True)


def _in_spawn_read(root: Path, context: Any) -> None:
    """What the first spawn after a save paid before reads moved off the spawn path."""
    snapshot = RoutingPolicyStore(root).load().snapshot
    explain(context, snapshot, index=PolicyIndex(snapshot.policies))


def first_spawn_row(cfg: BenchConfig) -> Row:
    n = cfg.policy_save_small
    row = Row(
        id="8c",
        title="first spawn after save",
        measured=f"instrumented host on revision 1, save of {n:,} policies, the next seam call",
        unit="ms",
        baseline_label="(none: target on ours)",
        target=Target("<=", 50.0, on="ours", unit="ms"),
    )
    try:
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        firsts: list[float] = []
        switches: list[float] = []
        during: list[float] = []
        for _ in range(cfg.runs):
            first, switched, busy = _one_save_and_spawn(cfg.workdir, n)
            firsts.append(first)
            switches.append(switched)
            during.extend(busy)
        row.ours, row.runs = Stats.of(firsts), cfg.runs
        row.extras["new_revision_in_use_after_ms"] = Stats.of(switches).median
        if during:
            during.sort()
            row.extras["spawns_during_background_read"] = len(during)
            row.extras["spawn_during_background_read_ms"] = {
                "median": during[len(during) // 2],
                "p99": during[int(len(during) * 0.99)],
                "max": during[-1],
            }
        root = Path(tempfile.mkdtemp(prefix="policy-read-", dir=cfg.workdir))
        try:
            RoutingPolicyStore(root).save(disjoint_policies(n))
            (context,) = make_contexts(1, n, seed=5)
            reads = [timed(lambda: _in_spawn_read(root, context)) * 1000 for _ in range(cfg.slow_runs)]
        finally:
            shutil.rmtree(root, ignore_errors=True)
        row.extras["read_in_the_spawn_ms"] = Stats.of(reads).median
        row.notes.append(
            "the read (load + PolicyIndex) runs on a background thread; seams keep revision 1 meanwhile"
        )
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def _check_row(row: Row, policies: list[RoutingPolicy], runs: int) -> Row:
    try:
        problems = validate_policies(policies)
        row.extras["problem_lines"] = len(problems)
        row.extras["problems_counted"] = sum(p.count for p in problems)
        row.extras["unreachable"] = sum(p.count for p in problems if p.code is ReasonCode.UNREACHABLE_POLICY)
        values = []
        for _ in range(runs):
            start = time.perf_counter()
            validate_policies(policies)
            values.append(time.perf_counter() - start)
        row.ours, row.runs = Stats.of(values), runs
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def check_rows(cfg: BenchConfig) -> list[Row]:
    n = cfg.policy_check
    spread = Row(
        id="8d",
        title="policy check",
        measured=f"validate_policies, {n:,} policies over every rung (unreachable ones included)",
        unit="s",
        baseline_label="(none: target on ours)",
        target=Target("<=", 2.0, on="ours", unit="s"),
    )
    conflicting = Row(
        id="8e",
        title="policy check, all conflicting",
        measured=f"validate_policies, {n:,} equal catch-alls with two actions",
        unit="s",
        baseline_label="(none: target on ours)",
        target=Target("<=", 2.0, on="ours", unit="s"),
    )
    return [
        _check_row(spread, make_policies(n, seed=31), cfg.runs),
        _check_row(conflicting, conflicting_catch_alls(n), cfg.runs),
    ]


def rows(cfg: BenchConfig, context: BenchContext | None = None) -> list[Row]:
    out: list[Row] = []
    if context is None or context.wants("8a") or context.wants("8b"):
        out.extend(save_rows(cfg))
    if context is None or context.wants("8c"):
        out.append(first_spawn_row(cfg))
    if context is None or context.wants("8d") or context.wants("8e"):
        out.extend(check_rows(cfg))
    if context is None or context.wants("8f") or context.wants("8g"):
        out.extend(stall_rows(cfg))
    return out


class _Ticker:
    """A host thread that wakes every millisecond and records the longest gap between two wakes:
    how long another thread of the process kept it from running (the interpreter lock, a garbage
    collection, and the machine's own scheduling, which ``_busy_floor`` measures alone)."""

    def __init__(self, period_s: float = 0.001) -> None:
        self.period_s = period_s
        self.longest_s = 0.0
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-ticker", daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        self._started.set()
        while not self._stop.is_set():
            time.sleep(self.period_s)
            now = time.perf_counter()
            self.longest_s = max(self.longest_s, now - last)
            last = now

    def __enter__(self) -> _Ticker:
        self._thread.start()
        self._started.wait()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def longest_ms(self) -> float:
        return self.longest_s * 1000


class _FullCollections:
    """Counts the full (generation 2) collections that run inside the block (observed, never caused)."""

    def __init__(self) -> None:
        self.count = 0

    def _hook(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info.get("generation") == 2:
            self.count += 1

    def __enter__(self) -> _FullCollections:
        gc.callbacks.append(self._hook)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._hook)


def _busy_floor(seconds: float) -> float:
    """The ticker's longest gap while this thread runs plain Python (which hands the interpreter
    over every switch interval, 5 ms): the floor the machine itself sets, ms."""
    with _Ticker() as ticker:
        deadline = time.perf_counter() + seconds
        spin = 0
        while time.perf_counter() < deadline:
            spin += 1
    return ticker.longest_ms


def _read_and_index(root: Path) -> tuple[float, float, int]:
    """(longest ticker gap ms, seconds, full collections) for what the instrumentation's background
    read does with a changed snapshot: ``load()`` and the policy index build."""
    with _Ticker() as ticker, _FullCollections() as full:
        started = time.perf_counter()
        load = RoutingPolicyStore(root).load()
        PolicyIndex(load.snapshot.policies)
        elapsed = time.perf_counter() - started
    assert load.state == "ok", load.problem
    return ticker.longest_ms, elapsed, full.count


def _save_in_process(root: Path, policies: list[RoutingPolicy]) -> tuple[float, int]:
    """(longest ticker gap ms, full collections) while this process saves ``policies`` (a host
    calling ``RoutingPolicyStore.save`` itself, holding the set it saves)."""
    with _Ticker() as ticker, _FullCollections() as full:
        RoutingPolicyStore(root).save(policies)
    return ticker.longest_ms, full.count


def _save_while_the_host_runs(root: Path, policy_file: Path) -> tuple[float, float]:
    """(longest ticker gap ms, seconds) in a host while ``otel-route-shadow policy save`` writes a
    new revision from another process and the host then reads and indexes it, as its background
    read does."""
    command = [
        sys.executable,
        "-m",
        "otel_route_shadow.cli",
        "policy",
        "save",
        str(policy_file),
        "--store",
        str(root),
    ]
    with _Ticker() as ticker:
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, timeout=600)
        load = RoutingPolicyStore(root).load()
        PolicyIndex(load.snapshot.policies)
        elapsed = time.perf_counter() - started
    assert load.state == "ok", load.problem
    return ticker.longest_ms, elapsed


def _write_policy_file(path: Path, policies: list[RoutingPolicy]) -> None:
    document = {"policies": [policy.model_dump(mode="json") for policy in policies]}
    path.write_text(json.dumps(document), "utf-8")


def stall_rows(cfg: BenchConfig) -> list[Row]:
    n = cfg.policy_stall
    read = Row(
        id="8f",
        title="host stall, snapshot read",
        measured=f"longest gap of a 1 ms ticker thread while {n:,} policies are loaded and indexed",
        unit="ms",
        baseline_label="(none: target on ours)",
        target=Target("<=", 50.0, on="ours", unit="ms"),
    )
    save = Row(
        id="8g",
        title="host stall, save while it runs",
        measured=f"the same while `policy save` writes {n:,} policies and the host reads them",
        unit="ms",
        baseline_label="(none: target on ours)",
        target=Target("<=", 50.0, on="ours", unit="ms"),
    )
    try:
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        gaps: dict[str, list[float]] = {"read": [], "save": [], "floor": [], "in_host": []}
        seconds: dict[str, list[float]] = {"read": [], "save": []}
        full: dict[str, list[int]] = {"read": [], "in_host": []}
        for run in range(cfg.slow_runs):
            work = Path(tempfile.mkdtemp(prefix="policy-stall-", dir=cfg.workdir))
            root = work / "store"
            try:
                RoutingPolicyStore(root).save(disjoint_policies(n))
                policy_file = work / "policies.json"
                _write_policy_file(policy_file, disjoint_policies(n + 1 + run))
                gc.collect()  # the harness's own garbage, not the host's: every run starts alike
                gap, elapsed, count = _read_and_index(root)
                gaps["read"].append(gap)
                seconds["read"].append(elapsed)
                full["read"].append(count)
                gaps["floor"].append(_busy_floor(elapsed))
                gap, elapsed = _save_while_the_host_runs(root, policy_file)
                gaps["save"].append(gap)
                seconds["save"].append(elapsed)
                policies = disjoint_policies(n + 2 + run)
                gc.collect()
                gap, count = _save_in_process(root, policies)
                del policies
                gaps["in_host"].append(gap)
                full["in_host"].append(count)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        floor = Stats.of(gaps["floor"]).median
        for row, key in ((read, "read"), (save, "save")):
            row.ours, row.runs = Stats.of(gaps[key]), cfg.slow_runs
            row.extras["seconds"] = Stats.of(seconds[key]).median
            row.extras["ticker_gap_busy_floor_ms"] = floor
        read.extras["full_collections"] = full["read"]
        save.extras["save_in_the_host_gap_ms"] = Stats.of(gaps["in_host"]).median
        save.extras["save_in_the_host_full_collections"] = full["in_host"]
        save.notes.append("save_in_the_host: the host calls save() itself, holding the set it saves")
    except Exception as exc:
        return [errored(read, exc), errored(save, exc)]
    return [read.judge(), save.judge()]
