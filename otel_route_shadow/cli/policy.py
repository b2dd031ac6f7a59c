"""``policy`` subcommand: check a policy file, and keep versioned snapshots of policy sets (D5).

Exit codes: ``exit_codes.COMMANDS["policy check"]`` and the other ``policy`` actions'; unusable input is
one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from otel_route_shadow.cli.common import CliError, count_argument, problem_line
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, EXIT_USAGE, epilog
from otel_route_shadow.core import PolicyProblem
from otel_route_shadow.store import (
    COMMAND_READ_WAIT_S,
    CorruptSnapshotError,
    HistoryEntry,
    InvalidPolicySetError,
    PolicyFile,
    PolicyFileError,
    PolicyStoreError,
    RevisionCorruptError,
    RoutingPolicyStore,
    SnapshotDiff,
    SnapshotLoad,
    StoreIOError,
    canonical_policy_dumps,
    read_policy_file,
)

__all__ = ["register"]

_IO_KINDS = frozenset(
    {"store-not-a-directory", "store-unreadable", "history-unreadable", "unreadable", "internal-error"}
)
"""Load problems that say the directory could not be read, not that its content is wrong."""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "policy",
        help="check policy files; save, show, diff and repair versioned policy snapshots",
        description=(
            "Check a policy file, and keep it as versioned, hashed snapshots in a store directory. "
            "A corrupt store holds every decision (snapshot-unavailable) and refuses saves until "
            "'policy repair'."
        ),
    )
    commands = parser.add_subparsers(dest="policy_command", required=True, metavar="ACTION")

    _action(
        commands,
        "check",
        "validate a policy file; exit 1 when it has an error (or, with --strict, a warning)",
        _check,
        file=True,
        store=False,
        json=False,
        strict=True,
    )
    _action(
        commands,
        "save",
        "validate FILE and save it as the store's next revision",
        _save,
        file=True,
        strict=True,
    )
    _action(commands, "show", "state, revision, hash and policy count; exit 1 when corrupt", _show)
    _action(commands, "history", "every revision, verified; exit 1 when any is not ok", _history)
    diff = _action(commands, "diff", "policies added, removed and changed (by field) from A to B", _diff)
    diff.add_argument("a", metavar="A", type=count_argument(0), help="revision number (0: the empty set)")
    diff.add_argument("b", metavar="B", type=count_argument(0), help="revision number")
    _action(
        commands, "repair", "move a corrupt snapshot aside with its evidence so saving can continue", _repair
    )
    export = _action(
        commands,
        "export",
        "print a revision (default: the current one) as a policy file for 'policy save'",
        _export,
        json=False,
    )
    export.add_argument("--revision", type=count_argument(0), default=None, metavar="N")


def _action(
    commands: Any,
    name: str,
    help: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    file: bool = False,
    store: bool = True,
    json: bool = True,
    strict: bool = False,
) -> argparse.ArgumentParser:
    """The ``policy NAME`` parser, with the arguments its handler reads."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, epilog=epilog(f"policy {name}"))
    if file:
        parser.add_argument("file", metavar="FILE", help='policy file: {"policies": [...]}')
    if store:
        parser.add_argument("--store", required=True, type=Path, metavar="DIR", help="policy store directory")
    if json:
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    if strict:
        parser.add_argument(
            "--strict",
            action="store_true",
            help="treat warnings (unreachable-policy) as errors: exit 1, and save nothing",
        )
    parser.set_defaults(handler=handler)
    return parser


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def _read(path: str) -> PolicyFile:
    try:
        return read_policy_file(path)
    except PolicyFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _store_error(store: Path, exc: PolicyStoreError) -> CliError:
    """A finding (exit 1) for a revision whose copy does not verify, else a usage error (exit 2)."""
    # I/O errors already name the store directory; the others are about something inside it.
    message = str(exc) if isinstance(exc, StoreIOError) else f"{store}: {exc}"
    return CliError(message, EXIT_FINDING if isinstance(exc, RevisionCorruptError) else EXIT_USAGE)


def _load(store: RoutingPolicyStore) -> SnapshotLoad:
    """The current snapshot's verdict; unusable input (exit 2) for a store that cannot be read, and for one
    without ``current.json`` whose lock a writer holds: its ``absent`` is no fact (a first save may be
    between its two writes), and its empty placeholder no policy set."""
    load = store.load()
    if load.state == "corrupt" and load.problem_kind in _IO_KINDS:
        raise CliError(f"{store.root}: {load.problem}", EXIT_USAGE)
    if load.snapshot.loading:
        raise CliError(f"{store.root}: {load.note}; nothing read", EXIT_USAGE)
    return load


