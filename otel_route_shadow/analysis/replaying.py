"""Replaying a recorded context against a snapshot: what ``whatif`` and ``report`` both need.

Decisions are pure functions of (context, snapshot), so a :class:`Replayer` explains each distinct
context text once per snapshot (against one policy index built once) and remembers the answer,
reduced to what the analyses compare (:class:`Replayed`). The memo is bounded (:data:`MEMO_LIMIT`
contexts; dropped and refilled past that), so memory stays constant over a chain of any length.

:class:`CitedSnapshots` finds the snapshot a record cites, once per distinct citation, and says why
when it cannot (:class:`Unchecked`) or when the store contradicts the citation (:class:`Mismatch`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final

from pydantic import ValidationError

from otel_route_shadow.core import (
    DECISION_FIELDS,
    EMPTY_SET_HASH,
    PolicyIndex,
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    explain,
    shadow_decision,
)
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "CORRUPT_STATE",
    "DECIDED",
    "MEMO_LIMIT",
    "OUTRANKED",
    "UNPARSEABLE",
    "CitedKey",
    "CitedLoader",
    "CitedSnapshots",
    "Mismatch",
    "Replayed",
    "Replayer",
    "Unchecked",
    "cited_key",
    "policy_usage",
]

MEMO_LIMIT: Final = 1 << 14
"""Distinct contexts remembered per snapshot; past this the memo is dropped and refilled."""
CORRUPT_STATE: Final = "corrupt"
LOADING_STATE: Final = "loading"
"""A record made before the host's first read of a large store finished (held, ``snapshot-loading``)."""
DECIDED: Final = "decided"
"""Usage: the policy decided the spawn."""
OUTRANKED: Final = "outranked"
"""Usage: the policy matched the spawn, but another one (or a conflict) decided it."""

CitedKey = tuple[int, str, bool, bool]
"""(revision, content hash, available, loading): the snapshot a record cites."""

CitedLoader = Callable[[int], PolicySnapshot | None]
"""Returns a store's revision N (or None when the store does not hold it)."""

Usage = tuple[tuple[str, str], ...]
"""``((policy id, DECIDED or OUTRANKED), ...)`` for one decision; a policy not in it did not match."""


@dataclass(frozen=True, slots=True)
class Replayed:
    """One context's decision under one snapshot, reduced to what the analyses compare."""

    decision_id: str
    fields: tuple[Any, ...]
    """The decision fields in the order of ``DECISION_FIELDS`` (see ``whatif``)."""
    agreed: bool
    divergence: str | None
    usage: Usage = ()


UNPARSEABLE: Final = Replayed(decision_id="", fields=(), agreed=False, divergence=None)
"""What a context text that is not a valid route context replays to."""


def policy_usage(decision: RouteDecision) -> Usage:
    """Which policies decided the decision, and which matched but were outranked (or tied)."""
    return tuple(
        (row.policy_id, DECIDED if row.policy_id == decision.policy_id else OUTRANKED)
        for row in decision.considered
        if row.matched
    )


_fields: Final = attrgetter(*DECISION_FIELDS)
"""A decision's :data:`DECISION_FIELDS`, as one tuple in their order."""


def _reduce(decision: RouteDecision, context: RouteContext) -> Replayed:
    # As the recorder compares (``observe``): a route that defied the spawn's literal requirement agrees
    # with no decision, so a candidate is not credited with agreement the recorded decision was denied.
    shadow = shadow_decision(decision, context.legacy_route, context.requirement)
    return Replayed(
        decision.decision_id, _fields(decision), shadow.agreed, shadow.divergence, policy_usage(decision)
    )


def _index(snapshot: PolicySnapshot) -> PolicyIndex | None:
    """The snapshot's policy index, or None when it cannot be built (``explain`` then answers with
    its fault decision for every context, as ``explain_batch`` would)."""
    try:
        return PolicyIndex(snapshot.policies)
    except Exception:
        return None


