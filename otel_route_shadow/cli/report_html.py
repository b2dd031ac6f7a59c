"""The divergence report as one self-contained HTML page, readable offline and at a glance.

No script, no stylesheet link, no image source, no font: styles are inline in one ``<style>`` block
and the charts are inline SVG (:mod:`.report_charts`). Every value from the chain is HTML-escaped.
The page opens with what an operator needs first: the log's evidence status, the headline figures,
the readiness verdict and its main reason (the other reasons one click away, in ``<details>``,
collapsed), then the charts, the noise baseline, the served route, and the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from otel_route_shadow.analysis import (
    BYPASS_DEFINITION,
    DIFFERS,
    KEY_NAMES,
    NO_STORE_NOTE,
    NOISE_DEFINITION,
    NOT_READY,
    READY,
    SERVED_STATES,
    TRANSIENT_ONLY,
    GapTally,
    NoisePart,
    Report,
    Tally,
    fraction_rate,
    key_label,
    label,
    rate,
    sorted_counts,
    top_counts,
    width_label,
)
from otel_route_shadow.cli.cohort_text import ci_text, cohort_html
from otel_route_shadow.cli.common import left_beside_line
from otel_route_shadow.cli.fleet_text import fleet_html
from otel_route_shadow.cli.report_charts import (
    AGREED_COLOR,
    code_colors,
    divergence_chart,
    legend,
    moment_label,
    timeline_chart,
)
from otel_route_shadow.cli.report_text import FLAPPING_SHOWN, evidence_lines
from otel_route_shadow.cli.text_table import html_text, pct
from otel_route_shadow.core import REQUIREMENT_DEFIED
from otel_route_shadow.version import __version__

__all__ = ["render_html"]

_CSS: Final = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem auto;padding:0 1.5rem;
color:#222;max-width:72rem;line-height:1.4}
p,code,.evidence{overflow-wrap:anywhere}
h1{font-size:1.5rem;margin-bottom:.25rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}caption{text-align:left;font-weight:600}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}td.text,th.text{text-align:left}
td.key{text-align:left}td.seqs{text-align:left;white-space:nowrap}
.wide{overflow-x:auto}
.flag{background:#fde2e1;border:2px solid #c8553d;padding:.75rem;font-weight:bold;color:#8b1d12}
.uv{color:#c8553d;font-weight:bold}.muted{color:#666;font-size:.85rem}
.evidence{border:1px solid #ccd;border-left:4px solid #3d7ec8;background:#f7f9fc;padding:.5rem .75rem;margin:1rem 0}
.evidence p{margin:.15rem 0}.evidence.none{border-left-color:#c8553d}
.kpis{display:flex;flex-wrap:wrap;gap:.75rem;margin:1rem 0}
.kpi{border:1px solid #e2e2e2;border-radius:4px;padding:.5rem .75rem;min-width:8.5rem}
.kpi b{display:block;font-size:1.5rem}.kpi span{color:#555;font-size:.85rem}
.verdict{display:inline-block;padding:.05rem .45rem;border-radius:3px;font-weight:600;color:#fff;background:#8c8c8c}
.v-ready{background:#4c9a5f}.v-transient-only{background:#3d7ec8}.v-not-ready{background:#c8553d}
.summary{border:1px solid #e2e2e2;padding:.5rem .75rem;margin:1rem 0}
details summary{cursor:pointer;color:#3d5a80}details ul{margin:.25rem 0 .25rem 1rem;padding:0}
.legend{list-style:none;padding:0;margin:.25rem 0 .5rem;display:flex;flex-wrap:wrap;gap:.25rem 1rem;font-size:.85rem}
.legend li{display:flex;align-items:center;white-space:nowrap}
.swatch{display:inline-block;width:.8rem;height:.8rem;margin-right:.35rem;border-radius:2px}
svg.chart{max-width:100%;height:auto;display:block}svg text{font-family:inherit;font-size:11px;fill:#333}
code{font-size:.85em;background:#f2f2f2;padding:0 .2rem}
"""


def _mark(report: Report) -> str:
    return ' <span class="uv" title="the chain did not verify">[UNVERIFIED]</span>' if report.flagged else ""


