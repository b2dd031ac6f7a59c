"""The monitor's state file (``report --state FILE``, docs/reports.md "Following a fleet"): per log, the
last checkpoint it was verified against and the report's aggregation up to it, in the form it is kept
on disk (version 4: decision keys as rows of indices into a table of the log's distinct values, cells
as rows of an index into one table of distinct cells shared by every log, their host and count), and
how it is read back.

**The state file is untrusted input**: read bounded (:data:`MAX_STATE_BYTES`), parsed by ``orjson``,
validated by the pydantic models below, each entry bound by a SHA-256 digest to its checkpoint, the
table of cells and the report's settings (:func:`entry_digest`): a damaged or mixed-up entry is
dropped with a warning, and its log rebuilt (:func:`read_state`). What an entry's counts say is
proven against the next signed root by the rerun (``analysis.monitor``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictStr,
    ValidationError,
)

from otel_route_shadow.analysis.cells import CELL_KEYS
from otel_route_shadow.analysis.cohorts import COHORT_ATTRIBUTES
from otel_route_shadow.analysis.fleet import (
    ReportSettings,
    is_remote,
)
from otel_route_shadow.analysis.fleet_logs import FleetLog
from otel_route_shadow.analysis.latency import LatencyHistogram
from otel_route_shadow.analysis.noise import KEY_ATTRIBUTES, ROUTE_ATTRIBUTES, KeyState, NoiseTracker
from otel_route_shadow.analysis.report import Aggregation
from otel_route_shadow.analysis.source import ChainAnalysisError
from otel_route_shadow.chain import DroppedGap
from otel_route_shadow.files import FileRefused, open_regular, read_regular, write_atomic

__all__ = [
    "MAX_STATE_BYTES",
    "STATE_KIND",
    "STATE_VERSION",
    "AggregationState",
    "CellTable",
    "LogState",
    "ValueTable",
    "aggregation_state",
    "check_state_path",
    "entry_digest",
    "log_entry",
    "read_state",
    "restore_aggregation",
    "write_state",
]

STATE_KIND: Final = "route-shadow-monitor-state"
_STATE_HEAD: Final = re.compile(rb'\s*\{\s*"kind"\s*:\s*"' + STATE_KIND.encode() + b'"')
"""How a state file begins (:func:`write_state` writes it without the spaces)."""
_HEAD_BYTES: Final = 256
STATE_VERSION: Final = 4
"""Version 2 added the spawns' durations per cohort (``latencies``); version 3 holds cells and keys as
rows of indices into a table of values; version 4 holds each distinct cell once for every log (a
fleet's logs share nearly all their cells but their host). An older state is rebuilt."""
MAX_STATE_BYTES: Final = 256 * 1024 * 1024
"""A state file holds counts per distinct cell and key, never per record: far below this."""

StrictInt = Annotated[int, Field(strict=True, ge=0)]
"""Every count, offset, size and seq of a state file: a whole number, never negative."""
Scalar = StrictBool | Annotated[int, Field(strict=True)] | StrictFloat | StrictStr | None


def _not_negative(rows: list[int]) -> list[int]:
    if rows and min(rows) < 0:
        raise ValueError("a negative index or count")
    return rows


Rows = Annotated[list[Annotated[int, Field(strict=True)]], AfterValidator(_not_negative)]
"""A list of :data:`StrictInt`, checked as one (its least member once, not each member)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TimelineState(_Model):
    width_ns: StrictInt
    first: StrictInt
    last: Annotated[int, Field(strict=True, ge=-1)]
    """The last spawn's start; -1 when no spawn was counted (``first`` is then 0)."""
    buckets: list[tuple[StrictInt, StrictInt, StrictInt]]


class DroppedState(_Model):
    events: StrictInt
    records: StrictInt
    first_ns: StrictInt | None
    last_ns: StrictInt | None
    uncounted: StrictInt = 0


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


class LatencyRow(_Model):
    cohort: list[Scalar]
    buckets: list[tuple[Annotated[int, Field(strict=True)], StrictInt]]
    unknown: StrictInt


class AggregationState(_Model):
    """A log's aggregation. Its cells and its decision keys are each one list of whole numbers (one
    container however many rows: cheap to parse, validate and keep):

    * ``cells``: per cell, the index of its values but its host in the state file's ``cells`` (see
      :class:`CellTable`), the index of its host in ``values``, then its count;
    * ``keys``: per decision key, the length of its row, then the row: one index per field of the key
      and its host, its flaps, the length of its last route (0 before a first spawn, else one index
      per route field) and that route, the number of distinct routes it ran and each route, then the
      ``seq`` of its first flaps (every field but the counts an index into ``values``).
    """

    values: list[Scalar]
    cells: Rows
    latencies: list[LatencyRow]
    keys: Rows
    timeline: TimelineState
    divergent: dict[str, list[dict[str, Any]]]
    served: list[dict[str, Any]]
    counts: CountsState


class LogState(_Model):
    path: StrictStr
    origin: StrictStr
    start: StrictInt = 0
    size: StrictInt
    root: StrictStr
    end: StrictInt | None = None
    """Where record ``size`` begins in a local chain (a remote log's entries are addressed by index)."""
    frontier: list[StrictStr]
    aggregation: AggregationState
    note: StrictStr | None = None
    """The signed checkpoint the entry is counted up to, as read: with its log's key, the proof that
    the log committed to ``size`` records (``analysis.monitor`` tells a fork from a damaged state by it)."""
    digest: StrictStr


class StateFile(_Model):
    kind: Literal["route-shadow-monitor-state"]
    version: Literal[4]
    cells: list[list[Scalar]]
    logs: list[LogState]


# ---------------------------------------------------------------------------------------------
# An aggregation to and from its state


def _typed(values: Sequence[Any]) -> tuple[Any, ...]:
    """``values`` with their types, so that ``True`` and ``1`` are told apart as keys."""
    return (*values, *map(type, values))


class CellTable:
    """The state file's table of distinct cells, each without its host, shared by every log's entry
    (a fleet's logs have nearly all their cells in common but their host)."""

    __slots__ = ("cells", "index")

    def __init__(self, cells: Sequence[Sequence[Any]] = ()) -> None:
        """Raises ``ValueError`` for a cell of the wrong shape."""
        self.cells: list[tuple[Any, ...]] = [tuple(cell) for cell in cells]
        if any(len(cell) != len(CELL_KEYS) or type(cell[0]) is not bool for cell in self.cells):
            raise ValueError("a cell of the wrong shape")
        self.index = {_typed(cell): at for at, cell in enumerate(self.cells)}

    def at(self, cell: tuple[Any, ...]) -> int:
        """The index of ``cell`` (its values but its host), added if it is new."""
        typed = _typed(cell)
        at = self.index.get(typed)
        if at is None:
            at = self.index[typed] = len(self.cells)
            self.cells.append(cell)
        return at

    def digest(self) -> str:
        return hashlib.sha256(orjson.dumps(self.cells)).hexdigest()


class ValueTable:
    """The table of values of one state entry (each distinct value once, by type: ``True`` is not
    ``1``), the state's :class:`CellTable`, and the rows of the cells and decision keys read from
    them, so that what a rerun did not change is written back as it was read, not looked up value by
    value."""

    __slots__ = ("cells", "index", "keys", "read_cells", "read_keys", "shared", "values")

    def __init__(self, values: Sequence[Any] = (), shared: CellTable | None = None) -> None:
        self.values: list[Any] = list(values)
        self.shared = shared if shared is not None else CellTable()
        self.index: dict[tuple[type, Any], int] = {(v.__class__, v): i for i, v in enumerate(self.values)}
        self.read_cells: list[int] = []
        self.read_keys: list[int] = []
        self.cells: dict[tuple[Any, ...], int] = {}
        """Where a restored cell's row begins in :attr:`read_cells`."""
        self.keys: dict[tuple[Any, ...], tuple[int, int, int, tuple[Any, ...]]] = {}
        """Where a restored decision key's row begins in :attr:`read_keys`, its length, and its flaps
        and last route as restored."""

    def row(self, values: Iterable[Any]) -> list[int]:
        index, row = self.index, []
        for value in values:
            at = index.get((value.__class__, value))
            if at is None:
                at = index[value.__class__, value] = len(self.values)
                self.values.append(value)
            row.append(at)
        return row

    def cell(self, out: list[int], key: tuple[Any, ...], count: int) -> None:
        at = self.cells.get(key)
        if at is None:
            out.append(self.shared.at(key[:-1]))
            out.extend(self.row(key[-1:]))
        else:
            out.extend(self.read_cells[at : at + 2])
        out.append(count)

    def key(self, out: list[int], key: tuple[Any, ...], state: KeyState) -> None:
        restored = self.keys.get(key)
        if restored is not None and restored[2] == state.flaps and restored[3] is state.last:
            at, length = restored[0], restored[1]  # routes and flap seqs change only with a flap
            out.extend(self.read_keys[at - 1 : at + length])
            return
        last = () if not state.routes else state.last
        routes = [value for route in state.routes for value in route]
        row = [
            *self.row(key),
            state.flaps,
            len(last),
            *self.row(last),
            len(state.routes),
            *self.row(routes),
            *state.flap_seqs,
        ]
        out.append(len(row))
        out.extend(row)


def aggregation_state(aggregation: Aggregation, table: ValueTable | None = None) -> dict[str, Any]:
    """The JSON form of ``aggregation`` before :meth:`~Aggregation.finish` (``table``: the one it
    was restored with, if it was)."""
    width, buckets, first, last = aggregation.report.times.state()
    counts = aggregation.report.records
    table = table or ValueTable()
    cube = aggregation.cube
    cells: list[int] = []
    for key, slot in cube.slots.items():
        table.cell(cells, key, slot.count)
    for key, count in cube.saved.items():
        table.cell(cells, key, count)
    keys: list[int] = []
    for key, state in aggregation.tracker.keys.items():
        table.key(keys, key, state)
    return {
        "values": table.values,
        "cells": cells,
        "latencies": [
            {"cohort": list(cohort), **latency.state()}
            for cohort, latency in aggregation.cube.latencies.items()
        ],
        "keys": keys,
        "timeline": {
            "width_ns": width,
            "first": first if last >= 0 else 0,
            "last": last,
            "buckets": buckets,
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
                "uncounted": counts.dropped.uncounted,
            },
            "truncated": {
                "records": counts.truncated.records,
                "observations": counts.truncated.observations,
                "first_seqs": list(counts.truncated.first_seqs),
            },
            "shadow_errors": [[list(key), n] for key, n in counts.shadow_errors.items()],
        },
    }


