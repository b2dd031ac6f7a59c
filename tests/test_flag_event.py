"""The ``feature_flag.evaluation`` event of a seam span (issue 27, item 3): the route slot as the key, the
managed decision as the variant, the reason mapped by one table, the snapshot as set id and version."""

from __future__ import annotations

from core_strategies import contexts, snapshots
from hypothesis import given, settings

from otel_route_shadow.core import PolicySnapshot, ReasonCode, RouteContext, RoutingPolicy
from otel_route_shadow.demo import factory
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import observe
from otel_route_shadow.shadow.flag_event import FLAG_REASONS, REASONS_NOT_USED, flag_key, flag_reason

CONVENTION_REASONS = {
    "static",
    "default",
    "targeting_match",
    "split",
    "cached",
    "disabled",
    "stale",
    "error",
    "unknown",
}
CONVENTION_ERRORS = {
    "flag_not_found",
    "invalid_context",
    "parse_error",
    "provider_fatal",
    "provider_not_ready",
    "targeting_key_missing",
    "type_mismatch",
    "general",
}
CONTEXT = factory.context_for(factory.plan_jobs(1, factory.FactorySettings())[0], "agentic")


def _event(context: RouteContext, snapshot: PolicySnapshot) -> dict[str, str]:
    event = observe("seam", context, snapshot).event
    assert event is not None
    return dict(event)


def test_the_table_maps_into_the_conventions_and_every_reason_is_ours() -> None:
    ours = {code.value for code in ReasonCode}
    for code, (reason, error) in FLAG_REASONS.items():
        assert code in ours and reason in CONVENTION_REASONS
        assert (error is not None) == (reason == "error") and (error is None or error in CONVENTION_ERRORS)
    used = {reason for reason, _ in FLAG_REASONS.values()} | {"unknown"}
    assert used | set(REASONS_NOT_USED) == CONVENTION_REASONS  # each reason used, or said why not


def test_legacy_compatibility_is_default_and_names_the_legacy_route() -> None:
    event = _event(CONTEXT, PolicySnapshot())
    assert event == {
        attr.FLAG_KEY: "route_shadow.route/acme/widgets/implementer/agentic",
        attr.FLAG_VARIANT: "anthropic/claude-opus-4-5",
        attr.FLAG_VALUE: "anthropic/claude-opus-4-5",
        attr.FLAG_REASON: "default",
        attr.FLAG_PROVIDER: "otel-route-shadow",
        attr.FLAG_SET_ID: PolicySnapshot().content_hash,
        attr.FLAG_VERSION: "0",
    }


def test_a_managed_selection_is_a_targeting_match_of_that_snapshot() -> None:
    policy = RoutingPolicy.model_validate(
        {"id": "all-anthropic", "action": {"provider_lock": "anthropic-harness"}}
    )
    snapshot = PolicySnapshot(revision=7, content_hash="ab" * 32, policies=(policy,))
    event = _event(CONTEXT, snapshot)
    assert (event[attr.FLAG_REASON], event[attr.FLAG_SET_ID], event[attr.FLAG_VERSION]) == (
        "targeting_match",
        "ab" * 32,
        "7",
    )
    assert event[attr.FLAG_VARIANT].startswith("anthropic/") and attr.FLAG_ERROR_TYPE not in event


def test_an_unusable_or_loading_snapshot_is_an_error_with_its_type() -> None:
    loading = _event(CONTEXT, PolicySnapshot(available=False, loading=True))
    unusable = _event(CONTEXT, PolicySnapshot(available=False))
    assert (loading[attr.FLAG_REASON], loading[attr.FLAG_ERROR_TYPE], loading[attr.FLAG_VARIANT]) == (
        "error",
        "provider_not_ready",
        "held",
    )
    assert (unusable[attr.FLAG_REASON], unusable[attr.FLAG_ERROR_TYPE]) == ("error", "general")


def test_the_key_is_the_route_slot_with_a_dash_for_what_is_missing() -> None:
    assert flag_key({attr.PRINCIPAL: "adr_review", attr.REQUEST_FACE: "one-shot"}) == (
        "route_shadow.route/-/adr_review/one-shot"
    )
    assert flag_key({attr.ROLE: "reviewer", attr.PRINCIPAL: "review", attr.REPO: "a/b"}) == (
        "route_shadow.route/a/b/reviewer/-"
    )
    assert flag_reason("a-reason-from-the-future") == ("unknown", None) and flag_reason(3) == (
        "unknown",
        None,
    )


@settings(max_examples=50)
@given(contexts, snapshots())
def test_every_decision_has_a_whole_event(context: RouteContext, snapshot: PolicySnapshot) -> None:
    record = observe("seam", context, snapshot)
    event = record.event
    assert event is not None
    a = record.attributes
    assert event[attr.FLAG_KEY].startswith("route_shadow.route/")
    assert event[attr.FLAG_REASON] in CONVENTION_REASONS - set(REASONS_NOT_USED)
    assert (attr.FLAG_ERROR_TYPE in event) == (event[attr.FLAG_REASON] == "error")
    assert event.get(attr.FLAG_SET_ID) == (a[attr.SNAPSHOT_HASH] or None)
    assert event[attr.FLAG_VERSION] == str(a[attr.SNAPSHOT_REVISION])
    if a[attr.OUTCOME] != "selected":
        assert event[attr.FLAG_VARIANT] == a[attr.OUTCOME]
    else:
        provider = a[attr.PROVIDER] or "-"
        assert event[attr.FLAG_VARIANT] == provider or event[attr.FLAG_VARIANT].startswith(provider + "/")
    assert set(event) <= {spec.key for spec in attr.FLAG_EVENT_ATTRIBUTES}