def _h2(anchor: str, title: str, mark: str) -> str:
    return f'<h2 id="{html_text(anchor)}">{html_text(title)}{mark}</h2>'


_CONTENTS: Final = (
    ("mechanisms", "divergence by mechanism"),
    ("time", "over time"),
    ("noise", "noise baseline"),
    ("served", "served route"),
    ("findings", "findings"),
    ("readiness", "readiness"),
    ("cohorts", "cohorts"),
    ("divergent", "divergent decisions"),
    ("per-mechanism", "per mechanism"),
    ("bypass", "bypass"),
    ("outcomes", "outcomes"),
    ("usage", "policy usage"),
)
"""The page's sections, linked at its top (in-page links only)."""


def _verdict(verdict: str) -> str:
    return f'<span class="verdict v-{html_text(verdict)}">{html_text(verdict)}</span>'


def _why(verdict: str, reasons: Sequence[str]) -> str:
    """The verdict and its main reason; the other reasons in a collapsed ``<details>``."""
    main = html_text(reasons[0]) if reasons else ""
    rest = reasons[1:]
    more = ""
    if rest:
        items = "".join(f"<li>{html_text(reason)}</li>" for reason in rest)
        more = f"<details><summary>{len(rest)} more reason(s)</summary><ul>{items}</ul></details>"
    return f"{_verdict(verdict)} {main}{more}"


def _counts_table(title: str, counts: dict[str, int], whole: int, mark: str, first: str = "code") -> str:
    if not counts:
        return f"<p><b>{html_text(title)}</b>: none</p>"
    rows = "".join(
        f"<tr><td>{html_text(k)}</td><td>{v}</td><td>{pct(rate(v, whole))}</td></tr>"
        for k, v in sorted_counts(counts)
    )
    return (
        f"<table><caption>{html_text(title)}{mark}</caption><tr><th>{html_text(first)}</th><th>spawns</th>"
        f"<th>share</th></tr>{rows}</table>"
    )


def _tally_table(first: str, rows: Sequence[tuple[str, Tally]], top: int, mark: str) -> str:
    head = (
        f"<tr><th>{html_text(first)}</th><th>spawns</th><th>agreed</th><th>agreement (95% CI)</th><th>diverged</th>"
        '<th>divergence</th><th>managed</th><th>bypass</th><th class="text">top divergences</th></tr>'
    )
    body = []
    for name, t in rows:
        tops = ", ".join(f"{html_text(c)} {n}" for c, n in top_counts(t.divergences, top)) or "-"
        body.append(
            f"<tr><td>{html_text(name)}{mark}</td><td>{t.spawns}</td><td>{t.agreed}</td>"
            f'<td>{pct(rate(t.agreed, t.spawns))} <span class="muted">({ci_text(t.agreed, t.spawns)})</span></td>'
            f"<td>{t.diverged}</td><td>{pct(rate(t.diverged, t.spawns))}</td>"
            f'<td>{pct(rate(t.managed, t.spawns))}</td><td>{t.bypass}</td><td class="text">{tops}</td></tr>'
        )
    return f'<div class="wide"><table>{head}{"".join(body)}</table></div>'


def _header(report: Report) -> list[str]:
    win = report.window.describe()
    skipped = ", ".join(f"{k} {v}" for k, v in sorted_counts(report.skipped_kinds)) or "none"
    out = [
        "<h1>Route-shadow divergence report</h1>",
        f'<p class="muted">chain <code>{html_text(report.chain.path)}</code>: {html_text(report.chain.describe())}<br>'
        f"window: since {html_text(win['since'] or '(start)')} until {html_text(win['until'] or '(end)')}; "
        f"records read {report.records_read}, observations {report.observations}, skipped "
        f"{html_text(skipped)}, outside window {report.outside_window}, without a decision "
        f"{report.without_decision}, malformed {report.malformed}; otel-route-shadow {html_text(__version__)}</p>",
    ]
    if report.fleet is not None:
        out.append(fleet_html(report.fleet))
        return out
    evidence = report.evidence
    lines = evidence_lines(evidence, report.chain.path)
    absent = evidence is None or evidence.status != "present"
    body = "".join(f"<p>{html_text(line.strip())}</p>" for line in lines)
    out.append(
        f'<section class="evidence{" none" if absent else ""}" aria-label="log evidence">{body}</section>'
    )
    return out


