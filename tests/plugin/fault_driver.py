"""Runs ``readme_host`` bare, then instrumented under one fault, in a process of its own.

Usage: ``python fault_driver.py '<json>'`` with ``fault``, ``workdir`` and ``jobs``; the settings come
from ``OTEL_PYTHON_ROUTE_SHADOW_*`` in the environment (the documented way). Prints one JSON line:
the two runs' outcomes compared, the spans and records made, the contained errors, and what the
shadow path did that could make the host wait (blocking ``flock`` calls, ``time.sleep`` calls, file
opens), counted rather than timed.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_route_shadow.chain import iter_payloads
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, RouteShadowSpanProcessor
from otel_route_shadow.shadow import attributes as attr
from tests.plugin import readme_host

NOBODY = 65534


class Counters:
    """What could make a spawn wait, counted: blocking file locks, sleeps, file opens."""

    def __init__(self) -> None:
        self.blocking_locks = 0
        self.sleeps = 0
        self.opens = 0
        self.host_calls = 0

    def install(self, stack: list[Any]) -> None:
        real_flock, real_open = fcntl.flock, os.open

        def flock(fd: Any, operation: int) -> None:
            if operation & (fcntl.LOCK_SH | fcntl.LOCK_EX) and not operation & fcntl.LOCK_NB:
                self.blocking_locks += 1
            return real_flock(fd, operation)

        def sleep(seconds: float) -> None:
            self.sleeps += 1

        def open_(*args: Any, **kwargs: Any) -> int:
            self.opens += 1
            return real_open(*args, **kwargs)

        for patch in (
            mock.patch.object(fcntl, "flock", flock),
            mock.patch.object(time, "sleep", sleep),
            mock.patch.object(os, "open", open_),
        ):
            patch.start()
            stack.append(patch)


def drop_root() -> None:
    """Permissions do not bind root: the faults that need them run as nobody."""
    if os.geteuid() == 0:
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def toggled_run(jobs: int) -> tuple[list[object], int]:
    """The kill switch set for the first half of the jobs and unset for the second, live."""
    os.environ["OTEL_PYTHON_ROUTE_SHADOW_DISABLED"] = "true"
    first = readme_host.run(jobs // 2)
    os.environ.pop("OTEL_PYTHON_ROUTE_SHADOW_DISABLED")
    second = readme_host.run(jobs - jobs // 2)
    return first + second, (jobs - jobs // 2) * readme_host.SEAM_CALLS_PER_JOB


def _boom(*args: Any, **kwargs: Any) -> None:
    raise TypeError("a bug in the route-shadow processor")


def main() -> None:
    spec = json.loads(sys.argv[1])
    fault, jobs = spec["fault"], spec["jobs"]
    chain = Path(os.environ.get("OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH", "route-shadow/chain.jsonl"))
    asyncio.run(asyncio.sleep(0))  # import everything lazy before a fault takes rights away
    bare = readme_host.run(jobs)
    if fault == "kill-switch-toggled":
        bare = readme_host.run(jobs // 2) + readme_host.run(jobs - jobs // 2)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=provider)

    counters, patches = Counters(), []
    if spec.get("non_root"):
        drop_root()
    if fault == "file-size-limit":
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    if fault.startswith("processor-bug"):
        hook = "on_start" if fault == "processor-bug-before-host" else "on_end"
        patch = mock.patch.object(RouteShadowSpanProcessor, hook, _boom)
        patch.start()
        patches.append(patch)
    counters.install(patches)
    expected_calls = jobs * readme_host.SEAM_CALLS_PER_JOB
    raised: list[str] = []
    if fault == "kill-switch-toggled":
        shadowed, expected_calls = toggled_run(jobs)
    elif fault == "processor-bug-before-host":
        shadowed, before = [], readme_host.HOST_CALLS[0]
        try:
            readme_host.complete(readme_host.Job(0))
        except TypeError as exc:
            raised.append(type(exc).__name__)
        expected_calls = readme_host.HOST_CALLS[0] - before  # the host must not have run
    else:
        shadowed = readme_host.run(jobs)
    for patch in reversed(patches):
        patch.stop()

    runtime = instrumentor.runtime
    errors = {f"{where}:{name}": n for (where, name), n in (runtime.errors if runtime else {}).items()}
    instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    try:
        records = [p for _, p in iter_payloads(chain) if p.get("kind") == "route-shadow"]
    except Exception as exc:  # the fault may leave no readable chain: that is what is reported
        records, chain_error = [], type(exc).__name__
    else:
        chain_error = None
    print(
        json.dumps(
            {
                "same": shadowed == bare,
                "expected_calls": expected_calls,
                "spans": len(spans),
                "span_error_types": sorted({str(s.attributes.get(attr.ERROR_TYPE)) for s in spans}),
                "span_reasons": sorted({str(s.attributes.get(attr.REASON)) for s in spans}),
                "records": len(records),
                "record_error_types": sorted({str(r["attributes"].get(attr.ERROR_TYPE)) for r in records}),
                "chain_error": chain_error,
                "errors": errors,
                "refused": instrumentor.refused,
                "raised": raised,
                "blocking_locks": counters.blocking_locks,
                "sleeps": counters.sleeps,
                "opens": counters.opens,
            }
        )
    )


if __name__ == "__main__":
    main()