def _restore_cells(saved: dict[tuple[Any, ...], int], table: ValueTable, cells: list[int]) -> None:
    """The cube's saved counts (each cell becomes a slot only if a new record of it is counted)."""
    shared, values, where = table.shared.cells, table.values, table.cells
    if len(cells) % 3:
        raise ValueError("a cell of the wrong shape")
    for at in range(0, len(cells), 3):
        key, count = (*shared[cells[at]], values[cells[at + 1]]), cells[at + 2]
        if count < 1 or key in saved:
            raise ValueError("a cell of the wrong shape, or given twice")
        saved[key] = count
        where[key] = at


def _restore_keys(tracker: NoiseTracker, table: ValueTable, keys: list[int]) -> None:
    """Each decision key's state (see :class:`AggregationState` for a row's fields)."""
    value, width, route_width = table.values.__getitem__, len(KEY_ATTRIBUTES) + 1, len(ROUTE_ATTRIBUTES)
    start = 0
    while start < len(keys):
        row = keys[start + 1 : start + 1 + keys[start]]
        if len(row) != keys[start] or len(row) < width + 3 or row[width + 1] not in (0, route_width):
            raise ValueError("a decision key of the wrong shape")
        at = width + 2 + row[width + 1]
        last = tuple(map(value, row[width + 2 : at]))
        flat = row[at + 1 : at + 1 + route_width * row[at]]
        if len(flat) != route_width * row[at]:
            raise ValueError("a decision key's routes of the wrong shape")
        routes = [
            tracker.route(tuple(map(value, flat[i : i + route_width])))
            for i in range(0, len(flat), route_width)
        ]
        key, route = tuple(map(value, row[:width])), tracker.route(last) if last else None
        tracker.restore_key(key, route, row[width], routes, row[at + 1 + len(flat) :])
        state = tracker.keys[key]
        table.keys[key] = (start + 1, len(row), state.flaps, state.last)
        start += 1 + len(row)