def _count(problems: Iterable[PolicyProblem]) -> int:
    """How many problems a capped listing stands for (a summary line counts its ``count``)."""
    return sum(problem.count for problem in problems)


def _warning_line(source: str, problem: PolicyProblem) -> str:
    line = problem_line(source, problem)
    return f"{source}: warning: {line[len(source) + 2 :]}"


def _check(args: argparse.Namespace) -> int:
    policy_file = _read(args.file)
    source = policy_file.source
    for problem in policy_file.problems:
        print(problem_line(source, problem))
    for problem in policy_file.warnings:
        print(_warning_line(source, problem))
    errors, warnings = _count(policy_file.problems), _count(policy_file.warnings)
    if errors or (warnings and args.strict):
        print(f"{source}: {errors} error(s), {warnings} warning(s)", file=sys.stderr)
        return EXIT_FINDING
    if warnings:
        print(f"{source}: {len(policy_file.policies)} policies, no errors, {warnings} warning(s)")
        return EXIT_OK
    print(f"{source}: {len(policy_file.policies)} policies, no problems")
    return EXIT_OK


def _refuse(source: str, store: Path, problems: Iterable[PolicyProblem]) -> int:
    listed = list(problems)
    for problem in listed:
        line = _warning_line(source, problem) if problem.warning else problem_line(source, problem)
        print(line, file=sys.stderr)
    print(f"{source}: refused, {_count(listed)} problem(s); nothing written to {store}", file=sys.stderr)
    return EXIT_FINDING


def _store(args: argparse.Namespace) -> RoutingPolicyStore:
    """The store ``--store`` names, as a command reads it (waiting for a writer up to
    :data:`~otel_route_shadow.store.COMMAND_READ_WAIT_S`, where a spawn waits milliseconds)."""
    return RoutingPolicyStore(args.store, read_lock_wait=COMMAND_READ_WAIT_S)


def _save(args: argparse.Namespace) -> int:
    policy_file = _read(args.file)
    if policy_file.problems or (args.strict and policy_file.warnings):
        return _refuse(policy_file.source, args.store, (*policy_file.problems, *policy_file.warnings))
    for problem in policy_file.warnings:
        print(_warning_line(policy_file.source, problem), file=sys.stderr)
    store = _store(args)
    try:
        result = store.save(policy_file.policies, strict=args.strict)
    except InvalidPolicySetError as exc:
        return _refuse(policy_file.source, args.store, exc.problems)
    except CorruptSnapshotError as exc:
        raise CliError(
            f"{args.store}: corrupt ({exc.problem}); nothing written; inspect with "
            f"'otel-route-shadow policy show --store {args.store}', then run "
            f"'otel-route-shadow policy repair --store {args.store}'",
            EXIT_FINDING,
        ) from None
    except PolicyStoreError as exc:
        raise _store_error(args.store, exc) from None
    if args.json:
        _print_json({"store": str(args.store), **result.to_dict()})
    elif result.created:
        print(
            f"saved revision {result.revision} to {args.store} "
            f"(hash {result.content_hash}, {result.policy_count} policies)"
        )
    else:
        print(
            f"unchanged: revision {result.revision} in {args.store} already holds this policy set "
            f"(hash {result.content_hash})"
        )
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    store = _store(args)
    load = _load(store)
    if args.json:
        _print_json({"store": str(args.store), **load.to_dict()})
        return EXIT_FINDING if load.state == "corrupt" else EXIT_OK
    rows: list[tuple[str, str]] = [("store", str(args.store)), ("state", load.state)]
    if load.state == "corrupt":
        rows.append(("problem", load.problem or "unknown"))
        rows.append(("revision", "0 (a corrupt snapshot has no revision)"))
        if load.claimed_revision is not None:
            rows.append(("claims", f"revision {load.claimed_revision} (not trusted)"))
        rows.append(("hash", "-"))
        rows.append(("policies", "0"))
        rows.append(
            (
                "effect",
                "decisions hold with snapshot-unavailable; saves are refused until "
                f"'otel-route-shadow policy repair --store {args.store}'",
            )
        )
    else:
        rows.append(("revision", str(load.revision)))
        rows.append(("hash", load.content_hash))
        rows.append(("policies", str(load.policy_count)))
        if load.saved_at is not None:
            rows.append(("saved_at", load.saved_at))
        if load.note is not None:
            rows.append(("note", load.note))
    for label, value in rows:
        print(f"{label + ':':<10}{value}")
    return EXIT_FINDING if load.state == "corrupt" else EXIT_OK


