"""A small agent factory that reproduces the design record's world.

Four spawn seams (agentic runner, subprocess runner, one-shot lightweight agent, gateway streaming),
and the four legacy mechanisms layered over them: per-role provider dials with six loops pinned to
z.ai, a repo-wide override, the fleet ratchet onto the gateway at the streaming seam, and a credit
failover onto GLM that comes and goes in the second half of a run (so the same decision key gets
different legacy routes: it flaps). The gateway itself sometimes falls back on its own: the spawn is
then served by GLM although the legacy route chose Anthropic, and only the gateway's answer says so.
The seams are plain host code: the demo instruments them exactly as a user would, through
``RouteShadowInstrumentor``, an extractor and a response hook (``served_by``) on every seam whose
result names what served it (the subprocess runner's does not: its served route is unknown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otel_route_shadow.core import (
    Account,
    Attempt,
    LegacyStage,
    RouteContext,
    ServedRoute,
    build_legacy_route,
)
from otel_route_shadow.instrumentation import ResponseHook, SeamCall, SeamSpec
from otel_route_shadow.shadow import served_from_headers

__all__ = [
    "ZAI_PINNED_LOOPS",
    "AgentRunner",
    "FactorySettings",
    "Job",
    "Loop",
    "SubprocessRunner",
    "extract_job",
    "plan_jobs",
    "run_lightweight_agent",
    "seam_specs",
    "served_by",
    "stream_claude_with_telemetry",
]

ZAI_PINNED_LOOPS = (
    "wiki_compilation",
    "adr_review",
    "transcript_summary",
    "triage_honeypot",
    "term_proposer",
    "pr_unstick",
)
"""The six loops the host pins to z.ai through per-role dials that no policy describes."""

_MODELS = {
    "claude-opus": "claude-opus-4-5",
    "claude-sonnet": "claude-sonnet-4-5",
    "claude-haiku": "claude-haiku-4-5",
}
_DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
_GLM_MODEL = "glm-5.1"


@dataclass(frozen=True)
class Loop:
    """A factory loop: who runs, in which role, through which seam, asking for what."""

    name: str
    role: str
    seam: str
    requirement: str | None


LOOPS: tuple[Loop, ...] = (
    Loop("implement", "implementer", "agentic", "claude-opus"),
    Loop("plan", "planner", "subprocess", "high-reasoning"),
    Loop("review", "reviewer", "streaming", "claude-sonnet"),
    Loop("triage", "triager", "one-shot", "fast"),
    Loop("wiki_compilation", "summarizer", "one-shot", None),
    Loop("adr_review", "adr_reviewer", "agentic", None),
    Loop("transcript_summary", "summarizer", "one-shot", "fast"),
    Loop("triage_honeypot", "triager", "one-shot", None),
    Loop("term_proposer", "term_proposer", "one-shot", None),
    Loop("pr_unstick", "implementer", "subprocess", "claude-opus"),
)

REPOS: tuple[str, ...] = ("acme/widgets", "acme/project-x", "acme/project-y", "acme-legacy-tools")
"""The last is a path-safe slug: its owner cannot be recovered, so it never joins a repo policy."""


@dataclass
class FactorySettings:
    """The host's hand-maintained routing dials."""

    role_dials: dict[str, str] = field(default_factory=lambda: dict.fromkeys(ZAI_PINNED_LOOPS, "zai"))
    repo_provider: dict[str, str] = field(default_factory=lambda: {"acme/project-y": "zai"})
    fleet_ratchet_enabled: bool = True
    credit_exhausted: bool = False
    route_shadow_enabled: bool = True


@dataclass(frozen=True)
class Job:
    """One spawn as the host schedules it, with the route its legacy mechanisms produced."""

    number: int
    loop: Loop
    repo: str
    stages: tuple[LegacyStage, ...]
    accounts: tuple[Account, ...]


def _model_for(provider: str, requirement: str | None) -> str:
    if provider == "zai":
        return _GLM_MODEL
    return _MODELS.get(requirement or "", _DEFAULT_ANTHROPIC_MODEL)


