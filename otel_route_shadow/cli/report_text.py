"""The divergence report as terminal text: every figure of a :class:`Report`, sections in the order an
operator reads them. When the chain did not verify, a banner opens and closes it and every figure line
starts with ``!``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from otel_route_shadow.analysis import (
    DIFFERS,
    FAILED,
    KEY_NAMES,
    NO_STORE_NOTE,
    NOT_CHECKED,
    NOT_VERIFIED,
    PRESENT,
    SERVED_DIFFERS,
    SERVED_STATES,
    VERIFIED,
    GapTally,
    LogEvidence,
    NoisePart,
    NoiseRow,
    RecordCounts,
    Report,
    Tally,
    UsageTable,
    fraction_rate,
    key_label,
    label,
    rate,
    sorted_counts,
    top_counts,
    width_label,
)
from otel_route_shadow.cli.cohort_text import ci_text, cohort_lines
from otel_route_shadow.cli.common import left_beside_line
from otel_route_shadow.cli.fleet_text import fleet_lines
from otel_route_shadow.cli.text_table import aligned, duration, pct
from otel_route_shadow.core import REQUIREMENT_DEFIED, printable

__all__ = ["FLAPPING_SHOWN", "evidence_lines", "format_report", "gap_lines", "noise_headers", "usage_lines"]

FLAPPING_SHOWN: Final = 10
"""Flapping keys listed in the text and the HTML (the JSON lists every one)."""


def format_report(report: Report, top: int = 3, beside: Sequence[str] = ()) -> str:
    """The terminal form of ``report``; ``beside``: the files :func:`otel_route_shadow.chain.left_beside`
    names, said under the dropped records."""
    mark = report.mark()
    out = [report.banner()] if report.flagged else []
    out.extend(_header(report))
    out.extend(f"! {left_beside_line(name)}; no figure includes it" for name in beside)
    if not report.total.spawns:
        out.append(f"{mark} no observations in this window: nothing to report")
    else:
        for section in (
            _totals,
            _noise,
            _served,
            _findings,
            _divergent,
            _bypass,
            _gaps,
            cohort_lines,
            _usage,
            _groups,
            _timeline,
        ):
            lines = section(report, mark, top)
            if lines:
                out.append("")
                out.extend(lines)
    if report.flagged:
        out.extend(["", report.banner()] if report.total.spawns else [report.banner()])
    return "\n".join(map(printable, out)) + "\n"


def evidence_lines(evidence: LogEvidence | None, chain_path: str) -> list[str]:
    """The log's evidence status in sentences: the last checkpoint, its signers, what was checked."""
    if evidence is None:
        return ["log evidence: not read"]
    if evidence.status != PRESENT:
        found = (
            "no checkpoint" if evidence.problem is None else f"an unreadable checkpoint ({evidence.problem})"
        )
        return [
            f"log evidence: {found} at {evidence.checkpoint_path}: nothing vouches for the chain beyond its "
            "own hash links",
            *_refusal_lines(evidence),
        ]
    beyond = evidence.records_beyond or 0
    age = "" if evidence.age_ns is None else f", written {duration(evidence.age_ns)} before this report"
    cover = (
        f"last checkpoint: size {evidence.size} of {evidence.chain_records} records"
        + (f" ({beyond} record(s) after it, not yet covered)" if beyond else "")
        + f"{age} (the file's time)"
    )
    return [
        f"log evidence: {cover}",
        f"  signed by: {_signers(evidence, chain_path)}",
        f"  cosigned by: {_cosigners(evidence)}",
        *_refusal_lines(evidence),
    ]


def _refusal_lines(evidence: LogEvidence) -> list[str]:
    return [f"  REFUSED: {line}" for line in evidence.refusals.lines()]


def _cosigners(evidence: LogEvidence) -> str:
    """The cosignature lines by name, or (``--witness-policy``) the witnesses whose cosignature verified."""
    witnesses = evidence.witnesses
    if witnesses is None:
        names = ", ".join(evidence.cosigned_by) or "none"
        return names + (
            " (names on further signature lines; not verified here)" if evidence.cosigned_by else ""
        )
    if witnesses.problem is not None:
        return f"NOT verified under the policy: {witnesses.problem}"
    names = ", ".join(witnesses.cosigned) or "no witness of the policy"
    quorum = witnesses.quorum or "none"
    if witnesses.met:
        verdict = f"quorum {quorum} met"
    else:
        verdict = f"quorum {quorum} NOT met, missing {', '.join(witnesses.missing)}: insufficient evidence"
    future = (
        f"; not counted, timestamped in the future: {', '.join(witnesses.future)}" if witnesses.future else ""
    )
    return f"{names} (cosignatures verified with the policy; {verdict}{future})"