def _history_row(entry: HistoryEntry) -> str:
    if entry.state == "missing":
        span = (
            str(entry.revision)
            if entry.through in (None, entry.revision)
            else f"{entry.revision}..{entry.through}"
        )
        return f"{span:<12}{'-':<29}{'-':<14}{'-':<10}missing"
    if entry.state == "corrupt":
        return f"{entry.revision:<12}{'-':<29}{'-':<14}{'-':<10}corrupt: {entry.problem}"
    mark = "  (current)" if entry.current else ""
    return (
        f"{entry.revision:<12}{entry.saved_at or '-':<29}{(entry.content_hash or '-')[:12]:<14}"
        f"{entry.policy_count if entry.policy_count is not None else '-':<10}ok{mark}"
    )


def _history(args: argparse.Namespace) -> int:
    store = _store(args)
    load = _load(store)
    try:
        entries = store.history(load)
    except PolicyStoreError as exc:
        raise _store_error(args.store, exc) from None
    bad = load.state == "corrupt" or any(entry.state != "ok" for entry in entries)
    if args.json:
        _print_json(
            {
                "store": str(args.store),
                "current": load.to_dict(),
                "revisions": [entry.to_dict() for entry in entries],
            }
        )
        return EXIT_FINDING if bad else EXIT_OK
    if not entries:
        print(f"{args.store}: no revisions")
    else:
        print(f"{'REVISION':<12}{'SAVED_AT':<29}{'HASH':<14}{'POLICIES':<10}STATE")
        for entry in entries:
            print(_history_row(entry))
    if load.state == "corrupt":
        print(f"current snapshot: corrupt: {load.problem}")
    elif load.note is not None and entries:
        print(f"current snapshot: {load.state}: {load.note}")
    return EXIT_FINDING if bad else EXIT_OK


def _render_value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _print_diff(diff: SnapshotDiff) -> None:
    print(
        f"revision {diff.from_revision} ({diff.from_hash[:12]}) -> "
        f"revision {diff.to_revision} ({diff.to_hash[:12]})"
    )
    if diff.identical:
        print("identical policy sets")
        return
    for policy_id in diff.added:
        print(f"+ added    {policy_id}")
    for policy_id in diff.removed:
        print(f"- removed  {policy_id}")
    for change in diff.changed:
        print(f"~ changed  {change.policy_id}")
        for field in change.fields:
            print(f"    {field.path}: {_render_value(field.before)} -> {_render_value(field.after)}")


def _diff(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        diff = store.diff(args.a, args.b)
    except PolicyStoreError as exc:
        raise _store_error(args.store, exc) from None
    if args.json:
        _print_json({"store": str(args.store), **diff.to_dict()})
    else:
        _print_diff(diff)
    return EXIT_OK


def _repair(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        result = store.repair()
    except PolicyStoreError as exc:
        raise _store_error(args.store, exc) from None
    if args.json:
        _print_json({"store": str(args.store), **result.to_dict()})
        return EXIT_OK
    if not result.repaired:
        print(f"{args.store}: state {result.state_before}; nothing to repair")
        return EXIT_OK
    quarantine = result.quarantine
    print(f"{args.store}: was corrupt: {result.problem}")
    for name in result.moved:
        print(f"moved {name} to {quarantine}/{name}")
    if not result.moved:
        print("nothing to move (the current snapshot was already missing)")
    print(f"evidence (problem, sizes and SHA-256 of what was moved): {quarantine}/evidence.json")
    print(
        "the store now reads 'absent': no managed policy applies until the next save, "
        f"which will be revision {result.next_revision}"
    )
    if result.reinstatable is not None:
        print(
            f"revision {result.reinstatable} is the newest revision the history vouches for; to reinstate it:"
        )
        print(
            f"  otel-route-shadow policy export --store {args.store} --revision {result.reinstatable} "
            "> policies.json"
        )
        print(f"  otel-route-shadow policy save policies.json --store {args.store}")
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.revision is None:
        load = _load(store)
        if load.state == "corrupt":
            raise CliError(f"{args.store}: corrupt ({load.problem}); nothing to export", EXIT_FINDING)
        snapshot = load.snapshot
    else:
        try:
            snapshot = store.revision(args.revision)
        except PolicyStoreError as exc:
            raise _store_error(args.store, exc) from None
    _print_json({"policies": canonical_policy_dumps(snapshot.policies)})
    return EXIT_OK
