"""Row 7: ``audit`` of the last records of a large chain against its witnessed checkpoints costs what
auditing a chain of just those records costs (issue 13, "Speed").

* large: the shared large chain (1M records in a full run), its tree and tiles built by the real
  ``tlog.Checkpointer`` with two checkpoints, at ``n - tail`` and at ``n``; the auditor's state
  (``audit --state``) trusts the one at ``n - tail``, as an earlier audit left it. Measured: the audit
  with both checkpoints witnessed, so it proves the one at ``n`` from the records after the trusted
  point (the state file is restored before each run, untimed, so every run does the same work);
* small: a chain of ``tail`` records (the same payloads), its one checkpoint witnessed, audited in full
  (no state: the first audit of a chain).

Both audits run in process (``backend.audit.audit_chain``) against an in-memory backend holding only the
checkpoint spans (no seam spans: the span cross-check then reads every record it is given and matches
none, on both sides alike). Target: large/small <= 2.0 (per-run ratios, sides interleaved).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmarks.chainfile import write_chain
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, ratios, timed, unavailable

ORIGIN = "bench.example/route-shadow/audit"
TAIL = 10_000


class _Backend:
    """A backend holding only checkpoint spans (the ``Backend`` protocol, in memory)."""

    kind = "bench"
    time_tolerance_ns = 0

    def __init__(self) -> None:
        self.spans: list[Any] = []

    def describe(self) -> str:
        return "in-memory backend"

    def add(self, checkpoint: Any) -> None:
        from otel_route_shadow.backend.base import BackendSpan
        from otel_route_shadow.instrumentation.checkpoint_spans import checkpoint_attributes

        n = len(self.spans) + 1
        self.spans.append(
            BackendSpan(f"{n:032x}", f"{n:016x}", time.time_ns(), checkpoint_attributes(checkpoint))
        )

    def fetch_spans(self, window: Any, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
        for span in self.spans:
            if window.start_unix_nano <= span.start_time_unix_nano < window.end_unix_nano and all(
                span.attributes.get(k) == v for k, v in (attributes or {}).items()
            ):
                yield span


def _fresh_link(directory: Path, target: Path) -> Path:
    """A new name for the large chain (its ``.tlog`` is built beside the name, the chain is not copied)."""
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    link = directory / "chain.jsonl"
    os.symlink(target.resolve(), link)
    return link


def _large(context: BenchContext, tail: int) -> tuple[Path, _Backend, str]:
    """The large chain with checkpoints at n - tail and n; the state trusting n - tail (as JSON text)."""
    from otel_route_shadow.backend.trust import Trusted, TrustState, verify_incremental
    from otel_route_shadow.logstore import Checkpointer

    n = context.cfg.chain_records
    chain = _fresh_link(context.cfg.workdir / "audit" / "large", context.chains.large())
    backend = _Backend()
    checkpointer = Checkpointer(str(chain), ORIGIN, None, max_leaves=n - tail, max_bytes=1 << 40)
    checkpointer.add_listener(backend.add)
    checkpointer.checkpoint()  # hashes the first n - tail lines: the checkpoint an earlier audit proved
    first = list(backend.spans)
    checkpointer.checkpoint(max_leaves=1 << 40)  # the rest: the checkpoint this audit must prove
    if [s.attributes["route_shadow.checkpoint.size"] for s in backend.spans] != [n - tail, n]:
        raise RuntimeError("the checkpointer did not make the two checkpoints the row needs")
    from otel_route_shadow.backend.checkpoints import backend_checkpoints

    earlier, _ = backend_checkpoints(first, ORIGIN)
    proven = verify_incremental(str(chain), earlier, [], Trusted.empty())
    if isinstance(proven, str) or proven[1] is None:
        raise RuntimeError("the large chain does not verify against its own checkpoint")
    state_path = chain.parent / "state.json"
    TrustState(state_path).put(ORIGIN, proven[1])
    return chain, backend, state_path.read_text()


def _small(context: BenchContext, tail: int) -> tuple[Path, _Backend]:
    from otel_route_shadow.logstore import Checkpointer

    directory = context.cfg.workdir / "audit" / "small"
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    chain = directory / "chain.jsonl"
    context.chains.large()  # the templates
    write_chain(chain, context.chains.templates, tail)
    backend = _Backend()
    checkpointer = Checkpointer(str(chain), ORIGIN, None, max_bytes=1 << 40)
    checkpointer.add_listener(backend.add)
    checkpointer.checkpoint()
    return chain, backend


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    n = cfg.chain_records
    tail = min(TAIL, n // 10)
    row = Row(
        id="7",
        title="audit: the last records of a large chain vs a chain of only those",
        measured=f"audit of the last {tail:,} of {n:,} records (--state trusts the rest)",
        unit="s",
        baseline_label=f"audit of a {tail:,}-record chain",
        ratio_label="of the small chain's",
        target=Target("<=", 2.0),
    )
    try:
        from otel_route_shadow.backend.audit import AuditOptions, audit_chain
        from otel_route_shadow.backend.trust import TrustState
    except ImportError as exc:
        return [unavailable(row, f"backend or tlog not importable: {exc}")]
    try:
        large, large_witness, state_text = _large(context, tail)
        small, small_witness = _small(context, tail)
        state_path = large.parent / "state.json"
        seen: dict[str, Any] = {}

        def audit_large() -> None:
            report = audit_chain(
                str(large), large_witness, AuditOptions(origin=ORIGIN, state=TrustState(state_path))
            )
            seen["large"] = report

        def audit_small() -> None:
            seen["small"] = audit_chain(str(small), small_witness, AuditOptions(origin=ORIGIN))

        def run_large() -> float:
            state_path.write_text(state_text)  # untimed: every run starts from the same trusted point
            return timed(audit_large)

        big_times: list[float] = []
        small_times: list[float] = []
        run_large()
        timed(audit_small)  # one untimed round each
        for i in range(cfg.runs):
            pair = (
                (run_large, lambda: timed(audit_small))
                if i % 2 == 0
                else (lambda: timed(audit_small), run_large)
            )
            first, second = pair[0](), pair[1]()
            big, little = (first, second) if i % 2 == 0 else (second, first)
            big_times.append(big)
            small_times.append(little)
        big_report, small_report = seen["large"], seen["small"]
        for name, report in (("large", big_report), ("small", small_report)):
            if report.verdict.value != "agree" or report.witnessed_size != report.chain_size:
                raise RuntimeError(f"the {name} audit did not agree: {report.summary_line()}")
        if big_report.trusted_from != n - tail:
            raise RuntimeError(
                f"the large audit was not incremental (trusted_from {big_report.trusted_from})"
            )
        row.ours, row.baseline, row.runs = Stats.of(big_times), Stats.of(small_times), cfg.runs
        row.ratio = ratios(big_times, small_times)
        row.extras["records_read_large"] = big_report.spans.seam_records + big_report.spans.other_records
        row.extras["records_read_small"] = small_report.spans.seam_records + small_report.spans.other_records
        row.notes.append(
            "in process: audit_chain(), in-memory backend of the checkpoint spans; state restored per run"
        )
    except Exception as exc:
        return [errored(row, exc)]
    return [row.judge()]
