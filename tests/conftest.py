"""Shared test settings.

Hypothesis: the ``ci`` profile (no deadline, a modest number of examples) is loaded by default so
the whole suite stays fast and never flakes on a slow machine; ``HYPOTHESIS_PROFILE=thorough`` runs
many more examples locally.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("thorough", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The tests that touch the OpenTelemetry SDK, marked ``sdk``: every test of tests/plugin/, and of a test module
# that imports opentelemetry or the package's OpenTelemetry folders (instrumentation, demo). `make test` runs
# the whole suite against the newest SDK pyproject.toml states, then these again against the oldest.
_SDK_IMPORT = re.compile(
    r"^\s*(?:from|import)\s+(?:opentelemetry|otel_route_shadow\.(?:instrumentation|demo))\b", re.MULTILINE
)
_TESTS = Path(__file__).parent


@functools.cache
def touches_sdk(path: Path) -> bool:
    """Whether the test module at ``path`` touches the OpenTelemetry SDK (see above)."""
    if path.is_relative_to(_TESTS / "plugin"):
        return True
    return bool(_SDK_IMPORT.search(path.read_text(encoding="utf-8")))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if touches_sdk(item.path):
            item.add_marker(pytest.mark.sdk)


@pytest.fixture
def pread_bytes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every ``os.pread`` the test makes from here on (each read's bytes, in order): a bound on
    what a reader reads, counted rather than timed."""
    read: list[int] = []
    pread = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        data = pread(fd, length, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counted)
    return read
