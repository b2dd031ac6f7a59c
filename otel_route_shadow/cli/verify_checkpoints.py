"""The ``--checkpoint/--key/--keys`` part of ``otel-route-shadow verify``: the chain against signed checkpoints."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from otel_route_shadow.chain import VerifyResult, anchor_checkpoints
from otel_route_shadow.cli.checkpoints import read_log_keys, read_log_notes, read_notes, read_published_note
from otel_route_shadow.cli.common import CliError
from otel_route_shadow.logstore import (
    CHECKPOINT_FILE,
    CHECKPOINTS_FILE,
    MAX_ENTRY_BYTES,
    ConsistencyReason,
    ConsistencyReport,
    LogStore,
    LongEntry,
    bundle_path,
    check_chain,
    long_entries,
)
from otel_route_shadow.tlog import REBUILD_HINT, Malformed, NoteError, checkpoint_of

__all__ = ["check_checkpoints", "checkpoint_inputs", "entry_lines", "human_report", "unservable_bundles"]

_SHOWN = 5


def checkpoint_inputs(
    args: argparse.Namespace, chain: str, policy_keys: list[str] | None = None, start: int = 0
) -> tuple[list[str], list[str]] | None:
    """(notes, log keys) when ``--checkpoint``, ``--key``, ``--keys`` or a policy (its log keys:
    ``policy_keys``) was given, else None. The notes are those of the files given (default: the log's
    own, when it has them), and those the chain's anchors carry from seq ``start`` on, so each anchor's
    root is held against the tree too (a malformed one is the chain's verdict, ``anchor-mismatch``, not
    read here). A segmented chain without its log folder is thus checked against its anchors' notes."""
    given: list[str] | None = args.checkpoint
    if not given and not args.key and not args.keys and policy_keys is None:
        return None
    sources = [(path, read_notes(path)) for path in given] if given else _published(chain)
    notes = [
        _well_formed(note, path, number) for path, found in sources for number, note in enumerate(found, 1)
    ]
    notes += [note for note in _anchor_notes(chain, start) if note not in notes]
    notes = list(dict.fromkeys(notes))  # a note read twice (``checkpoint`` is most often a copy) is one
    if not notes:
        if sources:
            raise CliError(f"{sources[0][0]}: holds no checkpoint")
        raise CliError(f"{LogStore(chain).file(CHECKPOINTS_FILE)}: no such checkpoint file")
    keys = read_log_keys(args.key, args.keys)
    return notes, keys + [k for k in policy_keys or [] if k not in keys]


def _anchor_notes(chain: str, start: int) -> list[str]:
    """The well-formed checkpoints the chain's anchors carry (an unreadable chain: none; the pass says why)."""
    try:
        found = anchor_checkpoints(chain, start)
    except (OSError, ValueError):
        return []
    return [note for note in found if _parses(note)]


def _parses(note: str) -> bool:
    try:
        checkpoint_of(note)
    except Malformed:
        return False
    return True


def _published(chain: str) -> list[tuple[str, list[str]]]:
    """The log's own checkpoint files and their notes: ``checkpoints``, and ``checkpoint`` when it holds
    one, the evidence ``report --witness-policy`` reads too (a cosignature stored in either counts)."""
    store = LogStore(chain)
    path = store.file(CHECKPOINTS_FILE)
    sources = [(path, read_log_notes(store))] if os.path.lexists(path) else []
    note = read_published_note(store)
    return sources + ([(store.file(CHECKPOINT_FILE), [note] if note else [])] if note is not None else [])


def _well_formed(note: str, path: str, number: int) -> str:
    try:
        checkpoint_of(note)
    except Malformed as exc:
        raise CliError(f"{path}: checkpoint {number}: {exc}") from None
    return note


