"""The one place the e2e suite produces seam events: spans over OTLP and the matching chain.

``emit_seam_events`` stands in for ``otel-route-shadow demo --spawns N --out DIR`` run with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set: it uses the real OpenTelemetry SDK (TracerProvider, batch
processor, OTLPSpanExporter over HTTP to rotel) with the resource attribute
``openinference.project.name`` that routes spans to a Phoenix project, and hands each seam span to the
plugin's own chain exporter (``RouteShadowChainExporter``) from a span processor's ``on_end``, sampled
or not, the way the plugin's processor does. Replace the body
with a run of the demo once it exists; the signature is the demo's: endpoint, project, out dir, spawns.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import Attributes

from otel_route_shadow.core import vocabulary as v
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter

CHAIN_NAME = "chain.jsonl"
SEAMS = (
    "base_runner._execute",
    "BaseSubprocessRunner.run",
    "runner_utils.run_lightweight_agent",
    "runner_utils.stream_claude_with_telemetry",
)


class EveryNthRecordOnly(Sampler):
    """Records every span but exports only some: every ``n``-th seam span is RECORD_ONLY (processors
    see it, so the chain holds it; the exporter does not, so the backend lacks it)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        decision = Decision.RECORD_AND_SAMPLE
        if attributes and any(str(k).startswith("route_shadow.") for k in attributes):
            self.count += 1
            if self.n and self.count % self.n == 0:
                decision = Decision.RECORD_ONLY
        return SamplingResult(decision, attributes)

    def get_description(self) -> str:
        return f"EveryNthRecordOnly({self.n})"


class ChainProcessor(SpanProcessor):
    """Hands every seam span to the plugin's chain exporter when it ends, sampled or not, as the
    route-shadow processor does."""

    def __init__(self, exporter: RouteShadowChainExporter) -> None:
        self.exporter = exporter

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is not None and span.attributes and "route_shadow.seam" in span.attributes:
            self.exporter.append(context.trace_id, context.span_id, span.start_time or 0, span.attributes)


def _decision_attributes(i: int, rng: random.Random) -> dict[str, str | int | bool]:
    mechanism = rng.choice(list(v.LegacyMechanism))
    transport = rng.choice(list(v.Transport))
    role = rng.choice(list(v.WorkerRole))
    outcome = rng.choice([v.Outcome.SELECTED] * 4 + [v.Outcome.HELD, v.Outcome.REJECTED])
    agreed = rng.random() < 0.6
    provider = rng.choice(list(v.Provider))
    model = "glm-4.6" if provider is v.Provider.ZAI else rng.choice(["claude-sonnet-4-5", "claude-opus-4-1"])
    attrs: dict[str, str | int | bool] = {
        "route_shadow.seam": SEAMS[i % len(SEAMS)],
        "route_shadow.outcome": outcome.value,
        "route_shadow.reason": "policy-selected" if outcome is v.Outcome.SELECTED else "no-eligible-account",
        "route_shadow.policy_source": rng.choice(list(v.PolicySource)).value,
        "route_shadow.rung": rng.randint(1, 9),
        "route_shadow.provider": provider.value,
        "route_shadow.account": f"{provider.value}-legacy",
        "route_shadow.model": model,
        "route_shadow.snapshot.revision": 3,
        "route_shadow.snapshot.hash": hashlib.sha256(b"snapshot-3").hexdigest(),
        "route_shadow.snapshot.state": "ok",
        "route_shadow.decision_id": hashlib.sha256(f"decision-{i}-{rng.random()}".encode()).hexdigest(),
        "route_shadow.legacy.provider": provider.value
        if agreed
        else ("anthropic" if provider is v.Provider.ZAI else "zai"),
        "route_shadow.legacy.mechanism": mechanism.value,
        "route_shadow.legacy.detail": f"provider={provider.value}",
        "route_shadow.transport": transport.value,
        "route_shadow.agreed": agreed,
        "route_shadow.repo": rng.choice(["acme/widgets", "acme/project-x", "acme-legacy-tools"]),
        "route_shadow.role": role.value,
        "route_shadow.principal_id": f"{role.value}_loop",
        "route_shadow.request_face": v.RequestFace.AGENTIC.value if i % 3 else v.RequestFace.ONE_SHOT.value,
        "route_shadow.requirement": rng.choice(["none", "claude-sonnet", "high-reasoning"]),
        "gen_ai.operation.name": "invoke_agent" if i % 3 else "chat",
        "gen_ai.provider.name": "anthropic" if provider is v.Provider.ANTHROPIC else "z.ai",
        "gen_ai.request.model": model,
    }
    if not agreed:
        attrs["route_shadow.divergence"] = "provider-differs"
    return attrs


def emit_seam_events(
    otlp_http_endpoint: str,
    project: str,
    out_dir: Path,
    spawns: int,
    *,
    record_only_every: int = 0,
    seed: int = 6,
) -> Path:
    """Run ``spawns`` seam calls; export their spans to ``otlp_http_endpoint`` (rotel) with the Phoenix
    project ``project``; write the chain to ``out_dir/chain.jsonl`` and return its path.

    ``record_only_every=n`` leaves every n-th span unexported (sampled out) while the chain keeps it.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    chain = out_dir / CHAIN_NAME
    provider = TracerProvider(
        resource=Resource.create({"service.name": "route-shadow-e2e", "openinference.project.name": project}),
        sampler=EveryNthRecordOnly(record_only_every),
    )
    provider.add_span_processor(ChainProcessor(RouteShadowChainExporter(chain)))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp_http_endpoint}/v1/traces", timeout=10))
    )
    tracer = provider.get_tracer("otel_route_shadow.e2e", "0.1.0")
    rng = random.Random(seed)
    for i in range(spawns):
        with tracer.start_as_current_span("host.job", kind=SpanKind.INTERNAL):  # a non-seam parent
            attrs = _decision_attributes(i, rng)
            name = f"{attrs['gen_ai.operation.name']} {attrs['gen_ai.request.model']}"
            with tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attrs):
                pass  # the host's spawn would run here
    assert provider.force_flush(30_000), "spans were not flushed to rotel"
    provider.shutdown()
    return chain