def legacy_stages(loop: Loop, repo: str, settings: FactorySettings) -> tuple[LegacyStage, ...]:
    """Apply the legacy mechanisms in the order the seams do, recording each one that applies."""
    provider = settings.role_dials.get(loop.name, "anthropic")
    stages = [
        LegacyStage(
            mechanism="role-dial",
            provider=provider,
            model=_model_for(provider, loop.requirement),
            detail=f"provider={provider}",
        )
    ]
    override = settings.repo_provider.get(repo)
    if override is not None:
        provider = override
        stages.append(
            LegacyStage(
                mechanism="repo-override",
                provider=provider,
                model=_model_for(provider, loop.requirement),
                detail=f"repo_provider={provider}",
            )
        )
    if loop.seam == "streaming" and settings.fleet_ratchet_enabled and provider == "anthropic":
        stages.append(
            LegacyStage(
                mechanism="fleet-ratchet",
                provider=provider,
                gateway=True,
                detail="gateway_fleet_ratchet_enabled",
            )
        )
    if settings.credit_exhausted and provider == "anthropic":
        stages.append(
            LegacyStage(
                mechanism="credit-failover",
                provider="zai",
                model=_GLM_MODEL,
                gateway=False,
                detail="anthropic-credit-exhausted",
            )
        )
    return tuple(stages)


def accounts_for(settings: FactorySettings) -> tuple[Account, ...]:
    anthropic_state = "exhausted" if settings.credit_exhausted else "available"
    return (
        Account(id="anthropic-legacy", provider="anthropic", state=anthropic_state),
        Account(id="zai-legacy", provider="zai", state="available"),
    )


FAILOVER_STRETCH = 8
"""Spawns per stretch of the credit failover: in the second half of a run it is on for one stretch in
three. A decision key comes back every 40 spawns (ten loops, four repositories), five stretches later,
so consecutive spawns of one key find the failover in different states: the legacy route flaps."""


def credit_exhausted(number: int, spawns: int) -> bool:
    """Whether the Anthropic credit is exhausted at spawn ``number`` of ``spawns`` (the failover flaps)."""
    return number >= spawns // 2 and (number // FAILOVER_STRETCH) % 3 == 1


