"""What a record says, for any context and snapshot: the invariants of issue 15's fields."""

from __future__ import annotations

import json

from core_strategies import contexts, snapshots
from hypothesis import given, settings

from otel_route_shadow.core import (
    FINDINGS,
    PolicySnapshot,
    RouteContext,
    WorkerRole,
    canonical_worker_role,
    legacy_finding,
    reconcile_context,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import observe, record_route_shadow

# The chain's canonical integers stop at 2**53 - 1 (a store's revisions never get near it).
recordable_snapshots = snapshots().map(lambda s: s.model_copy(update={"revision": s.revision % 2**53}))
DEFINED = {spec.key: spec.type for spec in (*attr.ATTRIBUTES, *attr.CONVENTION_ATTRIBUTES)}


@settings(max_examples=60)
@given(contexts, recordable_snapshots)
def test_every_record_is_whole_and_consistent(context: RouteContext, snapshot: PolicySnapshot) -> None:
    record = record_route_shadow("seam", context, snapshot)
    assert record is not None  # never None for a valid context: the path does not fail
    a = record.attributes
    assert set(a) <= set(DEFINED)
    # D8: the role is canonical or absent; the host's string is kept as given.
    assert a.get(attr.ROLE) in {None, *(r.value for r in WorkerRole)}
    assert a.get(attr.ROLE) == canonical_worker_role(context.role)
    assert a.get(attr.HOST_ROLE) == record.context.role
    # D7: the recorded mechanism and transport are the derived ones, and a mismatch is flagged.
    derived, mismatched = reconcile_context(record.context)
    assert mismatched == () and derived is record.context
    assert a[attr.LEGACY_MECHANISM] == record.context.legacy_route.mechanism
    assert a[attr.TRANSPORT] == record.context.legacy_route.transport
    flagged = a.get(attr.CLAIM_MISMATCH)
    assert flagged is None or set(flagged.split(",")) <= {"mechanism", "transport"}
    # D4: a finding is never suppressed, and never agreement.
    finding = legacy_finding(record.context.requirement, record.context.legacy_route)
    assert a.get(attr.FINDING) == finding
    assert finding is None or (finding in FINDINGS and a[attr.AGREED] is False and attr.DIVERGENCE in a)
    assert (a[attr.AGREED] is True) == (attr.DIVERGENCE not in a)
    # The whole decision: always the bypass flag; verdicts bounded and counted.
    assert isinstance(a[attr.FORBID_DIRECT_BYPASS], bool)
    verdicts = json.loads(str(a[attr.ACCOUNTS])) if attr.ACCOUNTS in a else []
    assert len(verdicts) <= attr.ACCOUNTS_RECORDED
    assert len(verdicts) + int(a.get(attr.ACCOUNTS_OMITTED, 0)) == len(record.shadow.decision.accounts)


@settings(max_examples=40)
@given(contexts, recordable_snapshots)
def test_the_recorded_context_replays_to_the_recorded_decision(
    context: RouteContext, snapshot: PolicySnapshot
) -> None:
    record = observe("seam", context, snapshot)
    replayed = observe(
        "seam", RouteContext.model_validate_json(str(record.attributes[attr.CONTEXT])), snapshot
    )
    assert replayed.attributes[attr.DECISION_ID] == record.attributes[attr.DECISION_ID]
    assert attr.CLAIM_MISMATCH not in replayed.attributes
