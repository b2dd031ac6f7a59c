"""The what-if replay as terminal text; flagged like the report's when the chain did not verify."""

from __future__ import annotations

from typing import Any, Final

from otel_route_shadow.analysis import (
    NOISE_LANES,
    ChangeTally,
    NoisePart,
    Transition,
    WhatIfResult,
    fraction_rate,
    key_label,
    label,
    rate,
    sorted_counts,
    top_counts,
)
from otel_route_shadow.cli.fleet_text import fleet_lines
from otel_route_shadow.cli.report_text import FLAPPING_SHOWN, gap_lines, noise_headers, usage_lines
from otel_route_shadow.cli.text_table import aligned, pct
from otel_route_shadow.core import printable

__all__ = ["format_whatif", "transition_text"]


def _moved(name: str, before: Any, after: Any) -> str:
    prefix = f"{name} " if name else ""
    if before != after:
        return f"{prefix}{label(before)}->{label(after)}"
    return f"{prefix}{label(after)}"


def transition_text(transition: Transition) -> str:
    out_b, out_a, prov_b, prov_a, reason_b, reason_a, also = transition
    moved = (
        _moved("", out_b, out_a),
        _moved("provider", prov_b, prov_a),
        _moved("reason", reason_b, reason_a),
    )
    return ", ".join(moved) + (f"; also changed: {', '.join(also)}" if also else "")


def format_whatif(result: WhatIfResult, top: int = 3) -> str:
    """The terminal form of ``result``."""
    mark = result.mark()
    out = [result.banner()] if result.flagged else []
    out.extend(_header(result, mark))
    for section in (_integrity, _changes, _noise, _groups, _usage):
        out.extend(section(result, mark, top))
    if result.flagged:
        out.extend(["", result.banner()])
    return "\n".join(map(printable, out)) + "\n"


def _header(result: WhatIfResult, mark: str) -> list[str]:
    cand = result.candidate
    win = result.window.describe()
    return [
        f"route-shadow what-if: {result.chain.path}",
        f"  chain: {result.chain.describe()}",
        *(f"  {line}" for line in (fleet_lines(result.fleet) if result.fleet is not None else [])),
        f"  candidate: {cand['source']} (revision {cand['revision']}, hash {cand['content_hash']}, "
        f"{cand['policies']} policies)",
        f"  window: since {win['since'] or '(start)'} until {win['until'] or '(end)'}",
        f"{mark} {result.records.describe()}; distinct contexts evaluated {result.distinct_contexts}",
        *gap_lines(result.records, mark),
    ]


def _integrity(result: WhatIfResult, mark: str, top: int) -> list[str]:
    integ = result.integrity
    out = [""]
    if integ.failed:
        out.append(
            f"! INTEGRITY: {integ.failed} record(s) do not reproduce from their cited snapshot: "
            + ", ".join(f"{k} {v}" for k, v in sorted_counts(integ.findings))
        )
        out.extend(
            f"!   seq {ex['seq']} trace {ex['trace_id']} span {ex['span_id']}: {ex['kind']}: {ex['detail']}"
            for ex in integ.examples[:10]
        )
    out.append(
        f"{mark} integrity: checked {integ.checked}, reproduced {integ.passed}, findings {integ.failed}"
    )
    if integ.unchecked:
        out.append(
            f"{mark} integrity NOT checked for {integ.unchecked} record(s): "
            + "; ".join(f"{k} ({v})" for k, v in sorted_counts(integ.not_checked))
        )
    return out