def _signers(evidence: LogEvidence, chain_path: str) -> str:
    names = ", ".join(evidence.signed_by) or "nobody (an unsigned checkpoint)"
    if not evidence.signed_by:
        return names
    if evidence.verification == NOT_CHECKED:
        return f"{names} (not verified here; run `otel-route-shadow verify {chain_path} --key VKEY`)"
    if evidence.verification == VERIFIED:
        return f"{names} (signature verified with the given key: {', '.join(evidence.verified_by)})"
    if evidence.verification == NOT_VERIFIED:
        return f"{names} (NOT by any key given: not verified)"
    if evidence.verification == FAILED:
        return f"{names} (a signature by a given key does NOT verify)"
    return names


def _header(report: Report) -> list[str]:
    win = report.window.describe()
    return [
        f"route-shadow divergence report: {report.chain.path}",
        f"  chain: {report.chain.describe()}",
        *(
            f"  {line}"
            for line in (
                evidence_lines(report.evidence, report.chain.path)
                if report.fleet is None
                else fleet_lines(report.fleet)
            )
        ),
        f"  window: since {win['since'] or '(start)'} until {win['until'] or '(end)'}",
        f"{report.mark()} {report.records.describe()}",
        *gap_lines(report.records, report.mark()),
    ]


def gap_lines(records: RecordCounts, mark: str) -> list[str]:
    """The records no figure includes (dropped by the writer, truncated), each marked ``!`` when
    there are any, or ``none``."""
    return [
        f"! {line}; every figure is over the recorded records only" if gap else f"{mark} {line}"
        for gap, line in records.gaps()
    ]


def _totals(report: Report, mark: str, top: int) -> list[str]:
    t = report.total
    above = fraction_rate(report.noise.part().above_noise())
    out = [
        f"{mark} spawns {t.spawns}: agreed {t.agreed} ({pct(rate(t.agreed, t.spawns))}), "
        f"diverged {t.diverged} ({pct(rate(t.diverged, t.spawns))}; above the noise {pct(above)}); "
        f"decided by a managed policy {t.managed} ({pct(rate(t.managed, t.spawns))})"
    ]
    for title, counts in (
        ("outcomes", report.outcomes),
        ("policy sources", report.policy_sources),
        ("divergences", report.divergences),
        ("held reasons", report.held_reasons),
        ("rejected reasons", report.rejected_reasons),
    ):
        text = ", ".join(f"{k} {v} ({pct(rate(v, t.spawns))})" for k, v in sorted_counts(counts))
        out.append(f"{mark} {title}: {text or 'none'}")
    return out


def _noise_part(name: str, part: NoisePart, mark: str) -> str:
    return (
        f"{mark} {name}: {part.keys} key(s), {part.spawns} spawn(s); flap rate "
        f"{pct(fraction_rate(part.flap_rate))}; divergence {pct(fraction_rate(part.divergence_rate()))}, "
        f"above the noise {pct(fraction_rate(part.above_noise()))}"
    )


def _noise_rows(rows: Sequence[NoiseRow]) -> list[list[str]]:
    return [
        [
            row.label,
            str(row.spawns),
            str(row.flaps),
            pct(fraction_rate(row.flap_rate)),
            str(row.routes),
            pct(fraction_rate(row.divergence_rate())),
            pct(fraction_rate(row.above_noise())),
            ", ".join(str(seq) for seq in row.flap_seqs),
        ]
        for row in rows
    ]


_NOISE_HEADERS: Final = (
    "decision key (" + " / ".join(KEY_NAMES) + ")",
    "spawns",
    "flaps",
    "flap%",
    "routes",
    "diverge%",
    "above noise",
    "first flaps at seq",
)


def noise_headers(headers: Sequence[str], rows: Sequence[NoiseRow]) -> list[str]:
    """``headers``, the key's named as after its host when the rows are a fleet's."""
    fleet = any(row.host is not None for row in rows)
    return [f"host: {headers[0]}" if fleet else headers[0], *headers[1:]]


