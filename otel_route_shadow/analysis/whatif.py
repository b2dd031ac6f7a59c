"""What-if replay: every recorded context through ``explain`` against a candidate snapshot.

Decisions are pure functions of (context, snapshot), so a replay needs one ``explain`` per distinct
context, not per record: results are memoised by the record's canonical context JSON (bounded, so
memory stays constant), and the misses of each chunk of records are resolved together with
``explain_batch`` (one policy index per chunk). Everything else reads attributes straight from the
parsed payload.

Integrity (ADR-0139 D5, D6): replaying a record's context against the snapshot it cites (same
revision and hash) must reproduce its decision id and its decision fields exactly. A mismatch is an
integrity finding, never a difference. The cited snapshot is available when it *is* the candidate,
when a store is given that holds that revision with that hash, when it is the empty policy set
(its hash proves its content), or when the record says the snapshot was unavailable (corrupt).
Otherwise the record's integrity is counted as not checked, with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from otel_route_shadow.analysis.groups import DIMENSIONS, GroupSpec, key_label, label, parse_by, spec_name
from otel_route_shadow.analysis.source import ChainStatus, ProgressFn, analyse_chain
from otel_route_shadow.analysis.tally import rate, sorted_counts, top_counts
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.core import (
    EMPTY_SET_HASH,
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    compare_routes,
    explain_batch,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.record import RECORD_KIND

__all__ = [
    "DECISION_FIELDS",
    "CitedLoader",
    "Replayed",
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
CHUNK: Final = 4096
MEMO_LIMIT: Final = 1 << 14
"""Distinct contexts kept per snapshot; the memo is dropped and refilled when it grows past this."""
KNOWN_LIMIT: Final = 1 << 12
"""Checked decisions (with one record's attributes each) kept for the fast path."""
PROGRESS_EVERY: Final = 1 << 15
CORRUPT_STATE: Final = "corrupt"
LOADING_STATE: Final = "loading"
"""A record made before the host's first read of a large store finished (held, ``snapshot-loading``)."""

CitedKey = tuple[int, str, bool, bool]
"""(revision, content hash, available, loading): the snapshot a record cites."""

CitedLoader = Callable[[int], PolicySnapshot | None]
"""Returns a store's revision N (or None when the store does not hold it)."""

Fields = tuple[Any, ...]
_Row = tuple[int, dict[str, Any], dict[str, Any], str]
_ChangeKey = tuple[tuple[Any, ...] | None, tuple[str, ...], bool]


@dataclass(frozen=True, slots=True)
class Replayed:
    """One context's decision under one snapshot, reduced to what the replay compares."""

    decision_id: str
    fields: Fields
    agreed: bool
    divergence: str | None


_UNPARSEABLE: Final = Replayed(decision_id="", fields=(), agreed=False, divergence=None)


def _reduce(decision: RouteDecision, context: RouteContext) -> Replayed:
    agreed, divergence = compare_routes(decision, context.legacy_route)
    fields = (
        decision.outcome,
        decision.reason,
        decision.policy_source,
        decision.rung,
        decision.policy_id,
        decision.provider,
        decision.account,
        decision.model,
    )
    return Replayed(decision.decision_id, fields, agreed, divergence)


class _Resolver:
    """A bounded memo of ``context JSON -> Replayed`` for one snapshot."""

    __slots__ = ("evaluated", "memo", "snapshot")

    def __init__(self, snapshot: PolicySnapshot) -> None:
        self.snapshot = snapshot
        self.memo: dict[str, Replayed] = {}
        self.evaluated = 0

    def resolve(self, texts: Iterable[str]) -> None:
        """Explain every text not yet memoised, in one batch."""
        memo = self.memo
        unique = list(dict.fromkeys(texts))
        pending = [text for text in unique if text not in memo]
        if not pending:
            return
        if len(memo) + len(pending) > MEMO_LIMIT:
            # Bounded memory: drop everything but this chunk's own hits (a chunk is << the limit).
            keep = {text: memo[text] for text in unique if text in memo}
            memo.clear()
            memo.update(keep)
        contexts: list[RouteContext] = []
        parsed: list[str] = []
        for text in pending:
            try:
                contexts.append(RouteContext.model_validate_json(text))
                parsed.append(text)
            except (ValidationError, ValueError):
                memo[text] = _UNPARSEABLE
        self.evaluated += len(contexts)
        for text, context, decision in zip(
            parsed, contexts, explain_batch(contexts, self.snapshot), strict=True
        ):
            memo[text] = _reduce(decision, context)


@dataclass(slots=True)
class ChangeTally:
    """Replayed records in one group and how many of them the candidate would decide differently."""

    replayed: int = 0
    changed: int = 0
    agreed_before: int = 0
    agreed_after: int = 0
    transitions: dict[tuple[Any, ...], int] = field(default_factory=dict)

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


def _transition_dict(transition: tuple[Any, ...]) -> dict[str, Any]:
    out_b, out_a, prov_b, prov_a, reason_b, reason_a = transition
    return {
        "outcome": {"before": out_b, "after": out_a},
        "provider": {"before": prov_b, "after": prov_a},
        "reason": {"before": reason_b, "after": reason_a},
    }


def transition_text(transition: tuple[Any, ...]) -> str:
    out_b, out_a, prov_b, prov_a, reason_b, reason_a = transition
    parts = []
    parts.append(f"{label(out_b)}->{label(out_a)}" if out_b != out_a else label(out_a))
    parts.append(
        f"provider {label(prov_b)}->{label(prov_a)}" if prov_b != prov_a else f"provider {label(prov_a)}"
    )
    parts.append(
        f"reason {label(reason_b)}->{label(reason_a)}"
        if reason_b != reason_a
        else f"reason {label(reason_a)}"
    )
    return ", ".join(parts)


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
class WhatIfResult:
    chain: ChainStatus
    candidate: dict[str, Any]
    window: TimeWindow
    by: tuple[GroupSpec, ...]
    records_read: int = 0
    observations: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)
    outside_window: int = 0
    without_decision: int = 0
    malformed: int = 0
    total: ChangeTally = field(default_factory=ChangeTally)
    field_changes: dict[str, int] = field(default_factory=dict)
    groups: dict[str, list[tuple[tuple[Any, ...], ChangeTally]]] = field(default_factory=dict)
    examples: dict[tuple[Any, ...], list[dict[str, Any]]] = field(default_factory=dict)
    integrity: IntegrityReport = field(default_factory=IntegrityReport)
    distinct_contexts: int = 0

    @property
    def flagged(self) -> bool:
        return self.chain.flagged

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
        data: dict[str, Any] = {
            "kind": "route-shadow-whatif",
            "chain": self.chain.as_dict(),
            "flagged": self.flagged,
            "flag": "UNVERIFIED" if self.flagged else None,
            "candidate": self.candidate,
            "window": self.window.describe(),
            "by": [spec_name(spec) for spec in self.by],
            "records": {
                "read": self.records_read,
                "observations": self.observations,
                "skipped_kinds": dict(sorted_counts(self.skipped_kinds)),
                "outside_window": self.outside_window,
                "without_decision": self.without_decision,
                "malformed": self.malformed,
            },
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
        }
        if self.flagged:
            _flag_rows(data)
        return data


