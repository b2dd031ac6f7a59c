"""What this instrumentation declares: the libraries it instruments, and its tracer's scope and schema."""

from typing import Final

_instruments: tuple[str, ...] = ()
"""The seams are host code named by configuration: no third-party package is required (kept identical
to the ``instruments`` extra in ``pyproject.toml``)."""

SCOPE_NAME: Final = "otel_route_shadow.instrumentation"
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.37.0"
"""The schema of the default conventions (the newest, opted into: ``conventions.LATEST_SCHEMA_URL``)."""
