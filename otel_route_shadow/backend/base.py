"""The backend interface: a trace backend that holds the seam spans independently of the host.

A backend answers one question: which spans does the backend hold for a time window (optionally with
given attribute values)? Phoenix is the first implementation (:mod:`.phoenix`); Jaeger or Tempo fit the
same shape. Everything here is plain data, so the cross-check (:mod:`.crosscheck`) stays pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = [
    "MAX_UNIX_NANO",
    "SEAM_PREFIXES",
    "AttributeValue",
    "Backend",
    "BackendError",
    "BackendNotFound",
    "BackendNotPhoenix",
    "BackendProtocolError",
    "BackendSpan",
    "BackendUnavailable",
    "QueryWindow",
    "format_unix_nano",
    "in_range",
    "is_checkpoint_span",
    "is_seam_span",
    "parse_time",
]

#: Attribute namespaces a chain record copies from its span and the cross-check compares.
SEAM_PREFIXES = ("route_shadow.", "gen_ai.")
_SEAM_MARKER = "route_shadow."
_CHECKPOINT_MARKER = "route_shadow.checkpoint."

AttributeValue = str | int | float | bool

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_DAY = datetime(9999, 12, 30, tzinfo=UTC)
#: The latest time taken (9999-12-30T00:00:00Z, in Unix nanoseconds): from the epoch up to it, every time
#: and a window's margins around it can be written as a date; a later one (or one before the epoch) is refused.
MAX_UNIX_NANO = (_LAST_DAY - _EPOCH) // timedelta(microseconds=1) * 1000


class BackendError(Exception):
    """The backend could not answer; the message is one line naming the backend."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached, refused access, or failed (network error, timeout, HTTP 5xx)."""


class BackendNotFound(BackendError):
    """The backend has no such project (Phoenix: no span has reached it yet, or the name is wrong)."""


class BackendProtocolError(BackendError):
    """The backend answered something this client does not understand."""


class BackendNotPhoenix(BackendProtocolError):
    """The URL answers, but not as the backend named (for example a collector's OTLP port)."""


@dataclass(frozen=True, slots=True)
class QueryWindow:
    """The span start times a backend is queried over: from ``start_unix_nano`` (inclusive) to
    ``end_unix_nano`` (exclusive)."""

    start_unix_nano: int
    end_unix_nano: int

    def __post_init__(self) -> None:
        if self.end_unix_nano < self.start_unix_nano:
            raise ValueError("time window ends before it starts")

    def describe(self) -> str:
        return f"{format_unix_nano(self.start_unix_nano)} .. {format_unix_nano(self.end_unix_nano)}"


@dataclass(frozen=True, slots=True)
class BackendSpan:
    """A span as the backend holds it. Ids are lower-case hex; attributes are flat dotted keys."""

    trace_id: str
    span_id: str
    start_time_unix_nano: int
    attributes: Mapping[str, object] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        if not _TRACE_ID.fullmatch(self.trace_id):
            raise ValueError(f"trace id {self.trace_id!r} is not 32 lower-case hex digits")
        if not _SPAN_ID.fullmatch(self.span_id):
            raise ValueError(f"span id {self.span_id!r} is not 16 lower-case hex digits")

    @property
    def key(self) -> tuple[str, str]:
        return (self.trace_id, self.span_id)


def is_checkpoint_span(span: BackendSpan) -> bool:
    """A checkpoint span (``route_shadow.checkpoint.*`` attributes) carries a checkpoint of the log, not a seam call."""
    return any(key.startswith(_CHECKPOINT_MARKER) for key in span.attributes)


def is_seam_span(span: BackendSpan) -> bool:
    """A seam span carries at least one ``route_shadow.*`` attribute and is not a checkpoint span;
    other spans of the host carry none."""
    return any(key.startswith(_SEAM_MARKER) for key in span.attributes) and not is_checkpoint_span(span)


@runtime_checkable
class Backend(Protocol):
    """A trace backend queried for spans.

    ``time_tolerance_ns`` is how far a start time the backend returns may be from the one the span was
    sent with (Phoenix keeps microseconds and rounds through a float: 1 us).
    """

    kind: str
    time_tolerance_ns: int

    def describe(self) -> str:
        """Where the backend is, for reports: backend kind, URL, project."""
        ...

    def fetch_spans(
        self, window: QueryWindow, attributes: Mapping[str, AttributeValue] | None = None
    ) -> Iterator[BackendSpan]:
        """Every span that started in ``window`` (and, when given, has all these attribute values).

        Raises :class:`BackendError` subclasses; never returns a partial answer silently.
        """
        ...


def format_unix_nano(value: int) -> str:
    """RFC 3339 UTC with microseconds, e.g. 2026-11-30T01:36:23.623422Z; a value no date can hold (before
    year 1 or after 9999) is written as its integer, ``<n> (Unix ns)``: never raises."""
    try:
        dt = _EPOCH + timedelta(microseconds=value // 1000)
    except OverflowError:
        return f"{value} (Unix ns)"
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> int:
    """Parse ISO 8601 (naive means UTC; ``Z`` accepted) or an integer of Unix nanoseconds; a time before
    the epoch or after :data:`MAX_UNIX_NANO` is refused (``ValueError``)."""
    stripped = text.strip()
    if stripped.isascii() and stripped.isdigit():
        value = int(stripped) if len(stripped) <= 24 else MAX_UNIX_NANO + 1  # int() of 4,301 digits raises
    else:
        try:
            dt = datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(f"{text!r} is neither ISO 8601 nor Unix nanoseconds") from None
        value = datetime_to_unix_nano(dt)
    if not in_range(value):
        raise ValueError(f"{text[:40]!r} is outside 1970-01-01 .. 9999-12-30 (UTC)")
    return value


def in_range(unix_nano: int) -> bool:
    """Whether a time lies from the epoch up to :data:`MAX_UNIX_NANO`."""
    return 0 <= unix_nano <= MAX_UNIX_NANO


def datetime_to_unix_nano(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return ((dt - _EPOCH) // timedelta(microseconds=1)) * 1000
