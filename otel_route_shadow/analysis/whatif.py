"""What-if replay: every recorded context through ``explain`` against a candidate snapshot.

Decisions are pure functions of (context, snapshot), so a replay needs one ``explain`` per distinct
context, not per record: a :class:`~otel_route_shadow.analysis.replaying.Replayer` remembers each
context's decision (bounded, so memory stays constant). Everything else reads attributes straight
from the parsed payload.

Integrity (:mod:`~otel_route_shadow.analysis.integrity`): replaying a record's context against the
snapshot it cites must reproduce its decision id and fields exactly. The cited snapshot is available
when it *is* the candidate, when a store is given that holds that revision with that hash, when it is
the empty policy set (its hash proves its content), or when the record says the snapshot was
unavailable (corrupt). Otherwise the record's integrity is counted as not checked, with the reason.

One record goes through these steps (:meth:`_Replay.take`): it must carry a context
(``record-incomplete``) that parses (``context-unparseable``); it is replayed against the candidate;
its integrity is checked against the snapshot it cites (:meth:`_Replay.check`); and it is counted
(:meth:`_Replay.count`): the change, if any, its examples, which candidate policies decided it, and
its decision key's noise baseline (:mod:`~otel_route_shadow.analysis.noise`, two lanes: the recorded
decision and the candidate's). A spawn served by another route after a fallback agrees with neither
decision (:mod:`~otel_route_shadow.analysis.served`).

Rendering (text) is the command line's (``otel_route_shadow.cli``): this module computes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from otel_route_shadow.analysis.changes import (
    FIELD_KEYS,
    ChangeKey,
    ChangeTally,
    Fields,
    Transition,
    change,
    transition_dict,
)
from otel_route_shadow.analysis.examples import Examples
from otel_route_shadow.analysis.groups import (
    DIMENSIONS,
    HOST_KEY,
    GroupSpec,
    as_specs,
    key_label,
    parse_by,
    spec_name,
)
from otel_route_shadow.analysis.integrity import IntegrityReport, reproduces
from otel_route_shadow.analysis.noise import KeyState, NoiseTable, NoiseTracker
from otel_route_shadow.analysis.records import AnalysisResult, Repeats, flag_rows, observations
from otel_route_shadow.analysis.replaying import (
    UNPARSEABLE,
    CitedLoader,
    CitedSnapshots,
    Mismatch,
    Replayed,
    Replayer,
    Unchecked,
    cited_key,
)
from otel_route_shadow.analysis.served import finding_codes, served_disagrees
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.tally import sorted_counts
from otel_route_shadow.analysis.usage import UsageTable, usage_table
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.core import DECISION_FIELDS, PolicySnapshot
from otel_route_shadow.shadow import attributes as attr

__all__ = ["NOISE_LANES", "WhatIfResult", "replay", "replay_payloads", "snapshot_info"]

NOISE_LANES: Final = ("recorded", "candidate")
"""The noise baseline's two divergences: of the recorded decision and of the candidate's."""
_N_FIELDS: Final = len(FIELD_KEYS)


@dataclass
class WhatIfResult(AnalysisResult):
    candidate: dict[str, Any] = field(default_factory=dict)
    total: ChangeTally = field(default_factory=ChangeTally)
    field_changes: dict[str, int] = field(default_factory=dict)
    groups: dict[str, list[tuple[tuple[Any, ...], ChangeTally]]] = field(default_factory=dict)
    examples: dict[Transition, list[dict[str, Any]]] = field(default_factory=dict)
    integrity: IntegrityReport = field(default_factory=IntegrityReport)
    distinct_contexts: int = 0
    usage: UsageTable | None = None
    """How many replayed spawns each candidate policy decided, was outranked in, never matched."""
    noise: NoiseTable = field(default_factory=lambda: NoiseTable(lanes=NOISE_LANES))
    """Per decision key: the legacy route's flap rate and both decisions' divergence above it."""

    @property
    def replayed(self) -> int:
        return self.total.replayed

    @property
    def changed(self) -> int:
        return self.total.changed

    @property
    def integrity_findings(self) -> int:
        return self.integrity.failed

    def group(self, spec: str | GroupSpec) -> dict[tuple[Any, ...], ChangeTally]:
        name = spec if isinstance(spec, str) else spec_name(spec)
        return dict(self.groups.get(name, []))

    def as_dict(self, top: int = 3) -> dict[str, Any]:
        data = self.header("route-shadow-whatif")
        data.update(
            {
                "candidate": self.candidate,
                "distinct_contexts_evaluated": self.distinct_contexts,
                "totals": self.total.as_dict(top),
                "field_changes": dict(sorted_counts(self.field_changes)),
                "changes": [
                    {**transition_dict(t), "count": n, "examples": self.examples.get(t, [])}
                    for t, n in sorted_counts(self.total.transitions)
                ],
                "groups": {
                    name: [
                        {"key": dict(zip(name.split("+"), key, strict=True)), **tally.as_dict(top)}
                        for key, tally in rows
                    ]
                    for name, rows in self.groups.items()
                },
                "integrity": self.integrity.as_dict(),
                "policy_usage": None if self.usage is None else self.usage.as_dict(),
                "noise": self.noise.as_dict(),
            }
        )
        if self.flagged:
            flag_rows(data)
        return data


def snapshot_info(snapshot: PolicySnapshot, source: str) -> dict[str, Any]:
    return {
        "source": source,
        "revision": snapshot.revision,
        "content_hash": snapshot.content_hash,
        "policies": len(snapshot.policies),
        "available": snapshot.available,
    }


_Cell = tuple[ChangeKey, tuple[Any, ...], Any, KeyState]
"""(change, (*recorded fields, agreed before, *dimensions), the candidate's policy usage, the decision
key's noise state): one cube cell."""


@dataclass(frozen=True, slots=True)
class _Counted:
    """What one record counts as: its cell of the cube, its recorded fields, its replay, and its
    decision key's noise state with its interned legacy route."""

    cell: _Cell
    recorded: Fields
    after: Replayed
    route: tuple[Any, ...]

    @property
    def state(self) -> KeyState:
        return self.cell[3]


class _Replay:
    """The state of one what-if pass, and the steps each record goes through."""

    def __init__(
        self, result: WhatIfResult, snapshot: PolicySnapshot, loader: CitedLoader | None, examples: int
    ):
        self.result = result
        self.candidate = Replayer(snapshot)
        self.cited = CitedSnapshots(loader, known=self.candidate)
        self.dims = tuple(dict.fromkeys(name for spec in result.by for name in spec))
        self.dim_keys = tuple(DIMENSIONS[name] for name in self.dims)
        self.cube: defaultdict[_Cell, int] = defaultdict(int)
        """Records per cell (see :data:`_Cell`)."""
        self.examples: Examples[Transition] = Examples(examples)
        self.repeats: Repeats[_Counted] = Repeats()
        self.noise = NoiseTracker(NOISE_LANES)

    def take(self, seq: int, payload: dict[str, Any], attributes: dict[str, Any]) -> None:
        integrity = self.result.integrity
        counted = self.repeats.get(attributes)
        if counted is not None:  # the very same observation as one already checked and counted
            integrity.checked += 1
            integrity.passed += 1
            self.tally(counted, seq, payload, attributes)
            return
        text = attributes.get(attr.CONTEXT)
        if type(text) is not str:
            integrity.find("record-incomplete", "no route_shadow.context to replay", seq, payload)
            return
        after = self.candidate.replay(text)
        if after is UNPARSEABLE:
            detail = "route_shadow.context is not a valid route context"
            integrity.find("context-unparseable", detail, seq, payload)
            return
        passed_before = integrity.passed
        problem = self.check(attributes, text)
        if problem is not None:
            integrity.find(*problem, seq, payload)
            return
        counted = self.count(attributes, after)
        if counted is None:
            self.result.records.demote()
            return
        self.tally(counted, seq, payload, attributes)
        if integrity.passed > passed_before:  # reproduced: a repeat of it is settled by comparison alone
            self.repeats.remember(attributes, counted)

    def check(self, attributes: dict[str, Any], text: str) -> tuple[str, str] | None:
        """Replay against the cited snapshot: None when reproduced (or not checkable, counted as
        such), else the integrity finding ``(kind, detail)``."""
        integrity = self.result.integrity
        key = cited_key(attributes)
        if key is None:
            integrity.skip("no snapshot citation")
            return None
        found = self.cited.lookup(key)
        if isinstance(found, Unchecked):
            integrity.skip(found.reason)
            return None
        if isinstance(found, Mismatch):
            return ("cited-snapshot-mismatch", found.detail)
        integrity.checked += 1
        problem = reproduces(found.replay(text), attributes)
        integrity.passed += problem is None
        return problem

    def count(self, attributes: dict[str, Any], after: Replayed) -> _Counted | None:
        """The record's cell of the cube, or None when a value cannot be counted (a value no
        exporter writes, such as a list)."""
        recorded = tuple(map(attributes.get, FIELD_KEYS))
        disagrees = served_disagrees(
            attributes.get(attr.SERVED_STATUS),
            finding_codes(attributes.get(attr.FINDING)),
            attributes.get(attr.SERVED_WHY),
        )
        before = attributes.get(attr.AGREED) is True and not disagrees
        now = after.agreed and not disagrees
        values = (*recorded, before, *map(attributes.get, self.dim_keys))
        try:
            state, route = self.noise.of(attributes)
            cell = (change(recorded, after, now), values, after.usage, state)
            hash(cell)
        except TypeError:
            return None
        return _Counted(cell, recorded, after, route)

    def tally(self, counted: _Counted, seq: int, payload: dict[str, Any], attributes: dict[str, Any]) -> None:
        self.cube[counted.cell] += 1
        if counted.state.last is not counted.route:
            counted.state.step(counted.route, seq)
        transition = counted.cell[0][0]
        if transition is not None and self.examples.wants(transition, seq):
            build = partial(_example, seq, payload, attributes, counted.recorded, counted.after)
            self.examples.offer(transition, seq, build)

    def finish(self, snapshot: PolicySnapshot) -> None:
        result = self.result
        result.distinct_contexts = self.candidate.evaluated
        result.examples = self.examples.by_kind
        usage: defaultdict[Any, int] = defaultdict(int)
        for (changed, values, used, state), n in self.cube.items():
            usage[used] += n
            state.spawns += n
            state.diverged[0] += 0 if values[_N_FIELDS] else n
            state.diverged[1] += 0 if changed[2] else n
        result.noise = self.noise.table()
        result.usage = usage_table(snapshot, usage)
        groups = _derive(result, self.cube, self.dims)
        result.groups = {
            name: sorted(
                rows.items(), key=lambda item: (-item[1].changed, -item[1].replayed, key_label(item[0]))
            )
            for name, rows in groups.items()
        }


def _derive(
    result: WhatIfResult, cube: dict[_Cell, int], dims: tuple[str, ...]
) -> dict[str, dict[tuple[Any, ...], ChangeTally]]:
    """Totals, field changes and group tallies from the counted cells."""
    positions = [(spec_name(spec), tuple(dims.index(name) for name in spec)) for spec in result.by]
    groups: dict[str, dict[tuple[Any, ...], ChangeTally]] = {name: {} for name, _ in positions}
    for (changed, values, _used, _state), n in cube.items():
        was_agreed = values[_N_FIELDS] is True
        cell_dims = values[_N_FIELDS + 1 :]
        for name in changed[1]:
            result.field_changes[name] = result.field_changes.get(name, 0) + n
        result.total.add(n, changed, was_agreed)
        for name, where in positions:
            key = tuple(cell_dims[p] for p in where)
            groups[name].setdefault(key, ChangeTally()).add(n, changed, was_agreed)
    return groups


def replay_payloads(
    payloads: Iterable[tuple[int, Any]],
    snapshot: PolicySnapshot,
    *,
    chain: ChainStatus,
    candidate_source: str = "candidate",
    cited_loader: CitedLoader | None = None,
    by: Sequence[GroupSpec] | None = None,
    window: TimeWindow | None = None,
    examples: int = 3,
    progress: ProgressFn | None = None,
) -> WhatIfResult:
    """Replay ``(seq, payload)`` pairs against ``snapshot`` in one pass; see the module docstring."""
    result = WhatIfResult(
        chain=chain,
        window=window if window is not None else TimeWindow(),
        by=tuple(by) if by is not None else parse_by(None),
        candidate=snapshot_info(snapshot, candidate_source),
    )
    run = _Replay(result, snapshot, cited_loader, examples)
    for seq, payload, attributes, _ns in observations(
        payloads, result.records, window=result.window, progress=progress, total=chain.records
    ):
        run.take(seq, payload, attributes)
    run.finish(snapshot)
    return result


def _example(
    seq: int, payload: dict[str, Any], attributes: dict[str, Any], recorded: Fields, after: Replayed
) -> dict[str, Any]:
    host = attributes.get(HOST_KEY)
    return {
        **({} if host is None else {"host": host}),
        "seq": seq,
        "trace_id": payload.get("trace_id"),
        "span_id": payload.get("span_id"),
        "repo": attributes.get(attr.REPO),
        "role": attributes.get(attr.ROLE),
        "principal": attributes.get(attr.PRINCIPAL),
        "mechanism": attributes.get(attr.LEGACY_MECHANISM),
        "before": dict(zip(DECISION_FIELDS, recorded, strict=True)),
        "after": dict(zip(DECISION_FIELDS, after.fields, strict=True)),
        "agreed_after": after.agreed,
        "divergence_after": after.divergence,
    }


def replay(
    path: str | Path,
    snapshot: PolicySnapshot,
    *,
    candidate_source: str = "candidate",
    cited_loader: CitedLoader | None = None,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    window: TimeWindow | None = None,
    examples: int = 3,
    allow_unverified: bool = False,
    verify: bool = True,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    verify_progress: ProgressFn | None = None,
    concurrent: bool | None = None,
    keys: Sequence[str] = (),
) -> WhatIfResult:
    """Verify the chain at ``path`` (refusing an unverifiable one unless ``allow_unverified``), then
    replay every observation against ``snapshot`` in one streaming pass.

    ``cited_loader(n)`` returns a store's revision ``n`` (or None) so records citing a snapshot other
    than the candidate can still be integrity-checked (``RoutingPolicyStore.revision`` will do; a
    missing revision may raise or return None). ``concurrent``: see :func:`analyse_chain`.
    """
    specs = as_specs(by)
    chosen = window if window is not None else TimeWindow.parse(since, until)

    def consume(payloads: Iterable[tuple[int, Any]], hint: int) -> WhatIfResult:
        pending = ChainStatus(path=str(path), records=hint, verified=False, checked=False)
        return replay_payloads(
            payloads,
            snapshot,
            chain=pending,
            candidate_source=candidate_source,
            cited_loader=cited_loader,
            by=specs,
            window=chosen,
            examples=examples,
            progress=progress,
        )

    status, result = analyse_chain(
        path,
        consume,
        verify=verify,
        allow_unverified=allow_unverified,
        jobs=jobs,
        verify_progress=verify_progress,
        concurrent=concurrent,
        keys=keys,
    )
    result.chain = status
    return result
