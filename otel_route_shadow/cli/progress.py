"""Progress for long runs: one self-overwriting line on stderr, only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["TerminalProgress"]


class TerminalProgress:
    """``progress(done, total)`` callbacks rendered as ``label: done/total (pct) rate/s``.

    Silent when the stream is not a terminal (pipes, CI logs, tests) or when disabled; redraws at
    most every ``interval`` seconds, so the callback costs a clock read at most.
    """

    def __init__(
        self, label: str, *, stream: TextIO | None = None, enabled: bool = True, interval: float = 0.2
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.label = label
        self.interval = interval
        self._started = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def phase(self, label: str) -> TerminalProgress:
        """Start a new phase (e.g. verifying, then reading) on the same line."""
        self.label = label
        self._started = time.monotonic()
        self._last = 0.0
        return self

    def __call__(self, done: int, total: int = 0) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        elapsed = max(now - self._started, 1e-9)
        speed = f"{done / elapsed:,.0f} records/s"
        if total > 0:
            text = f"{self.label}: {done:,}/{total:,} ({min(done / total, 1.0):.0%}) {speed}"
        else:
            text = f"{self.label}: {done:,} records {speed}"
        self.stream.write("\r" + text[:120].ljust(79))
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()
            self._drawn = False


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
