"""``audit`` subcommand: hold decision chains against the trace backend that holds their spans and checkpoints.

    otel-route-shadow audit CHAIN... [--backend URL] [--project NAME] [--origin O] [--key VKEY]...
                            [--witness-policy FILE] [--max-unwitnessed RECORDS] [--min-span-coverage FRACTION]
                            [--jobs N] [--json]

For each chain: the checkpoints of its origin the backend holds (checkpoint spans), the chain proven
consistent with every one, the span cross-check, and the coverage (the tail beyond them, the age of
the newest checkpoint, the share of records whose span the backend holds); see
:mod:`otel_route_shadow.backend.audit` and :mod:`otel_route_shadow.backend.verdict`. One chain prints a
full report; several chains, or a directory (every ``*.jsonl`` under it), are audited in parallel and
print one line each plus a total. With ``--witness-policy`` (a C2SP tlog-policy), only checkpoints whose
witnesses' cosignatures meet its quorum count as witnessed (the chain's own cosigned checkpoints are
held against it too); a quorum not met is insufficient evidence (:mod:`otel_route_shadow.backend.witnesses`).

Exit codes: ``exit_codes.COMMANDS["audit"]`` (several chains: the most serious one, in the order 1, 6,
5, 4, 2, 3, 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from otel_route_shadow.backend import (
    BACKEND_KINDS,
    MISSING,
    AuditError,
    AuditOptions,
    AuditReport,
    AuditVerdict,
    Backend,
    CrossCheckReport,
    PhoenixBackend,
    Problem,
    Thresholds,
    TrustState,
    TrustStateError,
    api_key_problem,
    audit_chain,
    format_unix_nano,
    parse_time,
)
from otel_route_shadow.chain import SEGMENTS_SUFFIX
from otel_route_shadow.cli.checkpoints import add_key_options, read_log_keys
from otel_route_shadow.cli.common import (
    CliError,
    count_argument,
    input_file,
    jobs_argument,
    left_beside_line,
    number_argument,
    witness_policy_arg,
)
from otel_route_shadow.cli.exit_codes import (
    EXIT_BAD_CHECKPOINT,
    EXIT_FINDING,
    EXIT_INSUFFICIENT,
    EXIT_NOT_A_BACKEND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    epilog,
)
from otel_route_shadow.cli.witnessed import log_keys, read_witness_policy

__all__ = ["build_backend", "register", "render_text"]

ENV_BACKEND = "ROUTE_SHADOW_PHOENIX_URL"
ENV_PROJECT = "ROUTE_SHADOW_PHOENIX_PROJECT"
ENV_API_KEY = "PHOENIX_API_KEY"

_EXIT_OF: Final[dict[AuditVerdict | Problem, int]] = {
    AuditVerdict.AGREE: EXIT_OK,
    AuditVerdict.DISAGREE: EXIT_FINDING,
    Problem.USAGE: EXIT_USAGE,
    AuditVerdict.INSUFFICIENT: EXIT_INSUFFICIENT,
    Problem.NO_SPANS: EXIT_INSUFFICIENT,
    Problem.UNREACHABLE: EXIT_UNREACHABLE,
    Problem.NOT_A_BACKEND: EXIT_NOT_A_BACKEND,
    AuditVerdict.BAD_CHECKPOINT: EXIT_BAD_CHECKPOINT,
}
"""The exit code of each verdict and problem (their meanings: :mod:`.exit_codes`)."""
#: Most serious first: the exit code of a fleet audit is the first of these any chain has.
_SEVERITY: Final = (
    EXIT_FINDING,
    EXIT_BAD_CHECKPOINT,
    EXIT_NOT_A_BACKEND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    EXIT_INSUFFICIENT,
    EXIT_OK,
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "audit",
        help="hold decision chains against the checkpoints and spans a trace backend holds",
        description=(
            "Prove each chain consistent with every checkpoint of its origin the backend holds, hold its "
            "records against their spans, and report the coverage."
        ),
        epilog=epilog("audit"),
    )
    parser.add_argument(
        "chains", nargs="+", metavar="CHAIN", help="chain files, or directories of *.jsonl chains"
    )
    parser.add_argument(
        "--backend",
        metavar="URL",
        default=os.environ.get(ENV_BACKEND) or None,
        help=f"backend base URL, e.g. http://127.0.0.1:6006 (default: ${ENV_BACKEND})",
    )
    parser.add_argument(
        "--backend-kind", choices=BACKEND_KINDS, default="phoenix", help="backend type (default: phoenix)"
    )
    parser.add_argument(
        "--project",
        default=os.environ.get(ENV_PROJECT) or "default",
        help=(
            "backend project holding the chains' spans: the resource attribute openinference.project.name "
            f"the hosts set (default: ${ENV_PROJECT} or 'default')"
        ),
    )
    parser.add_argument(
        "--origin",
        help="the chain's origin (default: the route_shadow.origin its records carry, else its checkpoint file's)",
    )
    add_key_options(
        parser,
        "verifier key (name+id+key) or a file holding one; repeatable. Without: signatures are not checked",
    )
    witness_policy_arg(
        parser,
        "a C2SP tlog-policy file: its log keys authenticate the checkpoints, and only checkpoints whose "
        "witnesses' cosignatures meet its quorum count as witnessed (exit 3 when none does)",
    )
    parser.add_argument(
        "--max-unwitnessed",
        type=count_argument(0),
        metavar="RECORDS",
        help="insufficient evidence (exit 3) when more records lie after the last checkpoint held against the "
        "chain (the backend's; with --witness-policy, the quorum's)",
    )
    parser.add_argument(
        "--min-span-coverage",
        type=number_argument(1.0),
        metavar="FRACTION",
        help="insufficient evidence (exit 3) when a smaller share of records has its span in the backend",
    )
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="span window start, ISO 8601 or Unix ns (default: the chain's first record)",
    )
    parser.add_argument("--until", metavar="TIME", help="span window end, exclusive (default: now)")
    parser.add_argument(
        "--state",
        metavar="FILE",
        help=(
            "the auditor's own state file: remembers, per origin, the largest checkpoint proven, so the next "
            "audit checks only the records after it (O(log n) per new checkpoint); created if absent"
        ),
    )
    parser.add_argument("--full", action="store_true", help="with --state: check every record again")
    parser.add_argument(
        "--timeout",
        type=number_argument(3600.0, positive=True),
        default=30.0,
        help="seconds per backend request, for the whole of it (connection, headers, body)",
    )
    jobs_argument(parser, "chains audited at once (default 4)", 4)
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the chain's own hash-linkage check (on by default: a broken chain is a finding)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--show",
        type=count_argument(0),
        default=20,
        metavar="N",
        help="findings listed per kind in text output (default 20)",
    )
    parser.set_defaults(handler=_handle, reads_chains=True)


def build_backend(kind: str, url: str, project: str, timeout: float) -> Backend:
    """The backend named; a URL or an API key that cannot be used is refused without quoting it (exit 2):
    either may hold a credential."""
    if kind == "phoenix":
        api_key = os.environ.get(ENV_API_KEY) or None
        if api_key is not None and (problem := api_key_problem(api_key)):
            raise CliError(f"${ENV_API_KEY} {problem}: it cannot be sent (the key is not shown)")
        try:
            return PhoenixBackend(url, project, api_key=api_key, timeout=timeout)
        except ValueError as exc:
            raise CliError(f"--backend (or ${ENV_BACKEND}): {exc}") from None
    raise CliError(f"--backend-kind: unknown backend {kind!r}")  # pragma: no cover - argparse guards


def _time_arg(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise CliError(f"{name}: {exc}") from None


def _options(args: argparse.Namespace) -> AuditOptions:
    keys = read_log_keys(args.key, args.keys)
    policy = read_witness_policy(args.witness_policy) if args.witness_policy else None
    if policy is not None:
        keys = log_keys(policy, keys, args.witness_policy)
    return AuditOptions(
        origin=args.origin or None,
        verifier_keys=tuple(keys),
        policy=policy,
        policy_source=args.witness_policy or "",
        since_unix_nano=_time_arg("--since", args.since),
        until_unix_nano=_time_arg("--until", args.until),
        check_linkage=not args.no_verify,
        thresholds=Thresholds(args.max_unwitnessed, args.min_span_coverage),
        state=_state(args.state) if args.state else None,
        full=args.full,
    )


def _state(path: str) -> TrustState:
    """The auditor's state file, read and checked before any backend is contacted (exit 2)."""
    state = TrustState(path)
    try:
        state.check()
    except TrustStateError as exc:
        raise CliError(str(exc)) from None
    return state


