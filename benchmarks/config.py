"""Sizes and run counts for the full and the quick (smoke) mode."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import RESULTS_DIR


@dataclass(frozen=True)
class BenchConfig:
    quick: bool
    runs: int
    """Runs per side for the cheap rows; each figure is the median of these."""
    slow_runs: int
    """Runs per side for the rows that read a whole large chain."""
    seam_calls: int
    """Seam calls (and bare spans) per run: long enough that each run carries its share of the
    periodic costs (the batch processor's export every 512 spans, garbage collection, the store
    re-check every 100 ms), so a run's mean is the per-call cost."""
    seam_runs: int
    """Paired runs per side for the seam row; the figure is the median of the per-pair ratios."""
    tail_calls: int
    """Single timed seam calls per side and round in rows 1c and 1d."""
    tail_rounds: int
    """Rounds of rows 1c and 1d (the two sides take turns)."""
    batch_contexts: int
    batch_policies: int
    explain_policies: int
    explain_contexts: int
    chain_records: int
    """Records in the large chain (verify, append-to-large, report/whatif)."""
    append_calls: int
    fsync_records: int
    fsync_appenders: int
    distinct_contexts: int
    """Distinct route contexts behind the chain's payloads (repeated to fill the chain)."""
    policy_save_small: int
    policy_save_large: int
    """``policy save`` sizes (rows 6a, 6b): the issue's 8,000 and ten times that."""
    policy_check: int
    """Policies validated in rows 6d and 6e."""
    policy_stall: int
    """Policies in the snapshot read, indexed and saved while row 8f's ticker runs."""
    workdir: Path

    @classmethod
    def full(cls, workdir: Path = RESULTS_DIR / "work") -> BenchConfig:
        return cls(
            quick=False,
            runs=7,
            slow_runs=3,
            seam_calls=2000,
            seam_runs=15,
            tail_calls=5000,
            tail_rounds=8,
            batch_contexts=10_000,
            batch_policies=1_000,
            explain_policies=100,
            explain_contexts=2000,
            chain_records=1_000_000,
            append_calls=2000,
            fsync_records=400,
            fsync_appenders=8,
            distinct_contexts=400,
            policy_save_small=8_000,
            policy_save_large=80_000,
            policy_check=8_000,
            policy_stall=50_000,
            workdir=workdir,
        )

    @classmethod
    def smoke(cls, workdir: Path = RESULTS_DIR / "work-quick") -> BenchConfig:
        return cls(
            quick=True,
            runs=3,
            slow_runs=3,
            seam_calls=100,
            seam_runs=3,
            tail_calls=150,
            tail_rounds=2,
            batch_contexts=300,
            batch_policies=100,
            explain_policies=100,
            explain_contexts=100,
            chain_records=3_000,
            append_calls=100,
            fsync_records=40,
            fsync_appenders=8,
            distinct_contexts=60,
            policy_save_small=200,
            policy_save_large=2_000,
            policy_check=300,
            policy_stall=500,
            workdir=workdir,
        )
