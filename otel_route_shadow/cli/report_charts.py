"""The HTML report's two charts, as inline SVG (no script, nothing fetched): divergence by mechanism
(stacked bars, with an HTML legend that wraps and so is never cut off) and agreement over time (a line
over spawn-volume bars, on a time axis whose buckets follow the window). Details are SVG ``<title>``
tooltips. Every value from the chain is escaped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Final

from otel_route_shadow.analysis import SERVED_DIFFERS, UNSPECIFIED, Tally, TimelinePoint, rate, width_label
from otel_route_shadow.cli.text_table import html_text, pct
from otel_route_shadow.core import REQUIREMENT_DEFIED

__all__ = [
    "AGREED_COLOR",
    "code_colors",
    "divergence_chart",
    "legend",
    "moment_label",
    "tick_label",
    "timeline_chart",
]

AGREED_COLOR: Final = "#4c9a5f"
KNOWN_COLORS: Final = {
    "provider-differs": "#c8553d",
    "policy-held": "#e0a030",
    "policy-rejected": "#7b5ea7",
    REQUIREMENT_DEFIED: "#b03a7a",
    SERVED_DIFFERS: "#3d7ec8",
    "model-differs": "#2a9d8f",
    "account-differs": "#8c6d31",
    UNSPECIFIED: "#8c8c8c",
}
"""One colour per divergence code an exporter writes, the same in every report."""
SPARE_COLORS: Final = ("#d46a9f", "#5e9fd4", "#a0a03c", "#6b4c9a", "#c97b3a", "#3c8c6b", "#9a9a50")
VOLUME_COLOR: Final = "#d7e2ee"
CHAR_W: Final = 6.6
"""The width of one character of the charts' 11px text, for sizing (an upper estimate)."""


def code_colors(codes: Iterable[str]) -> dict[str, str]:
    """A colour for every code: its own when known, else a spare one not in use (cycled when more
    unknown codes exist than spare colours; the legend still names each)."""
    colors: dict[str, str] = {}
    spare = 0
    for code in codes:
        if code in KNOWN_COLORS:
            colors[code] = KNOWN_COLORS[code]
        else:
            colors[code] = SPARE_COLORS[spare % len(SPARE_COLORS)]
            spare += 1
    return colors


def legend(entries: Sequence[tuple[str, str]], label: str) -> str:
    """An HTML legend: one swatch and name per entry, wrapping onto as many lines as it needs."""
    items = "".join(
        f'<li><span class="swatch" style="background:{color}"></span>{html_text(name)}</li>'
        for name, color in entries
    )
    return f'<ul class="legend" aria-label="{html_text(label)}">{items}</ul>'


