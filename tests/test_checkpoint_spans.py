"""Checkpoint spans: each checkpoint leaves the process over OTLP whatever the sampler keeps, through
the SDK's batch processor (a forked host too), never holding up the writer; a failed export is logged
once."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from plugin.conftest import make_harness

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import checkpoint_spans as cs
from otel_route_shadow.instrumentation.checkpointing import ScheduledCheckpointer
from otel_route_shadow.logstore import Checkpointer, SignedCheckpoint
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.tlog import Signer
from otel_route_shadow.worker import WorkerName

ORIGIN = "example.test/route-shadow/spans"


class FlakyExporter(SpanExporter):
    """Fails the first ``failures`` exports; can be held (blocked) until released."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.batches: list[list[ReadableSpan]] = []
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait()
        self.batches.append(list(spans))
        if self.failures:
            self.failures -= 1
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _checkpoint(size: int) -> SignedCheckpoint:
    root = bytes([size % 256]) * 32
    text = f"{ORIGIN}\n{size}\n{'A' * 43}=\n"
    return SignedCheckpoint(ORIGIN, size, root, text, False, None)


def _sizes(spans: Sequence[ReadableSpan]) -> list[int]:
    return [int(s.attributes[cpa.SIZE]) for s in spans if s.attributes]  # type: ignore[arg-type]


def _dispatch(n: int) -> None:
    for job in factory.plan_jobs(n, factory.FactorySettings()):
        factory.dispatch(job)


def test_no_checkpoint_key_is_a_prefix_of_another_span_key() -> None:
    keys = [spec.key for spec in attr.ATTRIBUTES] + [
        cpa.ORIGIN,
        cpa.SIZE,
        cpa.ROOT,
        cpa.NOTE,
        cpa.SIGNED,
        cpa.KEY_NAME,
    ]
    assert len(set(keys)) == len(keys)
    assert [(a, b) for a in keys for b in keys if a != b and b.startswith(a)] == []


def test_each_checkpoint_becomes_one_span_with_its_attributes_and_the_host_resource(tmp_path: Path) -> None:
    """A host sampler that drops everything does not matter: the checkpoint spans have their own."""
    host = TracerProvider(sampler=ALWAYS_OFF, resource=Resource.create({"openinference.project.name": "p1"}))
    exporter = InMemorySpanExporter()
    chain = tmp_path / "chain.jsonl"
    signer = Signer.generate(ORIGIN)
    checkpointer = ScheduledCheckpointer(
        Checkpointer(str(chain), ORIGIN, signer), 5, 3600.0, background=False
    )
    emitter = cs.attach_checkpoint_spans(checkpointer, host, exporter)
    assert emitter is not None
    with DecisionChain(chain, listener=checkpointer.line_written) as log:
        for i in range(12):
            log.append({"kind": "route-shadow", "i": i})
    checkpointer.checkpoint_now()
    assert emitter.flush(30)
    spans = exporter.get_finished_spans()
    assert _sizes(spans) == [5, 10, 12]
    last = spans[-1]
    assert last.name == cpa.SPAN_NAME and last.context is not None and last.context.trace_flags.sampled
    assert last.resource.attributes["openinference.project.name"] == "p1"
    assert last.attributes is not None
    assert last.attributes[cpa.ORIGIN] == ORIGIN and last.attributes[cpa.SIGNED] is True
    assert last.attributes[cpa.KEY_NAME] == ORIGIN
    note = str(last.attributes[cpa.NOTE])
    assert note.startswith(f"{ORIGIN}\n12\n{last.attributes[cpa.ROOT]}\n\n\u2014 {ORIGIN} ")
    assert signer.secret_string() not in repr(dict(last.attributes))  # the key never leaves
    emitter.close()


def test_a_failed_export_is_logged_once_and_the_next_checkpoint_still_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = FlakyExporter(failures=2)
    emitter = cs.CheckpointSpans(exporter, Resource.create({}))
    for size in (10, 20, 30):
        emitter(_checkpoint(size))
        assert emitter.flush(30)
    assert [_sizes(b) for b in exporter.batches] == [[10], [20], [30]]
    assert emitter.failed_exports == 2
    assert len([r for r in caplog.records if "checkpoint span export failed" in r.getMessage()]) == 1
    assert emitter.close(30)


