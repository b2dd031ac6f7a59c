"""``explain`` subcommand: resolve route contexts against a policy set and print the decisions.

``--context FILE`` prints one decision as indented JSON; ``--context -`` (or ``--jsonl``) reads JSON
lines and prints one compact decision per line. The policies come from a policy file
(``--policies``), a snapshot store (``--store``), or neither (the empty snapshot of a host that never
wrote a policy: every decision is legacy compatibility).

Contexts are sanitized exactly as the span layer sanitizes them (credential-shaped strings become
``[REDACTED]``) before they are explained, so a decision printed here carries the same
``decision_id`` as the span and the chain record of the same spawn, and nothing printed (decisions
or error lines) can carry a secret.

A context, a file or a line, is at most ``MAX_LINE_BYTES`` (4 MiB, the chain's record limit) and holds
at most ``core.MAX_ACCOUNTS`` accounts: a larger one is refused (exit 2) before it costs more than
its read, so the largest context admitted is explained in well under a second (docs/benchmarks.md).

Exit codes: ``exit_codes.COMMANDS["explain"]``. In JSON-lines mode a bad line is reported on stderr,
the other lines are still explained, and the exit code is 2 at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TextIO

from pydantic import ValidationError

from otel_route_shadow.cli.common import (
    MAX_LINE_BYTES,
    STDIN,
    CliError,
    input_file,
    json_lines,
    parse_json_text,
    problem_line,
    read_text_file,
)
from otel_route_shadow.cli.exit_codes import EXIT_OK, EXIT_USAGE, epilog
from otel_route_shadow.core import (
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    explain_batch,
    explain_policies,
    policy_set_hash,
    reconcile_context,
    redact_text,
)
from otel_route_shadow.shadow import sanitize_context
from otel_route_shadow.store import (
    COMMAND_READ_WAIT_S,
    PolicyFileError,
    RoutingPolicyStore,
    read_policy_file,
)

__all__ = ["register"]

_CHUNK = 512
"""JSON lines are explained in chunks: one ``explain_batch`` per chunk, output flushed per chunk."""
_STORE_IO_KINDS = frozenset({"store-not-a-directory", "store-unreadable", "history-unreadable", "unreadable"})
"""Store problems that mean the directory could not be read (exit 2), not that its content is
corrupt (which holds every decision with ``snapshot-unavailable``)."""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "explain",
        help="resolve route contexts against a policy set and print the explained decisions",
        description=(
            "Resolve route contexts against a policy set and print each decision as JSON, with its "
            "explanation: the policies considered, the rung, the accounts, the snapshot and the "
            "decision id. Formats and reason codes: docs/core.md."
        ),
        epilog=epilog("explain"),
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--policies",
        metavar="FILE",
        help="policy file {\"policies\": [...]}; an invalid set is refused (see 'policy check')",
    )
    source.add_argument(
        "--store",
        metavar="DIR",
        type=Path,
        help="policy snapshot store directory (a corrupt store holds with snapshot-unavailable)",
    )
    parser.add_argument(
        "--context",
        required=True,
        metavar="FILE",
        help="route context as JSON; '-' reads JSON lines from stdin, one decision per output line",
    )
    parser.add_argument(
        "--jsonl", action="store_true", help="read the context FILE as JSON lines (implied by '-')"
    )
    parser.add_argument(
        "--all-policies",
        action="store_true",
        help="add 'all_policies': every policy of the set and why it did or did not apply",
    )
    parser.set_defaults(handler=_explain)


# -- the policy snapshot ----------------------------------------------------------------------------


def _snapshot_from_file(path: str) -> PolicySnapshot:
    input_file(path)
    try:
        policy_file = read_policy_file(path)
    except PolicyFileError as exc:
        raise CliError(_scrub(str(exc))) from None
    if policy_file.problems:
        for problem in policy_file.problems:
            print(_scrub(problem_line(policy_file.source, problem)), file=sys.stderr)
        raise CliError(
            f"{policy_file.source}: {len(policy_file.problems)} problem(s); explain refuses an invalid "
            f"policy set (list them with 'otel-route-shadow policy check {policy_file.source}')"
        )
    return PolicySnapshot(
        policies=policy_file.policies, revision=0, content_hash=policy_set_hash(policy_file.policies)
    )


def _snapshot_from_store(root: Path) -> PolicySnapshot:
    load = RoutingPolicyStore(root, read_lock_wait=COMMAND_READ_WAIT_S).load()
    if load.state == "corrupt":
        if load.problem_kind in _STORE_IO_KINDS:
            raise CliError(f"{root}: {load.problem}")
        _note(f"{root}: corrupt ({load.problem}); every decision holds with snapshot-unavailable")
    elif not load.snapshot.available:  # a writer holds the store: decisions hold, snapshot-loading
        _note(f"{root}: {load.note}")
    elif load.state == "absent":
        _note(f"{root}: no policy snapshot saved; every decision is legacy compatibility")
    return load.snapshot


def _snapshot(args: argparse.Namespace) -> PolicySnapshot:
    if args.policies is not None:
        return _snapshot_from_file(args.policies)
    if args.store is not None:
        return _snapshot_from_store(args.store)
    _note("no --policies or --store: the empty snapshot; every decision is legacy compatibility")
    return PolicySnapshot()


def _note(message: str) -> None:
    print(f"otel-route-shadow: note: {_scrub(message)}", file=sys.stderr)


def _scrub(message: str) -> str:
    """Error and note lines name locations, not values; this is the second line of defence."""
    return redact_text(message)[0]


# -- contexts ---------------------------------------------------------------------------------------


def _context_problem(exc: ValidationError) -> str:
    """Pydantic error locations and messages, never the input values (a context may carry anything)."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(item)[:64] for item in error.get("loc", ()))
        parts.append(f"{loc or '<context>'}: {error.get('msg', 'invalid')}")
    return (
        "invalid context: " + "; ".join(parts[:5]) + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else "")
    )


