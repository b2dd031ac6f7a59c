"""Answering the operator's questions from the decision chain alone, offline (ISSUE 7).

* :func:`~otel_route_shadow.analysis.report.build_report`: the divergence report;
* :func:`~otel_route_shadow.analysis.whatif.replay`: the what-if replay against a candidate snapshot;
* :func:`~otel_route_shadow.analysis.matrix.build_matrix`: the effective-route matrix;
* :func:`~otel_route_shadow.analysis.html.render_html`: the self-contained HTML report.

All three read the chain through one reader and filter (:mod:`~otel_route_shadow.analysis.records`),
and replay contexts through one memoised replayer (:mod:`~otel_route_shadow.analysis.replaying`).

Shell code: it reads the chain (``otel_route_shadow.chain``) and the policy store, and calls the
pure core. See ``docs/reports.md``.
"""

from otel_route_shadow.analysis.html import render_html
from otel_route_shadow.analysis.matrix import Matrix, MatrixAxes, build_matrix
from otel_route_shadow.analysis.report import Report, aggregate, build_report, format_report
from otel_route_shadow.analysis.source import (
    ChainAnalysisError,
    ChainStatus,
    EmptyChainError,
    MissingChainError,
    UnverifiedChainError,
    open_chain,
)
from otel_route_shadow.analysis.whatif import WhatIfResult, format_whatif, replay, replay_payloads
from otel_route_shadow.analysis.window import TimeWindow

__all__ = [
    "ChainAnalysisError",
    "ChainStatus",
    "EmptyChainError",
    "Matrix",
    "MatrixAxes",
    "MissingChainError",
    "Report",
    "TimeWindow",
    "UnverifiedChainError",
    "WhatIfResult",
    "aggregate",
    "build_matrix",
    "build_report",
    "format_report",
    "format_whatif",
    "open_chain",
    "render_html",
    "replay",
    "replay_payloads",
]
