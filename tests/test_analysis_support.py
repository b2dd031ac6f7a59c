"""Helpers for the analysis tests (no tests here): synthetic contexts and real chains built in tmp_path.

Every chain is written through the real chain API (``DecisionChain.append``) from real observations
(``observe``), so the figures the tests check are the figures an operator would get.

The standard scenario, recorded against :data:`RECORDED_POLICIES` (hand-computed figures in
:data:`EXPECTED`):

=====  ==============  ===========  =========  ===========  ===============  ==========  =====
 name   repo            role         face       requirement  legacy (mech.)   transport   count
=====  ==============  ===========  =========  ===========  ===============  ==========  =====
 A      acme/project-x  reviewer     agentic    -            anthropic dial   harness     4
 B      acme/project-x  reviewer     agentic    -            zai failover     harness     2
 C      acme/other      implementer  one-shot   -            zai dial         direct-http 3
 D      acme/project-x  implementer  agentic    -            anthropic ratch. gateway     5
 E      acme/other      reviewer     agentic    high-reas.   anthropic dial   harness     1
 F      acme/other      triager      one-shot   claude-opus  anthropic dial   direct-http 2
=====  ==============  ===========  =========  ===========  ===============  ==========  =====

A agrees (reviewers policy picks anthropic), B diverges (provider-differs), C and D fall to legacy
compatibility (agree), E is held (capability-unmapped), F is rejected (literal-family-unsatisfiable).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_route_shadow.chain import DecisionChain, iter_payloads
from otel_route_shadow.core import (
    Account,
    LegacyStage,
    PolicySnapshot,
    RouteContext,
    RoutingPolicy,
    build_legacy_route,
    policy_set_hash,
)
from otel_route_shadow.shadow.record import observe, record_payload

T0 = 1_788_220_800 * 1_000_000_000
"""2026-09-01T00:00:00Z in nanoseconds."""
HOUR = 3_600 * 1_000_000_000

ACCOUNTS = (
    Account(id="anthropic-legacy", provider="anthropic", state="available"),
    Account(id="zai-legacy", provider="zai", state="available"),
)

RECORDED_POLICIES: list[dict[str, Any]] = [
    {
        "id": "reviewers-on-anthropic",
        "match": {"roles": ["reviewer"]},
        "action": {"provider_lock": "anthropic-harness"},
    },
    {
        "id": "triagers-on-zai",
        "match": {"roles": ["triager"]},
        "action": {"provider_lock": "zai-harness"},
    },
]

PROJECT_X_ZAI: list[dict[str, Any]] = [
    {
        "id": "project-x-uses-zai",
        "match": {"repo_ids": ["acme/project-x"]},
        "action": {"provider_lock": "zai-harness"},
    }
]


def snapshot_of(policies: Sequence[dict[str, Any]], revision: int = 0) -> PolicySnapshot:
    parsed = tuple(RoutingPolicy.model_validate(p) for p in policies)
    return PolicySnapshot(policies=parsed, revision=revision, content_hash=policy_set_hash(parsed))


def context(
    repo: str | None,
    role: str | None,
    face: str,
    provider: str,
    mechanism: str,
    *,
    gateway: bool = False,
    requirement: str | None = None,
    principal: str | None = None,
) -> RouteContext:
    stages = [LegacyStage(mechanism=mechanism, provider=provider, gateway=gateway)]
    legacy = build_legacy_route(stages, face, account=f"{provider}-legacy")
    assert legacy is not None
    return RouteContext(
        repo=repo,
        role=role,
        principal_id=principal,
        request_face=face,
        requirement=requirement,
        accounts=ACCOUNTS,
        legacy_route=legacy,
    )


@dataclass(frozen=True)
class Entry:
    name: str
    context: RouteContext
    count: int


SCENARIO: tuple[Entry, ...] = (
    Entry("A", context("acme/project-x", "reviewer", "agentic", "anthropic", "role-dial"), 4),
    Entry("B", context("acme/project-x", "reviewer", "agentic", "zai", "credit-failover"), 2),
    Entry("C", context("acme/other", "implementer", "one-shot", "zai", "role-dial"), 3),
    Entry(
        "D",
        context("acme/project-x", "implementer", "agentic", "anthropic", "fleet-ratchet", gateway=True),
        5,
    ),
    Entry(
        "E",
        context("acme/other", "reviewer", "agentic", "anthropic", "role-dial", requirement="high-reasoning"),
        1,
    ),
    Entry(
        "F",
        context("acme/other", "triager", "one-shot", "anthropic", "role-dial", requirement="claude-opus"),
        2,
    ),
)

EXPECTED: dict[str, Any] = {
    "spawns": 17,
    "agreed": 12,
    "diverged": 5,
    "managed": 9,
    "bypass": 5,
    "divergences": {"provider-differs": 2, "policy-rejected": 2, "policy-held": 1},
    "outcomes": {"selected": 14, "rejected": 2, "held": 1},
    "held_reasons": {"capability-unmapped": 1},
    "rejected_reasons": {"literal-family-unsatisfiable": 2},
    "mechanisms": {
        # mechanism: (spawns, agreed, bypass)
        "role-dial": (10, 7, 5),
        "fleet-ratchet": (5, 5, 0),
        "credit-failover": (2, 0, 0),
    },
    "repos": {"acme/project-x": (11, 9), "acme/other": (6, 3)},
}


def interleave(entries: Sequence[Entry]) -> list[Entry]:
    """Each entry repeated ``count`` times, round-robin, so every hour sees a mix."""
    queues = [[entry] * entry.count for entry in entries]
    out: list[Entry] = []
    for group in itertools.zip_longest(*queues):
        out.extend(entry for entry in group if entry is not None)
    return out


def build_chain(
    path: Path,
    entries: Sequence[Entry] = SCENARIO,
    snapshot: PolicySnapshot | None = None,
    *,
    snapshot_state: str = "ok",
    start_ns: int = T0,
    step_ns: int = HOUR,
    extra_payloads: Sequence[dict[str, Any]] = (),
    duration: Callable[[int], int | None] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Append one observation per spawn (interleaved), then ``extra_payloads``; returns
    ``(entry name, payload)`` in chain order. ``duration(i)`` gives the ``i``-th spawn's
    ``duration_ns`` (None, or no ``duration``: a record without one, as written before they were)."""
    snap = snapshot if snapshot is not None else snapshot_of(RECORDED_POLICIES)
    log = DecisionChain(path)
    written: list[tuple[str, dict[str, Any]]] = []
    for i, entry in enumerate(interleave(entries)):
        record = observe("test-seam", entry.context, snap, snapshot_state)
        spent = None if duration is None else duration(i)
        payload = record_payload(0xABC000 + i, 0x100 + i, start_ns + i * step_ns, record.attributes, spent)
        log.append(payload)
        written.append((entry.name, payload))
    for payload in extra_payloads:
        log.append(payload)
        written.append(("extra", payload))
    return written


