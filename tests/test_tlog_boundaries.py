"""The tlog package's place: what it may import, its settings, and its wiring into the plugin."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from otel_route_shadow.demo import factory
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn
from otel_route_shadow.instrumentation.config import RouteShadowConfig
from otel_route_shadow.logstore import read_note_file
from otel_route_shadow.logstore.consistency import verify_against_checkpoints
from otel_route_shadow.worker import WorkerName

TLOG = Path(__file__).resolve().parent.parent / "otel_route_shadow" / "tlog"
FORBIDDEN = (
    "otel_route_shadow.instrumentation",
    "otel_route_shadow.backend",
    "otel_route_shadow.analysis",
    "otel_route_shadow.cli",
    "opentelemetry",
)


@pytest.mark.parametrize("module", sorted(TLOG.glob("*.py")), ids=lambda p: p.name)
def test_tlog_imports_no_plugin_cli_or_opentelemetry(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert [n for n in names if n.startswith(FORBIDDEN)] == []
    assert not module.name.startswith("_") or module.name == "__init__.py"
    # No thread and no clock: the schedule lives in instrumentation.checkpointing.
    assert [n for n in names if n in ("threading", "time", "concurrent.futures.thread")] == []


def test_the_four_settings_come_from_the_environment_and_keywords_win(tmp_path: Path) -> None:
    env = {
        "OTEL_PYTHON_ROUTE_SHADOW_ORIGIN": "example.com/a",
        "OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY": str(tmp_path / "k"),
        "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS": "25",
        "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS": "2.5",
    }
    config = RouteShadowConfig.resolve(env)
    assert (config.origin, config.signing_key, config.checkpoint_records, config.checkpoint_seconds) == (
        "example.com/a",
        tmp_path / "k",
        25,
        2.5,
    )
    assert RouteShadowConfig.resolve(env, checkpoint_records=7).checkpoint_records == 7
    defaults = RouteShadowConfig.resolve({})
    assert (
        defaults.origin,
        defaults.signing_key,
        defaults.checkpoint_records,
        defaults.checkpoint_seconds,
    ) == (None, None, 1000, 10.0)
    with pytest.raises(ValueError, match="CHECKPOINT_RECORDS"):
        RouteShadowConfig.resolve({"OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS": "many"})


def test_the_plugin_checkpoints_as_it_goes_and_at_uninstrument(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=TracerProvider(),
        chain_path=chain,
        seams=(),
        checkpoint_records=4,
        origin="example.com/plugin",
    )
    try:
        runtime = instrumentor.runtime
        assert runtime is not None and runtime.checkpointer.origin == "example.com/plugin"
        made: list[tuple[int, str]] = []
        first = threading.Event()
        runtime.checkpointer.add_listener(
            lambda c: (made.append((c.size, threading.current_thread().name)), first.set())
        )
        for job in factory.plan_jobs(10, factory.FactorySettings()):
            with shadow_spawn(factory.context_for(job, "agentic"), seam="t"):
                pass
        assert first.wait(30)  # a hang guard only: due at record 4, made by the checkpointer's thread
        size, thread = made[0]
        assert 4 <= size <= 10 and thread == WorkerName.CHECKPOINTER
    finally:
        instrumentor.uninstrument()
    notes = read_note_file(os.fspath(chain) + ".tlog/checkpoints").notes
    report = verify_against_checkpoints(str(chain), notes, [])
    assert report.ok and report.checkpointed_size == report.chain_size == 10
    assert not report.authenticated  # unsigned: no key configured
    assert "\n\n" not in notes[-1]


def test_uninstrument_without_any_record_writes_nothing_and_logs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), chain_path=tmp_path / "c.jsonl", seams=())
    instrumentor.uninstrument()
    assert list(tmp_path.iterdir()) == []
    assert "checkpoint" not in caplog.text