def _kpis(report: Report, mark: str) -> str:
    t = report.total
    noise = report.noise
    flapping = noise.part("flapping")
    differs = report.served.get(DIFFERS, 0)
    tiles = (
        ("spawns", str(t.spawns)),
        ("agreement", pct(rate(t.agreed, t.spawns))),
        ("divergence", pct(rate(t.diverged, t.spawns))),
        ("divergence above the noise", pct(fraction_rate(noise.part().above_noise()))),
        ("flapping decision keys", f"{flapping.keys} of {noise.part().keys}"),
        (
            f"served by another route ({report.served.get('unknown', 0)} unknown)",
            str(differs) if report.served.get("unknown", 0) < t.spawns else "-",
        ),
        ("managed-policy decided", pct(rate(t.managed, t.spawns))),
        ("bypass (direct-http)", pct(rate(t.bypass, t.spawns))),
    )
    return (
        '<div class="kpis">'
        + "".join(
            f'<div class="kpi"><b>{html_text(v)}</b><span>{html_text(k)}</span>{mark}</div>' for k, v in tiles
        )
        + "</div>"
    )


def _summary(report: Report, mark: str) -> str:
    verdict, reasons = report.gap_total.reasons()
    return (
        f'<section class="summary" aria-label="readiness"><b>Readiness, all spawns{mark}:</b> '
        f"{_why(verdict, reasons)}</section>"
    )


def _charts(report: Report, mark: str) -> list[str]:
    mechanisms = [(label(k), v) for k, v in report.mechanisms]
    codes = [code for code, _ in sorted_counts(report.divergences)]
    colors = code_colors(codes)
    width, points = report.timeline()
    return [
        _h2("mechanisms", "Divergence by mechanism", mark),
        legend([("agreed", AGREED_COLOR), *((code, colors[code]) for code in codes)], "divergence codes"),
        divergence_chart(mechanisms, codes, colors),
        _h2("time", f"Agreement over time ({width_label(width)} buckets)", mark),
        f'<p class="muted">from {html_text(_iso(report.first_ns))} to {html_text(_iso(report.last_ns))} (UTC); '
        "the line is the agreement rate of each bucket, the bars its spawns (hover for figures).</p>",
        timeline_chart(points, width),
    ]


def _iso(ns: int | None) -> str:
    return "-" if ns is None else moment_label(ns)


def _part_row(name: str, part: NoisePart, mark: str) -> str:
    return (
        f"<tr><td>{html_text(name)}{mark}</td><td>{part.keys}</td><td>{part.spawns}</td>"
        f"<td>{pct(fraction_rate(part.flap_rate))}</td><td>{pct(fraction_rate(part.divergence_rate()))}</td>"
        f"<td>{pct(fraction_rate(part.above_noise()))}</td></tr>"
    )


def _noise_section(report: Report, mark: str) -> list[str]:
    table = report.noise
    out = [
        _h2("noise", "Noise baseline: divergence above the legacy route's own changes", mark),
        f'<p class="muted">{html_text(NOISE_DEFINITION)}. The readiness verdicts are given on the stable part.</p>',
        "<table><tr><th>decision keys</th><th>keys</th><th>spawns</th><th>flap rate</th><th>divergence</th>"
        "<th>above the noise</th></tr>",
        _part_row("all", table.part(), mark),
        _part_row("stable (judged)", table.part("stable"), mark),
        _part_row("flapping (shown apart)", table.part("flapping"), mark),
        "</table>",
    ]
    flapping = table.flapping
    if not flapping:
        out.append("<p>No decision key's legacy route changed in this window.</p>")
        return out
    head = "".join(f'<th class="text">{html_text(name)}</th>' for name in KEY_NAMES)
    rows = "".join(
        "<tr>"
        + "".join(f'<td class="key">{html_text(label(value))}</td>' for value in row.key)
        + f"<td>{row.spawns}</td><td>{row.flaps}</td><td>{pct(fraction_rate(row.flap_rate))}</td>"
        f"<td>{row.routes}</td><td>{pct(fraction_rate(row.divergence_rate()))}</td>"
        f"<td>{pct(fraction_rate(row.above_noise()))}</td>"
        f'<td class="seqs">{html_text(", ".join(str(seq) for seq in row.flap_seqs))}</td></tr>'
        for row in flapping[:FLAPPING_SHOWN]
    )
    more = len(flapping) - FLAPPING_SHOWN
    out.append(
        f'<div class="wide"><table><caption>Flapping decision keys ({len(flapping)}, most flapping first)'
        f"{mark}</caption><tr>{head}<th>spawns</th><th>flaps</th><th>flap rate</th><th>routes</th>"
        f'<th>divergence</th><th>above the noise</th><th class="text">flaps at seq</th></tr>{rows}</table></div>'
    )
    if more > 0:
        out.append(
            f'<p class="muted">and {more} more flapping keys (every one is in <code>--json</code>).</p>'
        )
    return out


