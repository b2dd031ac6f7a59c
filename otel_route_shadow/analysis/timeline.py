"""Agreement over time: hourly counts while streaming, coarsened into a few buckets for display."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_route_shadow.analysis.tally import rate
from otel_route_shadow.analysis.window import format_ns

__all__ = ["HOUR_NS", "TimelinePoint", "coarsen"]

HOUR_NS: Final = 3_600 * 1_000_000_000
_LADDER_HOURS: Final = (1, 2, 3, 6, 12, 24, 48, 24 * 7, 24 * 14, 24 * 30, 24 * 91, 24 * 365)


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    start_ns: int
    spawns: int
    agreed: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": format_ns(self.start_ns),
            "spawns": self.spawns,
            "agreed": self.agreed,
            "agreement_rate": rate(self.agreed, self.spawns),
        }


def coarsen(hours: Mapping[int, list[int]], max_points: int = 48) -> tuple[int, list[TimelinePoint]]:
    """Merge hourly ``{hour: [spawns, agreed]}`` into at most ``max_points`` buckets.

    Returns the bucket width in hours and the non-empty buckets in time order. Buckets are aligned
    to multiples of their width since the epoch, so two reports over the same chain line up.
    """
    if not hours:
        return 1, []
    first, last = min(hours), max(hours)
    width = _LADDER_HOURS[-1]
    for candidate in _LADDER_HOURS:
        if (last // candidate) - (first // candidate) + 1 <= max_points:
            width = candidate
            break
    merged: dict[int, list[int]] = {}
    for hour, (spawns, agreed) in hours.items():
        slot = merged.setdefault(hour // width, [0, 0])
        slot[0] += spawns
        slot[1] += agreed
    points = [
        TimelinePoint(start_ns=bucket * width * HOUR_NS, spawns=spawns, agreed=agreed)
        for bucket, (spawns, agreed) in sorted(merged.items())
    ]
    return width, points
