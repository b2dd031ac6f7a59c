"""The trace backend as an independent witness of the decision chain.

``Witness`` is the interface (spans for a time window, optionally by attribute value); ``PhoenixWitness``
implements it over Phoenix's REST API with the standard library; ``cross_check`` holds the chain's seam
records against the witness's spans. ``otel-route-shadow audit`` wires them together.
"""

from __future__ import annotations

from otel_route_shadow.witness.base import (
    TimeWindow,
    Witness,
    WitnessError,
    WitnessNotFound,
    WitnessProtocolError,
    WitnessSpan,
    WitnessUnavailable,
    is_seam_span,
)
from otel_route_shadow.witness.crosscheck import CrossCheckReport, cross_check, summarize_chain
from otel_route_shadow.witness.phoenix import PhoenixWitness

__all__ = [
    "WITNESS_KINDS",
    "CrossCheckReport",
    "PhoenixWitness",
    "TimeWindow",
    "Witness",
    "WitnessError",
    "WitnessNotFound",
    "WitnessProtocolError",
    "WitnessSpan",
    "WitnessUnavailable",
    "cross_check",
    "is_seam_span",
    "summarize_chain",
]

#: Backends ``audit --backend-kind`` knows. Jaeger or Tempo slot in here.
WITNESS_KINDS: tuple[str, ...] = ("phoenix",)
