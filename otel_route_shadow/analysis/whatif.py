"""What-if replay: every recorded context through ``explain`` against a candidate snapshot.

Decisions are pure functions of (context, snapshot), so a replay needs one ``explain`` per distinct
context, not per record: a :class:`~otel_route_shadow.analysis.replaying.Replayer` remembers each
context's decision (bounded, so memory stays constant). Everything else reads attributes straight
from the parsed payload.

Integrity (ADR-0139 D5, D6): replaying a record's context against the snapshot it cites (same
revision and hash) must reproduce its decision id and its decision fields exactly. A mismatch is an
integrity finding, never a difference. The cited snapshot is available when it *is* the candidate,
when a store is given that holds that revision with that hash, when it is the empty policy set
(its hash proves its content), or when the record says the snapshot was unavailable (corrupt).
Otherwise the record's integrity is counted as not checked, with the reason.

One record goes through these steps (:meth:`_Replay.take`): it must carry a context
(``record-incomplete``) that parses (``context-unparseable``); it is replayed against the candidate;
its integrity is checked against the snapshot it cites (:meth:`_Replay.check`); and it is counted
(:meth:`_Replay.count`): the change, if any, its examples, and which candidate policies decided it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from otel_route_shadow.analysis.groups import (
    DIMENSIONS,
    GroupSpec,
    as_specs,
    key_label,
    label,
    parse_by,
    spec_name,
)
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
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.tally import rate, sorted_counts, top_counts
from otel_route_shadow.analysis.usage import UsageTable, usage_table
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "DECISION_FIELDS",
    "WhatIfResult",
    "format_whatif",
    "replay",
    "replay_payloads",
    "transition_text",
]

DECISION_FIELDS: Final = (
    "outcome",
    "reason",
    "policy_source",
    "rung",
    "policy_id",
    "provider",
    "account",
    "model",
)
"""The decision fields a record carries and a replay compares (the ``how`` of a change)."""

_FIELD_KEYS: Final = (
    attr.OUTCOME,
    attr.REASON,
    attr.POLICY_SOURCE,
    attr.RUNG,
    attr.POLICY_ID,
    attr.PROVIDER,
    attr.ACCOUNT,
    attr.MODEL,
)
_OUTCOME_I, _REASON_I, _PROVIDER_I = 0, 1, 5
_N_FIELDS: Final = len(_FIELD_KEYS)
MAX_FINDING_EXAMPLES: Final = 20

Fields = tuple[Any, ...]
Transition = tuple[Any, ...]
"""(outcome before, after, provider before, after, reason before, after)."""
_ChangeKey = tuple[Transition | None, tuple[str, ...], bool]
"""(transition or None when nothing changed, the names of the fields that differ, agreed after)."""


@dataclass(slots=True)
class ChangeTally:
    """Replayed records in one group and how many of them the candidate would decide differently."""

    replayed: int = 0
    changed: int = 0
    agreed_before: int = 0
    agreed_after: int = 0
    transitions: dict[Transition, int] = field(default_factory=dict)

    def add(self, n: int, change: _ChangeKey, was_agreed: bool) -> None:
        transition, _changed, now_agreed = change
        self.replayed += n
        self.agreed_before += n if was_agreed else 0
        self.agreed_after += n if now_agreed else 0
        if transition is not None:
            self.changed += n
            self.transitions[transition] = self.transitions.get(transition, 0) + n

    def as_dict(self, top: int = 3) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "changed": self.changed,
            "change_rate": rate(self.changed, self.replayed),
            "agreement_rate_before": rate(self.agreed_before, self.replayed),
            "agreement_rate_after": rate(self.agreed_after, self.replayed),
            "top_changes": [
                {**_transition_dict(t), "count": n} for t, n in top_counts(self.transitions, top)
            ],
        }


def _transition_dict(transition: Transition) -> dict[str, Any]:
    out_b, out_a, prov_b, prov_a, reason_b, reason_a = transition
    return {
        "outcome": {"before": out_b, "after": out_a},
        "provider": {"before": prov_b, "after": prov_a},
        "reason": {"before": reason_b, "after": reason_a},
    }


def _moved(name: str, before: Any, after: Any) -> str:
    prefix = f"{name} " if name else ""
    if before != after:
        return f"{prefix}{label(before)}->{label(after)}"
    return f"{prefix}{label(after)}"


def transition_text(transition: Transition) -> str:
    out_b, out_a, prov_b, prov_a, reason_b, reason_a = transition
    return ", ".join(
        (_moved("", out_b, out_a), _moved("provider", prov_b, prov_a), _moved("reason", reason_b, reason_a))
    )


@dataclass
class IntegrityReport:
    checked: int = 0
    passed: int = 0
    findings: dict[str, int] = field(default_factory=dict)
    not_checked: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(self.findings.values())

    @property
    def unchecked(self) -> int:
        return sum(self.not_checked.values())

    def skip(self, reason: str) -> None:
        self.not_checked[reason] = self.not_checked.get(reason, 0) + 1

    def find(self, kind: str, detail: str, seq: int, payload: dict[str, Any]) -> None:
        self.findings[kind] = self.findings.get(kind, 0) + 1
        if len(self.examples) < MAX_FINDING_EXAMPLES:
            self.examples.append(
                {
                    "seq": seq,
                    "kind": kind,
                    "trace_id": payload.get("trace_id"),
                    "span_id": payload.get("span_id"),
                    "detail": detail,
                }
            )

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "passed": self.passed,
            "failed": self.failed,
            "findings": dict(sorted_counts(self.findings)),
            "not_checked": self.unchecked,
            "not_checked_reasons": dict(sorted_counts(self.not_checked)),
            "examples": self.examples,
        }


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
                    {**_transition_dict(t), "count": n, "examples": self.examples.get(t, [])}
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


class _Examples:
    """The ``limit`` lowest-seq examples of each change, whatever order records are processed in."""

    __slots__ = ("by_transition", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_transition: dict[Transition, list[dict[str, Any]]] = {}

    def wants(self, transition: Transition, seq: int) -> bool:
        """Whether an example at ``seq`` would be kept (saves building one that would not)."""
        bucket = self.by_transition.get(transition)
        return self.limit > 0 and (bucket is None or len(bucket) < self.limit or seq < bucket[-1]["seq"])

    def offer(self, transition: Transition, seq: int, build: Callable[[], dict[str, Any]]) -> None:
        if self.limit <= 0:
            return
        bucket = self.by_transition.setdefault(transition, [])
        if len(bucket) < self.limit:
            bucket.append(build())
        elif seq < bucket[-1]["seq"]:
            bucket[-1] = build()
        else:
            return
        bucket.sort(key=lambda example: example["seq"])


def _change(recorded: Fields, after: Replayed) -> _ChangeKey:
    """How the candidate's decision differs from the recorded one."""
    fields = after.fields
    if fields == recorded:
        return (None, (), after.agreed)
    transition = (
        recorded[_OUTCOME_I],
        fields[_OUTCOME_I],
        recorded[_PROVIDER_I],
        fields[_PROVIDER_I],
        recorded[_REASON_I],
        fields[_REASON_I],
    )
    changed = tuple(name for name, a, b in zip(DECISION_FIELDS, recorded, fields, strict=True) if a != b)
    return (transition, changed, after.agreed)


