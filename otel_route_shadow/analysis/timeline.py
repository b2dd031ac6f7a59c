"""Agreement over time: counts per small time bucket while streaming, merged for display into buckets
whose width follows the window (a run of minutes gets buckets of seconds, a month gets days).

While streaming, spawns and agreements are counted per *stored* bucket, 1 ms wide at first; when more
than :data:`STORED_BUCKETS_LIMIT` stored buckets exist, they are merged into the next width of
1 ms, 1 s, 1 min, 1 h, 1 day (each a multiple of the one before, so merging is exact), so memory stays
bounded whatever the chain's span. For display, :meth:`Timeline.points` takes a width of
:data:`LADDER_NS` that is a multiple of the stored width and gives at most ``max_points`` buckets between
the first and the last spawn, at least two thirds of them holding spawns when a width allows it. Every bucket is
aligned to a multiple of its width since the epoch, so two reports over one chain line up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from otel_route_shadow.analysis.tally import rate
from otel_route_shadow.analysis.window import format_ns

__all__ = [
    "LADDER_NS",
    "STORED_BUCKETS_LIMIT",
    "Timeline",
    "TimelinePoint",
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
_SPAWN: Final = 1 << 64
"""A stored bucket is one whole number, ``spawns * _SPAWN + agreed`` (``agreed <= spawns``, so far below
``_SPAWN``): two buckets add up as numbers, and a dict of numbers is nothing for the garbage collector
to walk (a monitor holds a timeline per log of a fleet)."""

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
        self.buckets: dict[int, int] = {}
        """Per stored bucket, its spawns and agreements packed (:data:`_SPAWN`)."""
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
        buckets = self.buckets
        counts = buckets.get(bucket)
        if counts is None:
            if len(buckets) >= STORED_BUCKETS_LIMIT and self.width_ns != _STORED_WIDTHS[-1]:
                self._widen()
                bucket, buckets = ns // self.width_ns, self.buckets
            counts = buckets.get(bucket, 0)
        buckets[bucket] = counts + _SPAWN + agreed
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
        self._add(other.width_ns, other.buckets, other._first, other._last)

    def state(self) -> tuple[int, list[tuple[int, int, int]], int, int]:
        """``(width_ns, [(bucket, spawns, agreed), ...], first, last)``, what :meth:`restore` takes."""
        buckets = [(bucket, *divmod(counts, _SPAWN)) for bucket, counts in self.buckets.items()]
        return self.width_ns, buckets, self._first, self._last

    def restore(self, width_ns: int, buckets: Iterable[Sequence[int]], first: int, last: int) -> None:
        """Add ``(bucket, spawns, agreed)`` buckets of ``width_ns`` (one of the stored widths) and a
        first and last start; raises ``ValueError`` for a bucket no pass could have counted."""
        packed: dict[int, int] = {}
        for bucket, spawns, agreed in buckets:
            if agreed > spawns or spawns >= _SPAWN:
                raise ValueError("a timeline bucket with more agreements than spawns, or too many")
            packed[bucket] = packed.get(bucket, 0) + spawns * _SPAWN + agreed
        self._add(width_ns, packed, first, last)

    def _add(self, width_ns: int, buckets: Mapping[int, int], first: int, last: int) -> None:
        if width_ns not in _STORED_WIDTHS:
            raise ValueError(f"not a stored bucket width: {width_ns}")
        while self.width_ns < width_ns:
            self._widen()
        theirs = _merge(buckets, width_ns, self.width_ns) if width_ns < self.width_ns else buckets
        mine = self.buckets
        if not mine:
            self.buckets = dict(theirs)
        else:
            for bucket, counts in theirs.items():
                mine[bucket] = mine.get(bucket, 0) + counts
        if last >= 0:
            self._first, self._last = min(self._first, first), max(self._last, last)

    def points(self, max_points: int = 48) -> tuple[int, list[TimelinePoint]]:
        return _coarsen(self.buckets, self.width_ns, max_points)


def _merge(buckets: Mapping[int, int], width_ns: int, wider_ns: int) -> dict[int, int]:
    """Packed buckets merged into buckets ``wider_ns`` wide."""
    merged: dict[int, int] = {}
    for bucket, counts in buckets.items():
        wider = bucket * width_ns // wider_ns
        merged[wider] = merged.get(wider, 0) + counts
    return merged


def _coarsen(buckets: Mapping[int, int], width_ns: int, max_points: int) -> tuple[int, list[TimelinePoint]]:
    """Merge packed buckets (``width_ns`` wide, see :data:`_SPAWN`) into at most ``max_points``
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
        TimelinePoint(start_ns=bucket * chosen, spawns=counts // _SPAWN, agreed=counts % _SPAWN)
        for bucket, counts in sorted(merged.items())
    ]
    return chosen, points


def width_label(width_ns: int) -> str:
    """``500ms``, ``10s``, ``5min``, ``1h``, ``7d``: a bucket width as people write it."""
    for unit, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (SECOND, "s"), (MS, "ms")):
        if width_ns >= unit and width_ns % unit == 0:
            return f"{width_ns // unit}{name}"
    return f"{width_ns}ns"