def _served_section(report: Report, mark: str) -> list[str]:
    t = report.total
    unknown = report.served.get("unknown", 0)
    out = [
        _h2("served", "Served route against the route chosen", mark),
        '<p class="muted">what actually served each spawn (a gateway or client may fall back on its own), '
        "as the host reported it. A spawn served by another route after a fallback never counts as agreement "
        "(an alias or a load-balanced deployment does not disagree); "
        "<i>unknown</i> means nothing was reported and never counts as the served route agreeing.</p>",
    ]
    if unknown == t.spawns:
        out.append(
            f"<p>unknown for all {t.spawns} spawns: no record of this window reports the route that served it"
            f"{mark}.</p>"
        )
        return out
    out += [
        "<table><tr><th>mechanism</th>"
        + "".join(f"<th>{state}</th>" for state in SERVED_STATES)
        + "</tr>"
        + f"<tr><td><b>all spawns</b>{mark}</td>"
        + "".join(f"<td>{report.served.get(state, 0)}</td>" for state in SERVED_STATES)
        + "</tr>"
        + "".join(
            f"<tr><td>{html_text(label(name))}{mark}</td>"
            + "".join(f"<td>{counts.get(state, 0)}</td>" for state in SERVED_STATES)
            + "</tr>"
            for name, counts in report.served_by_mechanism
        )
        + "</table>",
        f"<p>served route known for {pct(rate(t.spawns - unknown, t.spawns))} of spawns{mark}.</p>",
    ]
    if report.served_routes:
        rows = "".join(
            f'<tr><td class="text">{html_text(label(cp))} / {html_text(label(cm))}</td>'
            f'<td class="text">{html_text(label(sp))} / {html_text(label(sm))}</td><td>{n}</td></tr>'
            for (cp, cm, sp, sm), n in sorted_counts(report.served_routes)
        )
        seqs = ", ".join(str(example["seq"]) for example in report.served_examples)
        out.append(
            f"<table><caption>Chosen against served (served-differs){mark}</caption><tr><th>chosen "
            f'provider / model</th><th class="text">served provider / model</th><th>spawns</th></tr>{rows}</table>'
            f'<p class="muted">first served-differs decisions at seq {html_text(seqs)}</p>'
        )
    return out


def _findings_section(report: Report, mark: str) -> list[str]:
    """Findings and claim mismatches: in every report, never suppressed."""
    out = [_h2("findings", "Findings and claim mismatches", mark)]
    if not report.findings_known:
        out.append("<p>unknown: no record carries the whole decision (an older chain)</p>")
        return out
    defied = report.findings.get(REQUIREMENT_DEFIED, 0)
    out.append(
        f"<p><b>requirement-defied</b>: {defied} of {report.total.spawns} spawns "
        f"({pct(rate(defied, report.total.spawns))}) ran a legacy route that did not satisfy its "
        f"model requirement{mark}</p>"
    )
    elsewhere = report.defied_elsewhere
    if elsewhere:
        as_divergence = report.divergences.get(REQUIREMENT_DEFIED, 0)
        split = ", ".join(f"{html_text(k)} {v}" for k, v in sorted_counts(elsewhere))
        out.append(
            f'<p class="muted">Why {defied} here and {as_divergence} among the divergences: a spawn is counted '
            "once among the divergences, under its first difference. For "
            f"{as_divergence} of these {defied} spawns nothing else differed, so <i>requirement-defied</i> is "
            f"their divergence; the other {defied - as_divergence} are counted there as {split}.</p>"
        )
    out.append(_counts_table("findings", report.findings, report.total.spawns, mark))
    out.append(_counts_table("claim mismatches", report.claim_mismatches, report.total.spawns, mark))
    return out


