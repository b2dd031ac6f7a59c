"""The server's log of what it could not answer as good: each distinct problem once per process."""

from __future__ import annotations

import logging
import threading
from typing import Final

__all__ = ["ProblemLog"]

DISTINCT_MAX: Final = 4096
"""Distinct problems logged per process; one more line says that further ones are not."""


class ProblemLog:
    """Logs each distinct message once, as a warning on ``logger`` (thread-safe). After
    :data:`DISTINCT_MAX` distinct messages it logs one line saying that further ones are not logged."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def report(self, message: str) -> None:
        with self._lock:
            if message in self._seen or len(self._seen) > DISTINCT_MAX:
                return
            self._seen.add(message)
            if len(self._seen) > DISTINCT_MAX:
                message = f"{DISTINCT_MAX:,} distinct problems logged: further ones are answered, not logged"
        self._logger.warning("%s", message)
