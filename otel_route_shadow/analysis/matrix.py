"""The effective-route matrix: repos x roles x principals x faces x requirements against one snapshot.

Every row is resolved by one ``explain_batch`` call, so the whole matrix sees one snapshot and one
policy index (ADR-0139 D1: a matrix whose rows saw different revisions is a race, not a matrix).

A matrix cell is a hypothetical spawn, so it has no legacy route of its own. Each cell carries a
placeholder legacy route (documented in docs/reports.md); a cell that no managed policy claims is
shown as ``legacy-compatibility`` with no provider, because what the legacy dials would do there is
not something the policy set can answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from otel_route_shadow.analysis.records import RecordCounts, observations
from otel_route_shadow.analysis.source import chain_status, read_payloads
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.core import (
    DECISION_FIELDS,
    Account,
    AccountState,
    LegacyMechanism,
    LegacyRoute,
    PolicySnapshot,
    PolicySource,
    Provider,
    RequestFace,
    RouteContext,
    RouteDecision,
    WorkerRole,
    derive_transport,
    explain_batch,
)
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "COLUMNS",
    "DEFAULT_ACCOUNTS",
    "MAX_ROWS",
    "Matrix",
    "MatrixAxes",
    "MatrixError",
    "MatrixRow",
    "axes_from_chain",
    "build_matrix",
    "matrix_contexts",
    "parse_account",
    "parse_axis",
]

MAX_ROWS: Final = 100_000
NONE_TOKEN: Final = "none"  # noqa: S105 - the axis spelling of an absent value
PLACEHOLDER_DETAIL: Final = "matrix-placeholder"

DEFAULT_ACCOUNTS: Final[tuple[Account, ...]] = (
    Account(id="anthropic-legacy", provider=Provider.ANTHROPIC.value, state="available"),
    Account(id="zai-legacy", provider=Provider.ZAI.value, state="available"),
)
"""ADR-0138's two legacy bindings, both available, unless ``--account`` says otherwise."""

COLUMNS: Final = ("repo", "role", "principal", "face", "requirement", *DECISION_FIELDS)


class MatrixError(ValueError):
    pass


@dataclass(frozen=True)
class MatrixAxes:
    """The values of each axis; None stands for "not given" (no repo, no role, ...)."""

    repos: tuple[str | None, ...] = (None,)
    roles: tuple[str | None, ...] = tuple(role.value for role in WorkerRole)
    principals: tuple[str | None, ...] = (None,)
    faces: tuple[str, ...] = tuple(face.value for face in RequestFace)
    requirements: tuple[str | None, ...] = (None,)

    @property
    def size(self) -> int:
        return (
            len(self.repos)
            * len(self.roles)
            * len(self.principals)
            * len(self.faces)
            * len(self.requirements)
        )


@dataclass(frozen=True)
class MatrixRow:
    repo: str | None
    role: str | None
    principal: str | None
    face: str
    requirement: str | None
    decision: RouteDecision

    @property
    def legacy(self) -> bool:
        return self.decision.policy_source == PolicySource.LEGACY.value

    def as_dict(self) -> dict[str, Any]:
        d = self.decision
        return {
            "repo": self.repo,
            "role": self.role,
            "principal": self.principal,
            "face": self.face,
            "requirement": self.requirement,
            "outcome": d.outcome,
            "reason": d.reason,
            "policy_source": d.policy_source,
            "rung": d.rung,
            "policy_id": d.policy_id,
            "provider": None if self.legacy else d.provider,
            "account": None if self.legacy else d.account,
            "model": None if self.legacy else d.model,
        }


@dataclass
class Matrix:
    snapshot: dict[str, Any]
    axes: MatrixAxes
    rows: list[MatrixRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "route-shadow-matrix",
            "snapshot": self.snapshot,
            "axes": {
                "repos": list(self.axes.repos),
                "roles": list(self.axes.roles),
                "principals": list(self.axes.principals),
                "faces": list(self.axes.faces),
                "requirements": list(self.axes.requirements),
            },
            "rows": [row.as_dict() for row in self.rows],
        }


def _placeholder_legacy(face: str) -> LegacyRoute:
    return LegacyRoute(
        provider=Provider.ANTHROPIC.value,
        transport=derive_transport(face, False).value,
        mechanism=LegacyMechanism.ROLE_DIAL.value,
        mechanism_detail=PLACEHOLDER_DETAIL,
    )


def matrix_contexts(
    axes: MatrixAxes, accounts: Sequence[Account] = DEFAULT_ACCOUNTS
) -> Iterable[tuple[tuple[Any, ...], RouteContext]]:
    """Every cell's coordinates and its context, in axis order."""
    legacy = {face: _placeholder_legacy(face) for face in axes.faces}
    for repo, role, principal, face, requirement in product(
        axes.repos, axes.roles, axes.principals, axes.faces, axes.requirements
    ):
        yield (
            (repo, role, principal, face, requirement),
            RouteContext(
                repo=repo,
                role=role,
                principal_id=principal,
                request_face=face,
                requirement=requirement,
                accounts=tuple(accounts),
                legacy_route=legacy[face],
            ),
        )