def _gap_table(name: str, rows: Sequence[tuple[object, GapTally]], mark: str) -> str:
    head = (
        f"<tr><th>{html_text(name)}</th><th>spawns</th><th>persistent</th><th>policy gap</th>"
        '<th>transient</th><th>unknown</th><th>flapping</th><th class="text">readiness and why</th></tr>'
    )
    body = []
    for key, g in rows:
        verdict, reasons = g.reasons()
        body.append(
            f"<tr><td>{html_text(label(key))}{mark}</td><td>{g.spawns}</td>"
            f"<td>{pct(rate(g.persistent, g.spawns))}</td><td>{pct(rate(g.gaps, g.spawns))}</td>"
            f"<td>{pct(rate(g.transient, g.spawns))}</td><td>{g.unknown}</td><td>{g.flapping.spawns}</td>"
            f'<td class="text">{_why(verdict, reasons)}</td></tr>'
        )
    return (
        f'<div class="wide"><table><caption>by {html_text(name)}</caption>{head}{"".join(body)}</table></div>'
    )


def _gaps_section(report: Report, mark: str) -> list[str]:
    out = [
        _h2("readiness", "Policy gaps and readiness", mark),
        '<p class="muted">persistent policy gaps: role dial, repo override; transient mechanisms: credit '
        "failover, fleet ratchet. Each verdict is judged on the stable part (decision keys whose legacy "
        f"route did not flap); <i>{READY}</i>, <i>{TRANSIENT_ONLY}</i>, <i>{NOT_READY}</i>, <i>unknown</i> "
        "as docs/reports.md defines them.</p>",
    ]
    out.extend(_gap_table(name, rows, mark) for name, rows in report.gaps.items())
    return out


def _divergent_section(report: Report, mark: str) -> list[str]:
    if not report.divergent:
        return []
    rows = []
    for code, n in sorted_counts(report.divergences):
        examples = report.divergent.get(code, [])
        first = examples[0] if examples else {}
        where = " / ".join(label(first.get(name)) for name in ("repo", "role", "principal")) if first else "-"
        seqs = ", ".join(str(example["seq"]) for example in examples) or "-"
        rows.append(
            f'<tr><td>{html_text(code)}{mark}</td><td>{n}</td><td class="text">{html_text(seqs)}</td>'
            f'<td class="text">{html_text(where)}</td></tr>'
        )
    return [
        _h2("divergent", "Divergent decisions", mark),
        '<p class="muted">the lowest seq of each divergence; <code>otel-route-shadow prove CHAIN --seq N</code> '
        "proves one is in the log.</p>",
        '<table><tr><th>divergence</th><th>spawns</th><th class="text">seq</th>'
        '<th class="text">first one: repo / role / principal</th></tr>' + "".join(rows) + "</table>",
    ]


def _bypass_section(report: Report, mark: str) -> list[str]:
    t = report.total
    out = [
        _h2("bypass", "Bypass traffic", mark),
        f'<p class="muted">{html_text(BYPASS_DEFINITION)}.</p>',
        f"<p>{t.bypass} of {t.spawns} spawns ({pct(rate(t.bypass, t.spawns))}) are bypass traffic{mark}.</p>",
    ]
    rows = "".join(
        f"<tr><td>{html_text(label(name))}{mark}</td><td>{tally.bypass}</td><td>{tally.spawns}</td>"
        f"<td>{pct(rate(tally.bypass, tally.spawns))}</td><td>{pct(rate(tally.bypass, t.bypass))}</td></tr>"
        for name, tally in report.mechanisms
        if tally.bypass
    )
    if rows:
        out.append(
            "<table><tr><th>mechanism</th><th>bypass</th><th>spawns</th><th>share of mechanism</th>"
            f"<th>share of bypass</th></tr>{rows}</table>"
        )
    return out


