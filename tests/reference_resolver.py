"""A naive, linear-scan reference resolver: the oracle for ``explain`` and the benchmark's baseline.

It re-derives every decision from the documented rules (``docs/core.md``) without the core's index:
for each context it walks every policy of the snapshot, in precedence order, and checks each
dimension of the match directly. It shares only the vocabulary and the model classes with the core
(repository identity, the role join and requirement parsing are the vocabulary's own functions), so
an agreement between the two is evidence about the index, the ordering, the tie rule and the
account rules rather than a tautology.

API (also used by ``benchmarks/``):

- ``reference_explain(context, snapshot) -> RouteDecision``: the decision ``explain`` must return,
  field for field (``considered``, ``accounts`` and ``decision_id`` included).
- ``reference_explain_batch(contexts, snapshot) -> list[RouteDecision]``: the same for many
  contexts; it sorts the policies once and then scans all of them for every context, which is the
  linear scan ``explain_batch``'s index is measured against.
- ``reference_winner(context, snapshot) -> tuple[str, str | None]``: ``(outcome, policy_id)`` of
  ``reference_explain``, for comparisons that only care about the winner.

Unlike the core it is not total: it is test code and raises on malformed input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from otel_route_shadow.core import (
    Account,
    AccountVerdict,
    PolicyConsideration,
    PolicySnapshot,
    RouteContext,
    RouteDecision,
    RoutingPolicy,
    canonical_worker_role,
    parse_requirement,
    repo_identity,
)

__all__ = ["reference_explain", "reference_explain_batch", "reference_winner"]

# The ladder, written as a table rather than as the core's branches: (repo, principal, role, face).
_LADDER: dict[tuple[bool, bool, bool, bool], int] = {}
for _repo in (False, True):
    for _principal in (False, True):
        for _role in (False, True):
            for _face in (False, True):
                if _repo and _principal:
                    _rung = 1
                elif _repo and _role:
                    _rung = 2
                elif _repo and _face:
                    _rung = 3
                elif _repo:
                    _rung = 4
                elif _principal:
                    _rung = 5
                elif _role:
                    _rung = 6
                elif _face:
                    _rung = 7
                else:
                    _rung = 8
                _LADDER[(_repo, _principal, _role, _face)] = _rung

_BINDINGS = {"anthropic-harness": "anthropic", "zai-harness": "zai"}
_PROVIDERS = ("anthropic", "zai")


def _rung(policy: RoutingPolicy) -> int:
    m = policy.match
    return _LADDER[(bool(m.repo_ids), bool(m.principal_ids), bool(m.roles), bool(m.request_faces))]


def _canonical_bytes(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8", "surrogatepass")


def _sha256(value: Any) -> str:
    return hashlib.sha256(_canonical_bytes(value)).hexdigest()


def _sorted_policies(policies: Iterable[RoutingPolicy]) -> list[RoutingPolicy]:
    # (rung, -priority, id), then content: equal keys only happen with duplicate ids.
    return sorted(
        policies,
        key=lambda p: (_rung(p), -p.priority, p.id, _canonical_bytes(p.model_dump(mode="json"))),
    )


def _provider_of(model: str) -> str | None:
    if model.startswith("claude-"):
        return "anthropic"
    if model.startswith("glm-"):
        return "zai"
    return None


def _family_ok(family: str, model: str) -> bool:
    return model.startswith("claude-") and (model == family or model.startswith(family + "-"))


def _row(policy: RoutingPolicy, reason: str) -> PolicyConsideration:
    return PolicyConsideration(
        policy_id=policy.id,
        rung=_rung(policy),
        priority=policy.priority,
        matched=reason in ("matched", "tied", "outranked"),
        reason=reason,
    )


def _judge(account: Account, pool: Sequence[str], literal: bool, lock: str | None, target: str | None) -> str:
    if literal and account.provider != "anthropic":
        return "literal-family-incompatible"
    if pool and account.id not in pool:
        return "account-not-in-pool"
    if account.provider not in _PROVIDERS:
        return "provider-unknown"
    if (lock is not None and account.provider != lock) or (target is not None and account.provider != target):
        return "provider-locked-out"
    if account.state != "available":
        return "account-not-available"
    return "eligible"


def _apply(policy: RoutingPolicy, context: RouteContext) -> dict[str, Any]:
    action = policy.action
    requirement = parse_requirement(context.requirement)
    kind, name = requirement.kind.value, requirement.name
    outcome: tuple[str, str] | None = None
    lock: str | None = None
    if action.provider_lock is not None:
        lock = _BINDINGS.get(action.provider_lock)
        if lock is None:
            outcome = ("rejected", "unknown-provider-binding")
    target, model = lock, None
    mapped = action.requirement_map.get(name)
    literal = kind == "literal-family"
    if outcome is None and kind == "unrecognized":
        outcome = ("held", "requirement-unrecognized")
    elif outcome is None and literal:
        if mapped is not None and not _family_ok(name, mapped):
            outcome = ("rejected", "literal-family-mapped-to-foreign-model")
        elif lock is not None and lock != "anthropic":
            outcome = ("rejected", "literal-family-unsatisfiable")
        target, model = "anthropic", (mapped if mapped is not None else name)
    elif outcome is None and kind == "capability":
        if mapped is None:
            outcome = ("held", "capability-unmapped")
        else:
            provider = _provider_of(mapped)
            if provider is None:
                outcome = ("rejected", "unknown-model")
            elif lock is not None and provider != lock:
                outcome = ("rejected", "mapped-model-outside-lock")
            else:
                target = provider
            model = mapped
    pool = list(action.account_pool)

    def rank(account: Account) -> tuple[int, str, str, str]:
        position = pool.index(account.id) if account.id in pool else len(pool)
        return (position, account.id, account.provider, account.state)

    verdicts = []
    chosen: Account | None = None
    for account in sorted(context.accounts, key=rank):
        reason = _judge(account, pool, literal, lock, target)
        verdicts.append(
            AccountVerdict(
                account_id=account.id,
                provider=account.provider,
                eligible=reason == "eligible",
                reason=reason,
            )
        )
        if reason == "eligible" and chosen is None:
            chosen = account
    fields: dict[str, Any] = {"accounts": tuple(verdicts)}
    if outcome is None:
        outcome = ("selected", "policy-selected") if chosen is not None else ("held", "no-eligible-account")
    fields["outcome"], fields["reason"] = outcome
    if outcome[0] == "selected":
        assert chosen is not None
        fields.update(provider=chosen.provider, account=chosen.id, model=model, transport="gateway")
    return fields


def _decide(
    context: RouteContext, snapshot: PolicySnapshot, ordered: Sequence[RoutingPolicy], disabled: int
) -> RouteDecision:
    identity = repo_identity(context.repo, context.repo_slug)
    role = canonical_worker_role(context.role)
    role_value = role.value if role is not None else None
    fields: dict[str, Any] = {
        "repo": identity.value if identity is not None else None,
        "repo_identity": identity.version.value if identity is not None else None,
        "role": role_value,
    }
    if not snapshot.available:
        reason = "snapshot-loading" if snapshot.loading else "snapshot-unavailable"
        fields.update(outcome="held", reason=reason, policy_source="managed-policy")
        return _finished(context, snapshot, fields)
    rows: list[tuple[RoutingPolicy, str]] = []
    matched: list[RoutingPolicy] = []
    for policy in ordered:  # the linear scan
        m = policy.match
        if m.roles and role_value not in m.roles:
            continue
        if m.principal_ids and context.principal_id not in m.principal_ids:
            continue
        if m.request_faces and context.request_face not in m.request_faces:
            continue
        if m.repo_ids:
            if identity is None:
                continue
            if not identity.canonical:
                rows.append((policy, "repo-identity-not-canonical"))
                continue
            if identity.value not in m.repo_ids:
                continue
        rows.append((policy, "candidate"))
        matched.append(policy)
    fields["policies_excluded"] = len(ordered) - len(rows) + disabled
    if not matched:
        fields["considered"] = tuple(_row(policy, reason) for policy, reason in rows)
        legacy = context.legacy_route
        fields.update(
            outcome="selected",
            reason="no-managed-policy",
            policy_source="legacy-compatibility",
            rung=9,
            provider=legacy.provider,
            account=legacy.account,
            model=legacy.model,
            transport=legacy.transport,
        )
        return _finished(context, snapshot, fields)
    winner = matched[0]
    top = (_rung(winner), winner.priority)
    same = [p for p in matched if (_rung(p), p.priority) == top]
    conflict = any(p.action != winner.action for p in same)
    considered = []
    for policy, reason in rows:
        if reason == "candidate":
            if policy is winner:
                reason = "tied" if conflict else "matched"
            elif any(policy is p for p in same):
                reason = "tied" if conflict else "outranked"
            else:
                reason = "outranked"
        considered.append(_row(policy, reason))
    fields["considered"] = tuple(considered)
    fields.update(policy_source="managed-policy", rung=top[0])
    if conflict:
        fields.update(outcome="rejected", reason="policy-conflict", tied_policies=sorted(p.id for p in same))
        return _finished(context, snapshot, fields)
    fields["policy_id"] = winner.id
    fields["forbid_direct_bypass"] = winner.action.forbid_direct_bypass
    fields.update(_apply(winner, context))
    return _finished(context, snapshot, fields)


def _finished(context: RouteContext, snapshot: PolicySnapshot, fields: dict[str, Any]) -> RouteDecision:
    tied = list(fields.get("tied_policies", ()))
    outcome = {
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
        )
    }
    outcome["tied_policies"] = tied
    fields["tied_policies"] = tuple(tied)
    fields["snapshot_revision"] = snapshot.revision
    fields["snapshot_hash"] = snapshot.content_hash
    fields["decision_id"] = _sha256(
        {
            "context": context.model_dump(mode="json"),
            "snapshot": {"hash": snapshot.content_hash, "revision": snapshot.revision},
            "outcome": outcome,
        }
    )
    return RouteDecision(**fields)


def reference_explain_batch(
    contexts: Iterable[RouteContext], snapshot: PolicySnapshot
) -> list[RouteDecision]:
    ordered = _sorted_policies(p for p in snapshot.policies if p.enabled)
    disabled = sum(1 for p in snapshot.policies if not p.enabled)
    return [_decide(context, snapshot, ordered, disabled) for context in contexts]


def reference_explain(context: RouteContext, snapshot: PolicySnapshot) -> RouteDecision:
    (decision,) = reference_explain_batch([context], snapshot)
    return decision


def reference_winner(context: RouteContext, snapshot: PolicySnapshot) -> tuple[str, str | None]:
    decision = reference_explain(context, snapshot)
    return decision.outcome, decision.policy_id
