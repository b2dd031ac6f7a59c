"""``report``, ``whatif`` and ``matrix``: the operator's questions, answered from the chain offline.

    otel-route-shadow report CHAIN [--by DIM[,DIM|+DIM]] [--since T] [--until T] [--json] [--html FILE]
    otel-route-shadow whatif CHAIN (--policies FILE | --store DIR --revision N) [--store DIR] ...
    otel-route-shadow matrix (--policies FILE | --store DIR [--revision N]) [--chain CHAIN] [--repo R] ...

Exit codes: ``exit_codes.COMMANDS["report"]``, ``["whatif"]`` and ``["matrix"]``. See docs/reports.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from otel_route_shadow.analysis import (
    DEFAULT_ACCOUNTS,
    DIMENSIONS,
    MAX_ROWS,
    ChainAnalysisError,
    EmptyChainError,
    GroupingError,
    InvalidCandidateError,
    LogEvidence,
    MatrixAxes,
    MatrixError,
    SnapshotSourceError,
    SourcedSnapshot,
    TimeWindow,
    UnverifiedChainError,
    WindowError,
    axes_from_chain,
    build_fleet_report,
    build_matrix,
    build_report,
    candidate_snapshot,
    cited_loader,
    fleet_replay,
    follow_fleet,
    parse_account,
    parse_axis,
    parse_by,
    read_evidence,
    replay,
    store_snapshot,
    verifier_keys,
)
from otel_route_shadow.chain import left_beside
from otel_route_shadow.cli.checkpoints import add_key_options, read_log_keys
from otel_route_shadow.cli.common import (
    CliError,
    cap_jobs,
    check_output,
    count_argument,
    jobs_argument,
    witness_policy_arg,
    write_output,
)
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, EXIT_USAGE, epilog
from otel_route_shadow.cli.fleet import (
    excluded_logs,
    fleet_mode,
    min_spawns_arg,
    monitor_args,
    remote_fetch,
    whatif_fleet_args,
)
from otel_route_shadow.cli.matrix_text import render_csv, render_json, render_table
from otel_route_shadow.cli.progress import TerminalProgress
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.cli.report_text import format_report
from otel_route_shadow.cli.whatif_text import format_whatif
from otel_route_shadow.cli.witnessed import read_witness_policy
from otel_route_shadow.core import WorkerRole, canonical_worker_role, printable, redact_text
from otel_route_shadow.tlog import KeyWindow

__all__ = ["register"]

_DIMS = ", ".join(DIMENSIONS)


def register(sub: Any) -> None:
    _register_report(sub)
    _register_whatif(sub)
    _register_matrix(sub)


def _common_chain_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "chain",
        metavar="CHAIN",
        nargs="+",
        help="the decision chain (JSON lines); several chains, a folder of *.jsonl chains or a serve URL "
        "(http://host:port/<origin>/) make one fleet report: each log verified against its newest checkpoint "
        "first, one that does not is excluded (exit 1)",
    )
    parser.add_argument(
        "--by",
        action="append",
        metavar="DIM",
        help=(
            f"group by a dimension ({_DIMS}); repeat or comma-separate for several breakdowns, cross two "
            "with '+' (repo+role). Default: repo, role, mechanism, transport"
        ),
    )
    parser.add_argument(
        "--since", metavar="TIME", help="ISO-8601 date or timestamp (inclusive; UTC if no offset)"
    )
    parser.add_argument(
        "--until",
        metavar="TIME",
        help="ISO-8601 timestamp (exclusive) or date (that whole day included); UTC if no offset",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--allow-unverified",
        action="store_true",
        help="analyse a chain that does not verify; every figure is then flagged (exit status 1)",
    )
    jobs_argument(
        parser,
        "worker processes: of one chain, for its verification (default 1); of a fleet, logs checked and "
        "counted at once (default: one per CPU for logs of 8 MiB or more, else 1)",
    )
    parser.add_argument(
        "--top",
        type=count_argument(0),
        default=3,
        metavar="N",
        help="top divergences/changes per row (default 3)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress line on the terminal")


def _register_report(sub: Any) -> None:
    parser = sub.add_parser(
        "report",
        help="divergence report: agreement, divergence, bypass share and readiness from the chain",
        description=(
            "Verify the chain, then report agreement and divergence rates with counts per group, held "
            "and rejected reasons, the share of bypass traffic (direct-http spawns no gateway policy could "
            "bind) and per-mechanism readiness. Refuses an unverifiable chain unless --allow-unverified."
        ),
        epilog=epilog("report"),
    )
    _common_chain_args(parser)
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report with charts")
    parser.add_argument(
        "--store",
        metavar="DIR",
        help="policy store holding the snapshots the records cite: adds, per snapshot, the spawns each "
        "policy decided, was outranked in or never matched (policies that decided nothing included)",
    )
    parser.add_argument(
        "--examples",
        type=count_argument(0),
        default=3,
        metavar="N",
        help="divergent decisions listed per divergence (default 3)",
    )
    add_key_options(
        parser,
        "verifier key (string or file): check the signature of the log's last checkpoint "
        "(without it the report only lists who signed it); of a pruned chain, authenticate its first record "
        "kept from the signed tree",
    )
    witness_policy_arg(
        parser,
        "a C2SP tlog-policy file: verify the last checkpoint's cosignatures by its witnesses and say "
        "whether they meet its quorum (without it the report only lists the cosigners' names)",
    )
    min_spawns_arg(parser)
    monitor_args(parser)
    parser.set_defaults(handler=_handle_report, reads_chains=True)


def _register_whatif(sub: Any) -> None:
    parser = sub.add_parser(
        "whatif",
        help="replay every recorded context against a candidate policy set and report what changes",
        description=(
            "Replay each recorded route context through explain against a candidate snapshot (a policy "
            "file, or a store revision) and report which decisions change and how. Records that do not "
            "reproduce from the snapshot they cite are integrity findings, never differences."
        ),
        epilog=epilog("whatif"),
    )
    _common_chain_args(parser)
    parser.add_argument("--policies", metavar="FILE", help='candidate policy file ({"policies": [...]})')
    parser.add_argument(
        "--store",
        metavar="DIR",
        help="policy store: with --revision the candidate; otherwise where cited revisions are loaded "
        "to integrity-check records that cite something other than the candidate",
    )
    parser.add_argument(
        "--revision", type=count_argument(0), metavar="N", help="store revision to use as the candidate"
    )
    parser.add_argument(
        "--examples", type=count_argument(0), default=3, metavar="N", help="examples per change (default 3)"
    )
    parser.add_argument(
        "--fail-on-change", action="store_true", help="exit 1 when any decision would change (for CI)"
    )
    whatif_fleet_args(parser)
    parser.set_defaults(handler=_handle_whatif, reads_chains=True)


def _register_matrix(sub: Any) -> None:
    parser = sub.add_parser(
        "matrix",
        help="effective-route matrix: repos x roles x principals x faces x requirements against one snapshot",
        description=(
            "Resolve every combination of the given axis values with one explain_batch call against one "
            "snapshot. Axis values come from the options, or (for axes not given) from the contexts seen "
            "in --chain. Repeat an option or comma-separate values; 'none' means the value is absent."
        ),
        epilog=epilog("matrix"),
    )
    parser.add_argument("--policies", metavar="FILE", help="policy file to resolve against")
    parser.add_argument("--store", metavar="DIR", help="policy store to resolve against")
    parser.add_argument(
        "--revision", type=count_argument(0), metavar="N", help="store revision (default: the current one)"
    )
    parser.add_argument("--chain", metavar="CHAIN", help="take axis values not given below from this chain")
    parser.add_argument("--repo", action="append", metavar="OWNER/REPO", help="repositories")
    parser.add_argument("--role", action="append", metavar="ROLE", help="roles (default: every worker role)")
    parser.add_argument("--principal", action="append", metavar="ID", help="principal ids (default: none)")
    parser.add_argument(
        "--face", action="append", metavar="FACE", help="request faces (default: agentic, one-shot)"
    )
    parser.add_argument(
        "--requirement", action="append", metavar="REQ", help="model requirements (default: none)"
    )
    parser.add_argument(
        "--account",
        action="append",
        metavar="ID=PROVIDER[:STATE]",
        help="accounts the host sees (default: anthropic-legacy and zai-legacy, both available)",
    )
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    parser.add_argument(
        "--max-rows",
        type=count_argument(1),
        default=MAX_ROWS,
        metavar="N",
        help=f"row limit (default {MAX_ROWS})",
    )
    parser.set_defaults(handler=_handle_matrix, reads_chains=True)


# ---------------------------------------------------------------------------------------------
# shared


def _window(args: argparse.Namespace) -> TimeWindow:
    try:
        return TimeWindow.parse(args.since, args.until)
    except WindowError as exc:
        raise CliError(f"--since/--until: {exc}") from None


def _specs(args: argparse.Namespace) -> tuple[tuple[str, ...], ...]:
    try:
        return parse_by(args.by)
    except GroupingError as exc:
        raise CliError(f"--by: {exc}") from None


def _chain_error(exc: ChainAnalysisError) -> CliError:
    if isinstance(exc, UnverifiedChainError):
        return CliError(str(exc), EXIT_FINDING)
    if isinstance(exc, EmptyChainError):
        return CliError(str(exc), EXIT_USAGE)
    return CliError(str(exc), EXIT_USAGE)


def _progress(args: argparse.Namespace) -> TerminalProgress:
    return TerminalProgress("verifying", enabled=not args.no_progress)


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _dump(data: Any) -> str:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode("utf-8") + "\n"


def _check_jobs(args: argparse.Namespace) -> None:
    if args.jobs is not None:
        args.jobs = cap_jobs(args.jobs)


# ---------------------------------------------------------------------------------------------
# report


def _handle_report(args: argparse.Namespace) -> int:
    _check_jobs(args)
    specs = _specs(args)
    window = _window(args)
    html_path: str | None = args.html or None
    if html_path is not None:
        check_output(html_path, "--html")  # before the chain is read, not after
    try:
        loader = cited_loader(args.store) if args.store else None
    except SnapshotSourceError as exc:
        raise CliError(str(exc)) from None
    verifiers = [KeyWindow.parse(key) for key in read_log_keys(args.key, args.keys)]
    policy = read_witness_policy(args.witness_policy) if args.witness_policy else None
    progress = _progress(args)

    fleet = fleet_mode(args)

    def evidence(records: int) -> LogEvidence:
        return read_evidence(args.chain[0], records, verifiers=verifiers, policy=policy)

    shared = {"by": specs, "window": window, "examples": args.examples, "min_spawns": args.min_spawns}
    fleet_shared = {**shared, "verifiers": verifiers, "policy": policy, "jobs": args.jobs}
    try:
        if fleet:  # --state, several chains, a folder or a URL
            fleet_shared["fetch"] = remote_fetch(args.remote_timeout)
            if args.state:
                report = follow_fleet(args.chain, args.state, rebuild=args.rebuild, **fleet_shared)
            else:
                report = build_fleet_report(args.chain, cited_loader=loader, **fleet_shared)
        else:
            report = build_report(
                args.chain[0],
                allow_unverified=args.allow_unverified,
                jobs=args.jobs or 1,
                verify_progress=progress,
                progress=_ReadingPhase(progress),
                cited_loader=loader,
                evidence=evidence,
                keys=verifier_keys(verifiers, policy),
                **shared,
            )
    except ChainAnalysisError as exc:
        raise _chain_error(exc) from None
    finally:
        progress.finish()
    beside = () if fleet else left_beside(args.chain[0])  # what verify names too: not in the chain yet
    if html_path is not None:
        write_output(html_path, render_html(report, top=args.top, beside=beside).encode("utf-8"), "--html")
    if args.json:
        out = report.as_dict(top=args.top)
        if not fleet:
            out["left_beside"] = list(beside)
        _write_stdout(_dump(out))
    else:
        _write_stdout(format_report(report, top=args.top, beside=beside))
        if html_path is not None:
            print(f"wrote {html_path}", file=sys.stderr)
    return EXIT_FINDING if report.flagged or excluded_logs(report) else EXIT_OK


class _ReadingPhase:
    """Switch a progress line to the reading phase on the first reading callback."""

    def __init__(self, progress: TerminalProgress) -> None:
        self.progress = progress
        self.started = False

    def __call__(self, done: int, total: int = 0) -> None:
        if not self.started:
            self.progress.phase("reading")
            self.started = True
        self.progress(done, total)


# ---------------------------------------------------------------------------------------------
# whatif


def _print_problems(error: InvalidCandidateError) -> None:
    print(f"otel-route-shadow: {error}", file=sys.stderr)
    for line in error.lines():
        print(f"  - {line}", file=sys.stderr)


def _whatif_snapshot(args: argparse.Namespace) -> SourcedSnapshot:
    if args.policies and args.revision is not None:
        raise CliError("give either --policies FILE or --store DIR --revision N, not both")
    if args.policies:
        return candidate_snapshot(args.policies)
    if args.revision is not None:
        if not args.store:
            raise CliError("--revision needs --store DIR")
        return store_snapshot(args.store, args.revision)
    raise CliError("whatif needs a candidate: --policies FILE, or --store DIR --revision N")


def _handle_whatif(args: argparse.Namespace) -> int:
    _check_jobs(args)
    specs = _specs(args)
    window = _window(args)
    try:
        candidate = _whatif_snapshot(args)
        loader = cited_loader(args.store) if args.store else None
    except InvalidCandidateError as exc:
        _print_problems(exc)
        return EXIT_USAGE
    except SnapshotSourceError as exc:
        raise CliError(str(exc)) from None
    progress = _progress(args)
    fleet = fleet_mode(args)
    verifiers = [KeyWindow.parse(key) for key in read_log_keys(args.key, args.keys)]
    policy = read_witness_policy(args.witness_policy) if args.witness_policy else None
    try:
        result = (
            fleet_replay(
                args.chain,
                candidate.snapshot,
                candidate_source=candidate.source,
                cited_loader=loader,
                by=specs,
                window=window,
                examples=args.examples,
                verifiers=verifiers,
                policy=policy,
                jobs=args.jobs,
                fetch=remote_fetch(args.remote_timeout),
                progress=_ReadingPhase(progress),
            )
            if fleet
            else replay(
                args.chain[0],
                candidate.snapshot,
                candidate_source=candidate.source,
                cited_loader=loader,
                by=specs,
                window=window,
                examples=args.examples,
                allow_unverified=args.allow_unverified,
                jobs=args.jobs or 1,
                verify_progress=progress,
                progress=_ReadingPhase(progress),
                keys=verifier_keys(verifiers, policy),
            )
        )
    except ChainAnalysisError as exc:
        raise _chain_error(exc) from None
    finally:
        progress.finish()
    if args.json:
        _write_stdout(_dump(result.as_dict(top=args.top)))
    else:
        _write_stdout(format_whatif(result, top=args.top))
    if result.flagged or result.integrity_findings or excluded_logs(result):
        return EXIT_FINDING
    if args.fail_on_change and result.changed:
        return EXIT_FINDING
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# matrix


def _matrix_snapshot(args: argparse.Namespace) -> SourcedSnapshot:
    if args.policies and args.store:
        raise CliError("give either --policies FILE or --store DIR, not both")
    if args.policies:
        if args.revision is not None:
            raise CliError("--revision needs --store DIR")
        return candidate_snapshot(args.policies)
    if args.store:
        return store_snapshot(args.store, args.revision)
    raise CliError("matrix needs a snapshot: --policies FILE, or --store DIR [--revision N]")


def _handle_matrix(args: argparse.Namespace) -> int:
    try:
        sourced = _matrix_snapshot(args)
    except InvalidCandidateError as exc:
        _print_problems(exc)
        return EXIT_USAGE
    except SnapshotSourceError as exc:
        raise CliError(str(exc)) from None
    try:
        given = {
            "repos": parse_axis(args.repo),
            "roles": parse_axis(args.role),
            "principals": parse_axis(args.principal),
            "faces": parse_axis(args.face, allow_none=False),
            "requirements": parse_axis(args.requirement),
        }
        accounts = tuple(parse_account(a) for a in args.account) if args.account else DEFAULT_ACCOUNTS
        if args.chain:
            try:
                seen = axes_from_chain(args.chain, tell=lambda line: print(line, file=sys.stderr))
            except ChainAnalysisError as exc:
                raise _chain_error(exc) from None
            values = {name: given[name] or seen[name] for name in given}
        else:
            if given["repos"] is None:
                raise CliError("matrix needs --repo (one or more) or --chain to take repos from")
            defaults = MatrixAxes()
            values = {
                "repos": given["repos"],
                "roles": given["roles"] or defaults.roles,
                "principals": given["principals"] or defaults.principals,
                "faces": given["faces"] or defaults.faces,
                "requirements": given["requirements"] or defaults.requirements,
            }
        _warn_unknown_roles(given["roles"] or ())
        axes = MatrixAxes(
            repos=tuple(values["repos"] or ()),
            roles=tuple(values["roles"] or ()),
            principals=tuple(values["principals"] or ()),
            faces=tuple(str(face) for face in values["faces"] or () if face is not None),
            requirements=tuple(values["requirements"] or ()),
        )
        matrix = build_matrix(
            sourced.snapshot, axes, accounts=accounts, snapshot_source=sourced.source, max_rows=args.max_rows
        )
    except MatrixError as exc:
        raise CliError(str(exc)) from None
    renderer = {"table": render_table, "csv": render_csv, "json": render_json}[args.format]
    _write_stdout(renderer(matrix))
    return EXIT_OK


def _warn_unknown_roles(roles: Sequence[str | None]) -> None:
    """Say on stderr which ``--role`` values are no worker role (a typo resolves like any role no policy
    names, so its cells look plausible); the matrix is still made, since such a value may be meant."""
    for role in roles:
        if role is not None and canonical_worker_role(role) is None:
            known = ", ".join(WorkerRole)
            print(
                f"matrix: --role '{printable(redact_text(role)[0])}' is not a worker role ({known}): its cells are "
                "resolved as for a role no policy names",
                file=sys.stderr,
            )