def _usage_section(report: Report, mark: str) -> list[str]:
    out = [_h2("usage", "Policy usage", mark)]
    for table in report.usage:
        rows = "".join(
            f"<tr><td>{html_text(use.policy_id)}{mark}</td><td>{use.decided}</td><td>{use.outranked}</td>"
            f"<td>{use.never_matched}</td><td>{'decided nothing' if use.idle else ''}</td></tr>"
            for use in table.policies
        )
        out.append(
            f"<table><caption>snapshot revision {table.revision} ({table.spawns} spawns replayed)</caption>"
            "<tr><th>policy</th><th>decided</th><th>outranked</th><th>never matched</th><th></th></tr>"
            f"{rows}</table>"
        )
    for reason, n in sorted_counts(report.usage_not_replayed):
        out.append(f"<p>not replayed{mark}: {n} spawn(s): {html_text(reason)}</p>")
    if not report.usage:
        for (revision, _digest), decided in report.decided.items():
            title = f"decided, as recorded (revision {label(revision)})"
            out.append(_counts_table(title, decided, report.total.spawns, mark, first="policy"))
        if not report.usage_not_replayed:  # a store was given: why it could not replay is said above
            out.append(f'<p class="muted">{html_text(NO_STORE_NOTE)}.</p>')
    return out


def _tables(report: Report, mark: str, top: int) -> list[str]:
    t = report.total
    out = [
        _h2("per-mechanism", "Per-mechanism readiness", mark),
        _tally_table("mechanism", [(label(k), v) for k, v in report.mechanisms], top, mark),
        *_bypass_section(report, mark),
        _h2("outcomes", "Outcomes and reasons", mark),
        _counts_table("outcomes", report.outcomes, t.spawns, mark, first="outcome"),
        _counts_table("policy sources", report.policy_sources, t.spawns, mark, first="source"),
        _counts_table(
            "divergences (each spawn once, under its first difference)", report.divergences, t.spawns, mark
        ),
        _counts_table("held reasons", report.held_reasons, t.spawns, mark),
        _counts_table("rejected reasons", report.rejected_reasons, t.spawns, mark),
        *_usage_section(report, mark),
    ]
    for name, rows in report.groups.items():
        out.append(_h2(f"by-{name}", f"By {name}", mark))
        out.append(_tally_table(name, [(key_label(k), v) for k, v in rows], top, mark))
    return out


def render_html(report: Report, *, top: int = 3, beside: Sequence[str] = ()) -> str:
    """The whole report as one HTML document (a string; the caller writes it); ``beside``: the files
    :func:`otel_route_shadow.chain.left_beside` names, said under the dropped records."""
    mark = _mark(report)
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>route-shadow divergence report: {html_text(report.chain.path)}</title>",
        f"<style>{_CSS}</style></head><body>",
    ]
    if report.flagged:
        out.append(
            '<p class="flag">UNVERIFIED CHAIN: every figure in this report is flagged. '
            f"{html_text(report.chain.describe())}</p>"
        )
    out.extend(_header(report))
    for gap, line in report.records.gaps():
        if gap:
            out.append(
                f'<p class="flag">{html_text(line)}; every figure is over the recorded records only</p>'
            )
    out.extend(
        f'<p class="flag">{html_text(left_beside_line(name))}; no figure includes it</p>' for name in beside
    )
    if not report.total.spawns:
        out.append(f"<p>no observations in this window: nothing to report{mark}</p>")
    else:
        out.append(_kpis(report, mark))
        out.append(_summary(report, mark))
        links = " · ".join(f'<a href="#{anchor}">{html_text(text)}</a>' for anchor, text in _CONTENTS)
        out.append(f'<nav class="muted" aria-label="sections">{links}</nav>')
        sections: list[Any] = [
            _charts(report, mark),
            _noise_section(report, mark),
            _served_section(report, mark),
            _findings_section(report, mark),
            _gaps_section(report, mark),
            [cohort_html(report)],
            _divergent_section(report, mark),
            _tables(report, mark, top),
        ]
        for section in sections:
            out.extend(section)
    if report.flagged:
        out.append(f'<p class="flag">UNVERIFIED CHAIN: {html_text(report.chain.describe())}</p>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
