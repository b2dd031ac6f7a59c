"""One pass over a log's lines: each line's leaf hash taken (the Merkle tree its checkpoint signs) as
its record is counted, so that a log whose checkpoint is authenticated is checked and counted in one
read (:func:`count_logs`), and a monitor extends a log from its state the same way
(:mod:`~otel_route_shadow.analysis.monitor`).

With an authenticated checkpoint, ``check_chain`` hashes the lines the checkpoint vouches for and
checks only the lines after them; so does :func:`count_log`: the leaves of the first ``size`` lines
must give the checkpoint's root, and a log with lines after its checkpoint (or whose root differs, or
that holds a line that is not a record) is checked as a whole by ``check_chain`` instead, then counted
(:func:`~otel_route_shadow.analysis.fleet.check_logs`, which also says why a log is excluded).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Final

from otel_route_shadow.analysis.fleet import (
    PendingLog,
    ReportSettings,
    aggregate_log,
    check_logs,
    fleet_jobs,
)
from otel_route_shadow.analysis.fleet_logs import INCLUDED, FleetLog
from otel_route_shadow.analysis.groups import HOST_KEY
from otel_route_shadow.analysis.records import Repeats
from otel_route_shadow.analysis.remote import seq_and_payload
from otel_route_shadow.analysis.replaying import CitedLoader
from otel_route_shadow.analysis.report import Aggregation
from otel_route_shadow.chain import (
    GENESIS_HASH,
    MAX_LINE_BYTES,
    Good,
    ScanState,
    check_line,
    check_lines,
    each_chain_file,
    iter_chain_lines,
    record_hash_of,
)
from otel_route_shadow.files import FileRefused
from otel_route_shadow.lines import LineTooLong, complete_end
from otel_route_shadow.processes import map_in_workers
from otel_route_shadow.tlog import CompactRange, leaf_hash

__all__ = [
    "NotRecords",
    "count_logs",
    "hashed_records",
    "included_log",
    "lines_after",
    "links_from",
    "roots_at",
]

READ_BYTES: Final = 256 * 1024
"""Block size for reading a log's records: a day's share of a log is read by a monitor, not its
history (the chain readers' 8 MiB blocks would cost more to allocate than the records to read)."""
CHECK_LINES: Final = 256
"""Lines whose links are checked at once (:func:`_check`)."""


class NotRecords(Exception):
    """The lines from a position are not the records expected (the message says where and why)."""


def links_from(path: str, end: int, seq: int, kept_from: int = 0) -> ScanState:
    """Where the links of the chain's lines from position ``end`` (record ``seq``) are checked from:
    the record hash carried by the line that ends there (the genesis value at seq 0; at a pruned
    chain's minimum index, the first line's own link, which points into a pruned segment). Raises
    :class:`NotRecords` when no complete line ends at ``end``: the chain was cut short (or rewritten)
    since ``end`` was found."""
    if seq in (0, kept_from):
        return ScanState(seq, GENESIS_HASH if seq == 0 else "", 0, end)
    base = 0
    for _, handle in each_chain_file(path, kept_from):
        fd, size = handle.fileno(), os.fstat(handle.fileno()).st_size
        if base < end <= base + size and os.pread(fd, 1, end - base - 1) == b"\n":
            start = complete_end(handle, end - base - 1, MAX_LINE_BYTES)  # where that line begins
            line = os.pread(fd, end - base - 1 - start, start)
            return ScanState(seq, record_hash_of(line).decode("ascii", "replace"), 0, end)
        base += size
    raise NotRecords(f"no line of the chain ends at byte {end}: cut short or rewritten since")


def _check(lines: list[bytes], links: ScanState) -> None:
    """Check ``lines``' hashes and links after ``links`` (an empty ``prev``: take the first line's);
    :class:`NotRecords` at the first that does not verify. ``lines`` is emptied."""
    if lines and not links.prev:
        first = check_line(lines[0])
        links.prev = first.prev_hash if isinstance(first, Good) else ""
    stop = check_lines(lines, links, strict=False)
    lines.clear()
    if stop is not None:
        raise NotRecords(f"seq {stop.state.seq}: the record's hash or its link does not verify")


def hashed_records(
    path: str,
    start: int,
    count: int,
    host: str,
    add_leaf: Callable[[bytes], None],
    ends: list[int],
    kept_from: int = 0,
    links: ScanState | None = None,
) -> Iterator[tuple[int, Any]]:
    """``(seq, payload)`` of the ``count`` records from chain position ``start`` (over a segmented
    chain's files, from the one that begins at ``kept_from``, the minimum index), each observation's attributes carrying ``host`` (as ``fleet.with_host``), each
    line's leaf hash passed to ``add_leaf`` and the position after it set in ``ends[0]``; with
    ``links`` (:func:`links_from` at ``start``), each line's hash and link checked too, as a full check
    of the chain does. Raises :class:`NotRecords` for a line that is not a record or does not verify,
    or too few lines, and ``OSError``, ``LineTooLong`` or ``FileRefused`` for a chain that cannot be
    read."""
    if count <= 0:
        return
    lines = iter_chain_lines(path, start, block_bytes=READ_BYTES, kept_from=kept_from)
    unchecked: list[bytes] = []
    for taken, (position, line) in enumerate(lines, start=1):
        if line is None:
            raise NotRecords(f"the line at byte {position} is longer than any record")
        if links is not None:
            unchecked.append(line)
            if taken == count or len(unchecked) == CHECK_LINES:
                _check(unchecked, links)
        add_leaf(leaf_hash(line))
        ends[0] = position + len(line) + 1
        found = seq_and_payload(line)
        if found is None:
            raise NotRecords(f"the line ending at byte {ends[0]} is not a chain record")
        attributes = found[1].get("attributes")
        if attributes.__class__ is dict:
            attributes[HOST_KEY] = host
        yield found
        if taken == count:
            return
    raise NotRecords(f"the chain holds fewer records than the {count} expected")


def roots_at(path: str, old: int, new: int) -> tuple[bytes, bytes] | None:
    """The Merkle roots of the chain's first ``old`` and first ``new`` lines (``old <= new``), each
    line hashed as a leaf; None when the chain holds fewer lines, or cannot be read."""
    tree = CompactRange()
    at_old = tree.root()
    try:
        lines = iter_chain_lines(path)
        while tree.size < new:
            line = next(lines, (0, None))[1]
            if line is None:
                return None
            tree.append(leaf_hash(line))
            if tree.size == old:
                at_old = tree.root()
    except (OSError, LineTooLong, FileRefused):
        return None
    return at_old, tree.root()


def lines_after(path: str, start: int, kept_from: int = 0, links: ScanState | None = None) -> int:
    """The complete lines from chain position ``start`` on (the records not yet under a checkpoint;
    ``kept_from``: as for :func:`hashed_records`), each one's hash and link checked after ``links``
    when given (:class:`NotRecords` at the first that does not verify)."""
    if links is None:
        return sum(1 for _ in iter_chain_lines(path, start, block_bytes=READ_BYTES, kept_from=kept_from))
    count, unchecked = 0, []
    for position, line in iter_chain_lines(path, start, block_bytes=READ_BYTES, kept_from=kept_from):
        if line is None:
            raise NotRecords(f"the line at byte {position} is longer than any record")
        count += 1
        unchecked.append(line)
        if len(unchecked) == CHECK_LINES:
            _check(unchecked, links)
    _check(unchecked, links)
    return count


def count_log(
    pending: PendingLog, settings: ReportSettings, cited_loader: CitedLoader | None = None
) -> tuple[FleetLog, Aggregation] | None:
    """The log counted up to its checkpoint in one pass, its leaves giving the checkpoint's root; None
    when they do not, when a line is not a record, or when lines follow the checkpoint (see the module
    docstring)."""
    evidence = pending.evidence
    size = evidence.size or 0
    tree = CompactRange()
    ends = [0]
    aggregation = settings.aggregation(cited_loader)
    try:
        aggregation.feed(
            hashed_records(pending.path, 0, size, evidence.origin or pending.path, tree.append, ends)
        )
        if lines_after(pending.path, ends[0]):
            return None
    except (NotRecords, OSError, LineTooLong, FileRefused):
        return None
    if tree.root() != pending.root:
        return None
    aggregation.cube.repeats = Repeats()  # a cache of the pass, not a count: nothing to carry over
    return included_log(pending, size, ends[0], tree.nodes), aggregation


def included_log(
    pending: PendingLog,
    records: int,
    end: int,
    frontier: Sequence[bytes],
    *,
    start: int = 0,
    pruned_bytes: int = 0,
) -> FleetLog:
    """``pending`` included, counted up to its checkpoint (its record ``size`` begins at byte ``end``;
    ``frontier``: the roots of the perfect subtrees of its first ``size`` records), its chain holding
    ``records``; counted from seq ``start``, its pruned segments ``pruned_bytes`` long."""
    evidence = pending.evidence
    return FleetLog(
        pending.path,
        INCLUDED,
        origin=evidence.origin,
        size=evidence.size or 0,
        records=records,
        evidence=replace(evidence, chain_records=records),
        end=end,
        root=pending.root,
        frontier=tuple(frontier),
        start=start,
        pruned_bytes=pruned_bytes,
    )


def _counted(
    pending: PendingLog,
    settings: ReportSettings,
    keys: tuple[str, ...],
    cited_loader: CitedLoader | None = None,
) -> tuple[FleetLog, Aggregation | None]:
    """The log counted in one pass when its checkpoint is authenticated (``keys``) and it was never
    pruned (the pass reads from record 0), else (or when that pass does not give its root) checked as a
    whole, then counted if included."""
    found = count_log(pending, settings, cited_loader) if keys and pending.pruned is None else None
    if found is not None:
        return found
    log = check_logs([pending], keys)[0]
    return log, (aggregate_log(log, settings, cited_loader) if log.included else None)


def count_logs(
    pending: Sequence[PendingLog],
    settings: ReportSettings,
    keys: tuple[str, ...],
    *,
    jobs: int | None = None,
    cited_loader: CitedLoader | None = None,
) -> list[tuple[FleetLog, Aggregation | None]]:
    """Each log checked against its checkpoint and, if included, counted (:func:`_counted`), several at
    once in worker processes (``fleet.fleet_jobs``; not with a store: its snapshots are read in this
    process)."""
    jobs = 1 if cited_loader is not None else fleet_jobs(pending, jobs)
    return map_in_workers(_counted, [(log, settings, keys, cited_loader) for log in pending], jobs)
