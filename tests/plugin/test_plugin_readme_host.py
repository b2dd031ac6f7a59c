"""A host written from docs/instrumenting.md alone, meeting the
ADR's own examples: the adr_reviewer dial on z.ai, and a credit failover under a literal family."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, SeamCall, SeamSpec
from otel_route_shadow.shadow import Spawn, local_account_availability


@dataclass
class Job:
    repo: str
    role: str
    loop: str
    requirement: str | None
    account: str
    stages: list[tuple[str, str, str]] = field(default_factory=list)  # (mechanism, provider, model)
    conversation: str | None = None


class Runner:
    def execute(self, job: Job) -> str:
        return f"{job.loop} done"


def extract_execute(call: SeamCall) -> Spawn:
    job = call.args[0]
    stages = [LegacyStage(mechanism=m, provider=p, model=model) for m, p, model in job.stages]
    context = RouteContext(
        repo=job.repo,
        role=job.role,
        principal_id=job.loop,
        request_face=call.request_face,
        requirement=job.requirement,
        accounts=local_account_availability({}),
        legacy_route=build_legacy_route(stages, call.request_face, job.account),
    )
    return Spawn(context, job.conversation)


def _run(tmp_path: Path, jobs: list[Job]) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chain = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider,
        seams=[SeamSpec(f"{__name__}:Runner.execute", "agentic", extract_execute)],
        chain_path=chain,
        store=tmp_path / "policies",
    )
    try:
        results = [Runner().execute(job) for job in jobs]
    finally:
        instrumentor.uninstrument()
    records = [p["attributes"] for _, p in iter_payloads(chain) if p.get("kind") == "route-shadow"]
    return list(exporter.get_finished_spans()), records, results


def test_the_adr_reviewer_dial_and_a_credit_failover_from_the_readme_alone(tmp_path: Path) -> None:
    dial = Job(
        "acme/widgets", "adr_reviewer", "adr_review", None, "zai-legacy", [("role-dial", "zai", "glm-5.1")]
    )
    failover = Job(
        "acme/widgets",
        "implementer",
        "implement",
        "claude-opus",
        "zai-legacy",
        [("role-dial", "anthropic", "claude-opus-4-5"), ("credit-failover", "zai", "glm-5.1")],
        conversation="conv-7",
    )
    spans, records, results = _run(tmp_path, [dial, failover])
    assert results == ["adr_review done", "implement done"]
    assert [s.name for s in spans] == ["invoke_agent adr_review", "invoke_agent implement"]
    assert all(s.kind is SpanKind.CLIENT for s in spans)
    d, f = (dict(s.attributes) for s in spans)
    assert records == [
        {
            k: v
            for k, v in a.items()
            if k.startswith(("route_shadow.", "gen_ai.")) and k != "gen_ai.conversation.id"
        }
        for a in (d, f)
    ]

    # ADR D7: "an adr_reviewer spawn on z.ai records mechanism=role-dial, mechanism_detail=provider=zai,
    # and policy_source=legacy-compatibility"; D8: the loop name is no role, it is a principal.
    assert (d["route_shadow.legacy.mechanism"], d["route_shadow.legacy.detail"]) == (
        "role-dial",
        "provider=zai",
    )
    assert d["route_shadow.policy_source"] == "legacy-compatibility"
    assert d["route_shadow.transport"] == "harness-direct"
    assert "route_shadow.role" not in d
    assert (d["route_shadow.host_role"], d["route_shadow.principal_id"]) == ("adr_reviewer", "adr_review")
    assert d["route_shadow.agreed"] is True and "route_shadow.finding" not in d

    # ADR D4: a claude-opus request on GLM after credit failover is reported, never suppressed.
    assert f["route_shadow.legacy.mechanism"] == "credit-failover"
    assert f["route_shadow.role"] == "implementer"
    assert (f["route_shadow.finding"], f["route_shadow.divergence"]) == (
        "requirement-defied",
        "requirement-defied",
    )
    assert f["route_shadow.agreed"] is False
    assert f["gen_ai.conversation.id"] == "conv-7"
    assert f["route_shadow.forbid_direct_bypass"] is False
    assert f["route_shadow.identity_version"] == "canonical"