def _noise(report: Report, mark: str, top: int) -> list[str]:
    table = report.noise
    flapping = table.flapping
    out = [
        "noise baseline (per decision key: the legacy route's own changes between consecutive spawns):",
        _noise_part("all keys", table.part(), mark),
        _noise_part("stable keys (the readiness verdict's part)", table.part("stable"), mark),
        _noise_part("flapping keys (judged apart)", table.part("flapping"), mark),
    ]
    if flapping:
        shown = flapping[:FLAPPING_SHOWN]
        out.append(f"flapping keys ({len(flapping)}, most flapping first):")
        out.extend(aligned(noise_headers(_NOISE_HEADERS, shown), _noise_rows(shown), mark))
        if len(flapping) > len(shown):
            out.append(f"{mark}   ... and {len(flapping) - len(shown)} more (every one in --json)")
    return out


def _served(report: Report, mark: str, top: int) -> list[str]:
    t = report.total
    counts = ", ".join(f"{state} {report.served.get(state, 0)}" for state in SERVED_STATES)
    differs = report.served.get(DIFFERS, 0)
    out = [
        f"{mark} served route (what served each spawn against the route chosen): {counts}; "
        f"known for {pct(rate(t.spawns - report.served.get('unknown', 0), t.spawns))} of spawns "
        "(unknown: nothing reported; never counted as the served route agreeing)",
    ]
    if differs:
        disagree = report.findings.get(SERVED_DIFFERS, 0)
        why = ", ".join(f"{name} {n}" for name, n in sorted_counts(report.served_why))
        out.append(
            f"{mark}   differs {differs} ({pct(rate(differs, t.spawns))}; why: {why}); {SERVED_DIFFERS} "
            f"{disagree} (a fallback: never counted as agreement)"
        )
        for (cp, cm, sp, sm), n in sorted_counts(report.served_routes)[:top]:
            out.append(f"{mark}   chosen {label(cp)}/{label(cm)} -> served {label(sp)}/{label(sm)}: {n}")
        rows = [
            [label(name), *(str(c.get(state, 0)) for state in SERVED_STATES)]
            for name, c in report.served_by_mechanism
        ]
        out.extend(aligned(("mechanism", *SERVED_STATES), rows, mark))
    return out


def _findings(report: Report, mark: str, top: int) -> list[str]:
    """Findings and claim mismatches: always shown, never suppressed (unknown for older chains)."""
    if not report.findings_known:
        unknown = "unknown (no record carries the whole decision: an older chain)"
        return [f"{mark} findings (requirement-defied): {unknown}", f"{mark} claim mismatches: {unknown}"]
    t = report.total
    defied = report.findings.get(REQUIREMENT_DEFIED, 0)
    others = ", ".join(f"{k} {v}" for k, v in sorted_counts(report.findings) if k != REQUIREMENT_DEFIED)
    mismatches = ", ".join(f"{k} {v}" for k, v in sorted_counts(report.claim_mismatches)) or "none"
    out = [
        f"{mark} findings: requirement-defied {defied} ({pct(rate(defied, t.spawns))}) "
        "(a legacy route that did not satisfy its model requirement)" + (f"; {others}" if others else ""),
    ]
    elsewhere = report.defied_elsewhere
    if elsewhere:
        as_divergence = report.divergences.get(REQUIREMENT_DEFIED, 0)
        split = ", ".join(f"{k} {v}" for k, v in sorted_counts(elsewhere))
        out.append(
            f"{mark}   (a spawn counts once among the divergences, under its first difference: "
            f"requirement-defied is the divergence of {as_divergence} of these {defied}; the other "
            f"{defied - as_divergence} are counted there as {split})"
        )
    out.append(f"{mark} claim mismatches (the host claimed otherwise than derived): {mismatches}")
    return out


def _divergent(report: Report, mark: str, top: int) -> list[str]:
    if not report.divergent:
        return []
    out = ["divergent decisions (lowest seq first; `otel-route-shadow prove CHAIN --seq N` proves one):"]
    for code, n in sorted_counts(report.divergences):
        seqs = ", ".join(
            f"{example['host']} {example['seq']}" if "host" in example else str(example["seq"])
            for example in report.divergent.get(code, [])
        )
        out.append(f"{mark}   {code} ({n}): seq {seqs or '-'}")
    return out


_TALLY_HEADERS: Final = (
    "group",
    "spawns",
    "agreed",
    "agree%",
    "agree 95% CI",
    "diverged",
    "diverge%",
    "managed%",
    "bypass",
    "top divergences",
)


