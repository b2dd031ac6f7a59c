"""Records a writer could not append in time, kept in order until the chain is free again.

A writer with a lock timeout (the plugin's) never waits on another process for longer than that; a
record that finds the chain locked is kept here and written before the writer's next record. The
backlog is bounded: once it holds ``capacity`` records, further records are counted instead of kept,
and the count goes into the chain itself as a ``records-dropped`` event (``docs/chain-format.md``
section 7), written after the kept records, so the gap is where it happened and ``verify`` reports it.
Records the disk refused (no space, a file-size limit) are counted the same way, each cause with its
own ``reason``. The kept records are mirrored on disk while they wait (``chain.waiting.WaitingFile``),
for a process killed before it writes them. :class:`DroppedGap` is the reading side: those events
summed, as ``report`` and ``audit`` show them.
"""

from __future__ import annotations

import collections
import errno
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import orjson

from otel_route_shadow.chain.canonical import canonical_bytes
from otel_route_shadow.chain.record import DROPPED_KIND, EMPTY_MARKS, EncodedPayload

__all__ = [
    "BACKLOG_RECORDS",
    "DROPPED_REASON",
    "REASON_CHAIN_CORRUPT",
    "REASON_FILE_TOO_LARGE",
    "REASON_NOT_OBSERVED",
    "REASON_NO_SPACE",
    "REASON_SPILL_FULL",
    "REASON_SPILL_UNREADABLE",
    "REASON_WRITE_FAILED",
    "Backlog",
    "DroppedGap",
    "dropped_event",
    "dropped_event_of",
    "write_failure_reason",
]

BACKLOG_RECORDS: Final = 1024
"""Default capacity: at about 2 KiB per seam record, 2 MiB of memory at most."""

DROPPED_REASON: Final = "chain-lock-timeout"
"""Another process held the chain's lock for longer than the backlog could cover."""
REASON_NO_SPACE: Final = "no-space"
"""The file system had no room for the record (``ENOSPC``, ``EDQUOT``)."""
REASON_FILE_TOO_LARGE: Final = "file-too-large"
"""The chain reached the process's file-size limit (``EFBIG``, ``RLIMIT_FSIZE``)."""
REASON_WRITE_FAILED: Final = "write-failed"
"""Any other failure of the disk to take the record (an I/O error, a read-only file system)."""
REASON_CHAIN_CORRUPT: Final = "chain-corrupt"
"""The chain's last complete line was not a record: no head to link to (``ChainCorruptError``)."""
REASON_NOT_OBSERVED: Final = "not-observed"
"""Seam calls the plugin could not observe (the host's extractor raised or gave a context that does not
validate, the span did not start, or the record could not be built): the host's call ran, unrecorded."""
REASON_SPILL_UNREADABLE: Final = "spill-unreadable"
"""Lines of a spill file (``chain.spill``) that were not records a writer spilled (torn, foreign)."""
REASON_SPILL_FULL: Final = "spill-full"
"""Records a writer could not keep in the spill file at exit, which was at its size bound."""
_EVENT_KEYS: Final = frozenset({"kind", "reason", "count", "first_time_unix_nano", "last_time_unix_nano"})
_LATEST_NS: Final = 253_402_300_799 * 10**9
"""9999-12-31T23:59:59Z: a later time does not read as one (no date can show it)."""


def dropped_event(count: int, first_ns: int, last_ns: int, reason: str = DROPPED_REASON) -> dict[str, object]:
    """The payload of a ``records-dropped`` event: how many records, dropped between which times
    (wall clock, nanoseconds since the epoch, as decimal strings), and why."""
    return {
        "kind": DROPPED_KIND,
        "reason": reason,
        "count": count,
        "first_time_unix_nano": str(first_ns),
        "last_time_unix_nano": str(last_ns),
    }