def build_matrix(
    snapshot: PolicySnapshot,
    axes: MatrixAxes,
    *,
    accounts: Sequence[Account] = DEFAULT_ACCOUNTS,
    snapshot_source: str = "snapshot",
    max_rows: int = MAX_ROWS,
) -> Matrix:
    """Resolve every cell with one ``explain_batch`` call against ``snapshot``."""
    if axes.size > max_rows:
        raise MatrixError(
            f"the matrix would have {axes.size} rows (limit {max_rows}); name fewer axis values or raise --max-rows"
        )
    if axes.size == 0:
        raise MatrixError("the matrix is empty: every axis needs at least one value")
    try:
        cells = list(matrix_contexts(axes, accounts))
    except ValidationError as exc:
        where = ", ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise MatrixError(f"an axis value is not usable in a route context ({where})") from None
    decisions = explain_batch([context for _, context in cells], snapshot)
    matrix = Matrix(
        snapshot={
            "source": snapshot_source,
            "revision": snapshot.revision,
            "content_hash": snapshot.content_hash,
            "policies": len(snapshot.policies),
            "available": snapshot.available,
        },
        axes=axes,
    )
    for (coords, _), decision in zip(cells, decisions, strict=True):
        repo, role, principal, face, requirement = coords
        matrix.rows.append(MatrixRow(repo, role, principal, face, requirement, decision))
    return matrix


def _ordered(values: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(sorted(set(values), key=lambda v: (v is not None, str(v))))


def axes_from_chain(
    path: str | Path, *, tell: Callable[[str], None] | None = None
) -> dict[str, tuple[Any, ...]]:
    """The distinct repos, roles, principals, faces and requirements the chain's observations saw; of a
    pruned chain, those of the records it keeps (``tell`` is given the line that says so).

    The chain is only a source of axis values here, so it is not verified (``report`` and ``whatif``
    are the commands whose figures come from the chain).
    """
    status = chain_status(path, verify=False)
    if status.kept is not None and tell is not None:
        tell(f"axis values from seq {status.start} on: {status.kept.pruned.describe()}")
    seen: dict[str, set[Any]] = {
        name: set() for name in ("repos", "roles", "principals", "faces", "requirements")
    }
    keys = (
        ("repos", attr.REPO),
        ("roles", attr.ROLE),
        ("principals", attr.PRINCIPAL),
        ("faces", attr.REQUEST_FACE),
        ("requirements", attr.REQUIREMENT),
    )
    counts = RecordCounts()
    for _seq, _payload, attributes, _ns in observations(
        read_payloads(path, lenient=True, kept_from=status.start),
        counts,
        window=TimeWindow(),
        require_decision=False,
    ):
        for name, key in keys:
            value = attributes.get(key)
            if value is None or isinstance(value, str):
                seen[name].add(value)
    if not counts.observations:
        raise MatrixError(f"{path}: the chain holds no route-shadow observations to take axis values from")
    faces = {face for face in seen["faces"] if face is not None}
    return {
        "repos": _ordered(seen["repos"]),
        "roles": _ordered(seen["roles"]),
        "principals": _ordered(seen["principals"]),
        "faces": _ordered(faces) or tuple(face.value for face in RequestFace),
        "requirements": _ordered(seen["requirements"]),
    }


def parse_axis(values: Sequence[str] | None, *, allow_none: bool = True) -> tuple[str | None, ...] | None:
    """Repeatable, comma-separated axis values; ``none`` stands for an absent value."""
    if not values:
        return None
    out: list[str | None] = []
    for value in values:
        for raw in value.split(","):
            item = raw.strip()
            if not item:
                continue
            if item.lower() == NONE_TOKEN:
                if not allow_none:
                    raise MatrixError("'none' is not a request face (use agentic or one-shot)")
                out.append(None)
            else:
                out.append(item)
    return tuple(dict.fromkeys(out)) or None


def parse_account(text: str) -> Account:
    """``ID=PROVIDER[:STATE]``, e.g. ``zai-legacy=zai:exhausted``."""
    ident, sep, rest = text.partition("=")
    provider, _, state = rest.partition(":")
    if not sep or not ident.strip() or not provider.strip():
        raise MatrixError(f"--account {text!r}: expected ID=PROVIDER[:STATE], e.g. zai-legacy=zai:exhausted")
    states = [s.value for s in AccountState]
    if (state.strip() or "available") not in states:
        # A typo would hold every cell the account could serve (only `available` is eligible).
        raise MatrixError(
            f"--account {text!r}: unknown state {state.strip()!r} (choose from {', '.join(states)})"
        )
    return Account(id=ident.strip(), provider=provider.strip(), state=state.strip() or "available")
