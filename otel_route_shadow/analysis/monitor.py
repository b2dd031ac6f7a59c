"""Following a fleet like a Certificate Transparency monitor: a state file keeps, per log, the last
checkpoint it was verified against and the report's aggregation up to it; a rerun reads only the
records after it.

**The rerun.** For each log whose entry in the state file is usable, the newest checkpoint is read and
its signature (and quorum) checked as always (``analysis.fleet``); then the log is *extended*: the
records from the entry's size to the new checkpoint's size are read from where the entry says they
begin, each line's leaf hash is appended to the entry's compact range (the roots of the perfect
subtrees of the first ``size`` records: ``tlog.CompactRange``), and the root this gives must be the
new checkpoint's root. That one comparison proves the new records *and* the entry: the signed root
commits to every leaf, so the old records are unchanged (the consistency of the old checkpoint with
the new one, proven from the old size) and the entry's range is the true right edge of the old tree.
The new records are counted into the entry's aggregation, restored; nothing before the old size is
read. A log that shrank, an entry that does not extend to the new root, a line that is not a record:
the entry is dropped with a warning and the log is checked and read in full.

**The state file is untrusted input.** It is read bounded (``strict_json.read_json``) and validated
(pydantic), and each entry carries a SHA-256 digest of its content bound to the checkpoint (origin,
size, root) and to the report's settings: an entry whose digest does not match, for other settings,
or of another origin, is dropped with a warning and its log rebuilt from scratch; a file that cannot
be read or parsed is ignored whole, with a warning. Without a secret there is no keyed MAC: the
digest catches a damaged, truncated or mixed-up state file, not a forger who can write the monitor's
own disk (such a forger could as well change the monitor). The records' side is not taken on trust:
an entry's range is proven against the signed root of the next checkpoint, as above. ``--state``
with ``--rebuild`` recomputes every log in full and rewrites the file.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictStr, ValidationError

from otel_route_shadow.analysis.cells import CELL_KEYS, Cell, CubeSlot
from otel_route_shadow.analysis.fleet import (
    INCLUDED,
    Fleet,
    FleetError,
    FleetLog,
    Followed,
    PendingLog,
    ReportSettings,
    aggregate_logs,
    chain_paths,
    check_logs,
    combine,
    fleet_specs,
    is_remote,
    prepare_log,
    refuse_shared_origins,
    verifier_keys,
    with_host,
)
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import GroupSpec, as_specs
from otel_route_shadow.analysis.noise import KEY_ATTRIBUTES, ROUTE_ATTRIBUTES
from otel_route_shadow.analysis.remote import seq_and_payload
from otel_route_shadow.analysis.report import Aggregation, Report
from otel_route_shadow.analysis.source import ChainAnalysisError
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.chain import MAX_LINE_BYTES
from otel_route_shadow.files import FileRefused, open_regular, write_atomic
from otel_route_shadow.lines import LineTooLong, complete_end, iter_blocks
from otel_route_shadow.strict_json import StrictJSONError, read_json
from otel_route_shadow.tlog import CompactRange, Policy, Verifier, leaf_hash

__all__ = [
    "MAX_STATE_BYTES",
    "STATE_KIND",
    "aggregation_state",
    "follow_fleet",
    "restore_aggregation",
]

STATE_KIND: Final = "route-shadow-monitor-state"
STATE_VERSION: Final = 1
MAX_STATE_BYTES: Final = 256 * 1024 * 1024
"""A state file holds counts per distinct cell and key, never per record: far below this."""
READ_BYTES: Final = 256 * 1024
"""Block size for reading a log's new records: a day's share of a log, not its history (the chain
readers' 8 MiB blocks would cost more to allocate than the records to read)."""

StrictInt = Annotated[int, Field(strict=True, ge=0)]
"""Every count, offset, size and seq of a state file: a whole number, never negative."""
Scalar = StrictBool | Annotated[int, Field(strict=True)] | StrictFloat | StrictStr | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KeyRow(_Model):
    key: list[Scalar]
    last: list[Scalar] | None
    flaps: StrictInt
    routes: list[list[Scalar]]
    flap_seqs: list[StrictInt]


class TimelineState(_Model):
    width_ns: StrictInt
    first: StrictInt
    last: StrictInt
    buckets: list[tuple[StrictInt, StrictInt, StrictInt]]


class DroppedState(_Model):
    events: StrictInt
    records: StrictInt
    first_ns: StrictInt | None
    last_ns: StrictInt | None


class TruncatedState(_Model):
    records: StrictInt
    observations: StrictInt
    first_seqs: list[StrictInt]


class CountsState(_Model):
    read: StrictInt
    observations: StrictInt
    skipped_kinds: dict[str, StrictInt]
    outside_window: StrictInt
    without_decision: StrictInt
    malformed: StrictInt
    dropped: DroppedState
    truncated: TruncatedState
    shadow_errors: list[tuple[list[Scalar], StrictInt]]


class AggregationState(_Model):
    cells: list[tuple[list[Scalar], StrictInt]]
    keys: list[KeyRow]
    timeline: TimelineState
    divergent: dict[str, list[dict[str, Any]]]
    served: list[dict[str, Any]]
    counts: CountsState


class LogState(_Model):
    path: StrictStr
    origin: StrictStr
    size: StrictInt
    root: StrictStr
    end: StrictInt
    frontier: list[StrictStr]
    aggregation: AggregationState
    digest: StrictStr


class StateFile(_Model):
    kind: Literal["route-shadow-monitor-state"]
    version: Literal[1]
    logs: list[LogState]


# ---------------------------------------------------------------------------------------------
# An aggregation to and from its state


def _scalars(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(values)


def aggregation_state(aggregation: Aggregation) -> dict[str, Any]:
    """The JSON form of ``aggregation`` before :meth:`~Aggregation.finish`."""
    width, buckets, first, last = aggregation.report.times.state()
    counts = aggregation.report.records
    return {
        "cells": [[list(key), slot.count] for key, slot in aggregation.cube.slots.items()],
        "keys": [
            {
                "key": list(key),
                "last": None if not state.routes else list(state.last),
                "flaps": state.flaps,
                "routes": [list(route) for route in state.routes],
                "flap_seqs": list(state.flap_seqs),
            }
            for key, state in aggregation.tracker.keys.items()
        ],
        "timeline": {
            "width_ns": width,
            "first": first if last >= 0 else 0,
            "last": last,
            "buckets": [[bucket, spawns, agreed] for bucket, (spawns, agreed) in buckets.items()],
        },
        "divergent": dict(aggregation.divergent.by_kind),
        "served": aggregation.served.by_kind.get("served-differs", []),
        "counts": {
            "read": counts.read,
            "observations": counts.observations,
            "skipped_kinds": dict(counts.skipped_kinds),
            "outside_window": counts.outside_window,
            "without_decision": counts.without_decision,
            "malformed": counts.malformed,
            "dropped": {
                "events": counts.dropped.events,
                "records": counts.dropped.records,
                "first_ns": counts.dropped.first_ns,
                "last_ns": counts.dropped.last_ns,
            },
            "truncated": {
                "records": counts.truncated.records,
                "observations": counts.truncated.observations,
                "first_seqs": list(counts.truncated.first_seqs),
            },
            "shadow_errors": [[list(key), n] for key, n in counts.shadow_errors.items()],
        },
    }


def restore_aggregation(state: AggregationState, settings: ReportSettings) -> Aggregation:
    """An aggregation holding ``state``'s counts, ready to be fed the records after them. Raises
    ``ValueError`` for a state no aggregation could have written."""
    aggregation = settings.aggregation()
    tracker = aggregation.tracker
    for row in state.keys:
        if len(row.key) != len(KEY_ATTRIBUTES) + 1 or any(
            len(r) != len(ROUTE_ATTRIBUTES) for r in row.routes
        ):
            raise ValueError("a decision key or route of the wrong shape")
        if row.last is not None and len(row.last) != len(ROUTE_ATTRIBUTES):
            raise ValueError("a route of the wrong shape")
        routes = [tracker.route(_scalars(route)) for route in row.routes]
        last = tracker.route(_scalars(row.last)) if row.last is not None else None
        tracker.restore_key(_scalars(row.key), last, row.flaps, routes, row.flap_seqs)
    width = 1 + len(CELL_KEYS)
    for values, count in state.cells:
        if len(values) != width or type(values[0]) is not bool or count < 1:
            raise ValueError("a cell of the wrong shape")
        key = _scalars(values)
        slot = aggregation.cube.slots[key] = CubeSlot(Cell._make(key), tracker)
        slot.count = count
    timeline = state.timeline
    buckets = {bucket: [spawns, agreed] for bucket, spawns, agreed in timeline.buckets}
    aggregation.report.times.restore(timeline.width_ns, buckets, timeline.first, timeline.last)
    for examples in (*state.divergent.values(), state.served):
        if any(type(example.get("seq")) is not int for example in examples):
            raise ValueError("an example without its seq")
    for kind, examples in state.divergent.items():
        aggregation.divergent.restore(kind, examples)
    aggregation.served.restore("served-differs", state.served)
    counts, saved = aggregation.report.records, state.counts
    for name in ("read", "observations", "outside_window", "without_decision", "malformed"):
        setattr(counts, name, getattr(saved, name))
    counts.skipped_kinds = dict(saved.skipped_kinds)
    counts.dropped.events, counts.dropped.records = saved.dropped.events, saved.dropped.records
    counts.dropped.first_ns, counts.dropped.last_ns = saved.dropped.first_ns, saved.dropped.last_ns
    counts.truncated.records = saved.truncated.records
    counts.truncated.observations = saved.truncated.observations
    counts.truncated.first_seqs = list(saved.truncated.first_seqs)
    counts.shadow_errors = {_scalars(key): n for key, n in saved.shadow_errors}
    return aggregation


# ---------------------------------------------------------------------------------------------
# Entries: digest, read, write


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def _unb64(text: str) -> bytes:
    value = base64.b64decode(text, validate=True)
    if len(value) != 32:
        raise ValueError("not a SHA-256 hash")
    return value


def _settings_dict(settings: ReportSettings) -> dict[str, Any]:
    return {
        "by": ["+".join(spec) for spec in settings.by],
        "window": settings.window.describe(),
        "examples": settings.examples,
        "min_spawns": settings.min_spawns,
    }


def entry_digest(entry: dict[str, Any], settings: ReportSettings) -> str:
    """SHA-256 over the entry (without its digest) and the report's settings, canonical JSON."""
    body = {key: value for key, value in entry.items() if key != "digest"}
    data = orjson.dumps({"entry": body, "settings": _settings_dict(settings)}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()


def log_entry(log: FleetLog, aggregation: Aggregation, settings: ReportSettings) -> dict[str, Any]:
    """The state file's entry for an included log counted up to its checkpoint."""
    entry = {
        "path": log.path,
        "origin": log.origin or "",
        "size": log.size,
        "root": _b64(log.root),
        "end": log.end,
        "frontier": [_b64(node) for node in log.frontier],
        "aggregation": aggregation_state(aggregation),
    }
    entry["digest"] = entry_digest(entry, settings)
    return entry


def read_state(path: str, settings: ReportSettings, warnings: list[str]) -> dict[str, LogState]:
    """The usable entries of the state file at ``path``, by chain path (none when it does not exist
    yet); every entry or file left out is said in ``warnings``."""
    try:
        data = read_json(path, MAX_STATE_BYTES)
        state = StateFile.model_validate(data)
    except FileNotFoundError:
        return {}
    except (FileRefused, OSError, StrictJSONError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.append(f"state file {path} cannot be used ({first}): every log rebuilt from scratch")
        return {}
    usable: dict[str, LogState] = {}
    for entry in state.logs:
        if entry.digest != entry_digest(entry.model_dump(), settings):
            warnings.append(
                f"state of {entry.path}: its digest does not match its content and this report's settings "
                "(damaged, edited, or written with other --by/--since/--until/--examples/--min-spawns): "
                "rebuilt from scratch"
            )
            continue
        usable[entry.path] = entry
    return usable


def write_state(path: str, entries: list[dict[str, Any]]) -> None:
    """Replace the state file at ``path`` (atomically); one that cannot be written is a
    :class:`~otel_route_shadow.analysis.source.ChainAnalysisError` naming it."""
    document = {"kind": STATE_KIND, "version": STATE_VERSION, "logs": entries}
    try:
        write_atomic(path, orjson.dumps(document) + b"\n", mode=0o600)
    except OSError as exc:
        raise ChainAnalysisError(f"state file {path}: cannot write: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------------------------------
# Extending one log from its entry


class _NotAnExtension(Exception):
    """The entry does not extend to the new checkpoint: the log is read in full."""


def _new_lines(path: str, start: int, count: int) -> Iterator[tuple[bytes, int]]:
    """``count`` complete lines from byte ``start``: each line and the offset after it."""
    if count <= 0:
        return
    fd = open_regular(path)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        end = complete_end(handle)
        if start > end:
            raise _NotAnExtension(f"the chain is shorter ({end} bytes) than the state says ({start})")
        taken = 0
        for after, block in iter_blocks(handle, start, end, READ_BYTES, max_line=MAX_LINE_BYTES):
            offset = after - len(block) - 1
            for line in block.split(b"\n"):
                offset += len(line) + 1
                yield line, offset
                taken += 1
                if taken == count:
                    return
    raise _NotAnExtension(f"the chain holds fewer records than its checkpoint's {count} new ones")


def _lines_after(path: str, start: int) -> int:
    """The complete lines from byte ``start`` on (the records not yet under a checkpoint)."""
    with os.fdopen(open_regular(path), "rb", buffering=0) as handle:
        end = complete_end(handle)
        return sum(
            block.count(b"\n") + 1
            for _, block in iter_blocks(handle, start, end, READ_BYTES, max_line=MAX_LINE_BYTES)
        )


def _payloads(
    lines: Iterator[tuple[bytes, int]], tree: CompactRange, ends: list[int]
) -> Iterator[tuple[int, Any]]:
    for line, after in lines:
        tree.append(leaf_hash(line))
        ends[0] = after
        found = seq_and_payload(line)
        if found is None:
            raise _NotAnExtension(f"a new line ending at byte {after} is not a chain record")
        yield found


def extend_log(
    pending: PendingLog, entry: LogState, settings: ReportSettings
) -> tuple[FleetLog, Aggregation]:
    """The log counted up to its new checkpoint from ``entry`` (see the module docstring). Raises
    :class:`_NotAnExtension` when the entry does not extend to the new root."""
    evidence = pending.evidence
    size = evidence.size or 0
    if evidence.origin != entry.origin:
        raise _NotAnExtension(f"the state is for origin {entry.origin!r}, the log is {evidence.origin!r}")
    if size < entry.size:
        raise _NotAnExtension(f"the checkpoint's size {size} is below the state's {entry.size}")
    try:
        tree = CompactRange(entry.size, [_unb64(node) for node in entry.frontier])
        old_root = _unb64(entry.root)
        aggregation = restore_aggregation(entry.aggregation, settings)
    except ValueError as exc:
        raise _NotAnExtension(f"an unusable entry ({exc})") from None
    if tree.root() != old_root:
        raise _NotAnExtension("the entry's subtree roots do not give its root")
    ends = [entry.end]
    lines = _new_lines(pending.path, entry.end, size - entry.size)
    try:
        aggregation.feed(with_host(_payloads(lines, tree, ends), evidence.origin or pending.path))
    except (OSError, LineTooLong, FileRefused) as exc:
        raise _NotAnExtension(f"the new records cannot be read ({exc})") from None
    if tree.size != size or tree.root() != pending.root:
        raise _NotAnExtension(
            f"the records from {entry.size} to {size} with the state's tree do not give the checkpoint's root: "
            "the log's history differs from the state's (a fork, a rewrite, or a damaged state)"
        )
    try:
        records = size + _lines_after(pending.path, ends[0])
    except (OSError, LineTooLong) as exc:
        raise _NotAnExtension(f"the chain cannot be read after its checkpoint ({exc})") from None
    log = FleetLog(
        pending.path,
        INCLUDED,
        origin=evidence.origin,
        size=size,
        records=records,
        evidence=replace(evidence, chain_records=records),
        end=ends[0],
        root=pending.root,
        frontier=tuple(tree.nodes),
    )
    return log, aggregation


# ---------------------------------------------------------------------------------------------
# The fleet, followed


def follow_fleet(
    inputs: Sequence[str],
    state_path: str,
    *,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    window: TimeWindow | None = None,
    verifiers: Sequence[Verifier] = (),
    policy: Policy | None = None,
    jobs: int = 1,
    examples: int = 3,
    min_spawns: int = MIN_SPAWNS,
    rebuild: bool = False,
) -> Report:
    """The fleet report of ``inputs``, extending each log from the state file at ``state_path`` where
    it can and reading it in full where it cannot (``report.fleet.followed`` says which, and why);
    the state file is then rewritten. Raises
    :class:`~otel_route_shadow.analysis.fleet.FleetError` as :func:`build_fleet_report` does."""
    paths = chain_paths(inputs)
    remote = [path for path in paths if is_remote(path)]
    if remote:
        raise FleetError(
            f"{remote[0]}: --state follows local chains (a remote log is read in full without it)"
        )
    settings = ReportSettings(fleet_specs(as_specs(by)), window or TimeWindow(), examples, min_spawns)
    warnings: list[str] = []
    entries = {} if rebuild else read_state(state_path, settings, warnings)
    prepared = [prepare_log(path, verifiers, policy) for path in paths]
    origins = [item.evidence.origin if isinstance(item, PendingLog) else item.origin for item in prepared]
    refuse_shared_origins(origins, paths)
    done: dict[str, tuple[FleetLog, Aggregation]] = {}
    extended: list[str] = []
    for item in prepared:
        entry = entries.get(item.path) if isinstance(item, PendingLog) else None
        if isinstance(item, PendingLog) and entry is not None:
            try:
                done[item.path] = extend_log(item, entry, settings)
                extended.append(item.path)
            except _NotAnExtension as exc:
                warnings.append(f"state of {item.path}: {exc}: rebuilt from scratch")
    rest = [item for item in prepared if isinstance(item, PendingLog) and item.path not in done]
    checked = {log.path: log for log in check_logs(rest, verifier_keys(verifiers, policy), jobs)}
    fresh = [log for log in checked.values() if log.included]
    for log, aggregation in zip(fresh, aggregate_logs(fresh, settings, jobs=jobs), strict=True):
        done[log.path] = (log, aggregation)
    logs: list[FleetLog] = []
    for item in prepared:
        if item.path in done:
            logs.append(done[item.path][0])
        elif isinstance(item, PendingLog):
            logs.append(checked[item.path])
        else:
            logs.append(item)
    fleet = Fleet(tuple(logs), bool(verifiers), policy is not None)
    counted = [done[log.path] for log in fleet.included]
    write_state(state_path, [log_entry(log, aggregation, settings) for log, aggregation in counted])
    followed = Followed(tuple(extended), tuple(log.path for log in fresh), tuple(warnings))
    return combine(replace(fleet, followed=followed), [aggregation for _, aggregation in counted], settings)