def write_failure_reason(exc: OSError) -> str:
    """The ``reason`` of a ``records-dropped`` event for records the disk refused with ``exc``."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return REASON_NO_SPACE
    if exc.errno == errno.EFBIG:
        return REASON_FILE_TOO_LARGE
    return REASON_WRITE_FAILED


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
    uncounted: int = 0
    """Events whose ``count`` is not a positive integer: each adds 0 records, and the line says so."""

    def add(self, payload: object) -> None:
        """Count ``payload`` if it is a ``records-dropped`` event (anything else is ignored); a count
        or time that does not read as one counts as 0 / unknown."""
        if not isinstance(payload, dict) or payload.get("kind") != DROPPED_KIND:
            return
        count = payload.get("count")
        self.events += 1
        if type(count) is int and count > 0:
            self.records += count
        else:
            self.uncounted += 1
        first = _ns(payload, "first_time_unix_nano")
        last = _ns(payload, "last_time_unix_nano")
        if first >= 0:
            self.first_ns = first if self.first_ns is None else min(self.first_ns, first)
        if last >= 0:
            self.last_ns = last if self.last_ns is None else max(self.last_ns, last)

    def absorb(self, other: DroppedGap) -> None:
        """Add another log's events."""
        self.events += other.events
        self.records += other.records
        self.uncounted += other.uncounted
        self.first_ns = min((t for t in (self.first_ns, other.first_ns) if t is not None), default=None)
        self.last_ns = max((t for t in (self.last_ns, other.last_ns) if t is not None), default=None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "records": self.records,
            "events_without_count": self.uncounted,
            "first_time": None if self.first_ns is None else _iso_ns(self.first_ns),
            "last_time": None if self.last_ns is None else _iso_ns(self.last_ns),
        }

    def describe(self) -> str:
        """One line: ``dropped records: none``, or the gap (``GAP: ...``)."""
        if not self.events:
            return "dropped records: none"
        when = self.as_dict()
        uncounted = f"; {self.uncounted} of them name no count (read as 0 records)" if self.uncounted else ""
        return (
            f"GAP: {self.records} records dropped by the writer in {self.events} "
            f"event{'s' if self.events != 1 else ''}, from {when['first_time'] or '(unknown)'} to "
            f"{when['last_time'] or '(unknown)'}{uncounted}"
        )


class Mirror(Protocol):
    """Where the kept records wait on disk too (``chain.waiting.WaitingFile``), called under the lock."""

    def keep(self, entry: EncodedPayload) -> None: ...
    def take(self, claim_at: int | None) -> tuple[int, int]: ...
    def restore(self, taken: tuple[int, int]) -> None: ...
    def settled(self, taken: tuple[int, int]) -> None: ...
    def counted(self, counts: dict[str, list[int]], *, create: bool = False) -> None: ...
    def close(self) -> None: ...


Taken = tuple[list[EncodedPayload], tuple[int, int] | None]
"""What :meth:`Backlog.take` hands out: the entries, and their lines in the mirror."""