def chain_paths(arguments: Sequence[str]) -> list[str]:
    """The chains named: files as given, directories expanded to every ``*.jsonl`` under them
    (not inside a chain's ``.tlog`` or ``.segments`` directory: a closed segment is part of its
    chain), in a stable order."""
    found: list[str] = []
    for argument in arguments:
        path = Path(argument)
        if not path.is_dir():
            if path.exists() and not path.is_file():
                input_file(argument)  # a FIFO or a device: refused (exit 2) by name, without opening it
            found.append(argument)  # a missing chain is that chain's own line in a fleet audit
            continue
        chains = sorted(p for p in path.rglob("*.jsonl") if p.is_file() and not _in_tlog(p, path))
        if not chains:
            raise CliError(f"{argument}: no *.jsonl chain in this directory")
        found.extend(str(p) for p in chains)
    return found


def _in_tlog(path: Path, root: Path) -> bool:
    return any(part.endswith((".tlog", SEGMENTS_SUFFIX)) for part in path.relative_to(root).parts[:-1])


def _handle(args: argparse.Namespace) -> int:
    if not args.backend:
        raise CliError(f"--backend URL is required (or set ${ENV_BACKEND})")
    options = _options(args)  # every file named is read and checked before the backend is built
    chains = chain_paths(args.chains)
    backend = build_backend(args.backend_kind, args.backend, args.project, args.timeout)
    if len(chains) == 1 and not Path(args.chains[0]).is_dir():
        return _single(chains[0], backend, options, args)
    return _fleet(chains, backend, options, args)


