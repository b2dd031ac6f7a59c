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
from otel_route_shadow.core.decision import (
    DECISION_FIELDS,
    AccountVerdict,
    PolicyConsideration,
    PolicySnapshot,
    RouteDecision,
)
from otel_route_shadow.core.identity import RepoIdentity, canonical_worker_role, repo_identity
from otel_route_shadow.core.policy import LEGACY_RUNG, RoutingPolicy, precedence_level
from otel_route_shadow.core.policy_index import PolicyIndex
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

__all__ = ["explain", "explain_batch", "explain_policies"]

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


def _positions(mask: int) -> Iterable[int]:
    """Set bits of ``mask``, lowest (highest precedence) first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(slots=True)
class _Match:
    """Which candidates matched, which one won, and which tied with it."""

    entries: list[tuple[int, ReasonCode]]
    winner: int | None
    tied: list[int]
    conflict: bool


def _match(subject: _Subject, index: PolicyIndex) -> _Match:
    identity = subject.identity
    mask = index.candidates(
        identity.value if identity is not None and identity.canonical else None,
        repo_known=identity is not None,
        role=subject.role,
        principal=subject.principal,
        face=subject.face,
    )
    refused = index.repo_scoped(mask) if identity is None or not identity.canonical else 0
    entries: list[tuple[int, ReasonCode]] = []
    winner: int | None = None
    winner_key: tuple[int, int] | None = None
    tied: list[int] = []
    for position in _positions(mask):
        if refused >> position & 1:
            entries.append((position, ReasonCode.REPO_IDENTITY_NOT_CANONICAL))
        elif winner is None:
            winner, winner_key = position, index.keys[position][:2]
            entries.append((position, ReasonCode.MATCHED))
        elif index.keys[position][:2] == winner_key:
            tied.append(position)
            entries.append((position, ReasonCode.TIED))
        else:
            entries.append((position, ReasonCode.OUTRANKED))
    conflict = False
    if winner is not None and tied:
        action = index.ordered[winner].action
        conflict = any(index.ordered[position].action != action for position in tied)
        # A conflict names every tied policy, the first one included. Identical actions at one rung
        # and priority are no conflict: the id ordering picked the winner and the rest are outranked.
        group = {winner, *tied} if conflict else set(tied)
        final = ReasonCode.TIED if conflict else ReasonCode.OUTRANKED
        entries = [(position, final if position in group else reason) for position, reason in entries]
    return _Match(entries=entries, winner=winner, tied=tied, conflict=conflict)


@dataclass(slots=True)
class _Verdict:
    outcome: Outcome
    reason: ReasonCode
    provider: str | None = None
    account: str | None = None
    model: str | None = None


def _account_order(accounts: Sequence[Account], pool: Sequence[str]) -> list[Account]:
    """Pool order first (``selection: ordered``), then the rest by id: input order never decides."""
    rank: dict[str, int] = {}
    for position, account_id in enumerate(pool):
        rank.setdefault(account_id, position)
    return sorted(accounts, key=lambda a: (rank.get(a.id, len(pool)), a.id, a.provider, a.state))


def _judge_account(
    account: Account, pool: frozenset[str], literal: bool, locked: str | None, target: str | None
) -> tuple[bool, ReasonCode]:
    # The literal-family check comes first: a non-Anthropic account can never serve a literal family,
    # whatever the pool, the lock or its state says (D4), and the explanation says so.
    if literal and account.provider != Provider.ANTHROPIC.value:
        return False, ReasonCode.LITERAL_FAMILY_INCOMPATIBLE
    if pool and account.id not in pool:
        return False, ReasonCode.ACCOUNT_NOT_IN_POOL
    if account.provider not in _PROVIDERS:
        return False, ReasonCode.PROVIDER_UNKNOWN
    if (locked is not None and account.provider != locked) or (
        target is not None and account.provider != target
    ):
        return False, ReasonCode.PROVIDER_LOCKED_OUT
    if account.state != AccountState.AVAILABLE.value:
        return False, ReasonCode.ACCOUNT_NOT_AVAILABLE
    return True, ReasonCode.ELIGIBLE


@dataclass(slots=True)
class _Route:
    """What the requirement asks of the route under the policy's lock: a verdict already reached
    (held or rejected) or None, the provider the account must have, and the model."""

    verdict: _Verdict | None
    target: str | None
    model: str | None


def _literal_route(requirement: ModelRequirement, mapped: str | None, locked: str | None) -> _Route:
    # Never a quiet substitution, never an escape back to Anthropic past a foreign lock (D4).
    verdict: _Verdict | None = None
    if mapped is not None and not requirement.satisfied_by(mapped):
        verdict = _Verdict(Outcome.REJECTED, ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL)
    elif locked is not None and locked != Provider.ANTHROPIC.value:
        verdict = _Verdict(Outcome.REJECTED, ReasonCode.LITERAL_FAMILY_UNSATISFIABLE)
    return _Route(verdict, Provider.ANTHROPIC.value, mapped if mapped is not None else requirement.name)


def _capability_route(mapped: str | None, locked: str | None) -> _Route:
    # Only an explicit mapping resolves a capability; guessing is how it becomes the cheapest lane.
    if mapped is None:
        return _Route(_Verdict(Outcome.HELD, ReasonCode.CAPABILITY_UNMAPPED), locked, None)
    mapped_provider = model_provider(mapped)
    if mapped_provider is None:
        return _Route(_Verdict(Outcome.REJECTED, ReasonCode.UNKNOWN_MODEL), locked, mapped)
    if locked is not None and mapped_provider.value != locked:
        return _Route(_Verdict(Outcome.REJECTED, ReasonCode.MAPPED_MODEL_OUTSIDE_LOCK), locked, mapped)
    return _Route(None, mapped_provider.value, mapped)


def _route(requirement: ModelRequirement, mapped: str | None, locked: str | None) -> _Route:
    if requirement.kind is RequirementKind.UNRECOGNIZED:
        return _Route(_Verdict(Outcome.HELD, ReasonCode.REQUIREMENT_UNRECOGNIZED), locked, None)
    if requirement.kind is RequirementKind.LITERAL_FAMILY:
        return _literal_route(requirement, mapped, locked)
    if requirement.kind is RequirementKind.CAPABILITY:
        return _capability_route(mapped, locked)
    return _Route(None, locked, None)


def _choose(
    accounts: Sequence[Account],
    pool_order: Sequence[str],
    literal: bool,
    locked: str | None,
    target: str | None,
) -> tuple[Account | None, tuple[AccountVerdict, ...]]:
    """Every account's verdict, and the first eligible one in pool order."""
    pool = frozenset(pool_order)
    verdicts: list[AccountVerdict] = []
    chosen: Account | None = None
    for account in _account_order(accounts, pool_order):
        eligible, why = _judge_account(account, pool, literal, locked, target)
        verdicts.append(
            AccountVerdict(
                account_id=account.id, provider=account.provider, eligible=eligible, reason=why.value
            )
        )
        if eligible and chosen is None:
            chosen = account
    return chosen, tuple(verdicts)