def test_the_writer_never_waits_for_the_network_and_the_queue_is_bounded() -> None:
    exporter = FlakyExporter()
    exporter.release.clear()  # the backend hangs
    emitter = cs.CheckpointSpans(exporter, Resource.create({}), max_pending=4)
    emitter(_checkpoint(1))
    stuck = threading.Thread(target=emitter.flush, daemon=True)
    stuck.start()
    assert exporter.entered.wait(30)  # an export of [1] is stuck inside the exporter ...
    for size in range(2, 12):
        emitter(_checkpoint(size))  # ... and every call still returns
    exporter.release.set()
    stuck.join(30)
    assert emitter.flush(30)
    # 10 checkpoints into a queue of 4 while [1] was out: the 6 oldest were dropped.
    assert sorted(size for b in exporter.batches for size in _sizes(b)) == [1, 8, 9, 10, 11]
    assert emitter.close(30)


def test_close_waits_at_most_its_timeout_for_a_backend_that_does_not_answer() -> None:
    exporter = FlakyExporter()
    exporter.release.clear()
    emitter = cs.CheckpointSpans(exporter, Resource.create({}))
    emitter(_checkpoint(3))
    assert emitter.close(timeout_s=0.01) is False  # the export is stuck: close returned anyway
    assert exporter.entered.wait(30)
    exporter.release.set()
    for thread in threading.enumerate():
        if thread.name == WorkerName.CHECKPOINT_SPANS:
            thread.join(30)
            assert not thread.is_alive()
    assert [_sizes(b) for b in exporter.batches] == [[3]]  # the last export went out
    emitter(_checkpoint(4))  # after close: ignored, never raises
    assert [_sizes(b) for b in exporter.batches] == [[3]]


def test_a_forked_host_sends_its_checkpoint_spans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint spans' own worker thread did not survive a fork, so a forked host's checkpoint
    spans never left it (``flush`` gave up after its timeout). The child here makes seam calls, a
    checkpoint and a flush, and reports what its copy of the in-memory exporter received."""
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(cs, "exporter_from_environment", lambda: exporter)
    h = make_harness(tmp_path, origin=ORIGIN)
    try:
        runtime = h.instrumentor.runtime
        assert runtime is not None and runtime.checkpoint_spans is not None
        _dispatch(3)
        runtime.checkpoint_now()
        assert runtime.checkpoint_spans.flush(30)  # the parent's own checkpoint, before the fork
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            code = 1
            try:
                os.close(read_end)
                _dispatch(2)
                runtime.checkpoint_now()
                flushed = runtime.checkpoint_spans.flush(30)
                report = {"flushed": flushed, "sizes": _sizes(exporter.get_finished_spans())}
                os.write(write_end, json.dumps(report).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            report = json.loads(pipe.read() or b"null")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert report == {"flushed": True, "sizes": [3, 5]}
        assert _sizes(exporter.get_finished_spans()) == [3]  # the parent's copy saw only its own
    finally:
        h.instrumentor.uninstrument()
        h.provider.shutdown()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "http"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, "http"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "http"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, None),
    ],
)
def test_the_exporter_comes_from_the_users_own_otlp_settings(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str | None
) -> None:
    for name in (
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    exporter = cs.exporter_from_environment()
    if expected is None:
        assert exporter is None
    else:
        assert type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.http")
        assert exporter is not None
        exporter.shutdown()


def test_no_checkpointer_or_no_otlp_means_no_emitter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert cs.attach_checkpoint_spans(None, None, InMemorySpanExporter()) is None
    scheduled = ScheduledCheckpointer(Checkpointer(str(tmp_path / "c.jsonl"), ORIGIN))
    assert cs.attach_checkpoint_spans(scheduled, None) is None