def plan_jobs(spawns: int, settings: FactorySettings) -> list[Job]:
    """A deterministic schedule; the credit failover comes and goes in the second half of the run."""
    jobs = []
    for number in range(spawns):
        loop = LOOPS[number % len(LOOPS)]
        repo = REPOS[(number + number // len(LOOPS)) % len(REPOS)]
        settings.credit_exhausted = credit_exhausted(number, spawns)
        jobs.append(
            Job(
                number=number,
                loop=loop,
                repo=repo,
                stages=legacy_stages(loop, repo, settings),
                accounts=accounts_for(settings),
            )
        )
    settings.credit_exhausted = False
    return jobs


def context_for(job: Job, request_face: str) -> RouteContext:
    canonical = "/" in job.repo
    account = "zai-legacy" if job.stages[-1].provider == "zai" else "anthropic-legacy"
    legacy = build_legacy_route(job.stages, request_face, account)
    assert legacy is not None
    return RouteContext(
        repo=job.repo if canonical else None,
        repo_slug=None if canonical else job.repo,
        role=job.loop.role,
        principal_id=job.loop.name,
        request_face=request_face,
        requirement=job.loop.requirement,
        accounts=job.accounts,
        legacy_route=legacy,
    )


def extract_job(call: SeamCall) -> RouteContext | None:
    """The extractor the demo registers for all four seams: the job is the first argument."""
    job = call.kwargs.get("job", call.args[0] if call.args else None)
    if not isinstance(job, Job):
        return None
    return context_for(job, call.request_face)


# -- the four seams --------------------------------------------------------------------------------


GATEWAY_FALLBACK_EVERY = 3
"""The gateway falls back on its own for one spawn in three (by job number): GLM serves it."""


@dataclass(frozen=True)
class SpawnResult:
    """What a spawn returns: the route it was sent on, and what served it (the gateway's answer)."""

    job: int
    provider: str
    model: str | None
    gateway: bool
    served_provider: str
    served_model: str | None
    headers: dict[str, str] = field(default_factory=dict)
    """The gateway's response headers (LiteLLM's, on a fallback)."""


_FALLBACK_HEADERS: dict[str, str] = {
    "x-litellm-attempted-fallbacks": "1",
    "x-litellm-fallback-errors": "RateLimitError",
}
"""What the gateway answers when it fell back: one attempt failed (rate limited) before GLM served."""


def _spawn(job: Job) -> SpawnResult:
    final = job.stages[-1]
    model = next((stage.model for stage in reversed(job.stages) if stage.model), None)
    if final.gateway and job.number % GATEWAY_FALLBACK_EVERY == 0:
        # The gateway's own fallback: nothing in the host's route says so, only its answer.
        return SpawnResult(
            job.number, final.provider, model, final.gateway, "zai", _GLM_MODEL, dict(_FALLBACK_HEADERS)
        )
    return SpawnResult(job.number, final.provider, model, final.gateway, final.provider, model)


def served_by(call: SeamCall, result: Any, error: BaseException | None) -> ServedRoute | None:
    """The demo's response hook: a spawn's result names what served it, and the gateway's headers
    say whether it fell back and which attempts failed before."""
    if not isinstance(result, SpawnResult):
        return None
    reported = served_from_headers(result.headers)
    failed = reported.attempts[:-1] if reported is not None else ()
    served = Attempt(provider=result.served_provider, model=result.served_model)
    return ServedRoute(
        provider=served.provider,
        model=served.model,
        fallback=reported is not None and reported.fallback,
        attempts=(*failed, served) if failed else (),
    )


class AgentRunner:
    """``base_runner._execute``: an agent CLI run."""

    def _execute(self, job: Job) -> SpawnResult:
        return _spawn(job)


class SubprocessRunner:
    """``BaseSubprocessRunner.run``: an agent CLI run in a subprocess."""

    def run(self, job: Job) -> SpawnResult:
        return _spawn(job)


def run_lightweight_agent(job: Job) -> SpawnResult:
    """``runner_utils.run_lightweight_agent``: a single completion call."""
    return _spawn(job)


def stream_claude_with_telemetry(job: Job) -> SpawnResult:
    """``runner_utils.stream_claude_with_telemetry``: where the fleet ratchet applies."""
    return _spawn(job)


SEAMS: dict[str, tuple[str, str]] = {
    "agentic": ("otel_route_shadow.demo.factory:AgentRunner._execute", "agentic"),
    "subprocess": ("otel_route_shadow.demo.factory:SubprocessRunner.run", "agentic"),
    "one-shot": ("otel_route_shadow.demo.factory:run_lightweight_agent", "one-shot"),
    "streaming": ("otel_route_shadow.demo.factory:stream_claude_with_telemetry", "agentic"),
}
RESPONSE_HOOKS: dict[str, ResponseHook] = {
    "agentic": served_by,
    "one-shot": served_by,
    "streaming": served_by,
}
"""The seams whose result names what served the spawn; the subprocess runner's result does not."""


def seam_specs() -> tuple[SeamSpec, ...]:
    """The demo's four seams as the instrumentor takes them (extractor and response hooks included)."""
    return tuple(
        SeamSpec(target, face, extract_job, name, RESPONSE_HOOKS.get(name))
        for name, (target, face) in SEAMS.items()
    )


def dispatch(job: Job) -> SpawnResult:
    """The factory's scheduler: each loop spawns through its own seam. Module globals and class
    attributes are looked up at call time, so instrumentation applied after import is honoured."""
    seam = job.loop.seam
    if seam == "agentic":
        return AgentRunner()._execute(job)
    if seam == "subprocess":
        return SubprocessRunner().run(job)
    if seam == "one-shot":
        return run_lightweight_agent(job)
    return stream_claude_with_telemetry(job)
