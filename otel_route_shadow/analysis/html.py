"""The HTML divergence report: one self-contained file, readable offline.

No script, no stylesheet link, no image source, no font: styles are inline in one ``<style>`` block
and the charts are inline SVG generated here. Every value from the chain is HTML-escaped; chart
details live in SVG ``<title>`` elements (hover tooltips without JavaScript).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Final

from otel_route_shadow.analysis.gaps import GapTally
from otel_route_shadow.analysis.groups import key_label, label
from otel_route_shadow.analysis.report import BYPASS_DEFINITION, NO_STORE_NOTE, Report
from otel_route_shadow.analysis.tally import Tally, rate, sorted_counts, top_counts
from otel_route_shadow.analysis.timeline import TimelinePoint
from otel_route_shadow.core.shadow import REQUIREMENT_DEFIED
from otel_route_shadow.version import __version__

__all__ = ["divergence_chart", "render_html", "timeline_chart"]

AGREED_COLOR: Final = "#4c9a5f"
PALETTE: Final = ("#c8553d", "#e0a030", "#7b5ea7", "#3d7ec8", "#8c8c8c", "#b03a7a", "#2a9d8f")

_CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem;color:#222;max-width:72rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}
.flag{background:#fde2e1;border:2px solid #c8553d;padding:.75rem;font-weight:bold;color:#8b1d12}
.uv{color:#c8553d;font-weight:bold}.muted{color:#666;font-size:.85rem}
.kpi{display:inline-block;margin:0 1.5rem 1rem 0}.kpi b{display:block;font-size:1.6rem}
svg text{font-family:inherit;font-size:11px}
"""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _mark(report: Report) -> str:
    return ' <span class="uv" title="the chain did not verify">[UNVERIFIED]</span>' if report.flagged else ""