def _tally_rows(rows: Sequence[tuple[str, Tally]], top: int) -> list[list[str]]:
    return [
        [
            name,
            str(t.spawns),
            str(t.agreed),
            pct(rate(t.agreed, t.spawns)),
            ci_text(t.agreed, t.spawns),
            str(t.diverged),
            pct(rate(t.diverged, t.spawns)),
            pct(rate(t.managed, t.spawns)),
            str(t.bypass),
            ", ".join(f"{code} {n}" for code, n in top_counts(t.divergences, top)) or "-",
        ]
        for name, t in rows
    ]


def _bypass(report: Report, mark: str, top: int) -> list[str]:
    t = report.total
    out = [
        f"{mark} bypass traffic (direct-http, no gateway policy could bind it): {t.bypass} of "
        f"{t.spawns} spawns ({pct(rate(t.bypass, t.spawns))})"
    ]
    for name, tally in report.mechanisms:
        if tally.bypass:
            out.append(
                f"{mark}   {label(name)}: {tally.bypass} of its {tally.spawns} spawns "
                f"({pct(rate(tally.bypass, tally.spawns))}); {pct(rate(tally.bypass, t.bypass))} of all bypass"
            )
    out.append("")
    out.append("per-mechanism readiness:")
    out.extend(aligned(_TALLY_HEADERS, _tally_rows([(label(k), v) for k, v in report.mechanisms], top), mark))
    return out


_GAP_HEADERS: Final = ("group", "spawns", "persistent%", "policy gap%", "transient%", "unknown", "readiness")


def _gap_rows(rows: Sequence[tuple[Any, GapTally]]) -> list[list[str]]:
    return [
        [
            label(key),
            str(g.spawns),
            pct(rate(g.persistent, g.spawns)),
            pct(rate(g.gaps, g.spawns)),
            pct(rate(g.transient, g.spawns)),
            str(g.unknown),
            "{}: {}".format(*g.verdict()),
        ]
        for key, g in rows
    ]


def _gaps(report: Report, mark: str, top: int) -> list[str]:
    """Persistent policy gaps (role dial, repo override) against transient mechanisms (credit
    failover, fleet ratchet), per repo, role and principal, each with a readiness verdict."""
    verdict, why = report.gap_total.verdict()
    out = [
        "policy gaps (role dial, repo override: persistent) and transient mechanisms (credit failover, "
        "fleet ratchet):",
        f"{mark} all spawns: {verdict}: {why}",
    ]
    for name, rows in report.gaps.items():
        out.append(f"by {name}:")
        out.extend(aligned(_GAP_HEADERS, _gap_rows(rows), mark))
    return out


def usage_lines(table: UsageTable, mark: str) -> list[str]:
    """One snapshot's policy usage: one line per policy, the idle ones said so."""
    out = [f"{mark} snapshot revision {table.revision} ({table.spawns} spawns replayed):"]
    for use in table.policies:
        note = "  <- decided nothing" if use.idle else ("  (disabled)" if not use.enabled else "")
        out.append(
            f"{mark}   {use.policy_id}: decided {use.decided}, outranked {use.outranked}, "
            f"never matched {use.never_matched}{note}"
        )
    return out


def _usage(report: Report, mark: str, top: int) -> list[str]:
    out = ["policy usage (spawns each policy decided, was outranked in, never matched):"]
    for table in report.usage:
        out.extend(usage_lines(table, mark))
    for reason, n in sorted_counts(report.usage_not_replayed):
        out.append(f"{mark}   not replayed: {n} spawn(s): {reason}")
    if not report.usage:
        for (revision, _digest), decided in report.decided.items():
            text = ", ".join(f"{k} {v}" for k, v in sorted_counts(decided))
            out.append(f"{mark}   snapshot revision {label(revision)}, as recorded: decided {text}")
        if not report.usage_not_replayed:  # a store was given: why it could not replay is said above
            out.append(f"{mark}   {NO_STORE_NOTE}")
    return out


def _groups(report: Report, mark: str, top: int) -> list[str]:
    out: list[str] = []
    for name, rows in report.groups.items():
        out.extend(["", f"by {name}:"] if out else [f"by {name}:"])
        out.extend(aligned(_TALLY_HEADERS, _tally_rows([(key_label(k), v) for k, v in rows], top), mark))
    return out


def _timeline(report: Report, mark: str, top: int) -> list[str]:
    width, points = report.timeline()
    if not points:
        return []
    rows = [
        [p.as_dict()["start"], str(p.spawns), str(p.agreed), pct(rate(p.agreed, p.spawns))] for p in points
    ]
    return [
        f"agreement over time ({width_label(width)} buckets):",
        *aligned(("bucket start", "spawns", "agreed", "agree%"), rows, mark),
    ]