def _changes(result: WhatIfResult, mark: str, top: int) -> list[str]:
    t = result.total
    out = [
        "",
        f"{mark} replayed {t.replayed}: changed {t.changed} ({pct(rate(t.changed, t.replayed))}), "
        f"unchanged {t.replayed - t.changed}; agreement with the route that ran "
        f"{pct(rate(t.agreed_before, t.replayed))} recorded -> {pct(rate(t.agreed_after, t.replayed))} candidate",
    ]
    if result.field_changes:
        out.append(
            f"{mark} fields changed: " + ", ".join(f"{k} {v}" for k, v in sorted_counts(result.field_changes))
        )
    if t.transitions:
        out.extend(["", "changes (recorded -> candidate):"])
    for transition, n in sorted_counts(t.transitions):
        out.append(f"{mark} {n:>8}  {transition_text(transition)}")
        out.extend(
            f"{mark}            e.g. seq {ex['seq']} repo {label(ex['repo'])} role {label(ex['role'])} "
            f"principal {label(ex['principal'])} mechanism {label(ex['mechanism'])}"
            for ex in result.examples.get(transition, [])
        )
    return out


def _lanes_text(part: NoisePart) -> str:
    return "; ".join(
        f"{name} divergence {pct(fraction_rate(part.divergence_rate(i)))}, above the noise "
        f"{pct(fraction_rate(part.above_noise(i)))}"
        for i, name in enumerate(NOISE_LANES)
    )


_NOISE_HEADERS: Final = (
    "decision key",
    "spawns",
    "flap%",
    *(f"{name} diverge% / above noise" for name in NOISE_LANES),
    "first flaps at seq",
)


def _noise(result: WhatIfResult, mark: str, top: int) -> list[str]:
    table = result.noise
    out = ["", "noise baseline (the legacy route's own changes per decision key; see docs/reports.md):"]
    for name, which in (("all keys", "total"), ("stable keys", "stable"), ("flapping keys", "flapping")):
        part = table.part(which)
        out.append(
            f"{mark} {name}: {part.keys} key(s), {part.spawns} spawn(s), flap rate "
            f"{pct(fraction_rate(part.flap_rate))}; {_lanes_text(part)}"
        )
    flapping = table.flapping
    if flapping:
        rows = [
            [
                row.label,
                str(row.spawns),
                pct(fraction_rate(row.flap_rate)),
                *(
                    f"{pct(fraction_rate(row.divergence_rate(i)))} / {pct(fraction_rate(row.above_noise(i)))}"
                    for i in range(len(NOISE_LANES))
                ),
                ", ".join(str(seq) for seq in row.flap_seqs),
            ]
            for row in flapping[:FLAPPING_SHOWN]
        ]
        out.append(f"flapping keys ({len(flapping)}):")
        out.extend(aligned(noise_headers(_NOISE_HEADERS, flapping[:FLAPPING_SHOWN]), rows, mark))
        if len(flapping) > FLAPPING_SHOWN:
            out.append(f"{mark}   ... and {len(flapping) - FLAPPING_SHOWN} more (every one in --json)")
    return out


_GROUP_HEADER: Final = (
    "group",
    "replayed",
    "changed",
    "change%",
    "agree% before",
    "agree% after",
    "top changes",
)


def _group_row(key: tuple[Any, ...], tally: ChangeTally, top: int) -> list[str]:
    tops = "; ".join(f"{transition_text(tr)} ({n})" for tr, n in top_counts(tally.transitions, top))
    return [
        key_label(key),
        str(tally.replayed),
        str(tally.changed),
        pct(rate(tally.changed, tally.replayed)),
        pct(rate(tally.agreed_before, tally.replayed)),
        pct(rate(tally.agreed_after, tally.replayed)),
        tops or "-",
    ]


def _groups(result: WhatIfResult, mark: str, top: int) -> list[str]:
    out: list[str] = []
    for name, rows in result.groups.items():
        out.extend(["", f"by {name}:"])
        out.extend(aligned(_GROUP_HEADER, [_group_row(key, tally, top) for key, tally in rows], mark))
    return out


def _usage(result: WhatIfResult, mark: str, top: int) -> list[str]:
    if result.usage is None:
        return []
    return [
        "",
        "candidate policy usage (spawns each policy decided, was outranked in, never matched):",
        *usage_lines(result.usage, mark),
    ]
