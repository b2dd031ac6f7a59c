"""What the policy store raises: one line each, never quoting a file's content."""

from __future__ import annotations

from collections.abc import Iterable

from otel_route_shadow.core import PolicyProblem

__all__ = [
    "CorruptSnapshotError",
    "InvalidPolicySetError",
    "PolicyStoreError",
    "RevisionCorruptError",
    "RevisionNotFoundError",
    "RevisionUnavailableError",
    "StoreIOError",
]


class PolicyStoreError(Exception):
    """Base of every error the store raises; the message is one line and never quotes a file."""


class StoreIOError(PolicyStoreError):
    """The store directory cannot be read or written (not a directory, no space, lock timeout)."""


class CorruptSnapshotError(PolicyStoreError):
    """``save`` over a corrupt store: refused, nothing written.

    A corrupt load reports revision 0; saving through it would issue a revision number a second time,
    and two policy sets cited as one revision destroy replay. Repair is an explicit operator act.
    """

    def __init__(self, problem: str, problem_kind: str) -> None:
        super().__init__(f"the store is corrupt ({problem}); nothing was written; run 'policy repair' first")
        self.problem = problem
        self.problem_kind = problem_kind


class InvalidPolicySetError(PolicyStoreError):
    """``save`` refused a set that fails ``validate_policies``; ``problems`` carries every code."""

    def __init__(self, problems: Iterable[PolicyProblem]) -> None:
        self.problems = tuple(problems)
        codes = sorted({problem.code.value for problem in self.problems})
        super().__init__(
            f"refused: {len(self.problems)} problem(s) in the policy set ({', '.join(codes)}); nothing was written"
        )


class RevisionUnavailableError(PolicyStoreError):
    """A historical revision that cannot be replayed against."""

    def __init__(self, revision: int, message: str) -> None:
        super().__init__(message)
        self.revision = revision


class RevisionNotFoundError(RevisionUnavailableError):
    """The history holds no copy of the revision."""


class RevisionCorruptError(RevisionUnavailableError):
    """The history's copy of the revision does not verify."""
