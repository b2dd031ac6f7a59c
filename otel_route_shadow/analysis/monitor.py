"""Following a fleet like a Certificate Transparency monitor: a state file keeps, per log, the last
checkpoint it was verified against and the report's aggregation up to it; a rerun reads only the
records after it (docs/reports.md, "Following a fleet", says it at length).

**The rerun.** Each log's newest checkpoint is checked as always (``analysis.fleet``); then the log is
*extended*: its records from the entry's size to the new size (a local chain's read from the entry's
byte offset ``end``, which counts the pruned segments' bytes so that a prune does not move it; a
remote log's from the entry bundle holding that index), each leaf hash appended to the entry's compact
range, must give the new checkpoint's root. That one comparison proves the new records *and* the
entry (the old checkpoint's consistency with the new one). A log that shrank, was pruned past the
entry's size, or does not extend is read in full with a warning; a remote that fails during a rerun is
excluded and keeps its entry.

The state file, and why it is untrusted input, is ``analysis.monitor_state``'s.
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Callable, Sequence
from dataclasses import replace

from otel_route_shadow.analysis.collector_pause import collector_paused
from otel_route_shadow.analysis.evidence import VERIFIED, note_evidence
from otel_route_shadow.analysis.figures import Report
from otel_route_shadow.analysis.fleet import (
    PendingLog,
    ReportSettings,
    chain_paths,
    combine,
    fleet_specs,
    is_remote,
    verifier_keys,
)
from otel_route_shadow.analysis.fleet_logs import EXCLUDED, Fleet, FleetLog, Followed
from otel_route_shadow.analysis.fleet_report import count_pending, prepare_logs
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import GroupSpec, as_specs
from otel_route_shadow.analysis.log_pass import (
    NotRecords,
    hashed_records,
    included_log,
    lines_after,
    links_from,
    roots_at,
)
from otel_route_shadow.analysis.monitor_state import (
    CellTable,
    LogState,
    ValueTable,
    check_state_path,
    log_entry,
    read_state,
    restore_aggregation,
    write_state,
)
from otel_route_shadow.analysis.remote import Fetch, PendingRemote, RemoteError, remote_records
from otel_route_shadow.analysis.report import Aggregation
from otel_route_shadow.analysis.source import Payloads
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.chain import ScanState
from otel_route_shadow.files import FileRefused
from otel_route_shadow.lines import LineTooLong
from otel_route_shadow.tlog import (
    CompactRange,
    LogKey,
    WitnessPolicy,
    checkpoint_of,
    decode_hash,
)

__all__ = ["follow_fleet"]


# ---------------------------------------------------------------------------------------------
# Extending one log from its entry


class _NotAnExtension(Exception):
    """The entry does not extend to the new checkpoint: the log is read in full."""


class _PrunedPast(_NotAnExtension):
    """The log's minimum index is above the entry's size: records between were never counted."""


def _extended(
    pending: PendingLog | PendingRemote,
    entry: LogState,
    settings: ReportSettings,
    records: Callable[[Callable[[bytes], None]], Payloads],
    cells: CellTable,
) -> tuple[CompactRange, Aggregation, ValueTable]:
    """The entry's tree and aggregation extended with ``records(add_leaf)``, the records from the
    entry's size to the new checkpoint's (see the module docstring). Raises :class:`_NotAnExtension`
    when the entry does not extend to the new root; a remote's ``RemoteError`` passes."""
    evidence = pending.evidence
    size = evidence.size or 0
    if evidence.origin != entry.origin:
        raise _NotAnExtension(f"the state is for origin {entry.origin!r}, the log is {evidence.origin!r}")
    if size < entry.size:
        raise _NotAnExtension(f"the checkpoint's size {size} is below the state's {entry.size}")
    kept = pending.start
    if entry.size < kept:
        raise _PrunedPast(
            f"its size {entry.size} is below the log's minimum index {kept} (pruned since): records "
            f"{entry.size}..{kept - 1} were never counted"
        )
    try:
        tree = CompactRange(entry.size, [decode_hash(node) for node in entry.frontier])
        old_root = decode_hash(entry.root)
        table = ValueTable(entry.aggregation.values, cells)
        aggregation = restore_aggregation(entry.aggregation, settings, table)
    except ValueError as exc:
        raise _NotAnExtension(f"an unusable entry ({exc})") from None
    if tree.root() != old_root:
        raise _NotAnExtension("the entry's subtree roots do not give its root")
    try:
        aggregation.feed(records(tree.append))
    except NotRecords as exc:
        raise _NotAnExtension(f"the new records: {exc}") from None
    except (OSError, LineTooLong, FileRefused) as exc:
        raise _NotAnExtension(f"the new records cannot be read ({exc})") from None
    if tree.size != size or tree.root() != pending.root:
        raise _NotAnExtension(
            f"the records from {entry.size} to {size} with the state's tree do not give the checkpoint's root: "
            "the log's history differs from the state's (a fork, a rewrite, or a damaged state)"
        )
    return tree, aggregation, table


