"""Rows, paired timing, the table and the JSON: everything the targets share.

A row compares *our* figure with a *baseline* measured in the same process, in the same run, with the
runs interleaved (ours, baseline, baseline, ours, ...) so that drift on a shared machine hits both
sides alike. Each side's figure is the median of its runs, with min and max; the ratio is the median
of the per-run ratios (each taken from a back-to-back pair), with their min and max.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_ROOT = Path(__file__).resolve().parent.parent

PASS, FAIL, REPORTED, NOT_AVAILABLE, ERROR = "pass", "FAIL", "reported", "not available", "error"
AT_THE_LINE = "at the line"
"""The status of a row whose spread (the middle half of its runs) holds its target: one run says pass,
the next fail. Its notes say which side the median fell on."""
SPREAD_MIN_RUNS = 4
"""Runs a figure needs before its spread is judged (fewer: the median alone decides)."""

ROW_KEYS = (
    "id",
    "title",
    "measured",
    "unit",
    "ours",
    "baseline_label",
    "baseline",
    "ratio_label",
    "ratio",
    "target",
    "status",
    "runs",
    "notes",
    "extras",
)
"""Every row in the JSON carries exactly these keys (the smoke test checks them)."""


@dataclass(frozen=True)
class Stats:
    median: float
    min: float
    max: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        return cls(statistics.median(values), min(values), max(values), tuple(values))

    def spread(self) -> tuple[float, float] | None:
        """The first and third quartiles of the runs, or None with fewer than ``SPREAD_MIN_RUNS``."""
        if len(self.values) < SPREAD_MIN_RUNS:
            return None
        q1, _, q3 = statistics.quantiles(self.values, n=4)
        return q1, q3

    def as_dict(self) -> dict[str, Any]:
        spread = self.spread()
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "quartiles": None if spread is None else list(spread),
            "values": list(self.values),
        }


@dataclass(frozen=True)
class Target:
    """``op`` is one of ``<=``, ``>=``, ``>``; it applies to the ratio unless ``on`` says ``ours``."""

    op: str
    value: float
    on: str = "ratio"
    unit: str = "x"

    def met(self, ratio: float | None, ours: float | None) -> bool:
        subject = ours if self.on == "ours" else ratio
        if subject is None:
            return False
        if self.op == "<=":
            return subject <= self.value
        if self.op == ">=":
            return subject >= self.value
        if self.op == ">":
            return subject > self.value
        raise ValueError(self.op)

    def text(self) -> str:
        return (
            f"{self.op} {self.value:g}{self.unit}"
            if self.on == "ratio"
            else f"{self.op} {self.value:g} {self.unit}"
        )


@dataclass
class Row:
    id: str
    title: str
    measured: str
    unit: str
    ours: Stats | None = None
    baseline_label: str = ""
    baseline: Stats | None = None
    ratio_label: str = ""
    ratio: Stats | None = None
    target: Target | None = None
    status: str = REPORTED
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    def judge(self) -> Row:
        if self.status in (NOT_AVAILABLE, ERROR):
            return self
        if self.target is None:
            self.status = REPORTED
        else:
            ratio = self.ratio.median if self.ratio is not None else None
            ours = self.ours.median if self.ours is not None else None
            self.status = PASS if self.target.met(ratio, ours) else FAIL
            judged = self.ours if self.target.on == "ours" else self.ratio
            spread = judged.spread() if judged is not None else None
            if spread is not None and spread[0] <= self.target.value <= spread[1]:
                self.notes.append(
                    f"at the line: the middle half of {len(judged.values)} runs "  # type: ignore[union-attr]
                    f"({spread[0]:.3g}-{spread[1]:.3g}) holds the target {self.target.text()}; "
                    f"the median alone says {self.status}"
                )
                self.status = AT_THE_LINE
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "measured": self.measured,
            "unit": self.unit,
            "ours": self.ours.as_dict() if self.ours else None,
            "baseline_label": self.baseline_label,
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "ratio_label": self.ratio_label,
            "ratio": self.ratio.as_dict() if self.ratio else None,
            "target": self.target.text() if self.target else None,
            "status": self.status,
            "runs": self.runs,
            "notes": list(self.notes),
            "extras": dict(self.extras),
        }


def unavailable(row: Row, why: str) -> Row:
    """A row whose measured part has not landed (or cannot run here): said so, never faked."""
    row.status = NOT_AVAILABLE
    row.notes.append(why)
    return row


def errored(row: Row, exc: BaseException) -> Row:
    row.status = ERROR
    row.notes.append(f"{type(exc).__name__}: {exc}")
    row.extras["traceback"] = traceback.format_exc(limit=8)
    return row


# -- timing -----------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    """Wall-clock seconds of one call, after a full collection so no run pays for the previous one's
    garbage. The collector stays enabled during the call: the code under test runs as it would."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired(
    ours: Callable[[], float], baseline: Callable[[], float], runs: int
) -> tuple[list[float], list[float]]:
    """``runs`` measurements of each, interleaved ABBA so neither side always goes first."""
    a: list[float] = []
    b: list[float] = []
    for run in range(runs):
        if run % 2 == 0:
            a.append(ours())
            b.append(baseline())
        else:
            b.append(baseline())
            a.append(ours())
    return a, b


