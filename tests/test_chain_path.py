"""A chain path that is not a regular file is refused before anything reads or writes it, and a FIFO
never blocks: the writer, the readers, verify and the plugin's exporter (which then records nothing
and says so in one log line)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from otel_route_shadow.chain import ChainPathError, DecisionChain, iter_records, read_head, verify_chain
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "chain.jsonl"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(30)
def test_a_fifo_is_refused_by_every_reader_and_the_writer_without_blocking(fifo: Path) -> None:
    with pytest.raises(ChainPathError, match="FIFO"):
        DecisionChain(fifo).append({"n": 1})
    with pytest.raises(ChainPathError):
        DecisionChain(fifo, lock_timeout=0.01).submit(_encoded())  # type: ignore[arg-type]
    with pytest.raises(ChainPathError):
        verify_chain(fifo)
    with pytest.raises(ChainPathError):
        read_head(fifo)
    with pytest.raises(ChainPathError):
        list(iter_records(fifo))


def _encoded() -> object:
    from otel_route_shadow.chain import encode_payload, sanitize_payload

    return encode_payload(*sanitize_payload({"n": 1}))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_the_exporter_refuses_a_path_that_is_not_a_regular_file_with_one_log_line(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = {"fifo": tmp_path / "chain.jsonl", "device": Path("/dev/zero"), "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        exporter = RouteShadowChainExporter(path, lock_timeout_ms=10)
        exporter.append(1, 2, 3, {"route_shadow.seam": "s"})
        exporter.append(1, 2, 4, {"route_shadow.seam": "s"})
    assert exporter.refused is not None
    lines = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow"]
    assert len(lines) == 1 and "records nothing" in lines[0]
    if kind == "fifo":
        assert path.exists() and not path.is_file()


def test_a_regular_file_and_a_missing_one_are_accepted(tmp_path: Path) -> None:
    assert RouteShadowChainExporter(tmp_path / "new" / "chain.jsonl").refused is None
    existing = tmp_path / "chain.jsonl"
    existing.write_bytes(b"")
    exporter = RouteShadowChainExporter(existing, lock_timeout_ms=10)
    assert exporter.refused is None
    exporter.append(1, 2, 3, {"route_shadow.seam": "s"})
    assert verify_chain(existing).records == 1


@pytest.mark.timeout(60)
def test_a_refused_chain_path_gets_no_checkpoint_folder_and_no_second_log_line_at_uninstrument(
    fifo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused at start means nothing is made beside the path: the way out (uninstrument, provider shutdown,
    exit) made ``<fifo>.tlog/lock`` and logged a checkpoint failure that 'will retry' (it never could)."""
    from opentelemetry.sdk.trace import TracerProvider

    from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route
    from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn

    stage = LegacyStage(mechanism="role-dial", provider="zai", model="glm-4.6")
    context = RouteContext(
        repo="acme/widgets", principal_id="adr_reviewer", request_face="agentic",
        legacy_route=build_legacy_route([stage], "agentic", "zai-legacy"),
    )
    instrumentor = RouteShadowInstrumentor()
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        instrumentor.instrument(tracer_provider=TracerProvider(), chain_path=str(fifo), checkpoint_records=1)
        try:
            with shadow_spawn(context, seam="run_agent") as record:
                assert record is not None  # shadowed: the span is made, only the chain is refused
        finally:
            instrumentor.uninstrument()
    assert sorted(os.listdir(fifo.parent)) == [fifo.name]
    lines = [r.getMessage() for r in caplog.records if r.name == "otel_route_shadow"]
    assert len(lines) == 1 and "records nothing" in lines[0], lines
