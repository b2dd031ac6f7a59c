"""``--since`` / ``--until``: ISO-8601 timestamps or dates, compared against ``start_time_unix_nano``.

Rules (documented in ``docs/reports.md``):

* a timestamp without an offset is UTC;
* ``--since`` is inclusive; ``--until`` is exclusive for a timestamp, and a bare date given to
  ``--until`` means the whole of that day (the bound becomes the next midnight, UTC);
* a bare date given to ``--since`` means that day's midnight, UTC;
* a bound before the epoch or after 9999-12-30T00:00:00Z is refused (a date cannot be written for it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

__all__ = ["TimeWindow", "WindowError", "format_ns", "parse_bound"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST = datetime(9999, 12, 30, tzinfo=UTC)
_NS_PER_US = 1_000
_FRACTION = re.compile(r"(:\d\d[.,])(\d{7,})")
"""A fraction of a second finer than ``datetime`` holds (microseconds): its digits past the sixth."""


class WindowError(ValueError):
    """A ``--since``/``--until`` value that is not an ISO-8601 date or timestamp."""


def _to_ns(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * _NS_PER_US


def parse_bound(text: str, *, upper: bool = False) -> int:
    """Nanoseconds since the epoch for an ISO-8601 date or timestamp (see the module rules)."""
    moment, extra_ns = _moment(text, upper=upper)
    ns = _to_ns(moment) + extra_ns
    if not 0 <= ns <= _to_ns(_LAST):
        shown = text.strip()
        day = ": an upper bound's date ends at its next midnight, so the last is 9999-12-29"
        raise WindowError(
            f"{shown[:40]!r} is outside 1970-01-01 .. 9999-12-30 (UTC){day if upper and ns > 0 and len(shown) == 10 else ''}"
        )
    return ns


def _moment(text: str, *, upper: bool) -> tuple[datetime, int]:
    """The moment to the microsecond, and the nanoseconds past it (a bound given to the nanosecond,
    as the reports print a record's start, is kept exact, not cut to the microsecond)."""
    raw = text.strip()
    if not raw:
        raise WindowError("empty time bound")
    if len(raw) == 10 and raw[4] == "-" and raw[7] == "-":
        try:
            day = date.fromisoformat(raw)
        except ValueError:
            raise WindowError(f"{text!r} is not an ISO-8601 date (YYYY-MM-DD)") from None
        midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
        return (midnight + timedelta(days=1) if upper and day < date.max else midnight), 0
    candidate = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    extra_ns = 0
    fine = _FRACTION.search(candidate)
    if fine is not None and len(fine.group(2)) <= 9:
        extra_ns = int(fine.group(2)[6:].ljust(3, "0"))
        candidate = candidate[: fine.start(2)] + fine.group(2)[:6] + candidate[fine.end(2) :]
    elif fine is not None:
        raise WindowError(f"{text!r} is finer than a nanosecond (at most 9 digits after the seconds)")
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError:
        raise WindowError(
            f"{text!r} is not an ISO-8601 timestamp or date (e.g. 2026-08-22 or 2026-08-22T14:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment, extra_ns


def format_ns(ns: int) -> str:
    """An ISO-8601 UTC rendering of nanoseconds since the epoch (to the second when exact)."""
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = _EPOCH + timedelta(seconds=seconds)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if rest:
        text += f".{rest:09d}".rstrip("0")
    return text + "Z"


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open interval ``[since_ns, until_ns)`` over span start times; None means unbounded."""

    since_ns: int | None = None
    until_ns: int | None = None

    @classmethod
    def parse(cls, since: str | None, until: str | None) -> TimeWindow:
        window = cls(
            since_ns=parse_bound(since) if since else None,
            until_ns=parse_bound(until, upper=True) if until else None,
        )
        if window.since_ns is not None and window.until_ns is not None and window.until_ns <= window.since_ns:
            raise WindowError(f"empty time window: --until ({until}) is not after --since ({since})")
        return window

    @property
    def unbounded(self) -> bool:
        return self.since_ns is None and self.until_ns is None

    def contains(self, ns: int) -> bool:
        if self.since_ns is not None and ns < self.since_ns:
            return False
        return self.until_ns is None or ns < self.until_ns

    def describe(self) -> dict[str, str | None]:
        return {
            "since": format_ns(self.since_ns) if self.since_ns is not None else None,
            "until": format_ns(self.until_ns) if self.until_ns is not None else None,
        }
