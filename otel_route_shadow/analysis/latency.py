"""The spawn's latency per cohort: a fixed log-bucket histogram of the records' ``duration_ns``.

A duration of ``v`` nanoseconds (``v >= 1``) is counted in bucket ``ceil(log(v) / log(GAMMA))``,
which holds the durations in ``(GAMMA**(i-1), GAMMA**i]``; a zero duration has a bucket of its own
(``ZERO_BUCKET``). A quantile is read as the bucket holding the nearest-rank value (the
``ceil(q * n)``-th smallest duration) and reported as ``2 * GAMMA**i / (1 + GAMMA)``, the value
whose relative distance to both ends of the bucket is :data:`RELATIVE_ERROR`: so the reported p99
is within ``RELATIVE_ERROR`` (about 0.99% with ``GAMMA = 1.02``) of the exact nearest-rank p99 of
the same durations, whatever their distribution (the DDSketch construction, without its collapsing).

The buckets are fixed, so two histograms merge by adding their counts per bucket, exactly: the
histogram of a fleet, or of a log followed by a monitor in several runs, is the histogram of all
its durations at once (merge = concatenation). Memory is one count per bucket used: at most about
2,200 buckets between 1 ns and :data:`MAX_DURATION_NS`.

A record without a readable ``duration_ns`` (written before durations were recorded, or damaged)
is counted as *unknown*: never as a zero, and in no quantile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "GAMMA",
    "MAX_DURATION_NS",
    "RELATIVE_ERROR",
    "LatencyHistogram",
    "duration_ns",
]

GAMMA: Final = 1.02
"""The ratio of a bucket's upper to its lower bound."""
RELATIVE_ERROR: Final = (GAMMA - 1) / (GAMMA + 1)
"""The largest relative error of a quantile read from the histogram, against the exact one."""
MAX_DURATION_NS: Final = 1 << 62
"""Above this (146 years) a duration is no clock's: counted as unknown."""
ZERO_BUCKET: Final = -1
_LOG_GAMMA: Final = math.log(GAMMA)
_DURATION_KEY: Final = "duration_ns"


def duration_ns(payload: dict[str, Any]) -> int:
    """The record's ``duration_ns`` (a decimal string) in nanoseconds, or -1 when it has none that
    reads as a duration."""
    value = payload.get(_DURATION_KEY)
    if value.__class__ is not str or not value.isdigit() or not value.isascii() or len(value) > 19:
        return -1
    ns = int(value)
    return ns if ns <= MAX_DURATION_NS else -1


def bucket(ns: int) -> int:
    """The bucket of a duration of ``ns >= 0`` nanoseconds."""
    return ZERO_BUCKET if ns == 0 else math.ceil(math.log(ns) / _LOG_GAMMA)


def bucket_value(index: int) -> float:
    """The value a quantile falling in bucket ``index`` is reported as (ns)."""
    return 0.0 if index == ZERO_BUCKET else 2 * GAMMA**index / (1 + GAMMA)


class LatencyHistogram:
    """Durations counted per fixed log bucket, and the records without one (``unknown``)."""

    __slots__ = ("counts", "timed", "unknown")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.timed = 0
        self.unknown = 0

    def add(self, ns: int) -> None:
        """Count one record's duration (:func:`duration_ns`; -1 counts as unknown)."""
        if ns < 0:
            self.unknown += 1
            return
        index = bucket(ns)
        self.counts[index] = self.counts.get(index, 0) + 1
        self.timed += 1

    def extend(self, durations: Iterable[int]) -> None:
        for ns in durations:
            self.add(ns)

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts (exact: the buckets are fixed)."""
        counts = self.counts
        for index, n in other.counts.items():
            counts[index] = counts.get(index, 0) + n
        self.timed += other.timed
        self.unknown += other.unknown

    def quantile(self, q: float) -> float | None:
        """The nearest-rank ``q`` quantile in ns, within :data:`RELATIVE_ERROR` of the exact one;
        None without a timed record."""
        if not self.timed:
            return None
        rank = max(math.ceil(q * self.timed), 1)
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return bucket_value(index)
        return None  # unreachable: the counts add up to ``timed``

    def state(self) -> dict[str, Any]:
        """The JSON form (a monitor's state): the used buckets and the unknown count."""
        return {"buckets": sorted(self.counts.items()), "unknown": self.unknown}

    @classmethod
    def restore(cls, buckets: Iterable[tuple[int, int]], unknown: int) -> LatencyHistogram:
        """The histogram of :meth:`state`; raises ``ValueError`` for a bucket no duration has."""
        histogram = cls()
        top = bucket(MAX_DURATION_NS)
        for index, n in buckets:
            if not (ZERO_BUCKET <= index <= top) or n < 1 or index in histogram.counts:
                raise ValueError("a latency bucket of the wrong shape")
            histogram.counts[index] = n
            histogram.timed += n
        histogram.unknown = unknown
        return histogram
