"""The collector's test harness survives a port taken between choosing it and binding it: another process
on the machine (a parallel test run) took a port chosen free, and the gateway test failed with "address
already in use" instead of starting the collector again on fresh ports."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from .collector_proc import running_collector
from .conftest import load_stack_module

pytestmark = pytest.mark.e2e


def test_a_port_taken_after_it_was_chosen_free_starts_the_collector_again_on_fresh_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = load_stack_module()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    real = stack.free_port
    chosen: Iterator[int] = iter([port])

    def free_port() -> int:
        return next(chosen, None) or real()

    monkeypatch.setattr(stack, "free_port", free_port)
    try:
        with running_collector("otelcol.yaml", "http://127.0.0.1:9", tmp_path) as collector:
            assert port not in {
                int(url.rsplit(":", 1)[1].split("/")[0])
                for url in (
                    collector.otlp_http_endpoint,
                    collector.otlp_grpc_endpoint,
                    collector.prometheus_url,
                )
            }
            log = collector.log.read_text()
    finally:
        taken.close()
    assert "address already in use" in log  # the first start met the taken port