def restore_aggregation(
    state: AggregationState, settings: ReportSettings, table: ValueTable | None = None
) -> Aggregation:
    """An aggregation holding ``state``'s counts, ready to be fed the records after them (``table``
    keeps the rows read, for :func:`aggregation_state`). Raises ``ValueError`` for a state no
    aggregation could have written."""
    aggregation = settings.aggregation()
    table = table or ValueTable(state.values)
    table.read_cells, table.read_keys = state.cells, state.keys
    try:
        _restore_keys(aggregation.tracker, table, state.keys)
        _restore_cells(aggregation.cube.saved, table, state.cells)
    except IndexError:
        raise ValueError("an index beyond a row or the table of values") from None
    cube = aggregation.cube
    for latency in state.latencies:
        cohort = tuple(latency.cohort)
        if len(cohort) != len(COHORT_ATTRIBUTES) or cohort in cube.latencies:
            raise ValueError("a cohort of the wrong shape")
        cube.latencies[cohort] = LatencyHistogram.restore(latency.buckets, latency.unknown)
    timeline = state.timeline
    aggregation.report.times.restore(timeline.width_ns, timeline.buckets, timeline.first, timeline.last)
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
    counts.dropped = DroppedGap(**saved.dropped.model_dump())
    counts.truncated.records = saved.truncated.records
    counts.truncated.observations = saved.truncated.observations
    counts.truncated.first_seqs = list(saved.truncated.first_seqs)
    counts.shadow_errors = {tuple(key): n for key, n in saved.shadow_errors}
    return aggregation


