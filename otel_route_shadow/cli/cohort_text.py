"""The defensible figures in text and HTML: Wilson 95% intervals as ``low-high%``, and the cohort
table (per legacy mechanism and route: consistency, p99 latency, shadow-path errors)."""

from __future__ import annotations

from otel_route_shadow.analysis import (
    COHORT_DEFINITION,
    ERROR_NOTE,
    LATENCY_NOTE,
    Report,
    interval,
    label,
    rate,
)
from otel_route_shadow.cli.text_table import aligned, html_text, pct

__all__ = ["ci_text", "cohort_html", "cohort_lines"]

_HEADERS = (
    "mechanism",
    "provider",
    "model",
    "transport",
    "spawns",
    "consistent%",
    "95% CI",
    "p99 latency",
    "untimed",
    "shadow errors",
    "error%",
    "error 95% CI",
)


def ci_text(part: int, whole: int) -> str:
    """The Wilson 95% interval of ``part / whole`` as ``low-high%`` (``-`` when nothing to divide)."""
    found = interval(part, whole)
    return "-" if found is None else f"{found[0] * 100:.1f}-{found[1] * 100:.1f}%"


def _latency_text(p99_ms: float | None) -> str:
    """The p99 in milliseconds, ``unknown`` when no spawn of the cohort has a duration."""
    return "unknown" if p99_ms is None else f"{p99_ms:.3f} ms"


def _rows(report: Report) -> list[list[str]]:
    rows = []
    for key, cohort in report.cohorts:
        observed = cohort.spawns + cohort.errors
        rows.append(
            [
                *(label(value) for value in key),
                str(cohort.spawns),
                pct(rate(cohort.agreed, cohort.spawns)),
                ci_text(cohort.agreed, cohort.spawns),
                _latency_text(cohort.p99_ms),
                str(cohort.latency.unknown),
                str(cohort.errors),
                pct(rate(cohort.errors, observed)),
                ci_text(cohort.errors, observed),
            ]
        )
    return rows


def cohort_lines(report: Report, mark: str, top: int = 3) -> list[str]:
    """The cohort section of the text report."""
    if not report.cohorts:
        return []
    return [
        f"cohorts ({COHORT_DEFINITION}):",
        *aligned(_HEADERS, _rows(report), mark),
        f"  p99 latency: {LATENCY_NOTE}",
        f"  shadow errors: {ERROR_NOTE}",
    ]


def cohort_html(report: Report) -> str:
    """The cohort table of the HTML report (every value escaped)."""
    if not report.cohorts:
        return ""
    head = "".join(f"<th>{html_text(name)}</th>" for name in _HEADERS)
    body = "".join(
        "<tr>" + "".join(f'<td class="key">{html_text(cell)}</td>' for cell in row) + "</tr>"
        for row in _rows(report)
    )
    return (
        f'<h2 id="cohorts">Cohorts: consistency, latency and errors</h2><p class="muted">'
        f"{html_text(COHORT_DEFINITION)}. p99 latency: {html_text(LATENCY_NOTE)}. Shadow errors: {html_text(ERROR_NOTE)}.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