class Replayer:
    """``context text -> Replayed`` for one snapshot, memoised (bounded by :data:`MEMO_LIMIT`)."""

    __slots__ = ("evaluated", "index", "memo", "snapshot")

    def __init__(self, snapshot: PolicySnapshot) -> None:
        self.snapshot = snapshot
        self.index = _index(snapshot)
        self.memo: dict[str, Replayed] = {}
        self.evaluated = 0
        """Contexts explained (memo misses that parsed)."""

    def replay(self, text: str) -> Replayed:
        found = self.memo.get(text)
        if found is None:
            found = self._explain(text)
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            self.memo[text] = found
        return found

    def _explain(self, text: str) -> Replayed:
        try:
            context = RouteContext.model_validate_json(text)
        except (ValidationError, ValueError):
            return UNPARSEABLE
        self.evaluated += 1
        return _reduce(explain(context, self.snapshot, index=self.index), context)


@dataclass(frozen=True, slots=True)
class Unchecked:
    """The cited snapshot cannot be had: the record's integrity is not checked, for this reason."""

    reason: str


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The store holds the cited revision under another hash: an integrity finding."""

    detail: str


def cited_key(attributes: dict[str, Any]) -> CitedKey | None:
    """The snapshot a record cites, or None when it cites none that reads as one."""
    revision = attributes.get(attr.SNAPSHOT_REVISION)
    content_hash = attributes.get(attr.SNAPSHOT_HASH)
    if type(revision) is not int or not isinstance(content_hash, str):
        return None
    return (revision, content_hash, *state_flags(attributes.get(attr.SNAPSHOT_STATE)))


def state_flags(state: Any) -> tuple[bool, bool]:
    """(available, loading) of the snapshot a record's ``route_shadow.snapshot.state`` describes."""
    return state not in (CORRUPT_STATE, LOADING_STATE), state == LOADING_STATE


class CitedSnapshots:
    """Finds the snapshot a record cites, once per distinct citation.

    Available when it is ``known`` (the candidate), when it is the empty set (its hash proves its
    content), when the record says the snapshot was unavailable (corrupt: rebuilt as such), or when
    the loader (a store) holds that revision with that hash.
    """

    def __init__(self, loader: CitedLoader | None, known: Replayer | None = None) -> None:
        self.loader = loader
        self.found: dict[CitedKey, Replayer | Unchecked | Mismatch] = {}
        if known is not None:
            snapshot = known.snapshot
            self.found[(snapshot.revision, snapshot.content_hash, snapshot.available, snapshot.loading)] = (
                known
            )

    def lookup(self, key: CitedKey) -> Replayer | Unchecked | Mismatch:
        found = self.found.get(key)
        if found is None:
            found = self.found[key] = self._find(key)
        return found

    def _find(self, key: CitedKey) -> Replayer | Unchecked | Mismatch:
        revision, content_hash, available, loading = key
        if not available:
            snapshot = PolicySnapshot(
                revision=revision, content_hash=content_hash, available=False, loading=loading
            )
            return Replayer(snapshot)
        if content_hash == EMPTY_SET_HASH:
            return Replayer(PolicySnapshot(revision=revision, content_hash=content_hash))
        if self.loader is None:
            return Unchecked("cited snapshot is not the candidate and no --store was given")
        return self._load(revision, content_hash)

    def _load(self, revision: int, content_hash: str) -> Replayer | Unchecked | Mismatch:
        assert self.loader is not None
        try:
            snapshot = self.loader(revision)
        except Exception as exc:
            return Unchecked(f"store revision {revision} unreadable: {str(exc)[:160] or type(exc).__name__}")
        if snapshot is None:
            return Unchecked(f"store has no revision {revision}")
        if snapshot.content_hash != content_hash:
            return Mismatch(f"store revision {revision} does not have the cited hash {content_hash}")
        return Replayer(snapshot)