def divergence_chart(rows: Sequence[tuple[str, Tally]], *, width: int = 720) -> str:
    """Horizontal stacked bars per mechanism: agreed, then each divergence code."""
    if not rows:
        return '<p class="muted">no spawns</p>'
    codes = [code for code, _ in sorted_counts({c: n for _, t in rows for c, n in t.divergences.items()})]
    colors = {code: PALETTE[i % len(PALETTE)] for i, code in enumerate(codes)}
    bar_h, gap, left, right = 22, 8, 170, 120
    legend_h = 24
    height = legend_h + len(rows) * (bar_h + gap) + 10
    plot = width - left - right
    biggest = max(t.spawns for _, t in rows) or 1
    parts = [
        f'<svg role="img" aria-label="divergence by mechanism" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    x = left
    for name, color in [("agreed", AGREED_COLOR), *((c, colors[c]) for c in codes)]:
        parts.append(f'<rect x="{x}" y="4" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{x + 16}" y="14">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    for i, (name, tally) in enumerate(rows):
        y = legend_h + i * (bar_h + gap)
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{escape(name[:28])}</text>')
        cursor = float(left)
        segments = [("agreed", tally.agreed, AGREED_COLOR)]
        segments += [(c, tally.divergences.get(c, 0), colors[c]) for c in codes]
        for seg_name, count, color in segments:
            if not count:
                continue
            w = plot * count / biggest
            parts.append(
                f'<rect x="{cursor:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bar_h}" fill="{color}">'
                f"<title>{escape(name)}: {escape(seg_name)} {count} of {tally.spawns} "
                f"({_pct(rate(count, tally.spawns))})</title></rect>"
            )
            cursor += w
        parts.append(
            f'<text x="{cursor + 6:.1f}" y="{y + 15}">{_pct(rate(tally.diverged, tally.spawns))} diverged</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def timeline_chart(points: Sequence[TimelinePoint], bucket_hours: int, *, width: int = 720) -> str:
    """Agreement rate per bucket (line, left axis 0-100%) over spawn volume (bars)."""
    if not points:
        return '<p class="muted">no timestamps</p>'
    height, left, right, top, bottom = 250, 48, 16, 24, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(points)
    step = plot_w / n
    most = max(p.spawns for p in points) or 1
    parts = [
        f'<svg role="img" aria-label="agreement over time" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - frac)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{int(frac * 100)}%</text>')
    coords = []
    for i, p in enumerate(points):
        x = left + step * i
        bar_h = plot_h * p.spawns / most * 0.9
        parts.append(
            f'<rect x="{x + step * 0.1:.1f}" y="{top + plot_h - bar_h:.1f}" width="{step * 0.8:.1f}" '
            f'height="{bar_h:.1f}" fill="#dde6f0"><title>{escape(p.as_dict()["start"])}: {p.spawns} spawns'
            "</title></rect>"
        )
        agreement = rate(p.agreed, p.spawns) or 0.0
        coords.append((x + step / 2, top + plot_h * (1 - agreement), p, agreement))
    if len(coords) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in coords)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{AGREED_COLOR}" stroke-width="2"/>')
    for x, y, p, agreement in coords:
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{AGREED_COLOR}"><title>'
            f"{escape(p.as_dict()['start'])} (+{bucket_hours}h): agreement {_pct(agreement)}, "
            f"{p.agreed} of {p.spawns}</title></circle>"
        )
    for i in sorted({0, n // 2, n - 1}):
        x, anchor = left + step * i + step / 2, "middle"
        if i == 0:
            x, anchor = float(left), "start"
        elif i == n - 1:
            x, anchor = float(width - right), "end"
        parts.append(
            f'<text x="{x:.1f}" y="{height - 12}" text-anchor="{anchor}">'
            f"{escape(points[i].as_dict()['start'][:16].replace('T', ' '))}</text>"
        )
    parts.append(
        f'<line x1="{left}" y1="10" x2="{left + 18}" y2="10" stroke="{AGREED_COLOR}" stroke-width="2"/>'
        f'<text x="{left + 22}" y="14">agreement rate</text>'
        f'<rect x="{left + 130}" y="4" width="12" height="12" fill="#dde6f0"/>'
        f'<text x="{left + 146}" y="14">spawns per {bucket_hours}h (max {most})</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _counts_table(title: str, counts: dict[str, int], whole: int, mark: str) -> str:
    if not counts:
        return f"<p><b>{escape(title)}</b>: none</p>"
    rows = "".join(
        f"<tr><td>{escape(k)}</td><td>{v}</td><td>{_pct(rate(v, whole))}</td></tr>"
        for k, v in sorted_counts(counts)
    )
    return f"<table><caption>{escape(title)}{mark}</caption><tr><th>code</th><th>spawns</th><th>share</th></tr>{rows}</table>"


def _tally_table(first: str, rows: Sequence[tuple[str, Tally]], top: int, mark: str) -> str:
    head = (
        f"<tr><th>{escape(first)}</th><th>spawns</th><th>agreed</th><th>agreement</th><th>diverged</th>"
        "<th>divergence</th><th>managed</th><th>bypass</th><th>top divergences</th></tr>"
    )
    body = []
    for name, t in rows:
        tops = ", ".join(f"{escape(c)} {n}" for c, n in top_counts(t.divergences, top)) or "-"
        body.append(
            f"<tr><td>{escape(name)}{mark}</td><td>{t.spawns}</td><td>{t.agreed}</td>"
            f"<td>{_pct(rate(t.agreed, t.spawns))}</td><td>{t.diverged}</td><td>{_pct(rate(t.diverged, t.spawns))}</td>"
            f"<td>{_pct(rate(t.managed, t.spawns))}</td><td>{t.bypass}</td><td>{tops}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _findings_section(report: Report, mark: str) -> list[str]:
    """Findings and claim mismatches: in every report, never suppressed."""
    out = [f"<h2>Findings and claim mismatches{mark}</h2>"]
    if not report.findings_known:
        out.append("<p>unknown: no record carries the whole decision (an older chain)</p>")
        return out
    defied = report.findings.get(REQUIREMENT_DEFIED, 0)
    out.append(
        f"<p><b>requirement-defied</b>: {defied} of {report.total.spawns} spawns "
        f"({_pct(rate(defied, report.total.spawns))}) ran a legacy route that did not satisfy its "
        f"model requirement{mark}</p>"
    )
    out.append(_counts_table("findings", report.findings, report.total.spawns, mark))
    out.append(_counts_table("claim mismatches", report.claim_mismatches, report.total.spawns, mark))
    return out


def _gap_table(name: str, rows: Sequence[tuple[object, GapTally]], mark: str) -> str:
    head = (
        f"<tr><th>{escape(name)}</th><th>spawns</th><th>persistent</th><th>policy gap</th>"
        "<th>transient</th><th>unknown</th><th>readiness</th><th>why</th></tr>"
    )
    body = []
    for key, g in rows:
        verdict, why = g.verdict()
        body.append(
            f"<tr><td>{escape(label(key))}{mark}</td><td>{g.spawns}</td>"
            f"<td>{_pct(rate(g.persistent, g.spawns))}</td><td>{_pct(rate(g.gaps, g.spawns))}</td>"
            f"<td>{_pct(rate(g.transient, g.spawns))}</td><td>{g.unknown}</td>"
            f"<td>{escape(verdict)}</td><td>{escape(why)}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _gaps_section(report: Report, mark: str) -> list[str]:
    verdict, why = report.gap_total.verdict()
    out = [
        f"<h2>Policy gaps and transient mechanisms{mark}</h2>",
        '<p class="muted">persistent policy gaps: role dial, repo override; transient mechanisms: '
        "credit failover, fleet ratchet.</p>",
        f"<p>all spawns: <b>{escape(verdict)}</b>: {escape(why)}{mark}</p>",
    ]
    out.extend(_gap_table(name, rows, mark) for name, rows in report.gaps.items())
    return out


def _usage_section(report: Report, mark: str) -> list[str]:
    out = [f"<h2>Policy usage{mark}</h2>"]
    for table in report.usage:
        rows = "".join(
            f"<tr><td>{escape(use.policy_id)}{mark}</td><td>{use.decided}</td><td>{use.outranked}</td>"
            f"<td>{use.never_matched}</td><td>{'decided nothing' if use.idle else ''}</td></tr>"
            for use in table.policies
        )
        out.append(
            f"<table><caption>snapshot revision {table.revision} ({table.spawns} spawns replayed)</caption>"
            "<tr><th>policy</th><th>decided</th><th>outranked</th><th>never matched</th><th></th></tr>"
            f"{rows}</table>"
        )
    if not report.usage:
        for (revision, _digest), decided in report.decided.items():
            out.append(
                _counts_table(
                    f"decided, as recorded (revision {label(revision)})", decided, report.total.spawns, mark
                )
            )
        out.append(f'<p class="muted">{escape(NO_STORE_NOTE)}.</p>')
    return out


def render_html(report: Report, *, top: int = 3) -> str:
    """The whole report as one HTML document (a string; the caller writes it)."""
    mark = _mark(report)
    t = report.total
    win = report.window.describe()
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>route-shadow divergence report: {escape(report.chain.path)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Route-shadow divergence report</h1>",
    ]
    if report.flagged:
        out.append(
            '<p class="flag">UNVERIFIED CHAIN: every figure in this report is flagged. '
            f"{escape(report.chain.describe())}</p>"
        )
    out.append(
        f'<p class="muted">chain <code>{escape(report.chain.path)}</code>: {escape(report.chain.describe())}<br>'
        f"window: since {escape(win['since'] or '(start)')} until {escape(win['until'] or '(end)')}; "
        f"records read {report.records_read}, observations {report.observations}, skipped "
        f"{escape(', '.join(f'{k} {v}' for k, v in sorted_counts(report.skipped_kinds)) or 'none')}, "
        f"outside window {report.outside_window}, without a decision {report.without_decision}, "
        f"malformed {report.malformed}<br>otel-route-shadow {escape(__version__)}</p>"
    )
    if report.records.dropped.events:
        gap = escape(report.records.dropped.describe())
        out.append(f'<p class="flag">{gap}; every figure is over the recorded records only</p>')
    kpis = (
        ("spawns", str(t.spawns)),
        ("agreement", _pct(rate(t.agreed, t.spawns))),
        ("divergence", _pct(rate(t.diverged, t.spawns))),
        ("managed-policy decided", _pct(rate(t.managed, t.spawns))),
        ("bypass (direct-http)", _pct(rate(t.bypass, t.spawns))),
    )
    out.append("".join(f'<div class="kpi"><b>{v}</b>{escape(k)}{mark}</div>' for k, v in kpis))
    mechanisms = [(label(k), v) for k, v in report.mechanisms]
    out.append(f"<h2>Divergence by mechanism{mark}</h2>")
    out.append(divergence_chart(mechanisms))
    width, points = report.timeline()
    out.append(f"<h2>Agreement over time ({width}h buckets){mark}</h2>")
    out.append(timeline_chart(points, width))
    out.append(f"<h2>Per-mechanism readiness{mark}</h2>")
    out.append(_tally_table("mechanism", mechanisms, top, mark))
    out.append(f"<h2>Bypass traffic{mark}</h2>")
    out.append(f'<p class="muted">{escape(BYPASS_DEFINITION)}.</p>')
    out.append(
        f"<p>{t.bypass} of {t.spawns} spawns ({_pct(rate(t.bypass, t.spawns))}) are bypass traffic{mark}.</p>"
    )
    bypass_rows = "".join(
        f"<tr><td>{escape(name)}{mark}</td><td>{tally.bypass}</td><td>{tally.spawns}</td>"
        f"<td>{_pct(rate(tally.bypass, tally.spawns))}</td><td>{_pct(rate(tally.bypass, t.bypass))}</td></tr>"
        for name, tally in mechanisms
        if tally.bypass
    )
    if bypass_rows:
        out.append(
            "<table><tr><th>mechanism</th><th>bypass</th><th>spawns</th><th>share of mechanism</th>"
            f"<th>share of bypass</th></tr>{bypass_rows}</table>"
        )
    out.append(f"<h2>Outcomes and reasons{mark}</h2>")
    out.append(_counts_table("outcomes", report.outcomes, t.spawns, mark))
    out.append(_counts_table("policy sources", report.policy_sources, t.spawns, mark))
    out.append(_counts_table("divergences", report.divergences, t.spawns, mark))
    out.append(_counts_table("held reasons", report.held_reasons, t.spawns, mark))
    out.append(_counts_table("rejected reasons", report.rejected_reasons, t.spawns, mark))
    out.extend(_findings_section(report, mark))
    out.extend(_gaps_section(report, mark))
    out.extend(_usage_section(report, mark))
    for name, rows in report.groups.items():
        out.append(f"<h2>By {escape(name)}{mark}</h2>")
        out.append(_tally_table(name, [(key_label(k), v) for k, v in rows], top, mark))
    if report.flagged:
        out.append(f'<p class="flag">UNVERIFIED CHAIN: {escape(report.chain.describe())}</p>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
