"""The trace backend as an independent holder of the decision chain.

``Backend`` is the interface (spans for a time window, optionally by attribute value); ``PhoenixBackend``
implements it over Phoenix's REST API with the standard library; ``cross_check`` holds the chain's seam
records against the backend's spans; ``backend_checkpoints`` reads the checkpoint spans back;
``audit_chain`` proves a chain against them (``verdict``: the verdicts and coverage; ``trust``: the
auditor's state for incremental audits). ``otel-route-shadow audit`` wires them together.
"""

from __future__ import annotations

from otel_route_shadow.backend.audit import AuditError, AuditOptions, Problem, audit_chain
from otel_route_shadow.backend.base import (
    Backend,
    BackendError,
    BackendNotFound,
    BackendNotPhoenix,
    BackendProtocolError,
    BackendSpan,
    BackendUnavailable,
    QueryWindow,
    format_unix_nano,
    is_checkpoint_span,
    is_seam_span,
    parse_time,
)
from otel_route_shadow.backend.checkpoints import BackendCheckpoint, backend_checkpoints
from otel_route_shadow.backend.crosscheck import MISSING, CrossCheckReport, cross_check, summarize_chain
from otel_route_shadow.backend.phoenix import PhoenixBackend, api_key_problem
from otel_route_shadow.backend.trust import Trusted, TrustState, TrustStateError
from otel_route_shadow.backend.verdict import AuditReport, AuditVerdict, Consistency, Failure, Thresholds

__all__ = [
    "BACKEND_KINDS",
    "MISSING",
    "AuditError",
    "AuditOptions",
    "AuditReport",
    "AuditVerdict",
    "Backend",
    "BackendCheckpoint",
    "BackendError",
    "BackendNotFound",
    "BackendNotPhoenix",
    "BackendProtocolError",
    "BackendSpan",
    "BackendUnavailable",
    "Consistency",
    "CrossCheckReport",
    "Failure",
    "PhoenixBackend",
    "Problem",
    "QueryWindow",
    "Thresholds",
    "TrustState",
    "TrustStateError",
    "Trusted",
    "api_key_problem",
    "audit_chain",
    "backend_checkpoints",
    "cross_check",
    "format_unix_nano",
    "is_checkpoint_span",
    "is_seam_span",
    "parse_time",
    "summarize_chain",
]

#: Backends ``audit --backend-kind`` knows. Jaeger or Tempo slot in here.
BACKEND_KINDS: tuple[str, ...] = ("phoenix",)
