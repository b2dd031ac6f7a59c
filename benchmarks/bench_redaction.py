"""Row 2e: ``redact_text`` on hostile input against clean text of the same length.

The redactor runs on host data in the instrumented host's call path, so its cost must stay linear in the
length of the text whatever the text holds. Each run times ``redact_text`` on every hostile input below
(1 MB each, the shapes of the audit that cost the most, before or after the JWT branch was made linear)
and keeps the slowest; the baseline is ``redact_text`` on clean text of the same length that is full of
candidate positions (short words starting with "e", "s", "t", "p", "a", "c"), timed in the same run.

A superlinear branch shows as a ratio in the hundreds at this size: ``"-" + "eyJ" * n`` took 3.5 s at
100 KB and four times that at 200 KB before. Linear work still differs in its constant: input dense in
matches pays a step of the Python loop per replacement ("token: " repeated is a replacement every 7
characters), which is why the target is 4x and not the 3x a scan alone would meet (see
``docs/benchmarks.md``, 2e).
"""

from __future__ import annotations

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, paired, ratios, timed
from otel_route_shadow.core import redact_text

_CLEAN_WORDS = "see the set of easy tests, each step passes a tiny test; cache stats are ten seconds apart. "

HOSTILE: dict[str, tuple[str, str, str]] = {
    # name: (head, unit repeated to the size, tail)
    "token: * n": ("", "token: ", ""),
    'token="* n': ("", 'token="', ""),
    "glued sk- keys": (" ", "sk-a1B2c3D4e5a1B2c3D4e5", ""),
    '"-" + eyJ * n': ("-", "eyJ", ""),
    "eyJ * n + .payload.": ("-", "eyJ", ".bbbbbbbbbb."),
    "sk-eyJ * n": ("-", "sk-eyJ", ""),
    "AKIA..eyJ in a JWT header": ("-eyJ", "AKIAABCDEFGHIJKLMNOPeyJ", ""),
    "eyJsk-AKIAghp_ * n": ("", "eyJsk-AKIAghp_", ""),
    "ghp_ + a * n": ("ghp_", "a", ""),
}
"""The hostile inputs: the audit's slowest at 1 MB (match-dense pairs, glued keys) and the shapes that
were superlinear before (every "eyJ" of a long base64url run scanned the run to its end)."""


def build(head: str, unit: str, tail: str, size: int) -> str:
    """``head + unit * n + tail``, ``size`` characters or a unit fewer."""
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def clean_text(size: int) -> str:
    return (_CLEAN_WORDS * (size // len(_CLEAN_WORDS) + 1))[:size]


def rows(cfg: BenchConfig, context: BenchContext | None = None) -> list[Row]:
    if context is not None and not context.wants("2e"):
        return []
    size = 100_000 if cfg.quick else 1_000_000
    row = Row(
        id="2e",
        title="redaction on hostile input",
        measured=f"redact_text, slowest of {len(HOSTILE)} hostile {size / 1e6:g} MB inputs",
        unit="ms",
        baseline_label="clean text, same length",
        ratio_label="x of clean",
        target=Target("<=", 4.0),
    )
    try:
        clean = clean_text(size)
        if redact_text(clean)[1] != 0:
            raise RuntimeError("the clean text has a credential-shaped substring")
        hostile = {name: build(*parts, size) for name, parts in HOSTILE.items()}
        per_input: dict[str, list[float]] = {name: [] for name in hostile}

        def slowest() -> float:
            worst = 0.0
            for name, text in hostile.items():
                milliseconds = _ms(text)
                per_input[name].append(milliseconds)
                worst = max(worst, milliseconds)
            return worst

        runs = cfg.runs
        ours, base = paired(slowest, lambda: _ms(clean), runs)
        row.ours, row.baseline, row.ratio, row.runs = Stats.of(ours), Stats.of(base), ratios(ours, base), runs
        row.extras["bytes"] = size
        row.extras["per_input_ms"] = {
            name: round(Stats.of(values).median, 2) for name, values in per_input.items()
        }
        slowest_name = max(per_input, key=lambda name: Stats.of(per_input[name]).median)
        row.notes.append(f"slowest input: {slowest_name}; each input's median in extras")
    except Exception as exc:
        return [errored(row, exc)]
    return [row.judge()]


def _ms(text: str) -> float:
    """Milliseconds of one ``redact_text(text)``."""
    return timed(lambda: redact_text(text)) * 1e3