def extend_log(
    pending: PendingLog | PendingRemote,
    entry: LogState,
    settings: ReportSettings,
    cells: CellTable,
    check_links: bool = True,
) -> tuple[FleetLog, Aggregation, ValueTable]:
    """The log counted up to its new checkpoint from ``entry`` (its cells rows of ``cells``): a local
    chain's new records read from the entry's byte offset, a remote's from the entry bundle holding
    its size (:func:`_extended`). A local chain's lines are checked as a full run checks them: the
    line before that offset must still end there, every line after the new checkpoint's size must
    verify (its hash, its link), and so must the new records unless ``check_links`` is False (an
    authenticated checkpoint vouches for them)."""
    if isinstance(pending, PendingRemote):
        tree, aggregation, table = _extended(
            pending, entry, settings, lambda add_leaf: remote_records(pending, entry.size, add_leaf), cells
        )
        return pending.included(entry.start, tree.nodes), aggregation, table
    ends, count = [(entry.end or 0) - pending.pruned_bytes], (pending.evidence.size or 0) - entry.size
    host, kept, path = pending.evidence.origin or pending.path, pending.start, pending.path
    links: list[ScanState] = []

    def records(add_leaf: Callable[[bytes], None]) -> Payloads:  # once the entry's checkpoint is judged
        if entry.end is None or ends[0] < 0:
            raise _NotAnExtension(f"its position {entry.end} lies in the log's pruned segments, or is none")
        links.append(links_from(path, ends[0], entry.size, kept))
        checked = links[0] if check_links else None
        return hashed_records(path, ends[0], count, host, add_leaf, ends, kept_from=kept, links=checked)

    tree, aggregation, table = _extended(pending, entry, settings, records, cells)
    try:
        after = links[0] if check_links or not count else links_from(path, ends[0], tree.size, kept)
        chain_records = tree.size + lines_after(path, ends[0], kept_from=kept, links=after)
    except NotRecords as exc:
        raise _NotAnExtension(f"the lines after its checkpoint: {exc}") from None
    except (OSError, LineTooLong) as exc:
        raise _NotAnExtension(f"the chain cannot be read after its checkpoint ({exc})") from None
    log = included_log(
        pending, chain_records, ends[0], tree.nodes, start=entry.start, pruned_bytes=pending.pruned_bytes
    )
    return log, aggregation, table


def forked(
    pending: PendingLog | PendingRemote,
    entry: LogState,
    verifiers: Sequence[LogKey],
    policy: WitnessPolicy | None,
) -> str | None:
    """Why the log is excluded although it does not extend from ``entry`` (a rebuild would count what
    its key contradicts or go back), or None (a damaged state, or nothing to tell it by: rebuilt). Both
    checkpoints must verify with the given keys, for one origin. A fork is proven by another root for
    the same size, or (a never-pruned local chain, read again for it) first records whose leaves give
    the new signed root but, at the old size, another root than the old one signs. A smaller new tree
    proves no fork (it may be an older copy, a stale cache): the log is excluded as older than the
    state, its entry kept."""
    new = pending.evidence
    if entry.note is None or new.verification != VERIFIED or new.size is None:
        return None
    old = note_evidence(entry.path, entry.note, 0, 0, verifiers=verifiers, policy=policy)
    if old.verification != VERIFIED or old.origin != new.origin:
        return None
    signed = checkpoint_of(entry.note)  # parsed once already: cannot raise
    accept = "a fork, proven by two signed checkpoints; --rebuild accepts its new history"
    if new.size < signed.size:
        return (
            f"its checkpoint of {new.size} records is older than the {signed.size} it signed before (the "
            "state's): a stale copy or a rollback, not counted; the state is kept (--rebuild counts it as it is)"
        )
    at_old = pending.root if new.size == signed.size else None
    if at_old is None and isinstance(pending, PendingLog) and pending.pruned is None:
        roots = roots_at(pending.path, signed.size, new.size)
        at_old = roots[0] if roots is not None and roots[1] == pending.root else None
    if at_old is None or at_old == signed.root:
        return None
    return (
        f"its first {signed.size} records, under its checkpoint of {new.size}, give the root "
        f"{b64encode(at_old).decode()}, not the {b64encode(signed.root).decode()} it signed for them "
        f"before (the state's checkpoint) ({accept})"
    )


# ---------------------------------------------------------------------------------------------
# The fleet, followed