def _flag_rows(value: Any) -> None:
    if isinstance(value, dict):
        if any(key in value for key in ("replayed", "count", "checked")):
            value["unverified"] = True
        for item in value.values():
            _flag_rows(item)
    elif isinstance(value, list):
        for item in value:
            _flag_rows(item)


def snapshot_info(snapshot: PolicySnapshot, source: str) -> dict[str, Any]:
    return {
        "source": source,
        "revision": snapshot.revision,
        "content_hash": snapshot.content_hash,
        "policies": len(snapshot.policies),
        "available": snapshot.available,
    }


class _Cited:
    """Finds the snapshot a record cites, once per distinct citation."""

    def __init__(self, candidate: PolicySnapshot, loader: CitedLoader | None) -> None:
        self.candidate_key: CitedKey = (
            candidate.revision,
            candidate.content_hash,
            candidate.available,
            candidate.loading,
        )
        self.loader = loader
        self.resolvers: dict[CitedKey, _Resolver | str] = {}

    def resolver(self, key: CitedKey) -> _Resolver | str:
        """A resolver for the cited snapshot, or why there is none (``!`` prefix: a finding)."""
        found = self.resolvers.get(key)
        if found is not None:
            return found
        revision, content_hash, available, loading = key
        result: _Resolver | str
        if not available:
            result = _Resolver(
                PolicySnapshot(revision=revision, content_hash=content_hash, available=False, loading=loading)
            )
        elif content_hash == EMPTY_SET_HASH:
            result = _Resolver(PolicySnapshot(revision=revision, content_hash=content_hash))
        elif self.loader is None:
            result = "cited snapshot is not the candidate and no --store was given"
        else:
            try:
                snapshot = self.loader(revision)
            except Exception as exc:
                snapshot = None
                result = f"store revision {revision} unreadable: {str(exc)[:160] or type(exc).__name__}"
            else:
                if snapshot is None:
                    result = f"store has no revision {revision}"
                elif snapshot.content_hash != content_hash:
                    result = "!cited-snapshot-mismatch"
                else:
                    result = _Resolver(snapshot)
        self.resolvers[key] = result
        return result