def _parse_context(text: str, where: str) -> RouteContext:
    """Parse, validate and sanitize one context; every problem is a :class:`CliError` naming ``where``."""
    try:
        document = parse_json_text(text, where)
    except CliError as exc:
        raise CliError(_scrub(str(exc))) from None
    try:
        context = RouteContext.model_validate(document)
    except ValidationError as exc:
        raise CliError(_scrub(f"{where}: {_context_problem(exc)}")) from None
    try:
        sanitized, paths = sanitize_context(context)
    except Exception as exc:  # the CLI never shows a traceback for an input it was given
        raise CliError(f"{where}: cannot sanitize the context ({type(exc).__name__})") from None
    if paths:
        _note(f"{where}: redacted credential-shaped values at {', '.join(paths)}")
    derived, mismatched = reconcile_context(sanitized)  # as the span layer does (D7)
    if mismatched:
        _note(
            f"{where}: the legacy route's {', '.join(mismatched)} contradicted its stages; explained as derived"
        )
    return derived


def _json_lines(path: str) -> Iterator[tuple[int, RouteContext | CliError]]:
    """``(line number, context or the error for that line)``; blank lines are skipped.

    A line over the limit ends the input (``json_lines`` refuses the rest): its error is the last item.
    """
    source = "<stdin>" if path == STDIN else path
    try:
        for number, raw in json_lines(path):
            yield number, _context_of_line(raw, f"{source}:{number}")
    except CliError as exc:
        yield -1, exc


def _context_of_line(raw: bytes, where: str) -> RouteContext | CliError:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return CliError(f"{where}: not UTF-8 text (byte {exc.start})")
    if not text.strip():
        return _BLANK
    try:
        return _parse_context(text, where)
    except CliError as exc:
        return exc


_BLANK: Final = CliError("blank line")
"""A blank line: skipped, neither explained nor an error."""


# -- output -----------------------------------------------------------------------------------------


def _rendered(decision: RouteDecision, context: RouteContext, snapshot: PolicySnapshot, full: bool) -> Any:
    payload: dict[str, Any] = decision.model_dump(mode="json")
    if full:
        payload["all_policies"] = [row.model_dump(mode="json") for row in explain_policies(context, snapshot)]
    return payload


def _write(out: TextIO, value: Any, *, indent: int | None) -> None:
    # ASCII escapes keep the output total: a context may carry lone surrogates, which no encoding writes.
    if indent is None:
        out.write(json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n")
    else:
        out.write(json.dumps(value, ensure_ascii=True, indent=indent) + "\n")


def _chunks(
    items: Iterable[tuple[int, RouteContext | CliError]],
) -> Iterator[list[tuple[int, RouteContext | CliError]]]:
    chunk: list[tuple[int, RouteContext | CliError]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _explain_lines(path: str, snapshot: PolicySnapshot, full: bool) -> int:
    out = sys.stdout
    bad = 0
    for chunk in _chunks(item for item in _json_lines(path) if item[1] is not _BLANK):
        contexts = [item for _, item in chunk if isinstance(item, RouteContext)]
        decisions = iter(explain_batch(contexts, snapshot))
        for _, item in chunk:
            if isinstance(item, CliError):
                bad += 1
                out.flush()
                print(f"otel-route-shadow: {item}", file=sys.stderr)
                continue
            _write(out, _rendered(next(decisions), item, snapshot, full), indent=None)
        out.flush()
    if bad > 1:  # one bad line is said by its own error line
        source = "<stdin>" if path == STDIN else path
        print(f"otel-route-shadow: {source}: {bad} malformed lines not explained", file=sys.stderr)
    return EXIT_USAGE if bad else EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    snapshot = _snapshot(args)
    if args.context == STDIN or args.jsonl:
        return _explain_lines(args.context, snapshot, args.all_policies)
    context = _parse_context(read_text_file(args.context, max_bytes=MAX_LINE_BYTES), args.context)
    (decision,) = explain_batch([context], snapshot)
    _write(sys.stdout, _rendered(decision, context, snapshot, args.all_policies), indent=2)
    return EXIT_OK
