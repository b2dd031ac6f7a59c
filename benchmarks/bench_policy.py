"""Rows 8a-8e: policy validation and the store at scale (issue 16 part 2, issue 18 Speed).

8a/8b ``policy save`` of 8,000 and of 80,000 disjoint policies (fresh store each run: validate,
hash, encode, write, read back); 8b's ratio is its time over 8a's, measured in the same run (10x the
policies; near-linear growth is a ratio near 10). 8c a host's first spawn after such a save, as the
host sees it: an instrumented host (demo seams, re-check window 0) that resolved against revision 1,
the save of revision 2, then its next seam call; extras: when revision 2 is in use, a spawn while it
is read, and what reading it inside the spawn (the old way) costs. 8d/8e
``validate_policies`` (what ``policy check`` runs) on 8,000 policies spread over every rung with
unreachable ones, and on 8,000 catch-alls that all conflict (the issue's 16-million-line case).
"""

from __future__ import annotations

import shutil
import tempfile
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
    return out
