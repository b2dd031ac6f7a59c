"""The linear-scan baseline for ``explain_batch``.

Preferred: ``tests/reference_resolver.py`` (the tests' oracle, written independently of the core),
imported by path. If that file is missing, a fallback defined here does the same work per context
with no index: it sorts the enabled policies once by the core's own order key, then for every context
checks every enabled policy's match, applies the same tie rule, and calls the core's own action,
account and finishing helpers for the winner. Neither is slowed on purpose.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from benchmarks.harness import REPO_ROOT
from otel_route_shadow.core import PolicySnapshot, RouteContext, RouteDecision, RoutingPolicy
from otel_route_shadow.core import resolver as core
from otel_route_shadow.core.policy import LEGACY_RUNG, policy_order_key
from otel_route_shadow.core.vocabulary import Outcome, PolicySource, ReasonCode, Transport

BatchFn = Callable[[Iterable[RouteContext], PolicySnapshot], list[RouteDecision]]

REFERENCE_PATH = REPO_ROOT / "tests" / "reference_resolver.py"


def load_baseline() -> tuple[BatchFn, str]:
    """``(batch function, label)``: the tests' reference resolver if present, else the fallback."""
    if REFERENCE_PATH.is_file():
        spec = importlib.util.spec_from_file_location("_bench_reference_resolver", REFERENCE_PATH)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = getattr(module, "reference_explain_batch", None)
            if callable(fn):
                return fn, "tests/reference_resolver.py:reference_explain_batch"
    return fallback_explain_batch, "benchmarks/linear_resolver.py:fallback_explain_batch"


def _decide(
    context: RouteContext,
    snapshot: PolicySnapshot,
    ordered: Sequence[RoutingPolicy],
    keys: Sequence[Any],
    disabled: int,
) -> RouteDecision:
    subject = core._subject(context)
    base: dict[str, Any] = {
        "repo": subject.identity.value if subject.identity is not None else None,
        "repo_identity": subject.identity.version.value if subject.identity is not None else None,
        "role": subject.role,
    }
    if not snapshot.available:
        return core._finish(
            context,
            snapshot,
            {
                **base,
                "outcome": Outcome.HELD.value,
                "reason": ReasonCode.SNAPSHOT_UNAVAILABLE.value,
                "policy_source": PolicySource.MANAGED.value,
            },
        )
    entries: list[tuple[int, ReasonCode]] = []
    winner: int | None = None
    tied: list[int] = []
    identity, role, principal, face = subject.identity, subject.role, subject.principal, subject.face
    for position, policy in enumerate(ordered):  # the linear scan: every enabled policy, every context
        m = policy.match
        if m.roles and role not in m.roles:
            continue
        if m.principal_ids and principal not in m.principal_ids:
            continue
        if m.request_faces and face not in m.request_faces:
            continue
        if m.repo_ids:
            if identity is None:
                continue
            if not identity.canonical:
                entries.append((position, ReasonCode.REPO_IDENTITY_NOT_CANONICAL))
                continue
            if identity.value not in m.repo_ids:
                continue
        if winner is None:
            winner = position
            entries.append((position, ReasonCode.MATCHED))
        elif keys[position][:2] == keys[winner][:2]:
            tied.append(position)
            entries.append((position, ReasonCode.TIED))
        else:
            entries.append((position, ReasonCode.OUTRANKED))
    conflict = winner is not None and any(ordered[p].action != ordered[winner].action for p in tied)
    if tied:
        group = {winner, *tied} if conflict else set(tied)
        final = ReasonCode.TIED if conflict else ReasonCode.OUTRANKED
        entries = [(p, final if p in group else r) for p, r in entries]
    rows = []
    for position, reason in entries:
        rung, neg_priority, policy_id = keys[position]
        rows.append(
            core.PolicyConsideration(
                policy_id=policy_id,
                rung=rung,
                priority=-neg_priority,
                matched=reason in core._MATCHED_REASONS,
                reason=reason.value,
            )
        )
    base["considered"] = tuple(rows)
    base["policies_excluded"] = len(ordered) - len(entries) + disabled
    if winner is None:
        legacy = context.legacy_route
        return core._finish(
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
    policy, rung = ordered[winner], keys[winner][0]
    if conflict:
        return core._finish(
            context,
            snapshot,
            {
                **base,
                "outcome": Outcome.REJECTED.value,
                "reason": ReasonCode.POLICY_CONFLICT.value,
                "policy_source": PolicySource.MANAGED.value,
                "rung": rung,
                "tied_policies": sorted(keys[p][2] for p in (winner, *tied)),
            },
        )
    verdict, accounts = core._apply(policy, subject, context.accounts)
    return core._finish(
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


def fallback_explain_batch(contexts: Iterable[RouteContext], snapshot: PolicySnapshot) -> list[RouteDecision]:
    enabled = sorted((p for p in snapshot.policies if p.enabled), key=policy_order_key)
    keys = [policy_order_key(p) for p in enabled]
    disabled = sum(1 for p in snapshot.policies if not p.enabled)
    return [_decide(context, snapshot, enabled, keys, disabled) for context in contexts]
