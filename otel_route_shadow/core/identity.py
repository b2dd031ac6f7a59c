"""Repository identity (D2) and the role join (D8).

The host's path-safe slug flattens ``/`` to ``-`` (``a-b/c`` and ``a/b-c`` both become ``a-b-c``),
so an owner recovered from it is a guess. Only an exact ``owner/repo`` is canonical; anything else is
carried as ``legacy-lossy`` and can never join a repo-scoped policy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

from otel_route_shadow.core.vocabulary import RepoIdentityVersion, WorkerRole

__all__ = ["RepoIdentity", "canonical_worker_role", "canonicalize_repo", "repo_identity"]

# GitHub's rules: owners are alphanumerics and single hyphens (max 39), repositories are
# alphanumerics, '.', '_' and '-' (max 100) but never '.' or '..'.
_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_REPO = re.compile(r"[A-Za-z0-9._-]{1,100}")

_ROLES: Mapping[str, WorkerRole] = MappingProxyType({role.value: role for role in WorkerRole})


class RepoIdentity(BaseModel):
    """A repository as the resolver sees it: the value, and whether it may join a policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: str
    version: RepoIdentityVersion

    @property
    def canonical(self) -> bool:
        return self.version is RepoIdentityVersion.CANONICAL


def canonicalize_repo(value: object) -> str | None:
    """Return the canonical ``owner/repo`` (lower-cased: GitHub names are case-insensitive) or None.

    Exactly one slash between two safe segments; no whitespace, no scheme, no ``.git`` guessing.
    """
    if not isinstance(value, str) or value.count("/") != 1:
        return None
    owner, repo = value.split("/")
    if _OWNER.fullmatch(owner) is None or _REPO.fullmatch(repo) is None or repo in {".", ".."}:
        return None
    return f"{owner.lower()}/{repo.lower()}"


def repo_identity(repo: object, repo_slug: object = None) -> RepoIdentity | None:
    """Build the identity from what the host gave: a canonical ``repo`` wins; anything else is lossy."""
    canonical = canonicalize_repo(repo)
    if canonical is not None:
        return RepoIdentity(value=canonical, version=RepoIdentityVersion.CANONICAL)
    for raw in (repo, repo_slug):
        if isinstance(raw, str) and raw:
            return RepoIdentity(value=raw, version=RepoIdentityVersion.LEGACY_LOSSY)
    return None


def canonical_worker_role(name: object) -> WorkerRole | None:
    """The single role join: exact and case-insensitive. A loop name (``adr_reviewer``) is not a role.

    Case-insensitive means ASCII case only: ``str.lower`` also folds look-alikes such as the Kelvin
    sign onto ASCII letters, and a look-alike is not an exact match.
    """
    if not isinstance(name, str) or not name.isascii():
        return None
    return _ROLES.get(name.lower())
