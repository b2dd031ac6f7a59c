"""Which version of the GenAI conventions the seam spans follow, and the kind of each seam span.

As OpenTelemetry's contrib instrumentations do (``opentelemetry.instrumentation._semconv``), the
GenAI conventions in effect are chosen once, from ``OTEL_SEMCONV_STABILITY_OPT_IN`` (a comma-separated
list) when the first instrumentation of the process initialises it:

* by default, what the plugin has always emitted: semantic conventions v1.37.0, every seam span a
  CLIENT span (the conventions ask instrumentations not to change span kinds or names by default);
* with ``gen_ai_latest_experimental``, the newest: semantic conventions v1.44.0 and the GenAI
  conventions of open-telemetry/semantic-conventions-genai, where ``invoke_agent`` is a CLIENT span
  for a remote agent and an INTERNAL span for an agent running in the caller's process.

Per seam, under the newest conventions: an agentic seam is a remote agent (CLIENT), since the agent
runs in a CLI harness or a service outside the host's process, unless the host names the seam in
``OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS`` (its agent runs in the host's own process: INTERNAL); a
one-shot seam is an inference call (``chat``) to a provider, always CLIENT.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, NamedTuple

from opentelemetry.instrumentation._semconv import (
    _OpenTelemetrySemanticConventionStability,
    _OpenTelemetryStabilitySignalType,
    _StabilityMode,
)
from opentelemetry.trace import SpanKind

from otel_route_shadow.core import RequestFace
from otel_route_shadow.instrumentation.package import SCHEMA_URL

__all__ = ["LATEST_SCHEMA_URL", "Conventions", "gen_ai_conventions"]

LATEST_SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.44.0"
"""The schema of the newest conventions (``SCHEMA_URL``: the default ones)."""


class Conventions(NamedTuple):
    """The GenAI conventions one instrumentation follows."""

    latest: bool
    """``gen_ai_latest_experimental`` was opted into."""
    in_process_seams: frozenset[str] = frozenset()
    """Seams whose agent runs in the host's process."""

    @property
    def schema_url(self) -> str:
        return LATEST_SCHEMA_URL if self.latest else SCHEMA_URL

    def span_kind(self, seam: str, request_face: str) -> SpanKind:
        """INTERNAL for an in-process agent under the newest conventions; CLIENT otherwise."""
        if self.latest and request_face == RequestFace.AGENTIC.value and seam in self.in_process_seams:
            return SpanKind.INTERNAL
        return SpanKind.CLIENT


def gen_ai_conventions(in_process_seams: Collection[str] = ()) -> Conventions:
    """The process's GenAI conventions (``OTEL_SEMCONV_STABILITY_OPT_IN``, read once per process by
    the contrib helper every instrumentation shares)."""
    _OpenTelemetrySemanticConventionStability._initialize()  # type: ignore[no-untyped-call]
    mode = _OpenTelemetrySemanticConventionStability._get_opentelemetry_stability_opt_in_mode(
        _OpenTelemetryStabilitySignalType.GEN_AI
    )
    return Conventions(mode is _StabilityMode.GEN_AI_LATEST_EXPERIMENTAL, frozenset(in_process_seams))
