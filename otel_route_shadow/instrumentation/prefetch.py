"""Reading a large policy snapshot off the spawn path: one background thread at a time.

A fresh read of a big snapshot (parse, schema check, hash) and the build of its policy index are
linear in the set: too much to pay inside the host's next spawn after a ``policy save``.
``SnapshotPrefetch`` runs both on a daemon thread (a ``Worker``) while the seams keep resolving against the snapshot
they already had (their records cite its revision and hash, so they stay exact about what they used).
A result is handed over only once both are done: ``take()`` returns the verdict together with what
``prepare`` built from it (the policy index), so no seam ever sees the new snapshot without its index.
Which reads go to the background is decided by the caller, by file size, never by timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from otel_route_shadow.store import SnapshotLoad
from otel_route_shadow.worker import AFTER_FORK, Worker, WorkerName

__all__ = ["PREFETCH_JOIN_SECONDS", "SnapshotPrefetch"]

PREFETCH_JOIN_SECONDS: Final = 5.0
"""How long ``close`` (at uninstrument, never inside a spawn) waits for a read in flight; the
thread is a daemon, so a read that outlives the wait cannot keep the process alive."""

Prepared = TypeVar("Prepared")


class SnapshotPrefetch(Generic[Prepared]):
    """At most one background read at a time; its result waits in ``take()`` for the next seam.

    ``load`` reads and verifies the store (``RoutingPolicyStore.load``, total); ``prepare`` builds
    what a seam needs besides the verdict (the policy index), on the same thread, before the result
    is handed over; ``on_error`` is told of anything either raises, and the result is then dropped
    (the seams keep what they had; the next change seen starts a new read).
    """

    def __init__(
        self,
        load: Callable[[], SnapshotLoad],
        prepare: Callable[[SnapshotLoad], Prepared],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self._load = load
        self._prepare = prepare
        self._on_error = on_error
        self._lock = threading.Lock()
        self._worker = Worker(WorkerName.PREFETCH, self._run)
        self._closed = False
        self._ready: tuple[SnapshotLoad, Prepared] | None = None
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): a new lock (the parent's threads may have
        held it). The worker forgets the parent's read in flight (``Worker.after_fork``), so the child's
        next look starts a read of its own; a result already handed over (``_ready``, set whole) is
        kept: it is as exact in the child as in the parent."""
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._worker.busy

    def start(self) -> bool:
        """Start a read unless one is under way or :meth:`close` ran; True if one started."""
        with self._lock:
            if self._closed or self._worker.busy:
                return False
            self._worker.wake()
            return True

    def take(self) -> tuple[SnapshotLoad, Prepared] | None:
        """The verdict of the last finished read and what was prepared from it, once (None if
        there is none new)."""
        if self._ready is None:
            return None
        with self._lock:
            ready, self._ready = self._ready, None
        return ready

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the read in flight; True if none is left running."""
        return self._worker.idle(timeout)

    def close(self) -> None:
        """Wait (bounded) for the read in flight, then end the thread, so none outlives an uninstrument;
        for good: no read starts after it (a closed runtime keeps the snapshot it has)."""
        with self._lock:
            self._closed = True
        self._worker.stop(PREFETCH_JOIN_SECONDS)

    def _run(self) -> None:
        try:
            load = self._load()
            prepared = self._prepare(load)
        except Exception as exc:
            self._on_error(exc)
            return
        with self._lock:
            self._ready = (load, prepared)
