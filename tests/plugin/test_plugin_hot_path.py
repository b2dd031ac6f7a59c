"""The seam's shortcuts must be exact: the joined-string precheck never misses a credential, and a
memoised decision is the decision."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from otel_route_shadow.core import PolicySnapshot, RouteContext, policy_set_hash
from otel_route_shadow.core.redaction import redact_text
from otel_route_shadow.demo import factory
from otel_route_shadow.demo.run import default_policy_file
from otel_route_shadow.instrumentation.config import RouteShadowConfig
from otel_route_shadow.instrumentation.runtime import ShadowRuntime
from otel_route_shadow.shadow.record import context_json, observe, sanitize_context

CREDENTIALS = [
    "sk-ant-api03-" + "Qk9" * 14,
    "ghp_" + "Cx" * 18,
    "AKIACANARYCANARY1234",
    "Bearer\tabcdefgh12345678",
    "password=hunter2",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2ln",
    "0123456789abcdef0123456789abcdef.CanaryZaiSecret1",
    "-----BEGIN EC PRIVATE KEY-----\nabc",
]

fragments = st.one_of(st.text(max_size=40), st.sampled_from(CREDENTIALS))


@given(st.lists(st.tuples(fragments, fragments, fragments).map("".join), min_size=1, max_size=8))
def test_joined_precheck_finds_every_credential_any_single_field_holds(fields: list[str]) -> None:
    if any(redact_text(field)[1] for field in fields):
        assert redact_text("\x00".join(fields))[1] > 0


@given(st.sampled_from(CREDENTIALS), st.sampled_from(["principal_id", "role", "requirement", "repo_slug"]))
def test_sanitize_redacts_a_credential_in_any_field(secret: str, field: str) -> None:
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    context = factory.context_for(job, "agentic").model_copy(update={field: f"x {secret} y"})
    clean, paths = sanitize_context(context)
    assert paths == [f"/{field}"]
    assert secret not in context_json(clean)


def test_memoised_observation_equals_a_fresh_one(tmp_path: object) -> None:
    policies = default_policy_file().policies
    snapshot = PolicySnapshot(policies=policies, revision=3, content_hash=policy_set_hash(policies))
    runtime = ShadowRuntime(RouteShadowConfig.resolve(environ={}, chain_path=tmp_path / "c.jsonl"))  # type: ignore[operator]
    for job in factory.plan_jobs(80, factory.FactorySettings()):
        context: RouteContext = factory.context_for(job, "agentic")
        clean, encoded = runtime.sanitize(context)
        first = runtime.observe("seam", clean, encoded, snapshot, "ok")
        again = runtime.observe("seam", clean, encoded, snapshot, "ok")
        fresh = observe("seam", context, snapshot, "ok", origin=runtime.origin)
        assert again is first
        assert dict(first.attributes) == dict(fresh.attributes)
    changed = PolicySnapshot(policies=policies[:1], revision=4, content_hash=policy_set_hash(policies[:1]))
    assert runtime.observe("seam", clean, encoded, changed, "ok") is not first


@given(
    st.sampled_from(["principal_id", "role", "requirement", "repo_slug", "repo"]),
    st.one_of(st.text(max_size=30), fragments.map(lambda text: f"x {text} y")),
)
def test_the_sanitize_cache_returns_what_a_fresh_sanitize_does(field: str, value: str) -> None:
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    context = factory.context_for(job, "agentic").model_copy(update={field: value})
    expected_clean, _ = sanitize_context(context)
    expected = context_json(expected_clean)
    runtime = ShadowRuntime(RouteShadowConfig.resolve(environ={}))
    for _ in range(2):  # the second call is served from the cache when the context was clean
        clean, encoded = runtime.sanitize(context)
        assert encoded == expected
        assert clean == expected_clean
    for cached in (v for v in runtime.memo.values() if isinstance(v, str)):
        assert redact_text(cached)[1] == 0, "a context that needed redaction was remembered"


def test_the_sanitize_cache_tells_equal_looking_contexts_apart() -> None:
    job = factory.plan_jobs(1, factory.FactorySettings())[0]
    runtime = ShadowRuntime(RouteShadowConfig.resolve(environ={}))
    base = factory.context_for(job, "agentic")
    variants = [
        base.model_copy(update={"role": None}),
        base.model_copy(update={"role": "None"}),
        base.model_copy(update={"role": ""}),
        base.model_copy(update={"principal_id": base.role, "role": base.principal_id}),
    ]
    for context in [base, *variants, base, *variants]:
        assert runtime.sanitize(context)[1] == context_json(context)


def test_a_memoised_decision_carries_the_template_its_records_are_written_with(tmp_path: Path) -> None:
    from otel_route_shadow.chain import canonical_bytes
    from otel_route_shadow.shadow.record import record_payload, record_tokens

    policies = default_policy_file().policies
    snapshot = PolicySnapshot(policies=policies, revision=3, content_hash=policy_set_hash(policies))
    runtime = ShadowRuntime(RouteShadowConfig.resolve(environ={}, chain_path=tmp_path / "c.jsonl"))
    ids = (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, 1796007685579756355, 2_500_000)
    for job in factory.plan_jobs(40, factory.FactorySettings()):
        clean, encoded = runtime.sanitize(factory.context_for(job, "agentic"))
        record = runtime.observe("seam", clean, encoded, snapshot, "ok")
        assert record.template is not None
        assert record.template.encode(record_tokens(*ids)).payload == canonical_bytes(
            record_payload(*ids[:3], record.attributes, ids[3])
        )


def test_an_equal_but_distinct_context_object_is_recognised_as_seen() -> None:
    runtime = ShadowRuntime(RouteShadowConfig.resolve(environ={}))
    for job in factory.plan_jobs(40, factory.FactorySettings()):
        context = factory.context_for(job, "agentic")
        runtime.sanitize(context)
        known = len(runtime.memo)
        _, encoded = runtime.sanitize(context.model_copy(deep=True))
        assert len(runtime.memo) == known, "a fresh object of the same content missed the cache"
        assert encoded == context_json(context)
