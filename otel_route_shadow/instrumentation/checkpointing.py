"""When the plugin checkpoints its chain: every N records or T seconds, in one background thread, and
at shutdown.

``tlog.Checkpointer`` does the work (catch up, prove, sign, publish) synchronously, bounded, with no
thread and no clock. :class:`ScheduledCheckpointer` gives it the plugin's cadence: ``after_append``
counts records and, when a checkpoint is due (``every_records`` records, or the first record
``every_seconds`` after the last checkpoint, or a catch-up left lines for later), wakes one daemon
thread that runs it, so no checkpoint ever runs inside a spawn. ``checkpoint_now`` (at uninstrument and
provider shutdown) runs one synchronously with the larger shutdown bounds, waiting at most
``SHUTDOWN_WAIT_S`` for a checkpoint the thread is running; ``close`` stops the thread. A forked child
starts its own thread on its first due checkpoint (the parent's does not exist there) and does not wait
for a lock the fork copied in a held state.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Final

from otel_route_shadow.tlog import Checkpointer, SignedCheckpoint

__all__ = [
    "DEFAULT_EVERY_RECORDS",
    "DEFAULT_EVERY_SECONDS",
    "SHUTDOWN_WAIT_S",
    "WORKER_NAME",
    "ScheduledCheckpointer",
]

DEFAULT_EVERY_RECORDS: Final = 1000
"""A checkpoint at least every 1000 records ..."""
DEFAULT_EVERY_SECONDS: Final = 10.0
"""... or on the first record 10 seconds after the last one."""
SHUTDOWN_WAIT_S: Final = 5.0
"""Longest ``checkpoint_now`` waits for a checkpoint already running in the background thread."""
SHUTDOWN_MAX_LEAVES: Final = 1 << 20
SHUTDOWN_MAX_BYTES: Final = 4 * 1024 * 1024 * 1024
WORKER_NAME: Final = "route-shadow-checkpointer"
"""The name of the background thread."""


class ScheduledCheckpointer:
    """A ``tlog.Checkpointer`` on the plugin's schedule: see the module docstring. Never raises."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        every_records: int = DEFAULT_EVERY_RECORDS,
        every_seconds: float = DEFAULT_EVERY_SECONDS,
        *,
        background: bool = True,
    ) -> None:
        self.checkpointer = checkpointer
        self.every_records = max(1, every_records)
        self.every_seconds = every_seconds
        self.background = background
        self._pending = 0
        self._due_at = time.monotonic() + every_seconds
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._closed = False
        weak = weakref.WeakMethod(self._after_fork)
        os.register_at_fork(after_in_child=lambda: (method := weak()) is not None and method())

    @property
    def origin(self) -> str:
        return self.checkpointer.origin

    @property
    def last(self) -> SignedCheckpoint | None:
        return self.checkpointer.last

    @property
    def refused(self) -> str | None:
        return self.checkpointer.refused

    def add_listener(self, listener: Callable[[SignedCheckpoint], None]) -> None:
        """Call ``listener`` after each checkpoint is durably published (its exceptions are logged once)."""
        self.checkpointer.add_listener(listener)

    def after_append(self) -> None:
        """Count one appended record; checkpoint when due. Cheap unless due; never raises."""
        self._pending += 1
        due = (
            self._pending >= self.every_records
            or self.checkpointer.behind
            or time.monotonic() >= self._due_at
        )
        if not due or self.checkpointer.refused is not None:
            return
        if self.background:
            self._wake_worker()
        else:
            self._run(wait=0.0)

    def checkpoint_now(self) -> SignedCheckpoint | None:
        """Catch up (with the shutdown bounds) and checkpoint now; the latest checkpoint this process made
        when nothing was appended since (None if none). Never raises."""
        made = self._run(wait=SHUTDOWN_WAIT_S, max_leaves=SHUTDOWN_MAX_LEAVES, max_bytes=SHUTDOWN_MAX_BYTES)
        return made or self.checkpointer.last

    def close(self) -> None:
        """Stop the background thread (waiting at most ``SHUTDOWN_WAIT_S``); a later due checkpoint
        starts it again."""
        worker, self._closed = self._worker, True
        self._wake.set()
        if worker is not None and worker is not threading.current_thread():
            worker.join(SHUTDOWN_WAIT_S)
        self._worker, self._closed = None, False
        self._wake = threading.Event()

    def _wake_worker(self) -> None:
        worker = self._worker
        if worker is None or not worker.is_alive():
            self._wake = threading.Event()
            worker = threading.Thread(target=self._work, args=(self._wake,), name=WORKER_NAME, daemon=True)
            self._worker = worker
            worker.start()
        self._wake.set()

    def _work(self, wake: threading.Event) -> None:
        while True:
            wake.wait()
            wake.clear()
            if self._closed or wake is not self._wake:
                return
            self._run(wait=0.0)

    def _run(
        self, wait: float, max_leaves: int | None = None, max_bytes: int | None = None
    ) -> SignedCheckpoint | None:
        if not self._mutex.acquire(timeout=wait if wait > 0 else 0):
            return None
        try:
            self._pending = 0
            self._due_at = time.monotonic() + self.every_seconds
            return self.checkpointer.checkpoint(max_leaves=max_leaves, max_bytes=max_bytes)
        finally:
            self._mutex.release()

    def _after_fork(self) -> None:
        """In a forked child: the parent's thread does not exist here, and a lock it held was copied held."""
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._worker = None
        self._closed = False
