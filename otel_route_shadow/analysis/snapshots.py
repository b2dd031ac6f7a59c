"""Where an analysis gets its policy snapshot: a candidate policy file, or a store revision."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from otel_route_shadow.core import PolicyProblem, PolicySnapshot, policy_set_hash
from otel_route_shadow.store import (
    COMMAND_READ_WAIT_S,
    PolicyFileError,
    PolicyStoreError,
    RevisionNotFoundError,
    RoutingPolicyStore,
    read_policy_file,
)

__all__ = [
    "InvalidCandidateError",
    "SnapshotSourceError",
    "SourcedSnapshot",
    "candidate_snapshot",
    "cited_loader",
    "store_snapshot",
]


class SnapshotSourceError(Exception):
    """The snapshot cannot be obtained; the message names the file or store and the reason."""


class InvalidCandidateError(SnapshotSourceError):
    """The policy file parses but the set fails validation: never replay against it."""

    def __init__(self, source: str, problems: Sequence[PolicyProblem]) -> None:
        super().__init__(f"{source}: the policy set fails validation ({len(problems)} problem(s))")
        self.source = source
        self.problems = tuple(problems)

    def lines(self) -> list[str]:
        out = []
        for problem in self.problems:
            where = []
            if problem.policy_id is not None:
                where.append(f"policy {problem.policy_id}")
            if problem.index is not None:
                where.append(f"index {problem.index}")
            location = f" ({', '.join(where)})" if where else ""
            out.append(f"{problem.code.value}{location}: {problem.message}")
        return out


@dataclass(frozen=True)
class SourcedSnapshot:
    snapshot: PolicySnapshot
    source: str


def candidate_snapshot(path: str | Path) -> SourcedSnapshot:
    """A policy file as a candidate: revision 0, ``content_hash = policy_set_hash(policies)``."""
    try:
        document = read_policy_file(path)
    except PolicyFileError as exc:
        raise SnapshotSourceError(str(exc)) from None
    if document.problems:
        raise InvalidCandidateError(document.source, document.problems)
    policies = document.policies
    return SourcedSnapshot(
        PolicySnapshot(policies=policies, revision=0, content_hash=policy_set_hash(policies)),
        f"policy file {document.source}",
    )


def _open_store(directory: str | Path) -> RoutingPolicyStore:
    root = Path(directory)
    if not root.is_dir():
        raise SnapshotSourceError(f"{root}: no such policy store directory")
    return RoutingPolicyStore(root, read_lock_wait=COMMAND_READ_WAIT_S)


def store_snapshot(directory: str | Path, revision: int | None = None) -> SourcedSnapshot:
    """Revision ``revision`` of the store (verified), or its current snapshot when None.

    The current snapshot is whatever ``load()`` says, including an unavailable (corrupt) one: that
    is what a spawn would have seen.
    """
    store = _open_store(directory)
    if revision is None:
        load = store.load()
        note = f", {load.state}" + (f": {load.problem}" if load.problem else "")
        return SourcedSnapshot(load.snapshot, f"store {directory} current (revision {load.revision}{note})")
    if revision < 0:
        raise SnapshotSourceError(f"--revision {revision}: revisions are non-negative")
    try:
        snapshot = store.revision(revision)
    except PolicyStoreError as exc:
        raise SnapshotSourceError(f"{directory}: {exc}") from None
    return SourcedSnapshot(snapshot, f"store {directory} revision {revision}")


def cited_loader(directory: str | Path) -> Callable[[int], PolicySnapshot | None]:
    """``loader(n)``: the store's revision ``n`` for integrity checks; None if the store never held
    it. A revision that exists but does not verify raises (the caller reports why it could not check)."""
    store = _open_store(directory)

    def load(revision: int) -> PolicySnapshot | None:
        try:
            return store.revision(revision)
        except RevisionNotFoundError:
            return None

    return load
