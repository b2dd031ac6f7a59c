"""Agreement over time: counts per small time bucket while streaming, merged for display into buckets
whose width follows the window (a run of minutes gets buckets of seconds, a month gets days).

While streaming, spawns and agreements are counted per *stored* bucket, 1 ms wide at first; when more
than :data:`STORED_BUCKETS_LIMIT` stored buckets exist, they are merged into the next width of
1 ms, 1 s, 1 min, 1 h, 1 day (each a multiple of the one before, so merging is exact), so memory stays
bounded whatever the chain's span. For display, :func:`coarsen` takes a width of :data:`LADDER_NS`
that is a multiple of the stored width and gives at most ``max_points`` buckets between the first and
the last spawn, at least two thirds of them holding spawns when a width allows it. Every bucket is
aligned to a multiple of its width since the epoch, so two reports over one chain line up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_route_shadow.analysis.tally import rate
from otel_route_shadow.analysis.window import format_ns

__all__ = [
    "LADDER_NS",
    "STORED_BUCKETS_LIMIT",
    "Timeline",
    "TimelinePoint",
    "coarsen",
    "width_label",
]

MS: Final = 1_000_000
SECOND: Final = 1_000 * MS
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE
DAY: Final = 24 * HOUR

_STORED_WIDTHS: Final = (MS, SECOND, MINUTE, HOUR, DAY)
STORED_BUCKETS_LIMIT: Final = 4096
"""Stored buckets before they are merged into the next stored width."""
_NO_FIRST: Final = 1 << 126

LADDER_NS: Final = (
    *(n * MS for n in (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    *(n * SECOND for n in (1, 2, 5, 10, 15, 30)),
    *(n * MINUTE for n in (1, 2, 5, 10, 15, 30)),
    *(n * HOUR for n in (1, 2, 3, 6, 12)),
    *(n * DAY for n in (1, 2, 7, 14, 30, 91, 365)),
)
"""The bucket widths a timeline may show, narrowest first."""


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


class Timeline:
    """Spawns and agreements per stored bucket, and the first and last start seen."""

    __slots__ = ("_first", "_last", "buckets", "width_ns")

    def __init__(self) -> None:
        self.buckets: dict[int, list[int]] = {}
        self.width_ns = _STORED_WIDTHS[0]
        self._first = _NO_FIRST
        self._last = -1

    @property
    def first_ns(self) -> int | None:
        return None if self._last < 0 else self._first

    @property
    def last_ns(self) -> int | None:
        return None if self._last < 0 else self._last

    def add(self, ns: int, agreed: bool) -> None:
        if ns < 0:
            return
        bucket = ns // self.width_ns
        slot = self.buckets.get(bucket)
        if slot is None:
            if len(self.buckets) >= STORED_BUCKETS_LIMIT and self.width_ns != _STORED_WIDTHS[-1]:
                self._widen()
                bucket = ns // self.width_ns
                slot = self.buckets.get(bucket)
            if slot is None:
                slot = self.buckets[bucket] = [0, 0]
        slot[0] += 1
        slot[1] += agreed
        if ns > self._last:  # noqa: PLR1730 - a comparison, not a call to max(), once per record
            self._last = ns
        if ns < self._first:  # noqa: PLR1730
            self._first = ns

    def _widen(self) -> None:
        wider = _STORED_WIDTHS[_STORED_WIDTHS.index(self.width_ns) + 1]
        self.buckets = _merge(self.buckets, self.width_ns, wider)
        self.width_ns = wider

    def absorb(self, other: Timeline) -> None:
        """Add ``other``'s buckets (both at the wider of the two widths)."""
        self.restore(other.width_ns, other.buckets, other._first, other._last)

    def state(self) -> tuple[int, dict[int, list[int]], int, int]:
        """``(width_ns, buckets, first, last)``, what :meth:`restore` takes."""
        return self.width_ns, self.buckets, self._first, self._last

    def restore(self, width_ns: int, buckets: Mapping[int, list[int]], first: int, last: int) -> None:
        """Add buckets of ``width_ns`` (one of the stored widths) and a first and last start."""
        if width_ns not in _STORED_WIDTHS:
            raise ValueError(f"not a stored bucket width: {width_ns}")
        while self.width_ns < width_ns:
            self._widen()
        theirs = _merge(buckets, width_ns, self.width_ns) if width_ns < self.width_ns else buckets
        for bucket, (spawns, agreed) in theirs.items():
            slot = self.buckets.setdefault(bucket, [0, 0])
            slot[0] += spawns
            slot[1] += agreed
        if last >= 0:
            self._first, self._last = min(self._first, first), max(self._last, last)

    def points(self, max_points: int = 48) -> tuple[int, list[TimelinePoint]]:
        return coarsen(self.buckets, self.width_ns, max_points)


def _merge(buckets: Mapping[int, list[int]], width_ns: int, wider_ns: int) -> dict[int, list[int]]:
    merged: dict[int, list[int]] = {}
    for bucket, (spawns, agreed) in buckets.items():
        slot = merged.setdefault(bucket * width_ns // wider_ns, [0, 0])
        slot[0] += spawns
        slot[1] += agreed
    return merged


def coarsen(
    buckets: Mapping[int, list[int]], width_ns: int, max_points: int = 48
) -> tuple[int, list[TimelinePoint]]:
    """Merge ``{bucket: [spawns, agreed]}`` (buckets ``width_ns`` wide) into at most ``max_points``
    buckets of one width of :data:`LADDER_NS`: the narrowest of those widths where at least two thirds
    of the buckets between the first and the last spawn hold spawns (a sparse chain gets wider buckets,
    not a comb of empty ones); the narrowest that fits when none is that full.

    Returns that width in nanoseconds and the non-empty buckets in time order.
    """
    if not buckets:
        return width_ns, []
    limit = max(max_points, 1)
    first, last = min(buckets) * width_ns, max(buckets) * width_ns
    fitting = [
        w for w in LADDER_NS if w >= width_ns and w % width_ns == 0 and last // w - first // w + 1 <= limit
    ] or [max(width_ns, LADDER_NS[-1])]
    chosen = fitting[0]
    for candidate in fitting:
        slots = last // candidate - first // candidate + 1
        if 3 * len({bucket * width_ns // candidate for bucket in buckets}) >= 2 * slots:
            chosen = candidate
            break
    merged = _merge(buckets, width_ns, chosen)
    points = [
        TimelinePoint(start_ns=bucket * chosen, spawns=spawns, agreed=agreed)
        for bucket, (spawns, agreed) in sorted(merged.items())
    ]
    return chosen, points


def width_label(width_ns: int) -> str:
    """``500ms``, ``10s``, ``5min``, ``1h``, ``7d``: a bucket width as people write it."""
    for unit, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (SECOND, "s"), (MS, "ms")):
        if width_ns >= unit and width_ns % unit == 0:
            return f"{width_ns // unit}{name}"
    return f"{width_ns}ns"
