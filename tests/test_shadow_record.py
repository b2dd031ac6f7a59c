"""What a record says, for any context and snapshot: the invariants of issue 15's fields."""

from __future__ import annotations

import json

from core_strategies import contexts, snapshots
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.analysis.changes import FIELD_KEYS
from otel_route_shadow.core import (
    DECISION_FIELDS,
    FINDINGS,
    Attempt,
    PolicySnapshot,
    RouteContext,
    ServedRoute,
    ServedWhy,
    WorkerRole,
    canonical_worker_role,
    legacy_finding,
    reconcile_context,
    served_status,
    served_why,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import observe, record_route_shadow, served_attributes

recordable_snapshots = snapshots()
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
    # Issue 27: nothing reported yet is unknown, never agreement; nothing else of the served route.
    assert a[attr.SERVED_STATUS] == "unknown"
    assert not {
        attr.SERVED_PROVIDER,
        attr.SERVED_MODEL,
        attr.SERVED_SOURCE,
        attr.GEN_AI_RESPONSE_MODEL,
    } & set(a)


@settings(max_examples=30)
@given(contexts, recordable_snapshots)
def test_each_decision_field_is_recorded_under_the_attribute_the_analysis_reads(
    context: RouteContext, snapshot: PolicySnapshot
) -> None:
    """``FIELD_KEYS`` is derived from ``DECISION_FIELDS``, no longer a second list kept in order by hand."""
    record = record_route_shadow("seam", context, snapshot)
    assert record is not None
    decision = record.shadow.decision
    assert tuple(map(record.attributes.get, FIELD_KEYS)) == tuple(getattr(decision, n) for n in DECISION_FIELDS)


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


served_routes = st.builds(
    ServedRoute,
    provider=st.none() | st.sampled_from(["anthropic", "zai", "z.ai", "openai"]),
    model=st.none() | st.sampled_from(["claude-opus-4-1", "claude-opus-4-1-20250805", "glm-5.1", "gpt-4o"]),
    fallback=st.booleans(),
    model_group=st.none() | st.sampled_from(["claude-opus-4-1", "gpt-4o", "opus"]),
    attempts=st.lists(
        st.builds(
            Attempt,
            provider=st.none() | st.sampled_from(["anthropic", "zai"]),
            model=st.none() | st.sampled_from(["glm-5.1", "gpt-4o"]),
            error_type=st.none() | st.sampled_from(["RateLimitError", "_OTHER"]),
        ),
        max_size=10,
    ).map(tuple),
)


@settings(max_examples=60)
@given(
    contexts,
    recordable_snapshots,
    st.none() | served_routes,
    st.sampled_from(["response-hook", "descendant-span"]),
)
def test_a_served_route_that_differs_after_a_fallback_is_never_agreement(
    context: RouteContext, snapshot: PolicySnapshot, served: ServedRoute | None, source: str
) -> None:
    """Only a fallback disagrees; an alias, load balancing or no known reason is recorded as why the
    served route differs, and changes nothing of the comparison."""
    record = observe("seam", context, snapshot)
    before = record.attributes
    changed = served_attributes(before, record.shadow.legacy, served, source)
    after = {**before, **changed}
    assert set(after) <= set(DEFINED)
    status = after[attr.SERVED_STATUS]
    assert status == served_status(record.shadow.legacy, served).value
    why = served_why(record.shadow.legacy, served)
    assert after.get(attr.SERVED_WHY) == (None if why is None else why.value)
    assert (why is None) == (status != "differs")
    if why is ServedWhy.FALLBACK:
        assert after[attr.AGREED] is False and "served-differs" in str(after[attr.FINDING]).split(",")
        assert after[attr.DIVERGENCE] == before.get(attr.DIVERGENCE, "served-differs")
        assert str(after[attr.FINDING]).split(",") == sorted(
            {*str(before.get(attr.FINDING) or "served-differs").split(","), "served-differs"}
        )
    else:  # same, unknown, or differing for another reason than a fallback
        assert all(after.get(k) == before.get(k) for k in (attr.AGREED, attr.DIVERGENCE, attr.FINDING))
    assert (attr.SERVED_SOURCE in after) == (served is not None and served.reported)
    attempts = served.attempts if served is not None else ()
    if attempts:
        listed = json.loads(str(after[attr.SERVED_ATTEMPTS]))
        assert len(listed) == min(len(attempts), attr.ATTEMPTS_RECORDED)
        assert listed[-1] == attempts[-1].model_dump(exclude_none=True)  # the one that served is kept
        assert after.get(attr.SERVED_ATTEMPTS_OMITTED) == (len(attempts) - len(listed) or None)
    else:
        assert attr.SERVED_ATTEMPTS not in after


def test_a_snapshot_at_the_stores_largest_revision_is_recorded() -> None:
    """The store's revisions stop where the chain's integers do: a snapshot at ``MAX_REVISION`` is
    recorded (the bound was once 2**53, one past what a chain record can carry, so every spawn's record
    at that revision failed to encode)."""
    from otel_route_shadow.chain import MAX_SAFE_INTEGER
    from otel_route_shadow.demo import factory
    from otel_route_shadow.store import MAX_REVISION

    assert MAX_REVISION == MAX_SAFE_INTEGER
    context = factory.context_for(factory.plan_jobs(1, factory.FactorySettings())[0], "agentic")
    record = record_route_shadow("seam", context, PolicySnapshot(revision=MAX_REVISION))
    assert record is not None and record.attributes[attr.SNAPSHOT_REVISION] == MAX_REVISION