def _single(chain: str, backend: Backend, options: AuditOptions, args: argparse.Namespace) -> int:
    try:
        report = audit_chain(chain, backend, options)
    except AuditError as exc:
        raise CliError(str(exc), _EXIT_OF[exc.problem]) from None
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    else:
        sys.stdout.write(render_text(report, show=max(args.show, 0)))
    return _EXIT_OF[report.verdict]


def _audit_one(chain: str, backend: Backend, options: AuditOptions) -> AuditReport | AuditError:
    try:
        return audit_chain(chain, backend, options)
    except AuditError as exc:
        return exc


def _fleet(chains: list[str], backend: Backend, options: AuditOptions, args: argparse.Namespace) -> int:
    with ThreadPoolExecutor(max_workers=min(args.jobs or os.cpu_count() or 1, len(chains))) as pool:
        results = list(pool.map(lambda c: _audit_one(c, backend, options), chains))
    codes = [_EXIT_OF[r.problem if isinstance(r, AuditError) else r.verdict] for r in results]
    outcomes = Counter(r.problem.value if isinstance(r, AuditError) else r.verdict.value for r in results)
    total = ", ".join(f"{n} {name}" for name, n in sorted(outcomes.items()))
    code = next(c for c in _SEVERITY if c in codes or c == 0)
    if args.json:
        body = {
            "chains": [
                {"chain": c, "error": str(r), "problem": r.problem.value, "exit": x}
                if isinstance(r, AuditError)
                else {**r.to_json(), "exit": x}
                for c, r, x in zip(chains, results, codes, strict=True)
            ],
            "total": {"chains": len(chains), "outcomes": dict(outcomes), "exit": code},
        }
        sys.stdout.write(json.dumps(body, indent=2, default=str) + "\n")
        return code
    for chain, result, exit_code in zip(chains, results, codes, strict=True):
        line = (
            f"{result.problem.value.upper()}: {result}"
            if isinstance(result, AuditError)
            else result.summary_line()
        )
        sys.stdout.write(f"{chain}: {line} (exit {exit_code})\n")
    sys.stdout.write(f"total: {len(chains)} chains: {total}; exit {code}\n")
    return code


# --------------------------------------------------------------------------------------------------
# Text report of one chain
# --------------------------------------------------------------------------------------------------


def _window_moved(report: AuditReport) -> list[str]:
    """Why the span window starts later than asked, when it does."""
    seq = report.window_from_seq
    if seq is None:
        return []
    if report.trusted_from:
        return [
            f"window: starts at seq {seq}, the first record after those an earlier audit proved (their spans "
            "were held then; --full holds the whole window)"
        ]
    return [
        f"window: starts at the first record kept (seq {seq}): the records before it were pruned, so their "
        "spans have no record to be held against"
    ]


def render_text(report: AuditReport, *, show: int = 20) -> str:
    lines = [
        f"audit of {report.chain} against {report.spans.backend}",
        f"origin: {report.origin or '<none>'} (from {report.origin_source})",
        *(
            [
                f"incremental: records below seq {report.trusted_from} were proven by an earlier audit "
                "(--state) and the chain's own linkage is not re-verified; --full checks everything again"
            ]
            if report.trusted_from
            else []
        ),
        *(
            [f"incremental: not possible, checked in full: {report.state_fallback}"]
            if report.state_fallback
            else []
        ),
        *_window_moved(report),
        *(
            [
                f"pruned: audited from seq {report.pruned.min_index}, the first record kept; "
                f"{report.pruned.describe()}"
            ]
            if report.pruned is not None
            else []
        ),
        *render_checkpoints(report),
        *render_spans(report.spans, show=show),
        *render_coverage(report),
        render_verdict(report),
    ]
    return "\n".join(lines) + "\n"


