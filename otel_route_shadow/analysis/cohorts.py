"""Per cohort (legacy mechanism and the route it ran), the figures a migration is judged on: the
consistency rate (the shadow decision agreeing with the route that ran, as the report counts
agreement), the spawn's p99 latency and the error rate, each rate with its Wilson 95% interval.

The latency is the records' ``duration_ns`` (the spawn's, from its span's start to the seam's
finish), counted in a mergeable log-bucket histogram (:mod:`~otel_route_shadow.analysis.latency`):
the p99 is within 1% of the exact one, and a record written before durations were recorded is
counted as unknown, never as a zero. The only error a record holds is the shadow path's own (``route_shadow.error.type`` on an observation that has no
decision: the spawn went ahead), so the error rate is the shadow path's, over every observation of
the cohort. The host's own exception (``error.type``) is not written to the chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.latency import RELATIVE_ERROR, LatencyHistogram
from otel_route_shadow.analysis.tally import interval, rate
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "COHORT_ATTRIBUTES",
    "COHORT_DEFINITION",
    "ERROR_NOTE",
    "LATENCY_NOTE",
    "Cohort",
    "cohort_key",
    "cohorts_dict",
]

COHORT_ATTRIBUTES: Final = (attr.LEGACY_MECHANISM, attr.LEGACY_PROVIDER, attr.LEGACY_MODEL, attr.TRANSPORT)
"""A cohort: the legacy mechanism, and the legacy route (provider, model, transport) it ran."""
COHORT_DEFINITION: Final = (
    "per legacy mechanism and the route it ran (provider, model, transport): consistency_rate = spawns "
    "whose shadow decision agrees with the route that ran / spawns; shadow_error_rate = observations "
    "whose shadow path failed / all observations; each with its Wilson 95% interval"
)
LATENCY_NOTE: Final = (
    "the spawn's duration (its span's start to the seam's finish, the record's duration_ns), p99 by "
    f"nearest rank from a log-bucket histogram (within {RELATIVE_ERROR:.2%} of the exact p99); spawns "
    "whose record has no duration (written before durations were recorded) are counted as unknown, "
    "never as zero"
)
ERROR_NOTE: Final = (
    "the shadow path's errors (route_shadow.error.type on an observation without a decision; the spawn "
    "went ahead); the host's own exception (error.type) is not written to the chain"
)


def cohort_key(attributes: dict[str, Any]) -> tuple[Any, ...]:
    """The cohort of an observation's attributes; an unhashable value (one no exporter writes) counts
    as absent."""
    values = tuple(map(attributes.get, COHORT_ATTRIBUTES))
    try:
        hash(values)
    except TypeError:
        return tuple(value if isinstance(value, str) else None for value in values)
    return values


@dataclass(slots=True)
class Cohort:
    """One cohort's counts: decided spawns, those that agreed, shadow-path errors, and the decided
    spawns' durations."""

    spawns: int = 0
    agreed: int = 0
    errors: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def absorb(self, other: Cohort) -> None:
        """Add ``other``'s counts and durations (another log's of the same cohort)."""
        self.spawns += other.spawns
        self.agreed += other.agreed
        self.errors += other.errors
        self.latency.merge(other.latency)

    @property
    def p99_ms(self) -> float | None:
        """The p99 duration in milliseconds (3 decimals), None without a timed spawn."""
        p99 = self.latency.quantile(0.99)
        return None if p99 is None else round(p99 / 1e6, 3)

    def as_dict(self, key: tuple[Any, ...]) -> dict[str, Any]:
        observed = self.spawns + self.errors
        return {
            "mechanism": key[0],
            "route": {"provider": key[1], "model": key[2], "transport": key[3]},
            "spawns": self.spawns,
            "agreed": self.agreed,
            "consistency_rate": rate(self.agreed, self.spawns),
            "consistency_interval": interval(self.agreed, self.spawns),
            "p99_latency_ms": self.p99_ms,
            "latency_timed": self.latency.timed,
            "latency_unknown": self.latency.unknown,
            "shadow_errors": self.errors,
            "shadow_error_rate": rate(self.errors, observed),
            "shadow_error_interval": interval(self.errors, observed),
        }


def cohorts_dict(cohorts: list[tuple[tuple[Any, ...], Cohort]]) -> dict[str, Any]:
    """The JSON form of the report's cohorts."""
    return {
        "definition": COHORT_DEFINITION,
        "latency": LATENCY_NOTE,
        "errors": ERROR_NOTE,
        "rows": [cohort.as_dict(key) for key, cohort in cohorts],
    }
