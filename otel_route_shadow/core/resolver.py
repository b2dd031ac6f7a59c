"""``explain``: the pure, total resolver (D1).

It maps (context, snapshot) to exactly one decision, performs no I/O, reads no clock, holds no state
and raises on no input. Everything that can go wrong is a typed ``held`` or ``rejected`` outcome with
a reason code, because the only caller in this phase stands beside a live spawn, and an exception
here would become a routing incident.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from otel_route_shadow.core.canonical import digest
from otel_route_shadow.core.context import Account, RouteContext
from otel_route_shadow.core.decision import AccountVerdict, PolicyConsideration, PolicySnapshot, RouteDecision
from otel_route_shadow.core.identity import RepoIdentity, canonical_worker_role, repo_identity
from otel_route_shadow.core.policy import LEGACY_RUNG, RoutingPolicy, policy_order_key
from otel_route_shadow.core.requirements import ModelRequirement, model_provider, parse_requirement
from otel_route_shadow.core.vocabulary import (
    PROVIDER_BINDINGS,
    AccountState,
    Outcome,
    PolicySource,
    Provider,
    ReasonCode,
    RequirementKind,
    Transport,
)

__all__ = ["PolicyIndex", "explain", "explain_batch"]

_PROVIDERS = frozenset(provider.value for provider in Provider)


@dataclass(frozen=True, slots=True)
class _Subject:
    """The context as the resolver interprets it."""

    identity: RepoIdentity | None
    role: str | None
    principal: str | None
    face: str
    requirement: ModelRequirement


def _subject(context: RouteContext) -> _Subject:
    role = canonical_worker_role(context.role)
    return _Subject(
        identity=repo_identity(context.repo, context.repo_slug),
        role=role.value if role is not None else None,
        principal=context.principal_id,
        face=context.request_face,
        requirement=parse_requirement(context.requirement),
    )


class _Dimension:
    """Bit masks over the ordered policies for one match dimension."""

    __slots__ = ("any", "by_value", "scoped")

    def __init__(self, sets: Sequence[tuple[str, ...]]) -> None:
        self.any = 0
        self.scoped = 0
        self.by_value: dict[str, int] = {}
        for position, values in enumerate(sets):
            bit = 1 << position
            if not values:
                self.any |= bit
                continue
            self.scoped |= bit
            for value in values:
                self.by_value[value] = self.by_value.get(value, 0) | bit

    def admit(self, value: str | None) -> int:
        if value is None:
            return self.any
        return self.any | self.by_value.get(value, 0)


class PolicyIndex:
    """The enabled policies of one snapshot, ordered by precedence and indexed by exact-set member.

    A context's candidates are the AND of one mask per dimension, so resolving costs a few dict
    lookups plus the candidates themselves rather than a scan of every policy.
    """

    __slots__ = ("_faces", "_principals", "_repos", "_roles", "disabled", "keys", "ordered")

    def __init__(self, policies: Iterable[RoutingPolicy]) -> None:
        everything = list(policies)
        self.ordered: tuple[RoutingPolicy, ...] = tuple(
            sorted((p for p in everything if p.enabled), key=policy_order_key)
        )
        self.disabled = len(everything) - len(self.ordered)
        self.keys: tuple[tuple[int, int, str], ...] = tuple(policy_order_key(p) for p in self.ordered)
        self._repos = _Dimension([p.match.repo_ids for p in self.ordered])
        self._roles = _Dimension([p.match.roles for p in self.ordered])
        self._principals = _Dimension([p.match.principal_ids for p in self.ordered])
        self._faces = _Dimension([p.match.request_faces for p in self.ordered])

    def candidates(self, subject: _Subject) -> int:
        """Policies that match every dimension, plus (for an ambiguous repo identity) the repo-scoped
        ones that would have matched, so the explanation can say why they did not."""
        identity = subject.identity
        if identity is not None and identity.canonical:
            repos = self._repos.admit(identity.value)
        else:
            repos = self._repos.any | (self._repos.scoped if identity is not None else 0)
        return (
            repos
            & self._roles.admit(subject.role)
            & self._principals.admit(subject.principal)
            & self._faces.admit(subject.face)
        )

    def repo_scoped(self, position: int) -> bool:
        return bool(self._repos.scoped >> position & 1)


def _positions(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(slots=True)
class _Verdict:
    outcome: Outcome
    reason: ReasonCode
    provider: str | None = None
    account: str | None = None
    model: str | None = None


def _account_order(accounts: Sequence[Account], pool: Sequence[str]) -> list[Account]:
    """Pool order first (``selection: ordered``), then the rest by id: input order never decides."""
    rank = {account_id: position for position, account_id in enumerate(pool)}
    return sorted(accounts, key=lambda a: (rank.get(a.id, len(rank)), a.id, a.provider, a.state))


def _judge_account(
    account: Account, pool: frozenset[str], literal: bool, locked: str | None, target: str | None
) -> tuple[bool, ReasonCode]:
    if pool and account.id not in pool:
        return False, ReasonCode.ACCOUNT_NOT_IN_POOL
    if account.provider not in _PROVIDERS:
        return False, ReasonCode.PROVIDER_UNKNOWN
    if literal and account.provider != Provider.ANTHROPIC.value:
        return False, ReasonCode.LITERAL_FAMILY_INCOMPATIBLE
    if (locked is not None and account.provider != locked) or (
        target is not None and account.provider != target
    ):
        return False, ReasonCode.PROVIDER_LOCKED_OUT
    if account.state != AccountState.AVAILABLE.value:
        return False, ReasonCode.ACCOUNT_NOT_AVAILABLE
    return True, ReasonCode.ELIGIBLE


def _apply(
    policy: RoutingPolicy, subject: _Subject, accounts: Sequence[Account]
) -> tuple[_Verdict, tuple[AccountVerdict, ...]]:
    """What the winning policy does with this context."""
    action = policy.action
    requirement = subject.requirement
    lock = action.provider_lock
    locked: str | None = None
    verdict: _Verdict | None = None
    if lock is not None:
        bound = PROVIDER_BINDINGS.get(lock)
        if bound is None:
            verdict = _Verdict(Outcome.REJECTED, ReasonCode.UNKNOWN_PROVIDER_BINDING)
        else:
            locked = bound.value
    target = locked
    model: str | None = None
    literal = requirement.kind is RequirementKind.LITERAL_FAMILY
    mapped = action.requirement_map.get(requirement.name)
    if verdict is not None:
        pass
    elif requirement.kind is RequirementKind.UNRECOGNIZED:
        verdict = _Verdict(Outcome.HELD, ReasonCode.REQUIREMENT_UNRECOGNIZED)
    elif literal:
        if mapped is not None and not requirement.satisfied_by(mapped):
            verdict = _Verdict(Outcome.REJECTED, ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL)
        elif locked is not None and locked != Provider.ANTHROPIC.value:
            verdict = _Verdict(Outcome.REJECTED, ReasonCode.LITERAL_FAMILY_UNSATISFIABLE)
        model = mapped if mapped is not None else requirement.name
        target = Provider.ANTHROPIC.value
    elif requirement.kind is RequirementKind.CAPABILITY:
        if mapped is None:
            verdict = _Verdict(Outcome.HELD, ReasonCode.CAPABILITY_UNMAPPED)
        else:
            mapped_provider = model_provider(mapped)
            if mapped_provider is None or (locked is not None and mapped_provider.value != locked):
                verdict = _Verdict(Outcome.REJECTED, ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK)
            else:
                target = mapped_provider.value
            model = mapped
    pool = frozenset(action.account_pool)
    verdicts: list[AccountVerdict] = []
    chosen: Account | None = None
    for account in _account_order(accounts, action.account_pool):
        eligible, why = _judge_account(account, pool, literal, locked, target)
        verdicts.append(
            AccountVerdict(
                account_id=account.id, provider=account.provider, eligible=eligible, reason=why.value
            )
        )
        if eligible and chosen is None:
            chosen = account
    if verdict is None:
        if chosen is None:
            verdict = _Verdict(Outcome.HELD, ReasonCode.NO_ELIGIBLE_ACCOUNT)
        else:
            verdict = _Verdict(
                Outcome.SELECTED, ReasonCode.POLICY_SELECTED, chosen.provider, chosen.id, model
            )
    if verdict.outcome is not Outcome.SELECTED:
        verdict.model = None
    return verdict, tuple(verdicts)


def _decision_id(context: RouteContext, snapshot: PolicySnapshot, fields: dict[str, Any]) -> str:
    """Content address: the context, the snapshot (hash and revision) and the outcome."""
    return digest(
        {
            "context": context.model_dump(mode="json"),
            "snapshot": {"hash": snapshot.content_hash, "revision": snapshot.revision},
            "outcome": {
                key: fields.get(key)
                for key in (
                    "outcome",
                    "reason",
                    "policy_source",
                    "rung",
                    "policy_id",
                    "provider",
                    "account",
                    "model",
                    "transport",
                    "tied_policies",
                )
            },
        }
    )


def _finish(context: RouteContext, snapshot: PolicySnapshot, fields: dict[str, Any]) -> RouteDecision:
    fields["snapshot_revision"] = snapshot.revision
    fields["snapshot_hash"] = snapshot.content_hash
    fields["tied_policies"] = tuple(fields.get("tied_policies", ()))
    fields["decision_id"] = _decision_id(
        context, snapshot, {**fields, "tied_policies": list(fields["tied_policies"])}
    )
    return RouteDecision(**fields)


def _resolve(context: RouteContext, snapshot: PolicySnapshot, index: PolicyIndex) -> RouteDecision:
    subject = _subject(context)
    base: dict[str, Any] = {
        "repo": subject.identity.value if subject.identity is not None else None,
        "repo_identity": subject.identity.version.value if subject.identity is not None else None,
        "role": subject.role,
    }
    if not snapshot.available:
        return _finish(
            context,
            snapshot,
            {
                **base,
                "outcome": Outcome.HELD.value,
                "reason": ReasonCode.SNAPSHOT_UNAVAILABLE.value,
                "policy_source": PolicySource.MANAGED.value,
            },
        )
    mask = index.candidates(subject)
    lossy = subject.identity is None or not subject.identity.canonical
    considered: list[PolicyConsideration] = []
    winner: int | None = None
    tied: list[int] = []
    for position in _positions(mask):
        policy = index.ordered[position]
        rung, neg_priority, _ = index.keys[position]
        if lossy and index.repo_scoped(position):
            matched, reason = False, ReasonCode.REPO_IDENTITY_NOT_CANONICAL
        elif winner is None:
            winner, matched, reason = position, True, ReasonCode.MATCHED
        elif index.keys[winner][:2] == (rung, neg_priority):
            matched, reason = True, ReasonCode.TIED
            tied.append(position)
        else:
            matched, reason = True, ReasonCode.OUTRANKED
        considered.append(
            PolicyConsideration(
                policy_id=policy.id, rung=rung, priority=-neg_priority, matched=matched, reason=reason.value
            )
        )
    base["considered"] = tuple(considered)
    base["policies_excluded"] = len(index.ordered) - len(considered) + index.disabled
    if winner is None:
        legacy = context.legacy_route
        return _finish(
            context,
            snapshot,
            {
                **base,
                "outcome": Outcome.SELECTED.value,
                "reason": ReasonCode.NO_MANAGED_POLICY.value,
                "policy_source": PolicySource.LEGACY.value,
                "rung": LEGACY_RUNG,
                "provider": legacy.provider,
                "account": legacy.account,
                "model": legacy.model,
                "transport": legacy.transport,
            },
        )
    policy = index.ordered[winner]
    rung = index.keys[winner][0]
    if any(index.ordered[position].action != policy.action for position in tied):
        names = sorted([policy.id, *(index.ordered[position].id for position in tied)])
        relabelled = tuple(
            c.model_copy(update={"reason": ReasonCode.TIED.value}) if c.policy_id in names else c
            for c in considered
        )
        return _finish(
            context,
            snapshot,
            {
                **base,
                "considered": relabelled,
                "outcome": Outcome.REJECTED.value,
                "reason": ReasonCode.POLICY_CONFLICT.value,
                "policy_source": PolicySource.MANAGED.value,
                "rung": rung,
                "tied_policies": names,
            },
        )
    if tied:
        # Identical actions at one rung and priority are not a conflict; the id ordering already
        # picked the winner, so the others are simply outranked.
        base["considered"] = tuple(
            c.model_copy(update={"reason": ReasonCode.OUTRANKED.value})
            if c.reason == ReasonCode.TIED.value
            else c
            for c in considered
        )
    verdict, accounts = _apply(policy, subject, context.accounts)
    return _finish(
        context,
        snapshot,
        {
            **base,
            "outcome": verdict.outcome.value,
            "reason": verdict.reason.value,
            "policy_source": PolicySource.MANAGED.value,
            "rung": rung,
            "policy_id": policy.id,
            "provider": verdict.provider,
            "account": verdict.account,
            "model": verdict.model,
            "transport": Transport.GATEWAY.value if verdict.outcome is Outcome.SELECTED else None,
            "forbid_direct_bypass": policy.action.forbid_direct_bypass,
            "accounts": accounts,
        },
    )


def _fault(context: RouteContext, snapshot: PolicySnapshot) -> RouteDecision:
    """Last line of totality: a held decision instead of an exception. Tests assert it never fires."""
    fields: dict[str, Any] = {
        "outcome": Outcome.HELD.value,
        "reason": ReasonCode.RESOLVER_FAULT.value,
        "policy_source": PolicySource.MANAGED.value,
    }
    try:
        return _finish(context, snapshot, fields)
    except Exception:
        return RouteDecision(**fields)


def explain(context: RouteContext, snapshot: PolicySnapshot) -> RouteDecision:
    """Resolve one context against one snapshot. Pure and total."""
    try:
        return _resolve(context, snapshot, PolicyIndex(snapshot.policies))
    except Exception:
        return _fault(context, snapshot)


def explain_batch(contexts: Iterable[RouteContext], snapshot: PolicySnapshot) -> list[RouteDecision]:
    """Resolve many contexts against one snapshot (one index, one revision: a matrix, not a race)."""
    try:
        index = PolicyIndex(snapshot.policies)
    except Exception:
        return [_fault(context, snapshot) for context in contexts]
    decisions: list[RouteDecision] = []
    for context in contexts:
        try:
            decisions.append(_resolve(context, snapshot, index))
        except Exception:
            decisions.append(_fault(context, snapshot))
    return decisions