# ---------------------------------------------------------------------------------------------
# Entries: digest, read, write


def _settings_dict(settings: ReportSettings) -> dict[str, Any]:
    return {
        "by": ["+".join(spec) for spec in settings.by],
        "window": settings.window.describe(),
        "examples": settings.examples,
        "min_spawns": settings.min_spawns,
    }


def entry_digest(entry: dict[str, Any], settings: ReportSettings, cells: str) -> str:
    """SHA-256 over the entry (without its digest), the digest ``cells`` of the state's
    :class:`CellTable` and the report's settings, canonical JSON."""
    body = {key: value for key, value in entry.items() if key != "digest"}
    document = {"entry": body, "cells": cells, "settings": _settings_dict(settings)}
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def log_entry(log: FleetLog, aggregation: Aggregation, table: ValueTable, note: str) -> dict[str, Any]:
    """The state file's entry for an included log counted up to its checkpoint ``note``, without its
    digest (``table``: see :func:`aggregation_state`; :func:`write_state` adds the digest)."""
    entry = {
        "path": log.path,
        "origin": log.origin or "",
        "start": log.start,
        "size": log.size,
        "root": base64.b64encode(log.root).decode("ascii"),
        "frontier": [base64.b64encode(node).decode("ascii") for node in log.frontier],
        "aggregation": aggregation_state(aggregation, table),
        "note": note,
    }
    if not is_remote(log.path):
        entry["end"] = log.end + log.pruned_bytes
    return entry


