"""``audit`` subcommand: hold the decision chain against a trace backend (the witness).

    otel-route-shadow audit CHAIN --backend URL [--project NAME] [--since T] [--until T] [--json]

Two streaming passes over the chain around one query of the backend: the first pass finds the chain's
time window, then the backend's spans for [first record, --until or now) are fetched, then the second
pass joins records and spans. Fetching before the second pass means that, for a chain still being
written, any span the backend already holds has had its record appended (the chain is written when the
span ends, the export happens later).

Exit codes: 0 the chain and the witness agree (records the backend lacks are a rate, not an error);
1 they disagree (spans with no record, records whose content differs, duplicate or malformed records),
or the chain's own hash linkage is broken (checked first unless --no-verify; a torn tail is only noted);
2 unusable input: no chain, an empty chain without --since, a backend that cannot be reached or has no
such project.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from otel_route_shadow.cli.common import EXIT_FINDING, EXIT_OK, EXIT_USAGE, CliError, input_file
from otel_route_shadow.witness import WITNESS_KINDS, PhoenixWitness, Witness, WitnessError
from otel_route_shadow.witness.base import TimeWindow, format_unix_nano, parse_time
from otel_route_shadow.witness.chain_source import ChainReadError, iter_chain_payloads, verify
from otel_route_shadow.witness.crosscheck import (
    MISSING,
    CrossCheckReport,
    cross_check,
    summarize_chain,
)

__all__ = ["build_witness", "register", "run_audit"]

ENV_BACKEND = "ROUTE_SHADOW_PHOENIX_URL"
ENV_PROJECT = "ROUTE_SHADOW_PHOENIX_PROJECT"
ENV_API_KEY = "PHOENIX_API_KEY"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "audit",
        help="hold the decision chain against the spans in a trace backend",
        description=(
            "Fetch the seam spans for the chain's time window from a trace backend and report chain "
            "records with no span (a rate: sampling), spans with no chain record (a truncated or pruned "
            "chain), and records whose content differs from their span (a rewrite, even with recomputed "
            "hashes). Exit 0 agree, 1 disagree, 2 unusable input or unreachable backend."
        ),
    )
    parser.add_argument("chain", metavar="CHAIN", help="the decision chain (JSON lines)")
    parser.add_argument(
        "--backend",
        metavar="URL",
        default=os.environ.get(ENV_BACKEND) or None,
        help=f"backend base URL, e.g. http://127.0.0.1:6006 (default: ${ENV_BACKEND})",
    )
    parser.add_argument(
        "--backend-kind", choices=WITNESS_KINDS, default="phoenix", help="backend type (default: phoenix)"
    )
    parser.add_argument(
        "--project",
        default=os.environ.get(ENV_PROJECT) or "default",
        help=(
            "backend project holding this chain's spans: the resource attribute openinference.project.name "
            f"the host set (default: ${ENV_PROJECT} or 'default')"
        ),
    )
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="window start, ISO 8601 or Unix ns (default: the chain's first record)",
    )
    parser.add_argument("--until", metavar="TIME", help="window end, exclusive (default: now)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per backend request")
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the chain's own hash-linkage check (on by default: a broken chain is a finding)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--show",
        type=int,
        default=20,
        metavar="N",
        help="findings listed per kind in text output (default 20)",
    )
    parser.set_defaults(handler=_handle)


def build_witness(kind: str, url: str, project: str, timeout: float) -> Witness:
    if kind == "phoenix":
        try:
            return PhoenixWitness(url, project, api_key=os.environ.get(ENV_API_KEY) or None, timeout=timeout)
        except ValueError as exc:
            raise CliError(f"--backend: {exc}") from None
    raise CliError(f"--backend-kind: unknown backend {kind!r}")  # pragma: no cover - argparse guards


def _time_arg(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise CliError(f"{name}: {exc}") from None


def run_audit(
    chain: str,
    witness: Witness,
    *,
    since_unix_nano: int | None = None,
    until_unix_nano: int | None = None,
    check_linkage: bool = True,
) -> CrossCheckReport:
    """The audit without the command line: raises CliError for unusable input or an unreachable backend."""
    try:
        linkage = verify(chain) if check_linkage else None
        summary = summarize_chain(iter_chain_payloads(chain))
    except ChainReadError as exc:
        raise CliError(str(exc)) from None
    start = since_unix_nano if since_unix_nano is not None else summary.first_start_unix_nano
    if start is None:
        raise CliError(
            f"{chain}: the chain holds no seam records, so it has no time window to audit; pass --since "
            "to look for spans the chain lacks"
        )
    end = until_unix_nano if until_unix_nano is not None else time.time_ns() + 1
    if end <= start:
        raise CliError(f"empty window: {format_unix_nano(end)} is not after {format_unix_nano(start)}")
    window = TimeWindow(start, end)
    try:
        spans = list(witness.fetch_spans(window))
    except WitnessError as exc:
        raise CliError(str(exc)) from None
    try:
        report = cross_check(
            iter_chain_payloads(chain),
            spans,
            window=window,
            backend=witness.describe(),
            time_tolerance_ns=witness.time_tolerance_ns,
        )
    except ChainReadError as exc:
        raise CliError(str(exc)) from None
    if linkage is not None:
        report.chain_linkage = linkage.verdict.value
        report.chain_linkage_detail = linkage.describe()
    return report


def _handle(args: argparse.Namespace) -> int:
    if not args.backend:
        raise CliError(f"--backend URL is required (or set ${ENV_BACKEND})")
    if args.timeout <= 0:
        raise CliError("--timeout must be positive")
    chain = input_file(args.chain)
    witness = build_witness(args.backend_kind, args.backend, args.project, args.timeout)
    report = run_audit(
        chain,
        witness,
        since_unix_nano=_time_arg("--since", args.since),
        until_unix_nano=_time_arg("--until", args.until),
        check_linkage=not args.no_verify,
    )
    if args.json:
        body = {"chain": args.chain, **report.to_json()}
        sys.stdout.write(json.dumps(body, indent=2, sort_keys=False, default=str) + "\n")
    else:
        sys.stdout.write(render_text(args.chain, report, show=max(args.show, 0)))
    return EXIT_FINDING if report.verdict == "disagree" else EXIT_OK


def _value(value: object) -> str:
    return "<absent>" if value is MISSING else json.dumps(value, default=str)


def render_text(chain: str, report: CrossCheckReport, *, show: int = 20) -> str:
    lines: list[str] = [
        f"audit of {chain} against {report.backend}",
        f"window: {report.window.describe()}",
        f"chain: {report.seam_records} seam records"
        + (f" ({report.other_records} other records ignored)" if report.other_records else "")
        + (f", {report.outside_window} outside the window" if report.outside_window else ""),
        f"backend: {report.seam_spans} seam spans ({report.spans_fetched} spans in the window)",
        f"matched: {report.matched}",
        f"records the backend lacks: {len(report.missing_in_backend)} of {report.held_against} "
        f"({report.missing_rate:.1%}); expected under sampling or export lag, not an error",
    ]

    def more(total: int) -> None:
        if total > show:
            lines.append(f"  ... and {total - show} more (--json lists all)")

    lines.append(
        f"spans with no chain record: {len(report.orphan_spans)}"
        + (" (a truncated or pruned chain)" if report.orphan_spans else "")
    )
    for orphan in report.orphan_spans[:show]:
        lines.append(
            f"  trace {orphan.trace_id} span {orphan.span_id} started {format_unix_nano(orphan.start_time_unix_nano)}"
            f" decision_id {_value(orphan.decision_id) if orphan.decision_id is not None else '<absent>'}"
        )
    more(len(report.orphan_spans))
    lines.append(
        f"records whose content differs from their span: {len(report.mismatches)}"
        + (f" (decision_id differs in {len(report.decision_id_mismatches)})" if report.mismatches else "")
    )
    for mismatch in report.mismatches[:show]:
        lines.append(f"  seq {mismatch.seq} trace {mismatch.trace_id} span {mismatch.span_id}:")
        for diff in mismatch.diffs:
            lines.append(f"    {diff.key}: chain {_value(diff.chain)}, backend {_value(diff.backend)}")
    more(len(report.mismatches))
    if report.duplicates:
        lines.append(f"duplicate records: {len(report.duplicates)}")
        for dup in report.duplicates[:show]:
            lines.append(
                f"  seq {dup.seq} repeats seq {dup.first_seq} (trace {dup.trace_id} span {dup.span_id})"
            )
        more(len(report.duplicates))
    if report.malformed:
        lines.append(f"malformed seam records: {len(report.malformed)}")
        for bad in report.malformed[:show]:
            lines.append(f"  seq {bad.seq}: {bad.reason}")
        more(len(report.malformed))
    if report.chain_linkage is not None:
        note = {"intact": "", "torn-tail": " (an append cut short; noted, not an error)"}
        lines.append(f"chain linkage: {report.chain_linkage_detail}{note.get(report.chain_linkage, '')}")
    if report.verdict == "agree":
        lines.append("verdict: AGREE - the witness holds nothing the chain contradicts")
    else:
        what = (
            "the chain's own hashes do not hold"
            if report.errors == 1 and report.chain_broken
            else ("the chain and the witness disagree")
        )
        lines.append(f"verdict: DISAGREE - {report.errors} finding(s); {what}")
    return "\n".join(lines) + "\n"


_ = EXIT_USAGE