def render_checkpoints(report: AuditReport) -> list[str]:
    lines = [
        f"checkpoints the backend holds: {len(report.checkpoints)}"
        + (
            ""
            if report.signatures_checked or not report.checkpoints
            else " (signatures not checked: no --key)"
        )
    ]
    for bad in report.bad_checkpoint_spans:
        lines.append(f"  unreadable checkpoint span {bad.span_id}: {bad.reason}")
    c = report.consistency
    if c is None:
        if report.checkpoints and report.pruned is not None:
            lines.append(
                f"consistency: none covers the first record kept (seq {report.pruned.min_index}): the chain "
                "is not held against them (the backend lags: audit again later)"
            )
        return lines
    if c.ok:
        lines.append(
            f"consistency: the chain is consistent with every one (up to size {c.checkpointed_size})"
        )
        return lines
    lines.append(f"consistency: {len(c.failures)} checkpoint(s) held against the chain do not hold")
    for f in c.failures:
        at = f" at seq {f.first_bad_seq}" if f.first_bad_seq is not None else ""
        size = f"size {f.size}" if f.size is not None else "a checkpoint"
        lines.append(f"  {size}: {f.reason}{at}" + (f": {f.detail}" if f.detail else ""))
    return lines


def render_coverage(report: AuditReport) -> list[str]:
    newest = report.newest_checkpoint
    coverage = report.span_coverage
    lines = [
        f"coverage: proven up to {report.witnessed_size} of {report.chain_size} records; "
        f"{report.unwitnessed} after the last checkpoint held against the chain",
    ]
    if newest is not None and report.checkpoint_age_ns is not None:
        lines.append(
            f"  newest checkpoint: size {newest.size}, made {format_unix_nano(newest.seen_unix_nano)} "
            f"({report.checkpoint_age_ns / 1e9:.0f} s ago)"
        )
    else:
        lines.append("  newest checkpoint: none held by the backend for this origin")
    lines.append(
        "  span coverage: "
        + (
            f"{coverage:.1%} of records have their span in the backend"
            if coverage is not None
            else "no records"
        )
    )
    lines.append(f"  {render_dropped(report)}")
    lines.extend(f"  {left_beside_line(name)}; no figure includes it" for name in report.left_beside)
    lines.extend(render_witnessed(report))
    lines.extend(f"  insufficient: {line}" for line in report.shortfalls())
    return lines


def render_witnessed(report: AuditReport) -> list[str]:
    """With --witness-policy: up to which size the quorum attests the chain, and each witness's largest size."""
    w = report.witnessed
    if w is None:
        return []
    if w.attested_size is not None:
        head = f"  witnesses (--witness-policy {w.policy}, quorum {w.quorum}): attested up to size {w.attested_size} (cosigned by {', '.join(w.attested_by) or 'none required'})"
    else:
        head = f"  witnesses (--witness-policy {w.policy}, quorum {w.quorum}): no checkpoint the chain matches meets the quorum"
    sizes = ", ".join(f"{name} {size if size is not None else 'none'}" for name, size in w.largest)
    lines = [head, f"    largest size cosigned, per witness: {sizes or '-'}"]
    lines.extend(f"    cosignature does not verify: {detail}" for detail in w.bad_cosignatures)
    return lines


def render_dropped(report: AuditReport) -> str:
    """The chain's own account of records a writer dropped (listed, not judged)."""
    gap = report.dropped
    scope = f" (records from seq {report.trusted_from})" if report.trusted_from else ""
    if not gap.events:
        return f"{gap.describe()}{scope}"
    return f"{gap.describe()}{scope}; the chain records it, so it is no disagreement"


def render_verdict(report: AuditReport) -> str:
    verdict = report.verdict
    if verdict is AuditVerdict.AGREE:
        return "verdict: AGREE - the backend holds nothing the chain contradicts (exit 0)"
    if verdict is AuditVerdict.INSUFFICIENT:
        return (
            "verdict: INSUFFICIENT EVIDENCE - the backend covers too little to vouch for the chain (exit 3)"
        )
    if verdict is AuditVerdict.BAD_CHECKPOINT:
        return "verdict: BAD CHECKPOINT - a checkpoint held against the chain does not verify; wrong --key or --keys, or forged (exit 6)"
    first = report.first_bad_seq
    where = f"; first bad seq {first}" if first is not None else ""
    only_linkage = report.spans.errors == 1 and report.spans.chain_broken and report.consistency_holds
    what = "the chain's own hashes do not hold" if only_linkage else "the chain and the backend disagree"
    return f"verdict: DISAGREE - {what}{where} (exit 1)"


def _value(value: object) -> str:
    return "<absent>" if value is MISSING else json.dumps(value, default=str)


def render_spans(report: CrossCheckReport, *, show: int = 20) -> list[str]:
    """The span cross-check, as lines."""
    lines: list[str] = [
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
    return lines