class Backlog:
    """A bounded, ordered queue of encoded records, with counts of the records dropped, by reason.

    Thread-safe on its own: a thread that could not even get its writer's in-process lock in time
    keeps its record here without it. With a ``mirror``, each kept record is written there too, in the
    same order, and given up there once :meth:`settled` (written, spilled or counted), and so are the
    counts once records were dropped for the lock: what a killed process leaves on disk is what it had
    not written yet (the disk's refusals alone, which may have no room for a file, are counted in
    memory only).
    """

    def __init__(self, capacity: int = BACKLOG_RECORDS, mirror: Mirror | None = None) -> None:
        if capacity < 0:
            raise ValueError(f"backlog capacity must be >= 0, not {capacity}")
        self.capacity = capacity
        self.mirror = mirror
        self._items: collections.deque[EncodedPayload] = collections.deque()
        self._lock = threading.Lock()
        self._dropped: dict[str, list[int]] = {}
        """By reason, in the order the reasons first came: count, first and last drop time."""

    def __len__(self) -> int:
        return len(self._items) + len(self._dropped)

    def records(self) -> tuple[int, int]:
        """How many records the backlog stands for: those kept, and those counted as dropped."""
        with self._lock:
            return len(self._items), sum(counted[0] for counted in self._dropped.values())

    def keep(self, entry: EncodedPayload, now_ns: int) -> bool:
        """Keep ``entry`` after the others; False when the backlog is full and it was counted instead."""
        with self._lock:
            if len(self._items) < self.capacity:
                self._items.append(entry)
                if self.mirror is not None:
                    self.mirror.keep(entry)
                return True
            self._count(DROPPED_REASON, now_ns)
            if self.mirror is not None:
                self.mirror.counted(self._dropped, create=True)
            return False

    def count_dropped(self, reason: str, now_ns: int) -> None:
        """Count one record lost for ``reason`` (the disk refused it): the chain gets the event."""
        with self._lock:
            self._count(reason, now_ns)

    def _count(self, reason: str, now_ns: int) -> None:
        counted = self._dropped.get(reason)
        if counted is None:
            self._dropped[reason] = [1, now_ns, now_ns]
        else:
            counted[0] += 1
            counted[2] = now_ns

    def take(self, claim_at: int | None) -> Taken:
        """Everything to write, oldest first, emptying the backlog: the kept records, then one
        ``records-dropped`` event per reason for those counted (they came after every kept one); and
        the mirror's lines of the records, claimed at ``claim_at`` (the chain offset the caller, holding
        the chain's lock, starts writing them at), for :meth:`settled` or :meth:`restore`."""
        with self._lock:
            taken = None if self.mirror is None else self.mirror.take(claim_at)
            entries = list(self._items)
            self._items.clear()
            for reason, (count, first_ns, last_ns) in self._dropped.items():
                event = dropped_event(count, first_ns, last_ns, reason)
                entries.append(EncodedPayload(canonical_bytes(event), EMPTY_MARKS))
            self._dropped.clear()
            return entries, taken

    def settled(self, taken: tuple[int, int] | None) -> None:
        """The entries of a take are in the chain, the spill file or ``<chain>.lost``: the mirror gives
        their lines up."""
        if taken is not None and self.mirror is not None:
            with self._lock:
                self.mirror.settled(taken)
                self.mirror.counted(self._dropped)  # the counts taken are gone from it too

    def close_mirror(self) -> None:
        """Nothing waits: the mirror gives its file up (a record kept later makes a new one)."""
        with self._lock:
            if self.mirror is not None and not self._items and not self._dropped:
                self.mirror.close()

    def restore(self, entries: list[EncodedPayload], taken: tuple[int, int] | None) -> None:
        """Put back, in front and in order, what :meth:`take` returned but could not be written (with
        ``taken``, its lines in the mirror wait again too).

        A ``records-dropped`` event goes back into the counts (merged with any counted since), so a
        disk that keeps refusing grows a count, never the queue."""
        with self._lock:
            records = []
            for entry in entries:
                event = dropped_event_of(entry)
                if event is None:
                    records.append(entry)
                    continue
                reason, count, first_ns, last_ns = event
                counted = self._dropped.setdefault(reason, [0, first_ns, last_ns])
                counted[0] += count
                counted[1], counted[2] = min(counted[1], first_ns), max(counted[2], last_ns)
            self._items.extendleft(reversed(records))
            if taken is not None and self.mirror is not None:
                self.mirror.restore(taken)
                self.mirror.counted(self._dropped)


def dropped_event_of(entry: EncodedPayload) -> tuple[str, int, int, int] | None:
    """``(reason, count, first, last)`` when ``entry`` is a ``records-dropped`` event as
    :func:`dropped_event` makes it, else None."""
    if not entry.payload.startswith(b'{"count":'):
        return None
    try:
        payload = orjson.loads(entry.payload)
    except orjson.JSONDecodeError:
        return None
    if payload.get("kind") != DROPPED_KIND or payload.keys() != _EVENT_KEYS:
        return None
    reason, count = payload["reason"], payload["count"]
    first, last = _ns(payload, "first_time_unix_nano"), _ns(payload, "last_time_unix_nano")
    if not isinstance(reason, str) or type(count) is not int or count < 0 or min(first, last) < 0:
        return None
    return reason, count, first, last
