"""Row 2: ``explain_batch`` against a linear scan; ``explain`` per context at 100 policies."""

from __future__ import annotations

import inspect
import time

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, paired, ratios, timed
from benchmarks.linear_resolver import load_baseline
from benchmarks.resolver_data import make_contexts, make_policies, make_snapshot
from otel_route_shadow.core import explain, explain_batch


def batch_row(cfg: BenchConfig) -> Row:
    n_ctx, n_pol = cfg.batch_contexts, cfg.batch_policies
    row = Row(
        id="2a",
        title="explain_batch vs linear scan",
        measured=f"explain_batch, {n_ctx:,} contexts x {n_pol:,} policies",
        unit="s",
        baseline_label="linear scan",
        ratio_label="faster",
        target=Target(">=", 5.0),
    )
    try:
        baseline, label = load_baseline()
        row.notes.append(f"baseline: {label} (sorts once, then checks every enabled policy per context)")
        snapshot = make_snapshot(make_policies(n_pol))
        contexts = make_contexts(n_ctx, n_pol)
        # Honesty check: the baseline must decide exactly what explain_batch decides.
        ours_out = explain_batch(contexts, snapshot)
        base_out = baseline(contexts, snapshot)
        identical = sum(a == b for a, b in zip(ours_out, base_out, strict=True))
        row.extras["identical_decisions"] = f"{identical}/{n_ctx}"
        row.extras["mean_candidates_per_context"] = round(sum(len(d.considered) for d in ours_out) / n_ctx, 1)
        if identical != n_ctx:
            row.notes.append(f"WARNING: baseline and explain_batch disagree on {n_ctx - identical} contexts")
        del ours_out, base_out
        runs = cfg.slow_runs if not cfg.quick else cfg.runs
        ours, base = paired(
            lambda: timed(lambda: explain_batch(contexts, snapshot)),
            lambda: timed(lambda: baseline(contexts, snapshot)),
            runs,
        )
        row.ours, row.baseline, row.ratio, row.runs = Stats.of(ours), Stats.of(base), ratios(base, ours), runs
        row.extras["contexts_per_s"] = round(n_ctx / row.ours.median)
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def explain_row(cfg: BenchConfig) -> Row:
    n_pol, n_ctx = cfg.explain_policies, cfg.explain_contexts
    row = Row(
        id="2b",
        title="explain per context",
        measured=f"explain, one context at a time, {n_pol} policies",
        unit="us",
        baseline_label="(none: reported)",
    )
    try:
        snapshot = make_snapshot(make_policies(n_pol, seed=21))
        contexts = make_contexts(n_ctx, n_pol, seed=22)
        for context in contexts[:50]:
            explain(context, snapshot)

        def one_run(**kwargs: object) -> float:
            start = time.perf_counter()
            for context in contexts:
                explain(context, snapshot, **kwargs)  # type: ignore[arg-type]
            return (time.perf_counter() - start) / n_ctx * 1e6

        values = [one_run() for _ in range(cfg.runs)]
        row.ours, row.runs = Stats.of(values), cfg.runs
        row.notes.append("explain(context, snapshot): each call builds the snapshot's policy index")
        if "index" in inspect.signature(explain).parameters:
            from otel_route_shadow.core import PolicyIndex

            index = PolicyIndex(snapshot.policies)
            prebuilt = [one_run(index=index) for _ in range(cfg.runs)]
            row.extras["with_prebuilt_index_us"] = Stats.of(prebuilt).as_dict()
            row.notes.append("explain(..., index=PolicyIndex(...)) as the span processor calls it: in extras")
    except Exception as exc:
        return errored(row, exc)
    return row.judge()


def rows(cfg: BenchConfig, context: BenchContext | None = None) -> list[Row]:
    out = []
    if context is None or context.wants("2a"):
        out.append(batch_row(cfg))
    if context is None or context.wants("2b"):
        out.append(explain_row(cfg))
    return out
