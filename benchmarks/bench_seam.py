"""Rows 1, 1c, 1d, 1e: what a seam call adds beyond what any design must pay, and its tail.

Row 1: the shipped seam against the same seam with its append cut to the floor (the chain log's
``submit`` replaced, on that side only, by ``flock``, ``stat``, SHA-256 of the record, one ``write`` of
it, unlock, on a side file: the cheapest linked record any design writes in the caller's thread). Same
instrumentation, same spans and enrichment, same run: the ratio is what the real append costs beyond
that floor. Reported beside it, from the same interleaved runs: the ratio to a bare span with the same
attributes, to a bare span plus the floor, and the seam's parts in microseconds (span and enrichment
with no append at all, the record at its floor, the rest of the append).

Rows 1c and 1d: the p99 and p99.9 of single seam calls with checkpointing on (the default cadence:
every 1,000 records, signed) against the same with checkpointing off (deferred past the run), in
interleaved rounds, each side on a chain of its own, every call timed alone. Row 1e: the p99.9 of a
third side, checkpointing on and the chain cut (``segment_bytes``) every 2 MiB by the checkpointing
thread, against the same side off: the spawns that meet a cut stay within row 1d's target.

Setup (both sides, same run, same SDK ``TracerProvider``):

* span processors on the provider: the route-shadow processor that ``instrument()`` adds (a bare
  span passes through its ``on_start`` too and is ignored there), and one ``BatchSpanProcessor``
  (queue 65,536, so nothing is dropped at the queue) to an exporter that drops every batch;
* the host call is the demo factory's four seams (``factory.SEAMS``), each doing its trivial work;
* **instrumented**: the wrapped seam: context, span, enrichment (store load, sanitize, ``explain``,
  compare, ~30 attributes), and the chain append with durability ``flush`` (no fsync);
* **bare**: the unwrapped seam function inside ``tracer.start_as_current_span(name,
  attributes=...)``, whose attribute mapping is the one the real seam span for the same job carried
  (captured from the exporter during warm-up): same names, same number, same values;
* the extractor: **excluded from both sides**. The demo's ``extract_job`` builds the context with
  pydantic; that is host code, so the benchmark registers an extractor that returns the context
  precomputed for the job (a dict lookup). The demo extractor's own cost is reported in the extras.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.harness import Row, Stats, Target, errored, interleaved, paired, ratios, unavailable


class _DropExporter:
    """A span exporter that drops everything, except the spans it is told to capture."""

    def __init__(self) -> None:
        self.capture: list[Any] | None = None
        self.exported = 0

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.exported += len(spans)
        if self.capture is not None:
            self.capture.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _per_call(calls: Sequence[Callable[[], Any]]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        for call in calls:
            call()
        return (time.perf_counter() - start) / len(calls) * 1e6

    return run


def seam_rows(cfg: BenchConfig, *, tail: bool = True) -> list[Row]:
    """Rows 1, 1c and 1d (row 1 alone without ``tail``)."""
    row = Row(
        id="1",
        title="shipped seam vs the same seam with its append cut to the floor",
        measured="seam call: span + enrichment + chain append (flush), checkpointing on",
        unit="us",
        baseline_label="the same seam, its append flock/stat/sha256/write on a side file",
        ratio_label="of the floor seam",
        target=Target("<=", 1.25),
    )
    tail_rows = [
        Row(
            id=row_id,
            title=f"seam call {label}, checkpointing on{also} vs off",
            measured=f"{label} of single seam calls, checkpoints every 1,000 records (signed){also}",
            unit="us",
            baseline_label=f"{label}, checkpoints deferred past the run",
            ratio_label="of off",
            target=Target("<=", limit),
        )
        for row_id, label, limit, also in (
            ("1c", "p99", 1.5, ""),
            ("1d", "p99.9", 2.0, ""),
            ("1e", "p99.9", 2.0, " and the chain cut every 2 MiB"),
        )
    ]
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind

        from otel_route_shadow.demo import factory
        from otel_route_shadow.instrumentation import RouteShadowInstrumentor, SeamCall, SeamSpec
        from otel_route_shadow.store import RoutingPolicyStore
    except ImportError as exc:
        return [
            unavailable(r, f"instrumentation or chain not importable yet: {exc}") for r in (row, *tail_rows)
        ]
    instrumentor = None
    provider = None
    try:
        from benchmarks.payloads import demo_policies

        work = cfg.workdir / "seam"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        store = RoutingPolicyStore(work / "store")
        store.save(demo_policies())
        # The store caches a verdict only once its files are older than its racy window.
        time.sleep(RoutingPolicyStore.racy_window_ns / 1e9 + 0.2)

        jobs = factory.plan_jobs(80, factory.FactorySettings())
        faces = {name: face for name, (_, face) in factory.SEAMS.items()}
        contexts = {job.number: factory.context_for(job, faces[job.loop.seam]) for job in jobs}

        # Distinct but equal context objects per job, for the extras' check that no cache keys on
        # object identity (a real extractor builds a new context on every call).
        copies = {
            number: itertools.cycle([c.model_copy(deep=True) for _ in range(7)])
            for number, c in contexts.items()
        }
        fresh_objects = [False]

        def extract_precomputed(call: SeamCall) -> Any:
            number = call.args[0].number
            return next(copies[number]) if fresh_objects[0] else contexts[number]

        seams = tuple(
            SeamSpec(target=target, request_face=face, extractor=extract_precomputed, name=name)
            for name, (target, face) in factory.SEAMS.items()
        )
        provider = TracerProvider()
        exporter = _DropExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65_536))  # type: ignore[arg-type]
        instrumentor = RouteShadowInstrumentor()
        chain_path = work / "chain.jsonl"
        agent, subprocess_runner = factory.AgentRunner(), factory.SubprocessRunner()

        def instrument(chain: Path = chain_path, **extra: Any) -> dict[str, Any]:
            instrumentor.instrument(
                tracer_provider=provider,
                seams=seams,
                chain_path=chain,
                store=work / "store",
                durability="flush",
                **extra,
            )
            wrapped: dict[str, Any] = {
                "agentic": agent._execute,
                "subprocess": subprocess_runner.run,
                "one-shot": factory.run_lightweight_agent,
                "streaming": factory.stream_claude_with_telemetry,
            }
            for name, fn in wrapped.items():
                if not hasattr(fn, "__wrapped__"):
                    raise RuntimeError(f"seam {name} is not wrapped by the instrumentor")
            return wrapped

        wrapped = instrument()

        # Warm-up: one instrumented call per job, capturing the real seam spans.
        exporter.capture = []
        for job in jobs:
            wrapped[job.loop.seam](job)
        provider.force_flush()
        captured, exporter.capture = exporter.capture, None
        if len(captured) != len(jobs):
            raise RuntimeError(f"captured {len(captured)} seam spans for {len(jobs)} jobs")
        span_data = [(span.name, dict(span.attributes or {})) for span in captured]
        row.extras["attributes_per_span"] = sorted({len(attrs) for _, attrs in span_data})
        lines = chain_path.read_bytes().splitlines(keepends=True) if chain_path.exists() else []
        if len(lines) != len(jobs):  # a seam_variants prototype that patches the append
            row.notes.append(
                f"the warm-up wrote {len(lines)} chain lines for {len(jobs)} jobs: floor of 2.5 KB lines"
            )
            lines = [b"{" + b"x" * 2500 + b"}\n"] * len(jobs)
        row.extras["line_bytes"] = round(statistics.mean(len(line) for line in lines))
        floor = _append_floor(work / "floor.jsonl")

        tracer = provider.get_tracer("benchmarks.bare")
        internal = SpanKind.INTERNAL

        def bare(fn: Callable[[Any], Any], job: Any, name: str, attrs: dict[str, Any]) -> Callable[[], Any]:
            def call() -> Any:
                with tracer.start_as_current_span(name, kind=internal, attributes=attrs):
                    return fn(job)

            return call

        def shadowed(fn: Callable[[Any], Any], job: Any) -> Callable[[], Any]:
            return lambda: fn(job)

        n = cfg.seam_calls
        order = [i % len(jobs) for i in range(n)]
        ours_calls = [shadowed(wrapped[jobs[i].loop.seam], jobs[i]) for i in order]
        bare_calls = [
            bare(wrapped[jobs[i].loop.seam].__wrapped__, jobs[i], span_data[i][0], span_data[i][1])
            for i in order
        ]

        def bare_with_floor(bare_call: Callable[[], Any], line: bytes) -> Callable[[], Any]:
            def call() -> Any:
                result = bare_call()
                floor(line)
                return result

            return call

        floor_calls = [bare_with_floor(b, lines[i]) for b, i in zip(bare_calls, order, strict=True)]
        for call in bare_calls[: len(jobs)]:
            call()
        # One untimed round of each side, then let the file system settle (the work directory was
        # emptied at the start, possibly of a large chain from an earlier run), so that the timed
        # runs see neither first-touch costs nor the benchmark's own clean-up.
        _per_call(ours_calls)()
        _per_call(floor_calls)()
        _per_call(bare_calls)()
        os.sync()
        records_before = _count_lines(chain_path)

        def distinct_objects() -> float:
            fresh_objects[0] = True
            try:
                return _per_call(ours_calls)()
            finally:
                fresh_objects[0] = False

        log = instrumentor.runtime.exporter._chain() if instrumentor.runtime is not None else None
        if log is None:
            raise RuntimeError("the instrumentation has no chain log")
        side_floor = _append_floor(work / "seam-floor.jsonl")

        def with_submit(submit: Callable[[Any], Any], calls: Sequence[Callable[[], Any]]) -> Callable[[], float]:
            run = _per_call(calls)

            def side() -> float:
                log.submit = submit  # type: ignore[method-assign]  # this instance, this side only
                try:
                    return run()
                finally:
                    del log.submit

            return side

        # Every side runs interleaved with the others, so that all see the same moments of the machine:
        # the shipped seam, the same seam with a distinct (equal) context object on every call, the same
        # seam with its append cut to the floor and with no append at all, and the two bare spans.
        sides = {
            "ours": _per_call(ours_calls),
            "distinct": distinct_objects,
            "cut": with_submit(lambda encoded: side_floor(encoded.payload + b"\n"), ours_calls),
            "no_append": with_submit(lambda encoded: None, ours_calls),
            "floor": _per_call(floor_calls),
            "bare": _per_call(bare_calls),
        }
        measured = interleaved(sides, cfg.seam_runs)
        ours, base = measured["ours"], measured["cut"]
        row.extras["ratio_distinct_context_objects"] = round(ratios(measured["distinct"], base).median, 2)
        row.extras["ratio_vs_bare_span"] = round(ratios(ours, measured["bare"]).median, 2)
        row.extras["ratio_vs_bare_span_plus_floor"] = round(ratios(ours, measured["floor"]).median, 2)
        row.extras["bare_span_us"] = round(statistics.median(measured["bare"]), 1)
        median = {name: statistics.median(values) for name, values in measured.items()}
        row.extras["parts_us"] = {
            "bare span": round(median["bare"], 1),
            "span and enrichment, beyond a bare span": round(median["no_append"] - median["bare"], 1),
            "the record at its floor": round(median["cut"] - median["no_append"], 1),
            "the rest of the append": round(median["ours"] - median["cut"], 1),
        }
        provider.force_flush()
        records = _count_lines(chain_path) - records_before
        row.ours, row.baseline, row.ratio, row.runs = (
            Stats.of(ours),
            Stats.of(base),
            ratios(ours, base),
            cfg.seam_runs,
        )
        runtime = instrumentor.runtime
        errors = dict(runtime.errors) if runtime is not None else {}
        row.extras["chain_records_appended"] = records
        row.extras["expected_records"] = 2 * n * cfg.seam_runs  # ours and distinct
        row.extras["contained_errors"] = {f"{k[0]}:{k[1]}": v for k, v in errors.items()}
        store_obj = getattr(runtime, "_store", None)
        if store_obj is not None:
            row.extras["store_full_loads"] = store_obj.full_loads
        if errors or records != 2 * n * cfg.seam_runs:
            row.notes.append(
                "WARNING: the shadow path contained errors or missed chain records; figure suspect"
            )
        row.extras["demo_extractor_us"] = _extractor_cost(factory, jobs, faces)

        # Variant, same run, fewer runs: the store re-checked on every call instead of every 100 ms
        # (a new instrumentation, so measured after the main block, from a synced file system).
        variant_runs = max(3, cfg.seam_runs // 2)
        instrumentor.uninstrument()
        wrapped = instrument(snapshot_recheck_ms=0)
        exact_calls = [shadowed(wrapped[jobs[i].loop.seam], jobs[i]) for i in order]
        os.sync()
        ours_exact, base_exact = paired(_per_call(exact_calls), _per_call(floor_calls), variant_runs)
        row.extras["ratio_store_rechecked_every_call_vs_bare_plus_floor"] = round(ratios(ours_exact, base_exact).median, 2)
        row.notes.append(
            "same TracerProvider: route-shadow processor + BatchSpanProcessor(drop exporter); "
            "extractor excluded from both sides (precomputed context); demo extractor cost in extras"
        )
        instrumentor.uninstrument()
        tail_calls = [_by_seam(jobs[i]) for i in order]
        if tail:
            _tail(tail_rows, cfg, work, instrument, instrumentor.uninstrument, tail_calls)
        else:
            tail_rows = []
    except Exception as exc:
        return [errored(r, exc) if r.ours is None else r.judge() for r in (row, *tail_rows)]
    finally:
        if instrumentor is not None:
            with contextlib.suppress(Exception):
                instrumentor.uninstrument()
        if provider is not None:
            provider.shutdown()
    return [row.judge(), *(r.judge() for r in tail_rows)]


def _count_lines(path: Any) -> int:
    try:
        with open(path, "rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _extractor_cost(factory: Any, jobs: Sequence[Any], faces: dict[str, str]) -> float:
    from otel_route_shadow.instrumentation import SeamCall

    calls = [SeamCall(job.loop.seam, faces[job.loop.seam], None, (job,), {}) for job in jobs]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for call in calls:
            factory.extract_job(call)
        best = min(best, (time.perf_counter() - start) / len(calls) * 1e6)
    return round(best, 1)


def _append_floor(side: Path) -> Callable[[bytes], None]:
    """The irreducible steps of appending ``line`` to a linked chain in the caller's thread, on a side
    file: take the lock, look at the file, hash the line, write it, let go."""
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)

    def floor(line: bytes) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            os.stat(side)
            hashlib.sha256(line).digest()
            os.write(fd, line)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    return floor


def _tail(
    rows: list[Row],
    cfg: BenchConfig,
    work: Path,
    instrument: Callable[..., dict[str, Any]],
    uninstrument: Callable[[], None],
    calls: list[Callable[[dict[str, Any]], Any]],
) -> None:
    """Rows 1c, 1d and 1e: rounds of ``cfg.tail_calls`` single timed calls per side, the sides taking
    turns, each on a chain of its own; the percentiles are taken over every call of a side."""
    from otel_route_shadow.logstore import generate_key_file

    key = work / "tail.key"
    generate_key_file("bench.example/route-shadow/tail", str(key))
    never = {"segment_bytes": 0, "segment_seconds": 0.0}
    cut_bytes = max(64 * 1024, min(CUT_BYTES, cfg.tail_calls * 1000))  # quick sizes cut too
    settings = {
        "on": {"checkpoint_records": 1000, "signing_key": str(key), **never},
        "off": {
            "checkpoint_records": 10**8,
            "checkpoint_seconds": 86_400.0,
            "signing_key": str(key),
            **never,
        },
        "cut": {
            "checkpoint_records": min(1000, cfg.tail_calls // 2),  # quick sizes checkpoint (and cut) too
            "signing_key": str(key),
            **never,
            "segment_bytes": cut_bytes,
        },
    }
    latencies: dict[str, list[float]] = {"on": [], "off": [], "cut": []}
    sample = [calls[i % len(calls)] for i in range(cfg.tail_calls)]
    for round_ in range(cfg.tail_rounds):
        for side in ("on", "off", "cut") if round_ % 2 == 0 else ("cut", "off", "on"):
            wrapped = instrument(chain=work / f"tail-{side}.jsonl", **settings[side])
            try:
                timings = latencies[side]
                for call in sample:
                    start = time.perf_counter()
                    call(wrapped)
                    timings.append((time.perf_counter() - start) * 1e6)
            finally:
                uninstrument()
    for row, q, side in zip(rows, (0.99, 0.999, 0.999), ("on", "on", "cut"), strict=True):
        on, off = _quantile(latencies[side], q), _quantile(latencies["off"], q)
        row.ours, row.baseline = Stats.of([on]), Stats.of([off])
        row.ratio, row.runs = Stats.of([on / off]), cfg.tail_rounds
        row.extras["calls_per_side"] = len(latencies[side])
        row.extras["p50_on_off_us"] = [round(_quantile(latencies[s], 0.5), 1) for s in (side, "off")]
        row.extras["max_on_off_us"] = [round(max(latencies[s]), 1) for s in (side, "off")]
        row.extras["calls_over_1ms_on_off"] = [sum(t > 1000 for t in latencies[s]) for s in (side, "off")]
    segments = work / "tail-cut.jsonl.segments"
    rows[2].extras["cuts"] = len(list(segments.iterdir())) if segments.is_dir() else 0


CUT_BYTES = 2 * 1024 * 1024
"""Row 1e's ``segment_bytes``: a cut about every 800 records of the demo's 2.5 KB lines (quick sizes:
about every 60)."""


def _by_seam(job: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda wrapped: wrapped[job.loop.seam](job)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rows(cfg: BenchConfig, context: object = None) -> list[Row]:
    return seam_rows(cfg)
