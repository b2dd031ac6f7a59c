"""Terminal figures: percentages and aligned columns, as every text report of the command prints them."""

from __future__ import annotations

import html
from collections.abc import Sequence

from otel_route_shadow.core import printable

__all__ = ["aligned", "duration", "html_text", "pct"]


def pct(value: float | None) -> str:
    """A rate in [0, 1] as ``12.5%``; ``-`` when there was nothing to divide."""
    return "-" if value is None else f"{value * 100:.1f}%"


def aligned(headers: Sequence[str], rows: Sequence[Sequence[str]], mark: str) -> list[str]:
    """Aligned columns, each line opened by ``mark``: the first and the last (text) to the left, the
    figures between to the right."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    last = len(headers) - 1

    def align(i: int, cell: str) -> str:
        return cell.rjust(widths[i]) if 0 < i < last else cell.ljust(widths[i])

    lines = [mark + " " + "  ".join(align(i, h) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append(mark + " " + "  ".join(align(i, cell) for i, cell in enumerate(row)).rstrip())
    return lines


def duration(ns: int) -> str:
    """A duration as people say it: ``45 s``, ``12 min``, ``3 h 5 min``, ``4 d 2 h``."""
    seconds = ns // 1_000_000_000
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours < 1:
        return f"{minutes} min"
    if days < 1:
        return f"{hours} h {minutes % 60} min" if minutes % 60 else f"{hours} h"
    return f"{days} d {hours % 24} h" if hours % 24 else f"{days} d"


def html_text(text: str) -> str:
    """``html.escape`` of :func:`printable`: in the HTML report too, a value's control or bidi
    characters are shown as their escapes (an override reversed the text around it)."""
    return html.escape(printable(text))
