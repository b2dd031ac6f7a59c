"""The server's log of what it could not answer as good: each distinct problem once per process."""

from __future__ import annotations

import logging
import threading
from typing import Final

__all__ = ["ProblemLog"]

DISTINCT_MAX: Final = 4096
"""Distinct problems logged per process, of each kind; one more line says that further ones are not."""


class ProblemLog:
    """Logs each distinct message once, as a warning on ``logger`` (thread-safe). After
    :data:`DISTINCT_MAX` distinct messages of a kind it logs one line saying that further ones are not.
    The two kinds have a budget each: what a client's requests did wrong (``client``), which any
    client can vary at will, and the problems of the log's own files, so a client that floods the log
    with bad requests never silences a damaged or forged tile."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._seen: dict[bool, set[str]] = {False: set(), True: set()}
        self._lock = threading.Lock()

    def report(self, message: str, *, client: bool = False) -> None:
        with self._lock:
            seen = self._seen[client]
            if message in seen or len(seen) > DISTINCT_MAX:
                return
            seen.add(message)
            if len(seen) > DISTINCT_MAX:
                kind = "request problems" if client else "problems of the log's files"
                message = f"{DISTINCT_MAX:,} distinct {kind} logged: further ones are answered, not logged"
        self._logger.warning("%s", message)
