"""The spawn's duration, recorded by a real seam (real SDK, real chain) and read back per cohort."""

from __future__ import annotations

import time

from otel_route_shadow.analysis import build_report
from otel_route_shadow.analysis.latency import RELATIVE_ERROR
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import shadow_spawn
from otel_route_shadow.shadow import attributes as attr

from .conftest import Harness

HOST_RUN_S = 0.02
"""What the host's run takes at least (``time.sleep`` never returns early): a lower bound only."""


def test_a_seam_records_its_spawn_s_duration_and_the_report_gives_it_per_cohort(harness: Harness) -> None:
    jobs = factory.plan_jobs(12, factory.FactorySettings())
    for job in [*jobs, *jobs]:  # twice: the second time each decision comes from the runtime's memo
        with shadow_spawn(factory.context_for(job, "agentic"), seam="manual"):
            time.sleep(HOST_RUN_S)
    records = harness.records()
    spans = {span.context.span_id: span for span in harness.spans()}
    assert len(records) == 24
    for record in records:
        span = spans[int(record["span_id"], 16)]
        recorded = int(record["duration_ns"])
        # Measured from the span's start to the seam's finish, before the span ended.
        assert HOST_RUN_S * 1e9 <= recorded <= span.end_time - span.start_time
        assert int(record["start_time_unix_nano"]) == span.start_time
    report = build_report(harness.chain)
    assert report.cohorts and sum(cohort.latency.timed for _, cohort in report.cohorts) == 24
    mechanisms = {record["attributes"][attr.LEGACY_MECHANISM] for record in records}
    assert {key[0] for key, _ in report.cohorts} == mechanisms
    for _key, cohort in report.cohorts:
        assert cohort.latency.unknown == 0
        assert cohort.p99_ms is not None and cohort.p99_ms >= HOST_RUN_S * 1e3 * (1 - RELATIVE_ERROR)
    text_rows = report.as_dict()["cohorts"]["rows"]
    assert all(
        row["p99_latency_ms"] == cohort.p99_ms
        for row, (_, cohort) in zip(text_rows, report.cohorts, strict=True)
    )
