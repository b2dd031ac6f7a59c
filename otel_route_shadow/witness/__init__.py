"""The trace backend as an independent witness of the decision chain.

``Witness`` is the interface (spans for a time window, optionally by attribute value); ``PhoenixWitness``
implements it over Phoenix's REST API with the standard library; ``cross_check`` holds the chain's seam
records against the witness's spans; ``witnessed_checkpoints`` reads the checkpoint spans back;
``audit_chain`` proves a chain against them (``verdict``: the verdicts and coverage; ``trust``: the
auditor's state for incremental audits). ``otel-route-shadow audit`` wires them together.
"""

from __future__ import annotations

from otel_route_shadow.witness.audit import AuditError, AuditOptions, Problem, audit_chain
from otel_route_shadow.witness.base import (
    TimeWindow,
    Witness,
    WitnessError,
    WitnessNotFound,
    WitnessNotPhoenix,
    WitnessProtocolError,
    WitnessSpan,
    WitnessUnavailable,
    is_checkpoint_span,
    is_seam_span,
)
from otel_route_shadow.witness.checkpoints import WitnessedCheckpoint, witnessed_checkpoints
from otel_route_shadow.witness.crosscheck import CrossCheckReport, cross_check, summarize_chain
from otel_route_shadow.witness.phoenix import PhoenixWitness
from otel_route_shadow.witness.trust import Trusted, TrustState, TrustStateError
from otel_route_shadow.witness.verdict import AuditReport, Consistency, Failure, Thresholds, Verdict

__all__ = [
    "WITNESS_KINDS",
    "AuditError",
    "AuditOptions",
    "AuditReport",
    "Consistency",
    "CrossCheckReport",
    "Failure",
    "PhoenixWitness",
    "Problem",
    "Thresholds",
    "TimeWindow",
    "TrustState",
    "TrustStateError",
    "Trusted",
    "Verdict",
    "Witness",
    "WitnessError",
    "WitnessNotFound",
    "WitnessNotPhoenix",
    "WitnessProtocolError",
    "WitnessSpan",
    "WitnessUnavailable",
    "WitnessedCheckpoint",
    "audit_chain",
    "cross_check",
    "is_checkpoint_span",
    "is_seam_span",
    "summarize_chain",
    "witnessed_checkpoints",
]

#: Backends ``audit --backend-kind`` knows. Jaeger or Tempo slot in here.
WITNESS_KINDS: tuple[str, ...] = ("phoenix",)
