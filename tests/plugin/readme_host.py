"""A host written from docs/instrumenting.md alone, for the fault suite.

A tiny factory: a runner class whose ``execute`` spawns an agent, a one-shot ``complete``, and the
streaming shapes (a generator, an async generator, a coroutine). Every result is plain data, so an
instrumented run can be compared with a bare one by ``==``. A job whose ``fail`` is set makes the
host raise its own ``HostError`` (for the streams: after its second chunk).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route
from otel_route_shadow.shadow import local_account_availability

MODULE = __name__
SEAMS = (
    f"{MODULE}:Runner.execute,agentic,{MODULE}:extract_execute;"
    f"{MODULE}:complete,one-shot,{MODULE}:extract_execute;"
    f"{MODULE}:stream,agentic,{MODULE}:extract_execute;"
    f"{MODULE}:astream,agentic,{MODULE}:extract_execute;"
    f"{MODULE}:acomplete,one-shot,{MODULE}:extract_execute"
)
"""``OTEL_PYTHON_ROUTE_SHADOW_SEAMS`` for this host, as docs/instrumenting.md writes it."""


HOST_CALLS = [0]
"""How many times the host's own seam code started (every seam body adds one)."""


class HostError(Exception):
    """The host's own failure: must reach the caller as the very same object."""


@dataclass(frozen=True)
class Job:
    number: int
    repo: str = "acme/widgets"
    role: str = "reviewer"
    loop: str = "loop-1"
    requirement: str = "frontier"
    provider: str = "anthropic"
    model: str = "claude-sonnet"
    account: str = "anthropic-legacy"
    fail: bool = False


def extract_execute(call: object) -> RouteContext:
    """The extractor of docs/instrumenting.md, verbatim but for the job's field names."""
    job = call.args[0]  # type: ignore[attr-defined]
    stages = [LegacyStage(mechanism="role-dial", provider=job.provider, model=job.model)]
    return RouteContext(
        repo=job.repo,
        role=job.role,
        principal_id=job.loop,
        request_face=call.request_face,  # type: ignore[attr-defined]
        requirement=job.requirement,
        accounts=local_account_availability(),
        legacy_route=build_legacy_route(stages, call.request_face, job.account),  # type: ignore[attr-defined]
    )


class Runner:
    def execute(self, job: Job) -> tuple[str, int]:
        HOST_CALLS[0] += 1
        if job.fail:
            raise HostError(f"job {job.number} failed")
        return ("executed", job.number)


def complete(job: Job) -> tuple[str, int]:
    HOST_CALLS[0] += 1
    if job.fail:
        raise HostError(f"job {job.number} failed")
    return ("completed", job.number)


def stream(job: Job) -> Iterator[str]:
    HOST_CALLS[0] += 1
    for chunk in range(3):
        if job.fail and chunk == 2:
            raise HostError(f"job {job.number} failed mid-stream")
        yield f"{job.number}:{chunk}"


async def astream(job: Job) -> AsyncIterator[str]:
    HOST_CALLS[0] += 1
    for chunk in range(3):
        if job.fail and chunk == 2:
            raise HostError(f"job {job.number} failed mid-stream")
        yield f"{job.number}:{chunk}"


async def acomplete(job: Job) -> tuple[str, int]:
    HOST_CALLS[0] += 1
    if job.fail:
        raise HostError(f"job {job.number} failed")
    return ("acompleted", job.number)


def run(jobs: int = 10) -> list[object]:
    """One pass over every seam shape; each outcome (a result or the host's error, by repr) in order.

    Seam calls: 5 per job (``SEAM_CALLS_PER_JOB``).
    """
    import asyncio

    async def drain(job: Job) -> list[str]:
        return [chunk async for chunk in astream(job)]

    def calls(job: Job) -> list[Callable[[], object]]:
        return [
            lambda: Runner().execute(job),
            lambda: complete(job),
            lambda: list(stream(job)),
            lambda: asyncio.run(drain(job)),
            lambda: asyncio.run(acomplete(job)),
        ]

    outcomes: list[object] = []
    for number in range(jobs):
        for call in calls(Job(number, fail=number % 4 == 3)):
            try:
                outcomes.append(call())
            except HostError as exc:
                outcomes.append(("raised", type(exc).__name__, str(exc)))
    return outcomes


SEAM_CALLS_PER_JOB = 5