def _apply(
    policy: RoutingPolicy, subject: _Subject, accounts: Sequence[Account]
) -> tuple[_Verdict, tuple[AccountVerdict, ...]]:
    """What the winning policy does with this context: the lock, then the requirement, then the
    accounts (judged even when a verdict is already reached, so the explanation lists them all)."""
    action = policy.action
    requirement = subject.requirement
    lock = action.provider_lock
    bound = PROVIDER_BINDINGS.get(lock) if lock is not None else None
    locked = bound.value if bound is not None else None
    if lock is not None and bound is None:
        route = _Route(_Verdict(Outcome.REJECTED, ReasonCode.UNKNOWN_PROVIDER_BINDING), None, None)
    else:
        route = _route(requirement, action.requirement_map.get(requirement.name), locked)
    literal = requirement.kind is RequirementKind.LITERAL_FAMILY
    chosen, verdicts = _choose(accounts, action.account_pool, literal, locked, route.target)
    verdict = route.verdict
    if verdict is None:
        verdict = (
            _Verdict(Outcome.HELD, ReasonCode.NO_ELIGIBLE_ACCOUNT)
            if chosen is None
            else _Verdict(
                Outcome.SELECTED, ReasonCode.POLICY_SELECTED, chosen.provider, chosen.id, route.model
            )
        )
    if verdict.outcome is not Outcome.SELECTED:
        verdict.model = None
    return verdict, verdicts


_ID_FIELDS = (*DECISION_FIELDS, "transport", "tied_policies")


