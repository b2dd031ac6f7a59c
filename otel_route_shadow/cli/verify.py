"""``otel-route-shadow verify CHAIN``: check a decision chain's hash links, its checkpoints, and what a
quorum of witnesses attests (``--witness-policy``).

Intact: the record count and head hash; broken: the first bad seq, its reason class and line number.
Exit codes: ``exit_codes.COMMANDS["verify"]``. ``--json`` prints one object for machines; on a terminal
a progress bar tracks large chains on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Any, Final, TextIO

from otel_route_shadow.analysis import Kept, Refusals, kept_records, read_refusals
from otel_route_shadow.chain import VerifyResult, left_beside, verify_pass
from otel_route_shadow.cli.checkpoints import add_key_options, read_log_keys
from otel_route_shadow.cli.common import (
    CliError,
    cap_jobs,
    count_argument,
    input_file,
    jobs_argument,
    left_beside_line,
    witness_policy_arg,
)
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, epilog
from otel_route_shadow.cli.verify_archive import is_archive, verify_archive
from otel_route_shadow.cli.verify_checkpoints import (
    check_checkpoints,
    checkpoint_inputs,
    human_report,
    unservable_bundles,
)
from otel_route_shadow.cli.witnessed import (
    WitnessPolicyVerdict,
    log_keys,
    policy_verdict,
    read_witness_policy,
    verdict_lines,
)
from otel_route_shadow.logstore import ConsistencyReport, LogStore, Pruned, StateError
from otel_route_shadow.tlog import KeyWindow

__all__ = ["register"]

_PROGRESS_MIN_BYTES = 16 * 1024 * 1024
_PROGRESS_INTERVAL = 0.1


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "verify",
        help="verify a decision chain's hash links",
        description=(
            "Walk a decision chain and name the first seq whose links do not hold; with --key or "
            "--checkpoint, prove it consistent with every checkpoint; with --witness-policy, say up to which size "
            "a quorum of witnesses attests it."
        ),
        epilog=epilog("verify"),
    )
    parser.add_argument(
        "chain",
        metavar="CHAIN",
        help="chain file (JSON lines): its live file, one of its closed segments or its segments folder; or "
        "an archived segment (.gz, or with a .proof beside it), checked against its proof with --key (and "
        "--checkpoint: a note of the same tree)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    jobs_argument(parser, "verify with N processes (default 1; pays off on chains of many megabytes)", 1)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also reject payload values no writer emits (floats, non-ASCII keys); about half as fast",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on the terminal")
    parser.add_argument(
        "--live-segment",
        action="store_true",
        help="of a segmented chain, verify the live file alone, from its anchor (its checkpoint verified "
        "with --key or --keys, required; no closed segment read); not with --checkpoint or --witness-policy",
    )
    parser.add_argument(
        "--checkpoint",
        action="append",
        metavar="FILE",
        help="also prove the chain consistent with the signed checkpoints in FILE (repeatable; with --key "
        "alone: the chain's own CHAIN.tlog/checkpoints, and the checkpoints its segments' anchors carry)",
    )
    add_key_options(
        parser,
        "verifier key (string or file; repeatable): check the checkpoints' signatures; without "
        "--checkpoint, prove the chain consistent with its own CHAIN.tlog/checkpoints",
    )
    witness_policy_arg(
        parser,
        "a C2SP tlog-policy file: its log keys authenticate the checkpoints, and a checkpoint counts as "
        "witnessed only when its witnesses' cosignatures meet the witness policy's quorum",
    )
    parser.add_argument(
        "--max-unwitnessed",
        type=count_argument(0),
        metavar="N",
        help="with --witness-policy: up to N records may lie beyond the largest quorum-attested checkpoint "
        "(default 0: any is insufficient evidence, exit 3)",
    )
    parser.add_argument(
        "--all-cosignatures",
        action="store_true",
        help="with --witness-policy: check the cosignatures of every checkpoint (default: from the newest down, until "
        "the attested size and every witness's largest cosigned size are known; older ones are listed as "
        "not checked)",
    )
    parser.set_defaults(handler=_run, reads_chains=True)


_RETIRED_NOTES: Final = re.compile(r"checkpoints\.[0-9]{6}\.jsonl(\.gz)?")
"""The name of a file of old checkpoint entries in ``CHAIN.archive/`` (``logstore.note_retirement``)."""


def _run(args: argparse.Namespace) -> int:
    path: str = input_file(args.chain)
    if args.max_unwitnessed is not None and not args.witness_policy:
        raise CliError("--max-unwitnessed goes with --witness-policy")
    if args.all_cosignatures and not args.witness_policy:
        raise CliError("--all-cosignatures goes with --witness-policy")
    if _RETIRED_NOTES.fullmatch(os.path.basename(path)):
        raise CliError(
            f"{path}: old entries of the log's checkpoints file that prune moved out (docs/chain-format.md "
            "14.5), not a segment's archive: no chain or archive needs them to verify"
        )
    if path.endswith(".proof"):
        raise CliError(
            f"{path}: an archive's proof, not a chain: verify the archive it proves instead "
            f"({path.removesuffix('.proof')}.gz, or without .gz when archived with --no-compress)"
        )
    if is_archive(path):
        return verify_archive(args, path)
    jobs = cap_jobs(args.jobs)
    if args.live_segment and (args.checkpoint or args.witness_policy):
        raise CliError(
            "--live-segment checks the live file from its anchor, without --checkpoint or --witness-policy"
        )
    if args.live_segment and not (args.key or args.keys):
        raise CliError("--live-segment needs --key or --keys: the anchor's checkpoint must be verified")
    policy = read_witness_policy(args.witness_policy) if args.witness_policy else None
    keys = log_keys(policy, [], args.witness_policy) if policy is not None else None
    pruned = _pruned(path)
    start = pruned.min_index if pruned is not None and not args.live_segment else 0
    against = None if args.live_segment else checkpoint_inputs(args, path, keys, start)
    result, report = _verify_chain(args, path, jobs, against, start)
    kept = kept_records(path, pruned, *(against or ((), ()))) if pruned is not None and start else None
    witnessed = None
    if policy is not None and report is not None and against is not None:
        witnessed = policy_verdict(
            args.witness_policy,
            policy,
            against[0],
            report.verdicts,
            intact=result.intact,
            chain_size=report.chain_size,
            extra_logs=against[1],
            max_unwitnessed=args.max_unwitnessed,
            all_cosignatures=args.all_cosignatures,
        )
    _print(args, path, result, report, witnessed, read_refusals(path), pruned, kept)
    holds = report is None or (report.ok and report.tiles.ok)  # a damaged tile store is a finding too
    if not (result.intact and holds) or (kept is not None and kept.problem is not None):
        return EXIT_FINDING
    return witnessed.exit_code if witnessed is not None else EXIT_OK


def _pruned(path: str) -> Pruned | None:
    try:
        return LogStore(path).read_pruned()
    except StateError as exc:
        raise CliError(str(exc)) from None


def _verify_chain(
    args: argparse.Namespace,
    path: str,
    jobs: int,
    against: tuple[list[str], list[str]] | None,
    start: int,
) -> tuple[VerifyResult, ConsistencyReport | None]:
    """The chain's verdict, and with checkpoints their report, from one read (docs/chain-format.md 13.7),
    from ``start`` (a pruned chain's minimum index) on."""
    bar = _ProgressBar(sys.stderr) if _wants_progress(args, path) else None
    report = None
    try:
        if against is None:
            result = verify_pass(
                path,
                jobs=jobs,
                strict=args.strict,
                byte_progress=None if bar is None else bar.update,
                verifiers=[KeyWindow.parse(key) for key in read_log_keys(args.key, args.keys)],
                live_only=args.live_segment,
                start=start,
            ).result
        else:
            result, report = check_checkpoints(
                path,
                *against,
                jobs=jobs,
                strict=args.strict,
                byte_progress=None if bar is None else bar.update,
                start=start,
            )
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a chain file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        if bar is not None:
            bar.close()
    if _not_a_chain(result):
        raise CliError(f"{path}: not a decision chain: its first line is not a record ({result.detail})")
    return result, report


def _print(
    args: argparse.Namespace,
    path: str,
    result: VerifyResult,
    report: ConsistencyReport | None,
    witnessed: WitnessPolicyVerdict | None,
    refusals: Refusals,
    pruned: Pruned | None,
    kept: Kept | None,
) -> None:
    """The verdict; of a pruned chain, what was pruned (``kept``: checked from its minimum index, its first
    record kept authenticated or not; None for the live file alone)."""
    view = kept if kept is not None else None if pruned is None else Kept(pruned)
    if args.json:
        out = result.to_dict()
        out["refusals"] = refusals.as_dict()
        out["left_beside"] = list(left_beside(path))
        if view is not None:
            out["pruned"] = view.as_dict()
        if report is not None:
            out["checkpoints"] = report.to_dict()
            out["unservable_entries"] = [
                {"seq": e.seq, "bundle": e.bundle, "length": e.length} for e in unservable_bundles(path)
            ]
        if witnessed is not None:
            out["witnessed"] = witnessed.to_dict()
        print(json.dumps(out, sort_keys=True))
        return
    print(_human(result, result.first_seq if kept is None else kept.start))
    for name in left_beside(path):
        print(f"  {left_beside_line(name)}")
    lines = kept.lines() if kept is not None else [] if pruned is None else [pruned.describe()]
    print("".join(f"  {line}\n" for line in lines), end="")
    if kept is not None and kept.problem is not None:
        print(f"BROKEN: {kept.problem}")
    if report is not None:
        print(human_report(path, report))
    if witnessed is not None:
        print("\n".join(verdict_lines(witnessed)))
    for line in refusals.lines():
        print(f"REFUSED: {line}")


def _not_a_chain(result: VerifyResult) -> bool:
    """No line of the file is a record: its first one is unparseable (too long, not UTF-8, not JSON).
    That is unusable input (exit 2), not a chain that breaks (exit 1)."""
    reason = getattr(result.reason, "value", result.reason)
    return result.records == 0 and result.first_bad_seq == 0 and reason == "unparseable"


def _wants_progress(args: argparse.Namespace, path: str) -> bool:
    if args.no_progress or not sys.stderr.isatty():
        return False
    try:
        return os.path.getsize(path) >= _PROGRESS_MIN_BYTES
    except OSError:
        return False


def _human(result: VerifyResult, start: int = 0) -> str:
    """The chain's verdict; checked from ``start`` (a pruned chain's minimum index), what was verified
    before a break counts from there."""
    if result.intact:
        if result.records == 0:
            return f"{result.path}: intact (empty chain, 0 records)"
        first = result.first_seq
        read = (
            f"intact from seq {first}: {result.records - first} records"
            if first
            else f"intact: {result.records} records"
        )
        head = f"{result.path}: {read}, head seq {result.head_seq}, head hash {result.head_hash}"
        return "\n".join([head, *_dropped(result)])
    prefix = "TORN TAIL" if result.reason == "torn-tail" else "BROKEN"
    lines = [
        f"{result.path}: {prefix} at seq {result.first_bad_seq} (line {result.line}, byte {result.offset}): "
        f"{result.reason}",
        f"  {result.detail}",
    ]
    if result.records > start:
        lines.append(
            f"  verified before it: {result.records - start} records (seq {start}..{result.head_seq}), "
            f"head hash {result.head_hash}"
        )
    else:
        lines.append("  verified before it: no records" + (f" (pruned below seq {start})" if start else ""))
    lines.extend(_dropped(result))
    if result.torn_tail is not None:
        lines.append(
            "  every complete record verifies; the next append moves the torn bytes to a quarantine file "
            "beside the chain and records a chain-quarantine event"
        )
    return "\n".join(lines)


def _dropped(result: VerifyResult) -> list[str]:
    """The sentence docs/chain-format.md section 7 promises: records a writer had to drop, as the
    chain's own ``records-dropped`` events say (a recorded gap, not tampering)."""
    if not result.dropped_events:
        return []
    return [
        f"  dropped: {result.dropped_records} records in {result.dropped_events} gap(s) recorded by the "
        "chain (records-dropped events: a writer could not write them; not tampering)"
    ]


class _ProgressBar:
    """A one-line bar on a terminal, redrawn at most ten times a second."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last = 0.0
        self._started = time.monotonic()
        self._drawn = False

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < _PROGRESS_INTERVAL or total <= 0:
            return
        self._last = now
        fraction = min(1.0, done / total)
        width = 30
        filled = int(fraction * width)
        rate = done / max(now - self._started, 1e-9) / 1e6
        self._stream.write(
            f"\rverifying [{'#' * filled}{'.' * (width - filled)}] {fraction:6.1%} "
            f"{done / 1e6:,.0f}/{total / 1e6:,.0f} MB {rate:,.0f} MB/s"
        )
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\r\033[K")
            self._stream.flush()
