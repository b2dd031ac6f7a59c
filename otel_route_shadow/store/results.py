"""What the policy store returns: a load's verdict, a save, a history row, a repair."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from otel_route_shadow.core import PolicyProblem, PolicySnapshot

__all__ = [
    "ENVIRONMENT_PROBLEM_KINDS",
    "PROBLEM_KINDS",
    "HistoryEntry",
    "RepairResult",
    "SaveResult",
    "SnapshotLoad",
    "State",
]

State = Literal["ok", "absent", "corrupt"]

PROBLEM_KINDS = frozenset(
    {
        "invalid-json",
        "not-utf8",
        "wrong-schema",
        "hash-mismatch",
        "not-canonical",
        "history-mismatch",
        "history-missing",
        "history-corrupt",
        "current-missing",
        "not-a-regular-file",
        "too-large",
        "unreadable",
        "store-not-a-directory",
        "store-unreadable",
        "history-unreadable",
        "marker-corrupt",
        "internal-error",
    }
)
"""Every ``SnapshotLoad.problem_kind``; each is documented in ``docs/policy-store.md``."""

ENVIRONMENT_PROBLEM_KINDS = frozenset(
    {"store-not-a-directory", "store-unreadable", "history-unreadable", "unreadable", "internal-error"}
)
"""Problem kinds that describe the environment rather than the content (``docs/policy-store.md``)."""


@dataclass(frozen=True)
class SnapshotLoad:
    """What ``load()`` found. ``snapshot`` is always safe to hand to ``explain``.

    ``problem_kind`` is a stable code (``hash-mismatch``, ``history-mismatch``, ...; listed in
    ``docs/policy-store.md``); ``problem`` is the same for people. ``claimed_revision`` is what a
    corrupt file says about itself: shown to operators, never cited (``revision`` is 0 when corrupt).
    """

    state: State
    snapshot: PolicySnapshot
    problem: str | None = None
    problem_kind: str | None = None
    claimed_revision: int | None = None
    saved_at: str | None = None
    note: str | None = None

    @property
    def revision(self) -> int:
        return self.snapshot.revision

    @property
    def content_hash(self) -> str:
        return self.snapshot.content_hash

    @property
    def available(self) -> bool:
        return self.snapshot.available

    @property
    def policy_count(self) -> int:
        return len(self.snapshot.policies)

    @property
    def unreadable(self) -> bool:
        """Corrupt because the environment keeps the store from being read (permissions, a file in
        place of a folder, an I/O error, see ``ENVIRONMENT_PROBLEM_KINDS``), not because of what it
        holds: the instrumentation reports it as a sink fault."""
        return self.state == "corrupt" and self.problem_kind in ENVIRONMENT_PROBLEM_KINDS

    @property
    def history_mismatch(self) -> bool:
        """The current snapshot verifies on its own but is not the copy history kept of its revision:
        somebody edited one of them and recomputed the hash."""
        return self.problem_kind == "history-mismatch"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "revision": self.revision,
            "content_hash": self.content_hash if self.state != "corrupt" else None,
            "policy_count": self.policy_count,
            "available": self.available,
            "saved_at": self.saved_at,
            "problem": self.problem,
            "problem_kind": self.problem_kind,
            "history_mismatch": self.history_mismatch,
            "claimed_revision": self.claimed_revision,
            "note": self.note,
        }


@dataclass(frozen=True)
class SaveResult(SnapshotLoad):
    """The ``ok`` load of the revision just saved (a :class:`SnapshotLoad`, so it drops in wherever
    a load does). ``created`` is False when the store already held this exact set: no revision is
    spent on a set that is already current."""

    created: bool = True
    warnings: tuple[PolicyProblem, ...] = ()
    """Warnings (``unreachable-policy``) of the accepted set, capped per code like every listing."""

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "created": self.created,
            "warnings": [problem.model_dump(mode="json") for problem in self.warnings],
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One revision in the history, or one run of missing revisions (``revision``..``through``)."""

    revision: int
    state: Literal["ok", "corrupt", "missing"]
    content_hash: str | None = None
    saved_at: str | None = None
    policy_count: int | None = None
    problem: str | None = None
    current: bool = False
    through: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "through": self.through,
            "state": self.state,
            "content_hash": self.content_hash,
            "saved_at": self.saved_at,
            "policy_count": self.policy_count,
            "problem": self.problem,
            "current": self.current,
        }


@dataclass(frozen=True)
class RepairResult:
    """What ``repair()`` did, in enough detail for the operator to say it back."""

    repaired: bool
    state_before: State
    problem: str | None = None
    problem_kind: str | None = None
    quarantine: Path | None = None
    moved: tuple[str, ...] = ()
    next_revision: int = 1
    reinstatable: int | None = None
    """The newest history revision that verifies: what ``policy export`` + ``policy save`` can restore."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "repaired": self.repaired,
            "state_before": self.state_before,
            "problem": self.problem,
            "problem_kind": self.problem_kind,
            "quarantine": str(self.quarantine) if self.quarantine is not None else None,
            "moved": list(self.moved),
            "next_revision": self.next_revision,
            "reinstatable": self.reinstatable,
        }