def divergence_chart(
    rows: Sequence[tuple[str, Tally]], codes: Sequence[str], colors: dict[str, str], *, width: int = 960
) -> str:
    """Horizontal stacked bars per mechanism: agreed, then each divergence code in ``codes`` order."""
    if not rows:
        return '<p class="muted">no spawns</p>'
    bar_h, gap = 20, 8
    names = [name if len(name) <= 24 else name[:23] + "…" for name, _ in rows]
    left = int(max(len(n) for n in names) * CHAR_W) + 14
    right = int(len("100.0% diverged") * CHAR_W) + 12
    height = len(rows) * (bar_h + gap) + gap
    plot = width - left - right
    biggest = max(t.spawns for _, t in rows) or 1
    parts = [
        f'<svg class="chart" role="img" aria-label="divergence by mechanism" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">'
    ]
    for i, ((name, tally), shown) in enumerate(zip(rows, names, strict=True)):
        y = gap + i * (bar_h + gap)
        parts.append(
            f'<text x="{left - 8}" y="{y + 14}" text-anchor="end"><title>{html_text(name)}</title>'
            f"{html_text(shown)}</text>"
        )
        cursor = float(left)
        segments = [("agreed", tally.agreed, AGREED_COLOR)]
        segments += [(code, tally.divergences.get(code, 0), colors[code]) for code in codes]
        for segment, count, color in segments:
            if not count:
                continue
            w = plot * count / biggest
            parts.append(
                f'<rect x="{cursor:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bar_h}" fill="{color}">'
                f"<title>{html_text(name)}: {html_text(segment)} {count} of {tally.spawns} "
                f"({pct(rate(count, tally.spawns))})</title></rect>"
            )
            cursor += w
        parts.append(
            f'<text x="{cursor + 6:.1f}" y="{y + 14}">{pct(rate(tally.diverged, tally.spawns))} diverged</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def moment_label(ns: int) -> str:
    """A moment to the millisecond, UTC: ``2026-09-01 14:03:07.250``."""
    return (
        f"{datetime.fromtimestamp(ns // 1_000_000_000, UTC):%Y-%m-%d %H:%M:%S}.{ns // 1_000_000 % 1000:03d}"
    )


def tick_label(ns: int, width_ns: int, span_ns: int) -> str:
    """A bucket start as precise as its width needs: milliseconds, seconds, minutes or days (UTC)."""
    moment = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    if width_ns < 1_000_000_000:
        return f"{moment:%H:%M:%S}.{ns // 1_000_000 % 1000:03d}"
    if width_ns < 60 * 1_000_000_000:
        return f"{moment:%H:%M:%S}"
    if width_ns < 86_400 * 1_000_000_000:
        return f"{moment:%m-%d %H:%M}" if span_ns >= 86_400 * 1_000_000_000 else f"{moment:%H:%M}"
    return f"{moment:%Y-%m-%d}"


def timeline_chart(points: Sequence[TimelinePoint], width_ns: int, *, width: int = 960) -> str:
    """Agreement rate per bucket (line, left axis 0-100%) over spawn volume (bars), on a time axis:
    an empty bucket is a gap, not a step."""
    if not points:
        return '<p class="muted">no timestamps</p>'
    height, left, right, top, bottom = 240, 44, 16, 30, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    first = points[0].start_ns // width_ns
    slots = points[-1].start_ns // width_ns - first + 1
    step = plot_w / slots
    most = max(p.spawns for p in points) or 1
    bucket = width_label(width_ns)
    parts = [
        f'<svg class="chart" role="img" aria-label="agreement over time" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - frac)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{int(frac * 100)}%</text>')
    coords: list[tuple[int, float, float, TimelinePoint, float]] = []
    for p in points:
        slot = p.start_ns // width_ns - first
        x = left + step * (slot + 0.5)
        bar_h = plot_h * p.spawns / most * 0.9
        when = html_text(p.as_dict()["start"])
        parts.append(
            f'<rect x="{x - step * 0.4:.1f}" y="{top + plot_h - bar_h:.1f}" width="{max(step * 0.8, 1.0):.1f}" '
            f'height="{bar_h:.1f}" fill="{VOLUME_COLOR}"><title>{when} (+{bucket}): {p.spawns} spawns'
            "</title></rect>"
        )
        agreement = rate(p.agreed, p.spawns) or 0.0
        coords.append((slot, x, top + plot_h * (1 - agreement), p, agreement))
    for run in _runs(coords):
        if len(run) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for _, x, y, _, _ in run)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{AGREED_COLOR}" stroke-width="2"/>')
    for _slot, x, y, p, agreement in coords:
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{AGREED_COLOR}"><title>'
            f"{html_text(p.as_dict()['start'])} (+{bucket}): agreement {pct(agreement)}, "
            f"{p.agreed} of {p.spawns}</title></circle>"
        )
    parts.extend(_ticks(first, slots, step, left, height, width_ns))
    parts.append(
        f'<line x1="{left}" y1="12" x2="{left + 18}" y2="12" stroke="{AGREED_COLOR}" stroke-width="2"/>'
        f'<text x="{left + 24}" y="16">agreement rate</text>'
        f'<rect x="{left + 130}" y="6" width="12" height="12" fill="{VOLUME_COLOR}"/>'
        f'<text x="{left + 148}" y="16">spawns per {bucket} (tallest bar: {most})</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _runs(
    coords: list[tuple[int, float, float, TimelinePoint, float]],
) -> list[list[tuple[int, float, float, TimelinePoint, float]]]:
    """Consecutive buckets, split at empty ones (a line never bridges a bucket without spawns)."""
    runs: list[list[tuple[int, float, float, TimelinePoint, float]]] = []
    for item in coords:
        if runs and item[0] == runs[-1][-1][0] + 1:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _ticks(first: int, slots: int, step: float, left: int, height: int, width_ns: int) -> list[str]:
    span = slots * width_ns
    chosen = sorted({0, slots // 4, slots // 2, (3 * slots) // 4, slots - 1}) if slots > 1 else [0]
    out = []
    for i in chosen:
        x = left + step * (i + 0.5)
        anchor = "start" if i == 0 and slots > 1 else ("end" if i == slots - 1 and slots > 1 else "middle")
        if anchor == "start":
            x = left
        elif anchor == "end":
            x = left + step * slots
        out.append(
            f'<line x1="{left + step * (i + 0.5):.1f}" y1="{height - 34}" x2="{left + step * (i + 0.5):.1f}" '
            f'y2="{height - 30}" stroke="#999"/>'
            f'<text x="{x:.1f}" y="{height - 16}" text-anchor="{anchor}">'
            f"{html_text(tick_label((first + i) * width_ns, width_ns, span))}</text>"
        )
    return out