def check_checkpoints(
    chain: str,
    notes: list[str],
    keys: list[str],
    jobs: int = 1,
    *,
    strict: bool = False,
    byte_progress: Callable[[int, int], None] | None = None,
    start: int = 0,
) -> tuple[VerifyResult, ConsistencyReport]:
    """The chain's verdict and the report, from one pass over the chain (from ``start``, a pruned
    chain's minimum index, on); a malformed checkpoint is unusable input (exit 2), not a finding. A
    chain that cannot be read raises ``OSError``."""
    try:
        checked = check_chain(
            chain, notes, keys, jobs=jobs, strict=strict, byte_progress=byte_progress, start=start
        )
    except NoteError as exc:
        raise CliError(f"verifier key: {exc}") from None
    for verdict in checked.report.verdicts:
        if verdict.reason is ConsistencyReason.MALFORMED:
            raise CliError(f"checkpoint #{verdict.index + 1}: malformed: {verdict.detail}")
    return checked.chain, checked.report


def human_report(chain: str, report: ConsistencyReport) -> str:
    """A few lines: the overall verdict, each failing checkpoint, and the unprotected records."""
    good = sum(1 for v in report.verdicts if v.ok)
    if report.ok:
        head = f"{chain}: consistent with {good} checkpoint(s), largest size {report.checkpointed_size}"
        if not report.authenticated:
            head += " (UNAUTHENTICATED: no verifier key given; unsigned checkpoints prove nothing to a third party)"
    else:
        head = f"{chain}: CHECKPOINTS BROKEN: {report.reason.value}"
        if report.first_bad_seq is not None:
            head += f", first changed seq {report.first_bad_seq}"
        elif report.chain_broken_seq is not None:
            head += f" at seq {report.chain_broken_seq}"
    lines = [head]
    for verdict in report.verdicts:
        if not verdict.ok:
            size = "?" if verdict.size is None else verdict.size
            lines.append(
                f"  checkpoint #{verdict.index + 1} (size {size}): {verdict.reason.value}: {verdict.detail}"
            )
    lines.append(
        f"  {report.unprotected} of {report.chain_size} records lie beyond the largest verified checkpoint, unprotected"
    )
    lines.extend(_tile_lines(chain, report))
    lines.extend(entry_lines(unservable_bundles(chain)))
    return "\n".join(lines)


def unservable_bundles(chain: str) -> list[LongEntry]:
    """The chain's lines too long to be tlog-tiles entries (an older writer's), whose entry bundles
    ``serve`` cannot give (an unreadable chain: none; ``verify`` reports it already)."""
    try:
        return long_entries(chain)
    except OSError:
        return []


def entry_lines(long: list[LongEntry]) -> list[str]:
    """The tile-health report's lines about entry bundles that cannot be served."""
    if not long:
        return []
    bundles = sorted({entry.bundle for entry in long})
    out = [
        f"  entry bundles: {len(bundles)} cannot be served to tlog-tiles clients ({len(long)} line(s) over "
        f"{MAX_ENTRY_BYTES:,} bytes, written before the writer kept lines under that bound)"
    ]
    for entry in long[:_SHOWN]:
        out.append(
            f"    {bundle_path(entry.bundle)} (and its partial bundles): seq {entry.seq}, {entry.length:,} bytes"
        )
    if len(long) > _SHOWN:
        out.append(f"    ... and {len(long) - _SHOWN} more")
    return out


def _tile_lines(chain: str, report: ConsistencyReport) -> list[str]:
    """The tile store's health, apart from the chain's."""
    tiles = report.tiles
    where = LogStore(chain).path
    if tiles.ok:
        if tiles.size:
            return [f"  tiles: intact ({tiles.read} tiles of the tree of {tiles.size} records checked)"]
        return [f"  tiles: {tiles.note}"] if tiles.note else []
    problems = [*tiles.damaged, *tiles.missing]
    out = [f"  TILES DAMAGED in {where}: {len(tiles.damaged)} damaged, {len(tiles.missing)} missing"]
    out += [f"    {problem}" for problem in problems[:_SHOWN]]
    if len(problems) > _SHOWN:
        out.append(f"    ... and {len(problems) - _SHOWN} more")
    out.append(f"    {REBUILD_HINT}")
    return out
