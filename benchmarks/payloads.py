"""Realistic chain payloads, produced by the plugin's own code path.

A few hundred distinct route contexts from the demo factory's world (its loops, its four legacy
mechanisms, more repositories, the credit failover on and off) go through
``otel_route_shadow.shadow.record.observe`` against the demo policy snapshot, and each observation
becomes a payload with ``record_payload`` exactly as the chain exporter builds it. A large chain repeats
them with fresh trace ids, span ids and start times.
"""

from __future__ import annotations

import json
import random
from importlib import resources
from typing import Any

from otel_route_shadow.core import PolicySnapshot, RouteContext, RoutingPolicy, parse_policies

EXTRA_REPOS = tuple(f"acme/service-{i:02d}" for i in range(60)) + tuple(f"acme-tools-{i}" for i in range(6))

START_NS = 1_790_000_000_000_000_000
"""First record's start time (2026-09-21); records are 50 ms apart, give or take."""


def demo_policies() -> list[RoutingPolicy]:
    """The embedded demo policy set (``otel_route_shadow/demo/policies.json``)."""
    text = resources.files("otel_route_shadow.demo").joinpath("policies.json").read_text("utf-8")
    document = json.loads(text)
    policies, problems = parse_policies(document["policies"])
    if problems:
        raise ValueError(f"demo policies do not parse: {[p.message for p in problems]}")
    return policies


def distinct_contexts(n: int) -> list[tuple[str, RouteContext]]:
    """``(seam, context)`` for ``n`` distinct spawns of the demo factory's world."""
    from otel_route_shadow.demo import factory

    faces = {name: face for name, (_, face) in factory.SEAMS.items()}
    repos = (*factory.REPOS, *EXTRA_REPOS)
    out: list[tuple[str, RouteContext]] = []
    seen: set[str] = set()
    number = 0
    for repo in repos:
        for exhausted in (False, True):
            settings = factory.FactorySettings()
            settings.credit_exhausted = exhausted
            for loop in factory.LOOPS:
                job = factory.Job(
                    number=number,
                    loop=loop,
                    repo=repo,
                    stages=factory.legacy_stages(loop, repo, settings),
                    accounts=factory.accounts_for(settings),
                )
                number += 1
                context = factory.context_for(job, faces[loop.seam])
                key = context.model_dump_json()
                if key in seen:
                    continue
                seen.add(key)
                out.append((loop.seam, context))
                if len(out) >= n:
                    return out
    return out


def distinct_payloads(snapshot: PolicySnapshot, n: int, snapshot_state: str = "ok") -> list[dict[str, Any]]:
    """One payload per distinct context, from ``observe`` + ``record_payload`` (ids filled later)."""
    from otel_route_shadow.shadow.record import observe, record_payload

    payloads = []
    for seam, context in distinct_contexts(n):
        record = observe(seam, context, snapshot, snapshot_state)
        payloads.append(record_payload(0, 0, 0, record.attributes))
    return payloads


def stamp(template: dict[str, Any], rng: random.Random, index: int) -> dict[str, Any]:
    """A copy of ``template`` with a fresh trace id, span id and start time (index-th record)."""
    payload = dict(template)
    payload["trace_id"] = f"{rng.getrandbits(128):032x}"
    payload["span_id"] = f"{rng.getrandbits(64):016x}"
    payload["start_time_unix_nano"] = str(START_NS + index * 50_000_000 + rng.randrange(1_000_000))
    return payload