def _reproduces(reference: Replayed, attributes: dict[str, Any]) -> tuple[str, str] | None:
    """None when the replay against the cited snapshot reproduces the record; else the finding."""
    recorded_id = attributes.get(attr.DECISION_ID)
    if reference.decision_id != recorded_id:
        return (
            "decision-id-mismatch",
            f"recorded {label(recorded_id)}, replay gives {reference.decision_id}",
        )
    recorded = tuple(map(attributes.get, _FIELD_KEYS))
    if reference.fields != recorded:
        differing = [n for n, a, b in zip(DECISION_FIELDS, reference.fields, recorded, strict=True) if a != b]
        return (
            "decision-fields-mismatch",
            "recorded fields differ from the replayed decision: " + ", ".join(differing),
        )
    return None


_Cell = tuple[_ChangeKey, tuple[Any, ...], Any]
"""(change, (*recorded fields, agreed, *dimensions), the candidate's policy usage): one cube cell."""


@dataclass(frozen=True, slots=True)
class _Counted:
    """What one record counts as: its cell of the cube, its recorded fields and its replay."""

    cell: _Cell
    recorded: Fields
    after: Replayed


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
        self.examples = _Examples(examples)
        self.repeats: Repeats[_Counted] = Repeats()

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
        problem = _reproduces(found.replay(text), attributes)
        integrity.passed += problem is None
        return problem

    def count(self, attributes: dict[str, Any], after: Replayed) -> _Counted | None:
        """The record's cell of the cube, or None when a value cannot be counted (a value no
        exporter writes, such as a list)."""
        recorded = tuple(map(attributes.get, _FIELD_KEYS))
        change = _change(recorded, after)
        values = (*recorded, attributes.get(attr.AGREED), *map(attributes.get, self.dim_keys))
        cell = (change, values, after.usage)
        try:
            hash(cell)
        except TypeError:
            return None
        return _Counted(cell, recorded, after)

    def tally(self, counted: _Counted, seq: int, payload: dict[str, Any], attributes: dict[str, Any]) -> None:
        self.cube[counted.cell] += 1
        transition = counted.cell[0][0]
        if transition is not None and self.examples.wants(transition, seq):
            build = partial(_example, seq, payload, attributes, counted.recorded, counted.after)
            self.examples.offer(transition, seq, build)

    def finish(self, snapshot: PolicySnapshot) -> None:
        result = self.result
        result.distinct_contexts = self.candidate.evaluated
        result.examples = self.examples.by_transition
        usage: defaultdict[Any, int] = defaultdict(int)
        for (_change, _values, used), n in self.cube.items():
            usage[used] += n
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
    for (change, values, _used), n in cube.items():
        was_agreed = values[_N_FIELDS] is True
        cell_dims = values[_N_FIELDS + 1 :]
        for name in change[1]:
            result.field_changes[name] = result.field_changes.get(name, 0) + n
        result.total.add(n, change, was_agreed)
        for name, where in positions:
            key = tuple(cell_dims[p] for p in where)
            groups[name].setdefault(key, ChangeTally()).add(n, change, was_agreed)
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
    return {
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
    )
    result.chain = status
    return result


