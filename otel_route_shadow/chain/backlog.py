"""Records a writer could not append in time, kept in order until the chain is free again.

A writer with a lock timeout (the plugin's) never waits on another process for longer than that; a
record that finds the chain locked is kept here and written before the writer's next record. The
backlog is bounded: once it holds ``capacity`` records, further records are counted instead of kept,
and the count goes into the chain itself as a ``records-dropped`` event (``docs/chain-format.md``
section 7), written after the kept records, so the gap is where it happened and ``verify`` reports it.
:class:`DroppedGap` is the reading side: those events summed, as ``report`` and ``audit`` show them.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.record import DROPPED_KIND, EMPTY_MARKS, EncodedPayload

__all__ = ["BACKLOG_RECORDS", "Backlog", "DroppedGap", "dropped_event"]

BACKLOG_RECORDS: Final = 1024
"""Default capacity: at about 2 KiB per seam record, 2 MiB of memory at most."""

DROPPED_REASON: Final = "chain-lock-timeout"
_LATEST_NS: Final = 253_402_300_799 * 10**9
"""9999-12-31T23:59:59Z: a later time does not read as one (no date can show it)."""


def dropped_event(count: int, first_ns: int, last_ns: int) -> dict[str, object]:
    """The payload of a ``records-dropped`` event: how many records, dropped between which times
    (wall clock, nanoseconds since the epoch, as decimal strings)."""
    return {
        "kind": DROPPED_KIND,
        "reason": DROPPED_REASON,
        "count": count,
        "first_time_unix_nano": str(first_ns),
        "last_time_unix_nano": str(last_ns),
    }


def _ns(payload: dict[str, Any], key: str) -> int:
    """A decimal nanosecond time of the event, or -1 when it does not read as one."""
    value = payload.get(key)
    if not isinstance(value, str) or not value.isdecimal() or not value.isascii() or len(value) > 21:
        return -1
    ns = int(value)
    return ns if ns <= _LATEST_NS else -1


def _iso_ns(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat().replace("+00:00", "Z")


@dataclass(slots=True)
class DroppedGap:
    """The ``records-dropped`` events of a chain (``docs/chain-format.md`` section 7): records a
    writer dropped because another process held the chain's lock past its bounded backlog. They are
    not in any figure; ``records`` is 0 for a chain without such events (older chains too)."""

    events: int = 0
    records: int = 0
    first_ns: int | None = None
    last_ns: int | None = None

    def add(self, payload: object) -> None:
        """Count ``payload`` if it is a ``records-dropped`` event (anything else is ignored); a count
        or time that does not read as one counts as 0 / unknown."""
        if not isinstance(payload, dict) or payload.get("kind") != DROPPED_KIND:
            return
        count = payload.get("count")
        self.events += 1
        self.records += count if type(count) is int and count > 0 else 0
        first = _ns(payload, "first_time_unix_nano")
        last = _ns(payload, "last_time_unix_nano")
        if first >= 0:
            self.first_ns = first if self.first_ns is None else min(self.first_ns, first)
        if last >= 0:
            self.last_ns = last if self.last_ns is None else max(self.last_ns, last)

    def as_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "records": self.records,
            "first_time": None if self.first_ns is None else _iso_ns(self.first_ns),
            "last_time": None if self.last_ns is None else _iso_ns(self.last_ns),
        }

    def describe(self) -> str:
        """One line: ``dropped records: none``, or the gap (``GAP: ...``)."""
        if not self.events:
            return "dropped records: none"
        when = self.as_dict()
        return (
            f"GAP: {self.records} records dropped by the writer in {self.events} "
            f"event{'s' if self.events != 1 else ''}, from {when['first_time'] or '(unknown)'} to "
            f"{when['last_time'] or '(unknown)'}"
        )


class Backlog:
    """A bounded, ordered queue of encoded records, with a count of those it had to drop.

    Thread-safe on its own: a thread that could not even get its writer's in-process lock in time
    keeps its record here without it.
    """

    def __init__(self, capacity: int = BACKLOG_RECORDS) -> None:
        if capacity < 0:
            raise ValueError(f"backlog capacity must be >= 0, not {capacity}")
        self.capacity = capacity
        self._items: collections.deque[EncodedPayload] = collections.deque()
        self._lock = threading.Lock()
        self._dropped = 0
        self._first_drop_ns = 0
        self._last_drop_ns = 0

    def __len__(self) -> int:
        return len(self._items) + (1 if self._dropped else 0)

    def keep(self, entry: EncodedPayload, now_ns: int) -> bool:
        """Keep ``entry`` after the others; False when the backlog is full and it was counted instead."""
        with self._lock:
            if len(self._items) < self.capacity:
                self._items.append(entry)
                return True
            if not self._dropped:
                self._first_drop_ns = now_ns
            self._dropped += 1
            self._last_drop_ns = now_ns
            return False

    def take(self) -> list[EncodedPayload]:
        """Everything to write, oldest first, emptying the backlog: the kept records, then the
        ``records-dropped`` event for those counted (they came after every kept one)."""
        with self._lock:
            entries = list(self._items)
            self._items.clear()
            if self._dropped:
                event = dropped_event(self._dropped, self._first_drop_ns, self._last_drop_ns)
                entries.append(EncodedPayload(canonical_bytes(event), EMPTY_MARKS))
                self._dropped = 0
            return entries

    def restore(self, entries: list[EncodedPayload]) -> None:
        """Put back, in front and in order, what :meth:`take` returned but could not be written."""
        with self._lock:
            self._items.extendleft(reversed(entries))

    def clear(self) -> None:
        """Forget everything (a forked child: the records are its parent's to write)."""
        with self._lock:
            self._items.clear()
            self._dropped = 0