def _decision_id(context: RouteContext, snapshot: PolicySnapshot, fields: dict[str, Any]) -> str:
    """Content address: the context, the snapshot (hash and revision) and the outcome."""
    return digest(
        {
            "context": context.model_dump(mode="json"),
            "snapshot": {"hash": snapshot.content_hash, "revision": snapshot.revision},
            "outcome": {key: fields.get(key) for key in _ID_FIELDS},
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


def _unavailable_reason(snapshot: PolicySnapshot) -> ReasonCode:
    """Why an unavailable snapshot holds: still being read (``loading``), or unusable."""
    return ReasonCode.SNAPSHOT_LOADING if snapshot.loading else ReasonCode.SNAPSHOT_UNAVAILABLE


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
                "reason": _unavailable_reason(snapshot).value,
                "policy_source": PolicySource.MANAGED.value,
            },
        )
    found = _match(subject, index)
    base["considered"] = tuple(index.row(position, reason) for position, reason in found.entries)
    base["policies_excluded"] = len(index.ordered) - len(found.entries) + index.disabled
    if found.winner is None:
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
    policy = index.ordered[found.winner]
    rung = index.keys[found.winner][0]
    if found.conflict:
        return _finish(
            context,
            snapshot,
            {
                **base,
                "outcome": Outcome.REJECTED.value,
                "reason": ReasonCode.POLICY_CONFLICT.value,
                "policy_source": PolicySource.MANAGED.value,
                "rung": rung,
                "tied_policies": sorted(index.keys[p][2] for p in (found.winner, *found.tied)),
            },
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
        return _finish(context, snapshot, dict(fields))
    except Exception:
        # _finish may have failed on the snapshot's own fields: fall back to the bare outcome.
        return RouteDecision(**fields)


def explain(
    context: RouteContext, snapshot: PolicySnapshot, *, index: PolicyIndex | None = None
) -> RouteDecision:
    """Resolve one context against one snapshot. Pure and total.

    ``index`` lets a caller that resolves one context at a time against a long-lived snapshot (the
    span processor) build ``PolicyIndex(snapshot.policies)`` once; it must be built from this very
    snapshot's policies.
    """
    try:
        return _resolve(context, snapshot, index if index is not None else PolicyIndex(snapshot.policies))
    except Exception:
        return _fault(context, snapshot)


def explain_batch(contexts: Iterable[RouteContext], snapshot: PolicySnapshot) -> list[RouteDecision]:
    """Resolve many contexts against one snapshot (one index, one revision: a matrix, not a race).

    Every decision equals ``explain(context, snapshot)``.
    """
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


def _refusal(policy: RoutingPolicy, subject: _Subject) -> ReasonCode:
    """The first dimension (repo, role, principal, face) on which ``policy`` refuses ``subject``."""
    match = policy.match
    identity = subject.identity
    if match.repo_ids:
        if identity is not None and not identity.canonical:
            return ReasonCode.REPO_IDENTITY_NOT_CANONICAL
        if identity is None or identity.value not in match.repo_ids:
            return ReasonCode.REPO_NOT_MATCHED
    if match.roles and subject.role not in match.roles:
        return ReasonCode.ROLE_NOT_MATCHED
    if match.principal_ids and subject.principal not in match.principal_ids:
        return ReasonCode.PRINCIPAL_NOT_MATCHED
    if match.request_faces and subject.face not in match.request_faces:
        return ReasonCode.FACE_NOT_MATCHED
    return ReasonCode.MATCHED


def _static_row(policy: RoutingPolicy, reason: ReasonCode) -> PolicyConsideration:
    return PolicyConsideration(
        policy_id=policy.id,
        rung=precedence_level(policy.match),
        priority=policy.priority,
        matched=False,
        reason=reason.value,
    )


def explain_policies(context: RouteContext, snapshot: PolicySnapshot) -> tuple[PolicyConsideration, ...]:
    """Every policy of the snapshot and why it did or did not decide ``context``. Pure and total.

    The decision's own ``considered`` lists only the candidates (the policies that matched, plus
    repo-scoped ones refused for an ambiguous identity); this is the full table for a reader asking
    "why did my policy not apply?": the enabled policies in precedence order, each with the first
    dimension that refused it (``repo-not-matched``, ``role-not-matched``, ``principal-not-matched``,
    ``face-not-matched``) or its candidate row, then the disabled ones (``policy-disabled``). On an
    unavailable snapshot every row says ``snapshot-unavailable``. It costs a scan of every policy,
    which is why decisions do not carry it.
    """
    try:
        index = PolicyIndex(snapshot.policies)
        if not snapshot.available:
            return tuple(
                _static_row(policy, _unavailable_reason(snapshot))
                for policy in (*index.ordered, *index.disabled_policies)
            )
        subject = _subject(context)
        candidates = dict(_match(subject, index).entries)
        rows = [
            index.row(position, candidates[position])
            if position in candidates
            else _static_row(policy, _refusal(policy, subject))
            for position, policy in enumerate(index.ordered)
        ]
        rows.extend(_static_row(policy, ReasonCode.POLICY_DISABLED) for policy in index.disabled_policies)
        return tuple(rows)
    except Exception:
        return ()