def rewrite_chain(source: Path, target: Path, edit: Any) -> None:
    """A *re-hashed* copy: every payload of ``source`` through ``edit(seq, payload)`` appended afresh,
    so the copy verifies while its content differs (what a careful forger would produce)."""
    log = DecisionChain(target)
    for seq, payload in iter_payloads(source):
        log.append(edit(seq, payload))


SERVED_STATUS = "route_shadow.served.status"
SERVED_PROVIDER = "route_shadow.served.provider"
SERVED_MODEL = "route_shadow.served.model"
SERVED_SOURCE = "route_shadow.served.source"
FINDING = "route_shadow.finding"


def served(status: str | None, provider: str | None = None, model: str | None = None) -> dict[str, Any]:
    """The served-route attributes a recorder writes (docs/reports.md, "Served route"); ``status`` None
    writes nothing (the record says nothing about what served it)."""
    if status is None:
        return {}
    values = {
        SERVED_STATUS: status,
        SERVED_PROVIDER: provider,
        SERVED_MODEL: model,
        SERVED_SOURCE: "response-hook",
    }
    return {key: value for key, value in values.items() if value is not None}


def with_finding(attributes: dict[str, Any], code: str) -> dict[str, Any]:
    """``attributes`` with ``code`` added to ``route_shadow.finding`` (comma-separated, sorted)."""
    codes = set(filter(None, str(attributes.get(FINDING) or "").split(",")))
    return {**attributes, FINDING: ",".join(sorted(codes | {code}))}


def append_observations(
    path: Path,
    items: Sequence[tuple[RouteContext, dict[str, Any]]],
    snapshot: PolicySnapshot | None = None,
    *,
    start_ns: int = T0,
    step_ns: int = HOUR,
    served_differs_finding: bool = True,
) -> list[dict[str, Any]]:
    """Append one observation per item, in the order given, each context's record with the item's
    extra attributes merged in (a served route, say); a ``differs`` status also adds the
    ``served-differs`` finding unless told otherwise. Returns the payloads in chain order."""
    snap = snapshot if snapshot is not None else snapshot_of(RECORDED_POLICIES)
    log = DecisionChain(path)
    written = []
    for i, (ctx, extra) in enumerate(items):
        attributes = {**observe("test-seam", ctx, snap, "ok").attributes, **extra}
        if served_differs_finding and extra.get(SERVED_STATUS) == "differs":
            attributes = with_finding(attributes, "served-differs")
        payload = record_payload(0xABC000 + i, 0x100 + i, start_ns + i * step_ns, attributes)
        log.append(payload)
        written.append(payload)
    return written