def interleaved(sides: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """``runs`` measurements of every side, the order rotated each run (for three or more sides)."""
    names = list(sides)
    out: dict[str, list[float]] = {name: [] for name in names}
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            out[name].append(sides[name]())
    return out


def ratios(numerators: list[float], denominators: list[float]) -> Stats:
    return Stats.of([n / d for n, d in zip(numerators, denominators, strict=True) if d > 0])


# -- machine, formatting ----------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_mb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_mb = int(line.split()[1]) // 1024
    except OSError:
        pass
    try:
        import orjson

        orjson_version = orjson.__version__
    except ImportError:  # pragma: no cover
        orjson_version = None
    try:
        from importlib.metadata import version

        otel_sdk = version("opentelemetry-sdk")
    except Exception:  # pragma: no cover
        otel_sdk = None
    return {
        "cpu": model or platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_mb": mem_mb,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "orjson": orjson_version,
        "opentelemetry_sdk": otel_sdk,
        "loadavg": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def fmt_stats(stats: Stats | None, unit: str = "") -> str:
    if stats is None:
        return "-"
    suffix = f" {unit}" if unit else ""
    return f"{fmt(stats.median)}{suffix} [{fmt(stats.min)}-{fmt(stats.max)}]"


def fmt_ratio(stats: Stats | None) -> str:
    if stats is None:
        return "-"
    return f"{stats.median:.2f}x [{stats.min:.2f}-{stats.max:.2f}]"


TABLE_HEADERS = (
    "#",
    "measured",
    "ours (median [min-max])",
    "baseline (median [min-max])",
    "ratio",
    "target",
    "result",
)


def table_rows(rows: list[Row]) -> list[tuple[str, ...]]:
    out = []
    for row in rows:
        baseline = "-"
        if row.baseline is not None:
            baseline = f"{fmt_stats(row.baseline, row.unit)} {row.baseline_label}".strip()
        elif row.baseline_label:
            baseline = row.baseline_label
        ratio = fmt_ratio(row.ratio)
        if row.ratio is not None and row.ratio_label:
            ratio = f"{ratio} {row.ratio_label}"
        out.append(
            (
                row.id,
                row.measured,
                fmt_stats(row.ours, row.unit),
                baseline,
                ratio,
                row.target.text() if row.target else "(reported)",
                row.status,
            )
        )
    return out


def render_table(rows: list[Row], markdown: bool = False) -> str:
    body = table_rows(rows)
    if markdown:
        lines = ["| " + " | ".join(TABLE_HEADERS) + " |", "|" + "---|" * len(TABLE_HEADERS)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [
        max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(TABLE_HEADERS)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(TABLE_HEADERS, widths, strict=True))
    lines = [line, "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) for cells in body]
    return "\n".join(lines)