def read_state(
    path: str, settings: ReportSettings, warnings: list[str]
) -> tuple[dict[str, LogState], CellTable]:
    """The usable entries of the state file at ``path``, by chain path, and its table of cells (none
    when it does not exist yet); every entry or file left out is said in ``warnings``."""
    try:
        data = orjson.loads(read_regular(path, MAX_STATE_BYTES))
        version = data.get("version") if isinstance(data, dict) and data.get("kind") == STATE_KIND else None
        if type(version) is int and version != STATE_VERSION:
            warnings.append(
                f"state file {path} is of another schema version than {STATE_VERSION} (an older one lacks the "
                "spawns' durations or holds its counts in another form): every log rebuilt from scratch"
            )
            return {}, CellTable()
        state = StateFile.model_validate(data)
        cells = CellTable(state.cells)
    except FileNotFoundError:
        return {}, CellTable()
    except (FileRefused, OSError, orjson.JSONDecodeError, ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.append(f"state file {path} cannot be used ({first}): every log rebuilt from scratch")
        return {}, CellTable()
    usable: dict[str, LogState] = {}
    cells_digest = cells.digest()
    for entry, written in zip(state.logs, data["logs"], strict=True):
        if entry.digest != entry_digest(written, settings, cells_digest):
            warnings.append(
                f"state of {entry.path}: its digest does not match its content and this report's settings "
                "(damaged, edited, or written with other --by/--since/--until/--examples/--min-spawns): "
                "rebuilt from scratch"
            )
            continue
        if not _rows_in(entry.aggregation, len(cells.cells)):
            warnings.append(f"state of {entry.path}: a cell beyond the state's tables: rebuilt from scratch")
            continue
        usable[entry.path] = entry
    return usable, cells if usable else CellTable()


def _rows_in(aggregation: AggregationState, cells: int) -> bool:
    """Whether every row of ``aggregation``'s cells is whole and indexes the state's ``cells`` cells
    and the entry's values (an entry kept as read is written back without being restored)."""
    rows = aggregation.cells
    return len(rows) % 3 == 0 and all(
        max(column, default=-1) < bound
        for column, bound in ((rows[::3], cells), (rows[1::3], len(aggregation.values)))
    )


def _compacted(cells: CellTable, entries: list[dict[str, Any]]) -> CellTable:
    """The cells the ``entries`` hold, each entry's rows renumbered into it where any other is left."""
    used = sorted({at for entry in entries for at in entry["aggregation"]["cells"][::3]})
    if len(used) == len(cells.cells):
        return cells
    renumbered = dict(zip(used, range(len(used)), strict=True))
    for entry in entries:
        rows = entry["aggregation"]["cells"] = list(entry["aggregation"]["cells"])
        rows[::3] = [renumbered[at] for at in rows[::3]]
    return CellTable([cells.cells[at] for at in used])


def check_state_path(path: str, chains: Sequence[str]) -> None:
    """Raise :class:`~otel_route_shadow.analysis.source.ChainAnalysisError` when the file at ``path``
    may not be replaced by a state file: one of the logs' files (``chains``, their segments and log
    folders), or a file that is there and neither empty nor begun as :func:`write_state` begins one
    (a key, a chain, a mistyped path). A damaged state file is still rebuilt (:func:`read_state`)."""
    target = os.path.realpath(path)
    for chain in (c for c in chains if not is_remote(c)):
        own = os.path.realpath(chain)
        if target == own or target.startswith((own + ".", own + os.sep)):
            raise ChainAnalysisError(
                f"state file {path}: is {chain} or one of its files; name another --state"
            )
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return
    except FileRefused as exc:
        raise ChainAnalysisError(f"state file {path}: {exc.problem}") from None
    try:
        head = os.read(fd, _HEAD_BYTES)
    except OSError as exc:
        raise ChainAnalysisError(f"state file {path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if head and _STATE_HEAD.match(head) is None:
        raise ChainAnalysisError(
            f"state file {path}: not a fleet state file, and not replaced by one (name another --state, or "
            "remove it)"
        )


def write_state(path: str, entries: list[dict[str, Any]], cells: CellTable, settings: ReportSettings) -> None:
    """Replace the state file at ``path`` (atomically) with ``entries``, whose cells are rows of
    ``cells``, each entry's digest made anew (see :func:`entry_digest`); one that cannot be written is
    a :class:`~otel_route_shadow.analysis.source.ChainAnalysisError` naming it."""
    cells = _compacted(cells, entries)
    cells_digest = cells.digest()
    for entry in entries:
        entry["digest"] = entry_digest(entry, settings, cells_digest)
    document = {"kind": STATE_KIND, "version": STATE_VERSION, "cells": cells.cells, "logs": entries}
    try:
        write_atomic(path, orjson.dumps(document) + b"\n", mode=0o600)
    except OSError as exc:
        raise ChainAnalysisError(f"state file {path}: cannot write: {exc.strerror or exc}") from None