@collector_paused()
def follow_fleet(
    inputs: Sequence[str],
    state_path: str,
    *,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    window: TimeWindow | None = None,
    verifiers: Sequence[LogKey] = (),
    policy: WitnessPolicy | None = None,
    jobs: int | None = None,
    examples: int = 3,
    min_spawns: int = MIN_SPAWNS,
    rebuild: bool = False,
    fetch: Fetch | None = None,
) -> Report:
    """The fleet report of ``inputs`` (chains, ``serve`` URLs read through ``fetch``), each log extended
    from the state file at ``state_path`` where it can and read in full where it cannot
    (``report.fleet.followed`` says which, and why; those in worker processes as ``fleet.fleet_jobs``
    chooses from ``jobs``); the state file is then rewritten, an excluded remote log's entry kept; the
    garbage collector is paused meanwhile. Raises ``FleetError`` as
    :func:`build_fleet_report` does."""
    paths = chain_paths(inputs)
    check_state_path(state_path, paths)
    settings = ReportSettings(fleet_specs(as_specs(by)), window or TimeWindow(), examples, min_spawns)
    warnings: list[str] = []
    entries, cells = ({}, CellTable()) if rebuild else read_state(state_path, settings, warnings)
    prepared = prepare_logs(paths, verifiers, policy, fetch)
    unvouched = not verifier_keys(verifiers, policy)  # no key: every line's link is checked, as in full
    done: dict[str, tuple[FleetLog, Aggregation, ValueTable | None]] = {}
    checked: dict[str, FleetLog] = {}
    extended: list[str] = []
    held: set[str] = set()  # excluded with their entry kept: the next run says it again
    for item in [item for item in prepared if not isinstance(item, FleetLog) and item.path in entries]:
        try:
            done[item.path] = extend_log(item, entries[item.path], settings, cells, unvouched)
            extended.append(item.path)
        except _NotAnExtension as exc:
            fork = forked(item, entries[item.path], verifiers, policy)
            if fork is None and isinstance(exc, _PrunedPast) and is_remote(item.path):
                fork = f"{exc}; a remote's minimum index is not signed: --rebuild (every log read in full) counts it from there"
            if fork is not None:  # excluded, its entry kept: the next run proves it again
                origin, evidence = item.evidence.origin, item.evidence
                checked[item.path] = FleetLog(
                    item.path, EXCLUDED, origin=origin, reason=fork, evidence=evidence
                )
                held.add(item.path)
                continue
            if is_remote(item.path):  # its entry stays until its full read includes it
                warnings.append(
                    f"state of {item.path}: {exc}: read in full, its entry kept until it is counted"
                )
                continue
            del entries[item.path]
            rebuilt = f"rebuilt from seq {item.start}" if item.start else "rebuilt from scratch"
            warnings.append(f"state of {item.path}: {exc}: {rebuilt}")
        except RemoteError as exc:  # hangs or answers garbage: excluded this time, its entry kept
            origin, evidence = item.evidence.origin, item.evidence
            checked[item.path] = FleetLog(
                item.path, EXCLUDED, origin=origin, reason=str(exc), evidence=evidence
            )
    rest = [i for i in prepared if not isinstance(i, FleetLog) and i.path not in {*done, *checked}]
    for log, counted_log in count_pending(rest, settings, verifier_keys(verifiers, policy), jobs=jobs):
        checked[log.path] = log
        if counted_log is not None:
            done[log.path] = (log, counted_log, None)
    fresh = [log for log in checked.values() if log.included]
    checked.update((item.path, item) for item in prepared if isinstance(item, FleetLog))
    logs = tuple(done[item.path][0] if item.path in done else checked[item.path] for item in prepared)
    fleet = Fleet(logs, bool(verifiers), policy is not None)
    counted = [done[log.path] for log in fleet.included]
    kept = [
        entries[log.path]
        for log in fleet.excluded
        if log.path in entries and (is_remote(log.path) or log.path in held)
    ]
    warnings.extend(f"state of {entry.path}: kept (the log is excluded from this run)" for entry in kept)
    notes = {item.path: item.note for item in prepared if not isinstance(item, FleetLog)}
    written = [
        log_entry(log, aggregation, table or ValueTable(shared=cells), notes[log.path])
        for log, aggregation, table in counted
    ]
    kept_entries = [entry.model_dump(mode="json", exclude_unset=True) for entry in kept]
    write_state(state_path, [*written, *kept_entries], cells, settings)
    followed = Followed(tuple(extended), tuple(log.path for log in fresh), tuple(warnings))
    return combine(
        replace(fleet, followed=followed), [aggregation for _, aggregation, _ in counted], settings
    )
