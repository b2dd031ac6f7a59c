"""State shared between row groups in one run: the large chain, generated (or reused) once."""

from __future__ import annotations

from typing import Any

from benchmarks.config import BenchConfig


class BenchContext:
    def __init__(self, cfg: BenchConfig, only: set[str] | None = None) -> None:
        self.cfg = cfg
        self.only = only
        self._chains: Any = None

    def wants(self, row_id: str) -> bool:
        """Whether ``--only`` selected this row (or its group)."""
        return self.only is None or row_id in self.only

    @property
    def chains(self) -> Any:
        """The :class:`benchmarks.chainfile.ChainSet` (imports the chain package on first use)."""
        if self._chains is None:
            from benchmarks.chainfile import ChainSet

            self._chains = ChainSet(self.cfg.workdir, self.cfg.chain_records, self.cfg.distinct_contexts)
        return self._chains

    def describe(self) -> dict[str, Any]:
        chains = self._chains
        if chains is None or chains.path is None:
            return {"large": None}
        return {
            "large": str(chains.path),
            "records": chains.records,
            "bytes": chains.path.stat().st_size if chains.path.exists() else None,
            "distinct_contexts": len(chains.templates),
            "reused_from_cache": chains.reused,
            "generated_seconds": chains.generated_s,
            "head_hash": chains.head_hash,
        }
