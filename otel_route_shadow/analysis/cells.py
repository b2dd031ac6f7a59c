"""The report's counting: one :class:`Cell` per distinct tuple of the fields the figures need, counted
in a :class:`Cube` whose size depends on how many distinct values the chain holds, never on how many
records it has; :func:`derive` then turns the counted cells into the figures of a
:class:`~otel_route_shadow.analysis.figures.Report`.

A cell's agreement is the record's ``route_shadow.agreed`` *and* a served route that does not
disagree (:mod:`~otel_route_shadow.analysis.served`): a spawn served by another route after a fallback
is never counted as agreement; its divergence is then named ``served-differs`` when the record names
none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from otel_route_shadow.analysis.cohorts import Cohort
from otel_route_shadow.analysis.gaps import (
    CLAIM_MISMATCH_KEY,
    DECISION_MARKER_KEY,
    FINDING_KEY,
    GAP_DIMENSIONS,
    GapTally,
    SpawnFacts,
)
from otel_route_shadow.analysis.groups import HOST_KEY, GroupSpec, key_label, label, spec_name
from otel_route_shadow.analysis.latency import LatencyHistogram
from otel_route_shadow.analysis.noise import KEY_NAMES, KeyState, NoiseTable, NoiseTracker
from otel_route_shadow.analysis.records import Repeats
from otel_route_shadow.analysis.served import (
    DIFFERS,
    SERVED_DIFFERS,
    SERVED_STATES,
    finding_codes,
    served_disagrees,
    served_state,
)
from otel_route_shadow.analysis.tally import Tally
from otel_route_shadow.shadow import attributes as attr

if TYPE_CHECKING:
    from otel_route_shadow.analysis.figures import Report

__all__ = [
    "AGREED_LABEL",
    "BYPASS_TRANSPORT",
    "MANAGED_SOURCE",
    "UNSPECIFIED",
    "Cell",
    "Cube",
    "CubeSlot",
    "Rows",
    "derive",
    "set_rows",
]

BYPASS_TRANSPORT: Final = "direct-http"
MANAGED_SOURCE: Final = "managed-policy"
UNSPECIFIED: Final = "(unspecified)"
"""The divergence of a spawn that does not agree and names no divergence."""
WHY_NOT_RECORDED: Final = "(not recorded)"
"""Why a served route differs, in a record written before the reason was recorded."""
AGREED_LABEL: Final = "(agreed)"
"""Where a finding is counted against divergences: the spawn agreed otherwise."""


class Cell(NamedTuple):
    """The fields of one observation the figures need; the cube counts equal cells."""

    agreed: bool
    """The record's ``route_shadow.agreed`` is true (before the served route is considered)."""
    divergence: Any
    outcome: Any
    reason: Any
    source: Any
    transport: Any
    mechanism: Any
    repo: Any
    role: Any
    principal: Any
    request_face: Any
    requirement: Any
    legacy_provider: Any
    legacy_model: Any
    finding: Any
    claim_mismatch: Any
    whole_decision: Any
    revision: Any
    content_hash: Any
    policy_id: Any
    served_status: Any
    served_provider: Any
    served_model: Any
    served_source: Any
    served_why: Any
    host: Any
    """The origin of the log the observation came from (a fleet report's; None for one chain)."""

    @property
    def served(self) -> str:
        return served_state(self.served_status, finding_codes(self.finding))

    @property
    def served_disagrees(self) -> bool:
        """The served route differs after a real fallback (``served.served_disagrees``)."""
        return served_disagrees(self.served_status, finding_codes(self.finding), self.served_why)

    @property
    def codes(self) -> frozenset[str]:
        """The record's findings, with ``served-differs`` when the served route disagrees."""
        codes = finding_codes(self.finding)
        return codes | {SERVED_DIFFERS} if self.served_disagrees else codes

    @property
    def agrees(self) -> bool:
        return self.agreed and not self.served_disagrees

    @property
    def divergence_code(self) -> str | None:
        """None when the spawn agrees; else the record's divergence, ``served-differs`` when only the
        served route disagrees, or :data:`UNSPECIFIED`."""
        if self.agrees:
            return None
        if not self.agreed:
            return self.divergence if isinstance(self.divergence, str) else UNSPECIFIED
        return SERVED_DIFFERS

    @property
    def decision_key(self) -> tuple[Any, ...]:
        return (self.repo, self.role, self.principal, self.request_face, self.requirement)

    @property
    def noise_key(self) -> tuple[Any, ...]:
        """The decision key on its host: the noise baseline never pairs spawns of two logs."""
        return (*self.decision_key, self.host)

    @property
    def legacy_route(self) -> tuple[Any, ...]:
        return (self.legacy_provider, self.legacy_model, self.transport)

    @property
    def cohort(self) -> tuple[Any, ...]:
        """The cohort (``cohorts.COHORT_ATTRIBUTES``): the mechanism and the legacy route."""
        return (self.mechanism, self.legacy_provider, self.legacy_model, self.transport)

    def facts(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`Tally.add` for this cell."""
        return {
            "agreed": self.agrees,
            "divergence": self.divergence_code,
            "outcome": self.outcome if isinstance(self.outcome, str) else label(self.outcome),
            "managed": self.source == MANAGED_SOURCE,
            "bypass": self.transport == BYPASS_TRANSPORT,
        }

    def spawn(self, flapping: bool) -> SpawnFacts:
        return SpawnFacts(
            mechanism=self.mechanism,
            managed=self.source == MANAGED_SOURCE,
            agreed=self.agrees,
            bypass=self.transport == BYPASS_TRANSPORT,
            findings=self.codes,
            claim_mismatch=self.claim_mismatch,
            whole_decision=self.whole_decision is not None,
            flapping=flapping,
        )


CELL_KEYS: Final = (
    attr.DIVERGENCE,
    attr.OUTCOME,
    attr.REASON,
    attr.POLICY_SOURCE,
    attr.TRANSPORT,
    attr.LEGACY_MECHANISM,
    attr.REPO,
    attr.ROLE,
    attr.PRINCIPAL,
    attr.REQUEST_FACE,
    attr.REQUIREMENT,
    attr.LEGACY_PROVIDER,
    attr.LEGACY_MODEL,
    FINDING_KEY,
    CLAIM_MISMATCH_KEY,
    DECISION_MARKER_KEY,
    attr.SNAPSHOT_REVISION,
    attr.SNAPSHOT_HASH,
    attr.POLICY_ID,
    *attr.SERVED_KEYS,
    HOST_KEY,
)
"""The attributes of a :class:`Cell` after ``agreed``, in its field order."""


class CubeSlot:
    """One distinct cell: its count, and what each of its records needs while streaming."""

    __slots__ = ("agreed", "cell", "count", "divergence", "latency", "route", "served_differs", "state")

    def __init__(
        self, cell: Cell, noise: NoiseTracker, latencies: dict[tuple[Any, ...], LatencyHistogram]
    ) -> None:
        self.cell = cell
        self.count = 0
        self.agreed = cell.agrees
        self.divergence: str = cell.divergence_code or ""
        """The divergence code when the cell does not agree (empty when it does)."""
        self.served_differs = cell.served_disagrees
        self.state: KeyState = noise.key(cell.noise_key)
        self.route = noise.route(cell.legacy_route)
        cohort = cell.cohort
        latency = latencies.get(cohort)
        if latency is None:
            latency = latencies[cohort] = LatencyHistogram()
        self.latency = latency
        """The histogram of the durations of the cell's cohort (shared by its cells)."""


class Cube:
    """Counts of equal :class:`Cell` tuples (a repeated observation reuses its slot: :class:`Repeats`),
    and the spawns' durations per cohort."""

    __slots__ = ("latencies", "noise", "repeats", "saved", "slots")

    def __init__(self, noise: NoiseTracker) -> None:
        self.noise = noise
        self.slots: dict[tuple[Any, ...], CubeSlot] = {}
        self.latencies: dict[tuple[Any, ...], LatencyHistogram] = {}
        """Per cohort, the durations of its spawns (``latency.LatencyHistogram``)."""
        self.repeats: Repeats[CubeSlot] = Repeats()
        self.saved: dict[tuple[Any, ...], int] = {}
        """The counts of cells restored from a saved pass (a monitor's state) and not counted since:
        a cell becomes a slot, with its saved count, only when a record of it is counted again."""

    def add(self, attributes: dict[str, Any]) -> CubeSlot | None:
        """Count one observation; its slot, or None when a value cannot be counted (a value no
        exporter writes, such as a list)."""
        slot = self.repeats.get(attributes)
        if slot is None:
            key = (attributes.get(attr.AGREED) is True, *map(attributes.get, CELL_KEYS))
            try:
                slot = self.slots.get(key)
            except TypeError:
                return None
            if slot is None:
                slot = self.slots[key] = self.slot(key)
                if self.saved:
                    slot.count = self.saved.pop(key, 0)
            self.repeats.remember(attributes, slot)
        slot.count += 1
        return slot

    def slot(self, key: tuple[Any, ...]) -> CubeSlot:
        """A new slot for the cell ``key``, tied to this cube's noise tracker and latencies."""
        return CubeSlot(Cell._make(key), self.noise, self.latencies)

    def counted(self) -> Iterator[tuple[tuple[Any, ...], int, KeyState]]:
        """Every counted cell: its values (``Cell`` order), its count and its decision key's state."""
        for slot in self.slots.values():
            yield slot.cell, slot.count, slot.state
        key = self.noise.key
        for values, count in self.saved.items():
            yield values, count, key(_noise_key(values))


_noise_key = itemgetter(*(Cell._fields.index(name) for name in (*KEY_NAMES, "host")))
"""The decision key and host of a cell's values (:attr:`Cell.noise_key`)."""


# ---------------------------------------------------------------------------------------------
# From the cube to the figures


def derive(report: Report, cubes: Sequence[Cube]) -> None:
    """Every counted figure of ``report`` from the cells of ``cubes`` (one per log: a fleet's logs'
    cubes, each log's cells its own), with the noise table over all their decision keys.

    One pass over the cells adds each one's count to its decision key's spawns and folds it into a
    *fleet cell*: the cell without its host, and whether its key flaps. Every figure but a breakdown
    by host depends on nothing else, so the figures are derived once per fleet cell (as many as one
    log's distinct cells, however many hosts), and the breakdowns by host are added in that pass."""
    host_specs = [(spec_name(spec), _fields_of(spec)) for spec in report.by if HOST in spec]
    host_groups: dict[str, dict[tuple[Any, ...], Tally]] = {name: {} for name, _ in host_specs}
    known: dict[tuple[Any, ...], tuple[Cell, dict[str, Any]]] = {}
    fleet_cells: dict[tuple[tuple[Any, ...], bool], list[Any]] = {}
    for cube in cubes:
        for values, n, state in cube.counted():
            bare = values[:-1]
            found = known.get(bare)
            if found is None:
                cell = Cell._make((*bare, None))
                found = known[bare] = (cell, cell.facts())
            facts = found[1]
            state.spawns += n
            if not facts["agreed"]:
                state.diverged[0] += n
            merged = fleet_cells.get((bare, state.flaps > 0))
            if merged is None:
                fleet_cells[bare, state.flaps > 0] = [found[0], facts, n]
            else:
                merged[2] += n
            for name, fields in host_specs:
                group, key = host_groups[name], fields(values)
                tally = group.get(key)
                if tally is None:
                    tally = group[key] = Tally()
                tally.add(n, **facts)
    report.noise = NoiseTable(
        lanes=cubes[0].noise.lanes if cubes else ("",),
        rows=[row for cube in cubes for row in cube.noise.rows()],
    )
    latencies = _merged_latencies(cubes)
    mechanisms: dict[Any, Tally] = {}
    served_by: dict[Any, dict[str, int]] = {}
    specs = [spec for spec in report.by if HOST not in spec]
    groups: dict[str, dict[tuple[Any, ...], Tally]] = {spec_name(spec): {} for spec in report.by}
    groups.update(host_groups)
    gaps: dict[str, dict[Any, GapTally]] = {name: {} for name in GAP_DIMENSIONS}
    cohorts: dict[tuple[Any, ...], Cohort] = {
        key: Cohort(errors=n) for key, n in report.records.shadow_errors.items()
    }
    report.gap_total.min_spawns = report.min_spawns
    for (_, flapping), (cell, facts, n) in fleet_cells.items():
        report.total.add(n, **facts)
        mechanisms.setdefault(cell.mechanism, Tally()).add(n, **facts)
        _add_counts(report, cell, n)
        _add_served(report, served_by.setdefault(cell.mechanism, dict.fromkeys(SERVED_STATES, 0)), cell, n)
        _add_groups(groups, specs, cell, facts, n)
        _add_gaps(report.gap_total, gaps, cell.spawn(flapping), cell, n, report.min_spawns)
        cohort = cohorts.setdefault(cell.cohort, Cohort())
        latency = latencies.get(cell.cohort)
        if latency is not None:
            cohort.latency = latency
        cohort.spawns += n
        cohort.agreed += n if cell.agrees else 0
    set_rows(report, Rows(mechanisms, served_by, groups, gaps, cohorts))


def _merged_latencies(cubes: Sequence[Cube]) -> dict[tuple[Any, ...], LatencyHistogram]:
    """Per cohort, its durations over every cube (the one cube's own histograms when there is one)."""
    if len(cubes) == 1:
        return cubes[0].latencies
    merged: dict[tuple[Any, ...], LatencyHistogram] = {}
    for cube in cubes:
        for cohort, latency in cube.latencies.items():
            merged.setdefault(cohort, LatencyHistogram()).merge(latency)
    return merged


def _fields_of(spec: GroupSpec) -> Any:
    """The group key of ``spec`` from a cell's values."""
    indices = [Cell._fields.index(_CELL_FIELD[name]) for name in spec]
    return lambda values: tuple([values[i] for i in indices])


class Rows(NamedTuple):
    """The keyed figures of a report while they are summed, before :func:`set_rows` orders them."""

    mechanisms: dict[Any, Tally]
    served_by: dict[Any, dict[str, int]]
    groups: dict[str, dict[tuple[Any, ...], Tally]]
    gaps: dict[str, dict[Any, GapTally]]
    cohorts: dict[tuple[Any, ...], Cohort]


def set_rows(report: Report, rows: Rows) -> None:
    """Set ``report``'s keyed figures from ``rows``, each list largest first."""
    report.mechanisms = sorted(rows.mechanisms.items(), key=lambda item: (-item[1].spawns, label(item[0])))
    report.cohorts = sorted(rows.cohorts.items(), key=lambda item: (-item[1].spawns, key_label(item[0])))
    report.served_by_mechanism = [(name, rows.served_by[name]) for name, _ in report.mechanisms]
    report.groups = {
        name: sorted(found.items(), key=lambda item: (-item[1].spawns, key_label(item[0])))
        for name, found in rows.groups.items()
    }
    report.gaps = {
        name: sorted(found.items(), key=lambda item: (-item[1].spawns, label(item[0])))
        for name, found in rows.gaps.items()
    }


def _add(counts: dict[str, int], key: Any, n: int) -> None:
    name = key if isinstance(key, str) else label(key)
    counts[name] = counts.get(name, 0) + n


def _add_counts(report: Report, cell: Cell, n: int) -> None:
    """The flat counts: outcomes, sources, reasons, divergences, findings, recorded deciders."""
    _add(report.outcomes, cell.outcome, n)
    _add(report.policy_sources, cell.source, n)
    if cell.outcome == "held":
        _add(report.held_reasons, cell.reason, n)
    elif cell.outcome == "rejected":
        _add(report.rejected_reasons, cell.reason, n)
    divergence = cell.divergence_code
    if divergence is not None:
        _add(report.divergences, divergence, n)
    for code in cell.codes:
        _add(report.findings, code, n)
        _add(report.findings_by_divergence.setdefault(code, {}), divergence or AGREED_LABEL, n)
    if isinstance(cell.claim_mismatch, str):
        for name in cell.claim_mismatch.split(","):
            _add(report.claim_mismatches, name.strip(), n)
    if isinstance(cell.policy_id, str):
        decided = report.decided.setdefault((cell.revision, cell.content_hash), {})
        decided[cell.policy_id] = decided.get(cell.policy_id, 0) + n


def _add_served(report: Report, by_mechanism: dict[str, int], cell: Cell, n: int) -> None:
    served = cell.served
    report.served[served] = report.served.get(served, 0) + n
    by_mechanism[served] += n
    if served == DIFFERS:
        move = (cell.legacy_provider, cell.legacy_model, cell.served_provider, cell.served_model)
        report.served_routes[move] = report.served_routes.get(move, 0) + n
        _add(report.served_why, cell.served_why if isinstance(cell.served_why, str) else WHY_NOT_RECORDED, n)
    if served != "unknown" and isinstance(cell.served_source, str):
        _add(report.served_sources, cell.served_source, n)


def _add_groups(
    groups: dict[str, dict[tuple[Any, ...], Tally]],
    specs: Sequence[GroupSpec],
    cell: Cell,
    facts: dict[str, Any],
    n: int,
) -> None:
    values = cell._asdict()
    for spec in specs:
        key = tuple(values[_CELL_FIELD[name]] for name in spec)
        groups[spec_name(spec)].setdefault(key, Tally()).add(n, **facts)


HOST: Final = "host"
"""The ``--by`` name of the fleet's breakdown per host (the origin of each log)."""
_CELL_FIELD: Final = {
    "repo": "repo",
    "role": "role",
    "principal": "principal",
    "mechanism": "mechanism",
    "transport": "transport",
    "outcome": "outcome",
    "host": "host",
}
"""``--by`` name -> the :class:`Cell` field it groups on (see ``groups.DIMENSIONS``)."""


def _add_gaps(
    total: GapTally,
    gaps: dict[str, dict[Any, GapTally]],
    spawn: SpawnFacts,
    cell: Cell,
    n: int,
    min_spawns: int,
) -> None:
    total.add(spawn, n)
    values = cell._asdict()
    for name in GAP_DIMENSIONS:
        gaps[name].setdefault(values[name], GapTally(min_spawns=min_spawns)).add(spawn, n)