# ---------------------------------------------------------------------------------------------
# Text rendering


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def format_whatif(result: WhatIfResult, top: int = 3) -> str:
    """The terminal form; flagged like the report's when the chain did not verify."""
    mark = result.mark()
    out = [result.banner()] if result.flagged else []
    out.extend(_text_header(result, mark))
    for section in (_text_integrity, _text_changes, _text_groups, _text_usage):
        out.extend(section(result, mark, top))
    if result.flagged:
        out.extend(["", result.banner()])
    return "\n".join(out) + "\n"


def _text_header(result: WhatIfResult, mark: str) -> list[str]:
    cand = result.candidate
    win = result.window.describe()
    return [
        f"route-shadow what-if: {result.chain.path}",
        f"  chain: {result.chain.describe()}",
        f"  candidate: {cand['source']} (revision {cand['revision']}, hash {cand['content_hash']}, "
        f"{cand['policies']} policies)",
        f"  window: since {win['since'] or '(start)'} until {win['until'] or '(end)'}",
        f"{mark} {result.records.describe()}; distinct contexts evaluated {result.distinct_contexts}",
    ]


def _text_integrity(result: WhatIfResult, mark: str, top: int) -> list[str]:
    integ = result.integrity
    out = [""]
    if integ.failed:
        out.append(
            f"! INTEGRITY: {integ.failed} record(s) do not reproduce from their cited snapshot: "
            + ", ".join(f"{k} {v}" for k, v in sorted_counts(integ.findings))
        )
        out.extend(
            f"!   seq {ex['seq']} trace {ex['trace_id']} span {ex['span_id']}: {ex['kind']}: {ex['detail']}"
            for ex in integ.examples[:10]
        )
    out.append(
        f"{mark} integrity: checked {integ.checked}, reproduced {integ.passed}, findings {integ.failed}"
    )
    if integ.unchecked:
        out.append(
            f"{mark} integrity NOT checked for {integ.unchecked} record(s): "
            + "; ".join(f"{k} ({v})" for k, v in sorted_counts(integ.not_checked))
        )
    return out


def _text_changes(result: WhatIfResult, mark: str, top: int) -> list[str]:
    t = result.total
    out = [
        "",
        f"{mark} replayed {t.replayed}: changed {t.changed} ({_pct(rate(t.changed, t.replayed))}), "
        f"unchanged {t.replayed - t.changed}; agreement with the route that ran "
        f"{_pct(rate(t.agreed_before, t.replayed))} recorded -> {_pct(rate(t.agreed_after, t.replayed))} candidate",
    ]
    if result.field_changes:
        out.append(
            f"{mark} fields changed: " + ", ".join(f"{k} {v}" for k, v in sorted_counts(result.field_changes))
        )
    if t.transitions:
        out.extend(["", "changes (recorded -> candidate):"])
    for transition, n in sorted_counts(t.transitions):
        out.append(f"{mark} {n:>8}  {transition_text(transition)}")
        out.extend(
            f"{mark}            e.g. seq {ex['seq']} repo {label(ex['repo'])} role {label(ex['role'])} "
            f"principal {label(ex['principal'])} mechanism {label(ex['mechanism'])}"
            for ex in result.examples.get(transition, [])
        )
    return out


_GROUP_HEADER: Final = (
    "group",
    "replayed",
    "changed",
    "change%",
    "agree% before",
    "agree% after",
    "top changes",
)


def _group_row(key: tuple[Any, ...], tally: ChangeTally, top: int) -> list[str]:
    tops = "; ".join(f"{transition_text(tr)} ({n})" for tr, n in top_counts(tally.transitions, top))
    return [
        key_label(key),
        str(tally.replayed),
        str(tally.changed),
        _pct(rate(tally.changed, tally.replayed)),
        _pct(rate(tally.agreed_before, tally.replayed)),
        _pct(rate(tally.agreed_after, tally.replayed)),
        tops or "-",
    ]


def _text_groups(result: WhatIfResult, mark: str, top: int) -> list[str]:
    out: list[str] = []
    for name, rows in result.groups.items():
        table = [_group_row(key, tally, top) for key, tally in rows]
        widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(_GROUP_HEADER)]
        out.extend(["", f"by {name}:"])
        out.append(mark + " " + "  ".join(h.ljust(widths[i]) for i, h in enumerate(_GROUP_HEADER)).rstrip())
        out.extend(
            mark
            + " "
            + "  ".join(
                c.rjust(widths[i]) if 0 < i < 6 else c.ljust(widths[i]) for i, c in enumerate(row)
            ).rstrip()
            for row in table
        )
    return out


def _text_usage(result: WhatIfResult, mark: str, top: int) -> list[str]:
    if result.usage is None:
        return []
    return [
        "",
        "candidate policy usage (spawns each policy decided, was outranked in, never matched):",
        *result.usage.lines(mark),
    ]