def _cited_key(attributes: dict[str, Any]) -> CitedKey | None:
    revision = attributes.get(attr.SNAPSHOT_REVISION)
    content_hash = attributes.get(attr.SNAPSHOT_HASH)
    if isinstance(revision, bool) or not isinstance(revision, int) or not isinstance(content_hash, str):
        return None
    return (revision, content_hash, *_state_flags(attributes.get(attr.SNAPSHOT_STATE)))


def _state_flags(state: Any) -> tuple[bool, bool]:
    """(available, loading) of the snapshot a record's ``route_shadow.snapshot.state`` describes."""
    return state not in (CORRUPT_STATE, LOADING_STATE), state == LOADING_STATE


class _Examples:
    """The ``limit`` lowest-seq examples of each change, whatever order records are processed in."""

    __slots__ = ("by_transition", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_transition: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

    def offer(self, transition: tuple[Any, ...], seq: int, build: Callable[[], dict[str, Any]]) -> None:
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
    """How the candidate's decision differs from the recorded one: (transition or None, the names of
    the fields that differ, whether the candidate agrees with the route that ran)."""
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


class _Known:
    """A recorded decision already replayed and checked (by decision id), and its running count.

    A later record with the same decision id is the same decision only if it carries exactly the same
    context text, citation and decision fields; if its attributes equal ``attributes`` altogether it
    is the very same observation (same dimensions, same agreement) and only ``count`` moves.
    """

    __slots__ = (
        "after",
        "attributes",
        "available",
        "change",
        "content_hash",
        "count",
        "loading",
        "recorded",
        "revision",
        "text",
        "transition",
        "values",
    )

    def __init__(
        self,
        text: str,
        key: CitedKey,
        recorded: Fields,
        change: _ChangeKey,
        after: Replayed,
        attributes: dict[str, Any],
        values: tuple[Any, ...],
    ) -> None:
        self.text = text
        self.revision, self.content_hash, self.available, self.loading = key
        self.recorded = recorded
        self.change = change
        self.transition = change[0]
        self.after = after
        self.attributes = attributes
        self.values = values
        self.count = 0


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
    """Replay ``(seq, payload)`` pairs against ``snapshot``; see the module docstring.

    One pass. The first record of each recorded decision (its decision id) goes the careful way:
    replayed against the candidate and against the snapshot it cites, compared, and remembered.
    A later record with the same decision id whose attributes equal the remembered record's is the
    same observation and is only counted; one that carries the same context text, citation and
    recorded fields is the same decision and is settled by comparisons alone; anything else goes the
    careful way. Records whose contexts are not yet memoised wait in a small pending list, resolved
    with one ``explain_batch`` per snapshot when it fills and at the end.
    """
    specs = tuple(by) if by is not None else parse_by(None)
    window = window if window is not None else TimeWindow()
    bounded = not window.unbounded
    dim_names = list(dict.fromkeys(name for spec in specs for name in spec))
    dim_keys = tuple(DIMENSIONS[name] for name in dim_names)
    dim_pos = {name: i for i, name in enumerate(dim_names)}
    spec_positions = [(spec_name(spec), tuple(dim_pos[name] for name in spec)) for spec in specs]

    result = WhatIfResult(
        chain=chain, candidate=snapshot_info(snapshot, candidate_source), window=window, by=specs
    )
    integrity = result.integrity
    not_checked = integrity.not_checked
    candidate = _Resolver(snapshot)
    cited = _Cited(snapshot, cited_loader)
    candidate_key = cited.candidate_key
    memo = candidate.memo
    known: dict[str, _Known] = {}
    known_get = known.get
    # cube: (change, (*recorded fields, agreed, *dims)) -> count
    cube: defaultdict[tuple[Any, ...], int] = defaultdict(int)
    example_sink = _Examples(examples)
    example_lists = example_sink.by_transition
    example_limit = examples
    skipped = result.skipped_kinds
    total = chain.records
    context_key, id_key, agreed_key, outcome_key = attr.CONTEXT, attr.DECISION_ID, attr.AGREED, attr.OUTCOME
    revision_key, hash_key, state_key = attr.SNAPSHOT_REVISION, attr.SNAPSHOT_HASH, attr.SNAPSHOT_STATE
    field_keys = _FIELD_KEYS
    n_fields = len(field_keys)
    # Every attribute a record contributes, in one map: its decision fields, agreed, the dimensions.
    all_keys = (*field_keys, agreed_key, *dim_keys)
    pending: list[_Row] = []
    fast = 0

    def fold() -> None:
        """Move the known decisions' counts into the cube (before forgetting them, and at the end)."""
        for entry in known.values():
            if entry.count:
                cube[(entry.change, entry.values)] += entry.count
                entry.count = 0

    def finding(kind: str, seq: int, payload: dict[str, Any], detail: str) -> None:
        integrity.findings[kind] = integrity.findings.get(kind, 0) + 1
        if len(integrity.examples) < 20:
            integrity.examples.append(
                {
                    "seq": seq,
                    "kind": kind,
                    "trace_id": payload.get("trace_id"),
                    "span_id": payload.get("span_id"),
                    "detail": detail,
                }
            )

    def offer(
        transition: tuple[Any, ...],
        seq: int,
        payload: dict[str, Any],
        attributes: dict[str, Any],
        recorded: Fields,
        after: Replayed,
    ) -> None:
        if example_limit > 0:
            bucket = example_lists.get(transition)
            if bucket is None or len(bucket) < example_limit or seq < bucket[-1]["seq"]:
                example_sink.offer(
                    transition, seq, partial(_example, seq, payload, attributes, recorded, after)
                )

    def tally(
        seq: int,
        payload: dict[str, Any],
        attributes: dict[str, Any],
        recorded: Fields,
        after: Replayed,
        change: _ChangeKey,
    ) -> tuple[Any, ...] | None:
        values = tuple(map(attributes.get, all_keys))
        try:
            cube[(change, values)] += 1
        except TypeError:  # an unhashable attribute value: not something the exporter writes
            result.malformed += 1
            return None
        if change[0] is not None:
            offer(change[0], seq, payload, attributes, recorded, after)
        return values

    def process(row: _Row, defer: bool) -> None:
        """The careful way: replay against the candidate and the cited snapshot, check, remember."""
        seq, payload, attributes, text = row
        after = memo.get(text)
        if after is None:
            if defer:
                pending.append(row)
                return
            candidate.resolve([text])
            after = memo[text]
        if after is _UNPARSEABLE:
            finding("context-unparseable", seq, payload, "route_shadow.context is not a valid route context")
            return
        key = _cited_key(attributes)
        reference: Replayed | None = None
        if key is None:
            not_checked["no snapshot citation"] = not_checked.get("no snapshot citation", 0) + 1
        elif key == candidate_key:
            reference = after
        else:
            resolver = cited.resolver(key)
            if isinstance(resolver, str):
                if resolver.startswith("!"):
                    finding(
                        resolver[1:],
                        seq,
                        payload,
                        f"store revision {key[0]} does not have the cited hash {key[1]}",
                    )
                    return
                not_checked[resolver] = not_checked.get(resolver, 0) + 1
            else:
                reference = resolver.memo.get(text)
                if reference is None:
                    if defer:
                        pending.append(row)
                        return
                    resolver.resolve([text])
                    reference = resolver.memo[text]
        recorded = tuple(map(attributes.get, field_keys))
        change = _change(recorded, after)
        if reference is None or key is None:
            tally(seq, payload, attributes, recorded, after, change)
            return
        integrity.checked += 1
        recorded_id = attributes.get(id_key)
        if reference.decision_id != recorded_id:
            finding(
                "decision-id-mismatch",
                seq,
                payload,
                f"recorded {label(recorded_id)}, replay gives {reference.decision_id}",
            )
            return
        if reference.fields != recorded:
            differing = [
                name for name, a, b in zip(DECISION_FIELDS, reference.fields, recorded, strict=True) if a != b
            ]
            finding(
                "decision-fields-mismatch",
                seq,
                payload,
                "recorded fields differ from the replayed decision: " + ", ".join(differing),
            )
            return
        integrity.passed += 1
        values = tally(seq, payload, attributes, recorded, after, change)
        if values is not None and reference.decision_id not in known:
            if len(known) >= KNOWN_LIMIT:
                fold()
                known.clear()
            known[reference.decision_id] = _Known(text, key, recorded, change, after, attributes, values)

    def flush() -> None:
        candidate.resolve(row[3] for row in pending)
        by_cited: dict[CitedKey, list[str]] = {}
        for row in pending:
            key = _cited_key(row[2])
            if key is not None and key != candidate_key:
                by_cited.setdefault(key, []).append(row[3])
        for key, texts in by_cited.items():
            resolver = cited.resolver(key)
            if isinstance(resolver, _Resolver):
                resolver.resolve(texts)
        rows = pending[:]
        pending.clear()
        for row in rows:
            process(row, False)

    read = observations = 0
    for seq, payload in payloads:
        read += 1
        if progress is not None and not read % PROGRESS_EVERY:
            progress(read, total)
        if payload.__class__ is not dict:
            result.malformed += 1
            continue
        kind = payload.get("kind")
        if kind != RECORD_KIND:
            name = kind if isinstance(kind, str) else "(no kind)"
            skipped[name] = skipped.get(name, 0) + 1
            continue
        attributes = payload.get("attributes")
        if attributes.__class__ is not dict:
            result.malformed += 1
            continue
        if bounded:
            try:
                ns = int(payload["start_time_unix_nano"])
            except (KeyError, TypeError, ValueError):
                ns = -1
            if ns < 0 or not window.contains(ns):
                result.outside_window += 1
                continue
        get = attributes.get
        decision_id = get(id_key)
        seen = known_get(decision_id) if decision_id.__class__ is str else None
        if seen is not None:
            if attributes == seen.attributes:
                # The very same observation as one already replayed and checked: count it.
                fast += 1
                seen.count += 1
                if seen.transition is not None:
                    offer(seen.transition, seq, payload, attributes, seen.recorded, seen.after)
                continue
            revision = get(revision_key)
            if (
                seen.text == get(context_key)
                and get(hash_key) == seen.content_hash
                and revision == seen.revision
                and revision.__class__ is int
                and _state_flags(get(state_key)) == (seen.available, seen.loading)
            ):
                values = tuple(map(get, all_keys))
                if values[:n_fields] == seen.recorded:
                    # The same decision (other dimensions or agreement): comparisons only.
                    try:
                        cube[(seen.change, values)] += 1
                    except TypeError:
                        result.malformed += 1
                        continue
                    fast += 1
                    if seen.transition is not None:
                        offer(seen.transition, seq, payload, attributes, seen.recorded, seen.after)
                    continue
        if get(outcome_key) is None:
            result.without_decision += 1
            continue
        observations += 1
        text = get(context_key)
        if text.__class__ is not str:
            finding("record-incomplete", seq, payload, "no route_shadow.context to replay")
            continue
        process((seq, payload, attributes, text), True)
        if len(pending) >= CHUNK:
            flush()
    flush()
    fold()
    if progress is not None:
        progress(read, total)

    integrity.checked += fast
    integrity.passed += fast
    result.observations = observations + fast
    result.records_read = read
    result.distinct_contexts = candidate.evaluated
    result.examples = example_lists
    groups: dict[str, dict[tuple[Any, ...], ChangeTally]] = {name: {} for name, _ in spec_positions}
    field_changes = result.field_changes
    for (change_key, values), n in cube.items():
        transition, changed, now_agreed = change_key
        was_agreed = values[n_fields] is True
        cell_dims = values[n_fields + 1 :]
        for name in changed:
            field_changes[name] = field_changes.get(name, 0) + n
        tallies = [result.total]
        for name, positions in spec_positions:
            group_key = tuple(cell_dims[p] for p in positions)
            tallies.append(groups[name].setdefault(group_key, ChangeTally()))
        for tally_ in tallies:
            tally_.replayed += n
            if was_agreed:
                tally_.agreed_before += n
            if now_agreed:
                tally_.agreed_after += n
            if transition is not None:
                tally_.changed += n
                tally_.transitions[transition] = tally_.transitions.get(transition, 0) + n
    result.groups = {
        name: sorted(
            rows_.items(), key=lambda item: (-item[1].changed, -item[1].replayed, key_label(item[0]))
        )
        for name, rows_ in groups.items()
    }
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
    if by is None:
        specs = parse_by(None)
    elif all(isinstance(item, str) for item in by):
        specs = parse_by([item for item in by if isinstance(item, str)])
    else:
        specs = tuple(tuple(item) for item in by)
    if window is None:
        window = TimeWindow.parse(since, until)
    chosen = window

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
    mark = "!" if result.flagged else " "
    banner = f"!!! UNVERIFIED CHAIN: every figure below is flagged ({result.chain.describe()}) !!!"
    out: list[str] = []
    if result.flagged:
        out.append(banner)
    cand = result.candidate
    out.append(f"route-shadow what-if: {result.chain.path}")
    out.append(f"  chain: {result.chain.describe()}")
    out.append(
        f"  candidate: {cand['source']} (revision {cand['revision']}, hash {cand['content_hash']}, "
        f"{cand['policies']} policies)"
    )
    win = result.window.describe()
    out.append(f"  window: since {win['since'] or '(start)'} until {win['until'] or '(end)'}")
    skipped = ", ".join(f"{k} {v}" for k, v in sorted_counts(result.skipped_kinds)) or "none"
    out.append(
        f"{mark} records read {result.records_read}: observations {result.observations}; skipped "
        f"(not observations) {skipped}; outside window {result.outside_window}; without a decision "
        f"{result.without_decision}; malformed {result.malformed}; distinct contexts evaluated "
        f"{result.distinct_contexts}"
    )
    integ = result.integrity
    out.append("")
    if integ.failed:
        out.append(
            f"! INTEGRITY: {integ.failed} record(s) do not reproduce from their cited snapshot: "
            + ", ".join(f"{k} {v}" for k, v in sorted_counts(integ.findings))
        )
        for example in integ.examples[:10]:
            out.append(
                f"!   seq {example['seq']} trace {example['trace_id']} span {example['span_id']}: "
                f"{example['kind']}: {example['detail']}"
            )
    out.append(
        f"{mark} integrity: checked {integ.checked}, reproduced {integ.passed}, findings {integ.failed}"
    )
    if integ.unchecked:
        out.append(
            f"{mark} integrity NOT checked for {integ.unchecked} record(s): "
            + "; ".join(f"{k} ({v})" for k, v in sorted_counts(integ.not_checked))
        )
    t = result.total
    out.append("")
    out.append(
        f"{mark} replayed {t.replayed}: changed {t.changed} ({_pct(rate(t.changed, t.replayed))}), "
        f"unchanged {t.replayed - t.changed}; agreement with the route that ran "
        f"{_pct(rate(t.agreed_before, t.replayed))} recorded -> {_pct(rate(t.agreed_after, t.replayed))} candidate"
    )
    if result.field_changes:
        out.append(
            f"{mark} fields changed: " + ", ".join(f"{k} {v}" for k, v in sorted_counts(result.field_changes))
        )
    if t.transitions:
        out.append("")
        out.append("changes (recorded -> candidate):")
        for transition, n in sorted_counts(t.transitions):
            out.append(f"{mark} {n:>8}  {transition_text(transition)}")
            for ex in result.examples.get(transition, []):
                out.append(
                    f"{mark}            e.g. seq {ex['seq']} repo {label(ex['repo'])} role {label(ex['role'])} "
                    f"principal {label(ex['principal'])} mechanism {label(ex['mechanism'])}"
                )
    for name, rows in result.groups.items():
        out.append("")
        out.append(f"by {name}:")
        header = ("group", "replayed", "changed", "change%", "agree% before", "agree% after", "top changes")
        table = [
            [
                key_label(key),
                str(tally.replayed),
                str(tally.changed),
                _pct(rate(tally.changed, tally.replayed)),
                _pct(rate(tally.agreed_before, tally.replayed)),
                _pct(rate(tally.agreed_after, tally.replayed)),
                "; ".join(f"{transition_text(tr)} ({n})" for tr, n in top_counts(tally.transitions, top))
                or "-",
            ]
            for key, tally in rows
        ]
        widths = [max([len(header[i])] + [len(row[i]) for row in table]) for i in range(len(header))]
        out.append(mark + " " + "  ".join(h.ljust(widths[i]) for i, h in enumerate(header)).rstrip())
        for row in table:
            out.append(
                mark
                + " "
                + "  ".join(
                    c.rjust(widths[i]) if 0 < i < 6 else c.ljust(widths[i]) for i, c in enumerate(row)
                ).rstrip()
            )
    if result.flagged:
        out.append("")
        out.append(banner)
    return "\n".join(out) + "\n"
