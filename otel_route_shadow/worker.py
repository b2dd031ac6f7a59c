"""One background worker: a daemon thread, started when first woken, that runs one step per wake.

The instrumentation's background work (the checkpointer, the witness pusher, the snapshot prefetch,
the checkpoint spans' last export) runs on a :class:`Worker` each, in the manner of the SDK's
``BatchProcessor``: a wake event, one daemon thread, bounded waits, fork handling.

* ``wake()`` never waits: it starts the thread if there is none (the first wake, after ``stop``,
  after ``fork``) and sets the event. The thread runs ``step`` once per wake; ``step`` returns how
  long to sleep before it runs again unprompted (None: until the next wake). What ``step`` raises is
  logged once per worker, never raised; the thread goes on.
* ``idle(timeout)`` waits at most ``timeout`` seconds for the steps asked for so far to be done.
* ``stop(timeout)`` ends the thread once the steps asked for so far are done (drained), waiting at
  most ``timeout`` seconds (a step that outlives the wait finishes in the daemon thread, which cannot
  keep the process alive); it is not a latch: a ``wake`` before the thread ends calls the stop off (the
  same thread goes on: never two running steps), one after it ended starts a new thread.
* After ``os.fork`` the child has no thread of the parent's (none survives a fork) and none is
  believed to run there: its state is reset (new locks, nothing in flight; the owner resets what its
  step works on through :data:`AFTER_FORK` too), and its first ``wake`` starts its own thread. A child
  never runs, waits for or joins the parent's thread.

Every worker is named from :class:`WorkerName`, the one place thread names are defined.

``os.register_at_fork`` and ``atexit`` keep every callable they are given for the life of the process,
so nothing registers with them per object: a :class:`ProcessHook` is registered once and calls the
live objects added to it (held weakly). :data:`AFTER_FORK` is the one fork handler, for every worker
and for whatever else has state to reset in a forked child; :func:`run_at_exit` registers a hook
that runs at interpreter exit, in a ``multiprocessing`` child too.
"""

from __future__ import annotations

import atexit
import enum
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

from otel_route_shadow.redacted_log import LOG as _LOG

__all__ = ["AFTER_FORK", "ProcessHook", "Worker", "WorkerName", "run_at_exit"]


class WorkerName(enum.StrEnum):
    """The name of each background thread the instrumentation starts."""

    CHECKPOINTER = "route-shadow-checkpointer"
    WITNESS = "route-shadow-witness"
    PREFETCH = "route-shadow-snapshot-prefetch"
    CHECKPOINT_SPANS = "route-shadow-checkpoint-spans"
    CONNECT = "route-shadow-connect"
    """A connection waited for within a deadline (``socket_budget.connect_within``)."""


_Owner = TypeVar("_Owner")


class ProcessHook(Generic[_Owner]):
    """The live owners added, held weakly (one that is collected is forgotten); ``run`` (what is
    registered, once, with the process-wide hook) calls ``call(owner)`` for each in the order added.
    What a call raises is logged, never raised."""

    def __init__(self, what: str, call: Callable[[_Owner], None]) -> None:
        self._what = what
        self._call = call
        self._owners: weakref.WeakKeyDictionary[_Owner, None] = weakref.WeakKeyDictionary()

    def add(self, owner: _Owner) -> None:
        self._owners[owner] = None

    def discard(self, owner: _Owner) -> None:
        self._owners.pop(owner, None)

    def __contains__(self, owner: object) -> bool:
        return owner in self._owners

    def run(self) -> None:
        for owner in list(self._owners):
            self._run_one(owner)

    def drain(self) -> None:
        """:meth:`run`, forgetting each owner before its call: a second ``drain`` calls nothing."""
        for owner in list(self._owners):
            if self._owners.pop(owner, False) is None:  # not taken meanwhile by another drain
                self._run_one(owner)

    def _run_one(self, owner: _Owner) -> None:
        try:
            self._call(owner)
        except Exception as exc:
            _LOG.warning("route shadow: %s failed (%s)", self._what, type(exc).__name__)


class _Forked(Protocol):
    def after_fork(self) -> None: ...


AFTER_FORK: Final[ProcessHook[_Forked]] = ProcessHook("a reset after fork", lambda owner: owner.after_fork())
"""What has state to reset in a forked child (every :class:`Worker`, and what its step works on):
``after_fork()`` runs there, in the order added."""
os.register_at_fork(after_in_child=AFTER_FORK.run)

_EXIT_PRIORITY: Final = 0
"""The ``multiprocessing.util.Finalize`` priority of :func:`run_at_exit`'s hooks: in the first pass of a
``multiprocessing`` process's exit, before it joins its own children (a wait without bound)."""


def run_at_exit(hook: ProcessHook[_Owner]) -> None:
    """Drain ``hook`` at interpreter exit, once per process (call this once per hook).

    ``atexit`` covers a process that ends normally. A ``multiprocessing`` child started by fork or by
    the forkserver (a ``Pool`` worker, a ``Process`` target) ends in ``os._exit``, which runs no ``atexit``
    entry; before it, ``Process._bootstrap`` runs the ``multiprocessing.util.Finalize`` entries, so the
    hook is one of those too. The child clears the entries it inherited as it starts and then runs the
    ``register_after_fork`` callbacks: the entry is made again there. Where both run (a process that
    ends normally runs ``multiprocessing``'s own ``atexit`` entry too), the second drain calls nothing.
    ``multiprocessing.util`` is imported here, not at import of this module: a process that loads the
    workers without the chain (which loads it anyway) does not pay for it."""
    import multiprocessing.util

    atexit.register(hook.drain)
    _finalize_at_exit(hook)
    multiprocessing.util.register_after_fork(hook, _finalize_at_exit)


def _finalize_at_exit(hook: ProcessHook[Any]) -> None:
    import multiprocessing.util

    multiprocessing.util.Finalize(None, hook.drain, exitpriority=_EXIT_PRIORITY)


class Worker:
    """A daemon thread running ``step`` once per wake (see the module docstring); ``last`` runs on the
    thread as it ends (closing what only the thread uses). Never raises."""

    def __init__(
        self,
        name: WorkerName,
        step: Callable[[], float | None],
        *,
        last: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._step = step
        self._last = last
        self._reset()
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by :data:`AFTER_FORK`)."""
        self._reset()

    def _reset(self) -> None:
        """At construction, and in a forked child: no thread, nothing asked for, nothing in flight."""
        self._cond = threading.Condition()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended = False
        """The thread has left its loop (it runs no more steps, though it may still be closing)."""
        self._stopping = False
        self._asked = 0
        self._done = 0
        self._failed = False

    @property
    def busy(self) -> bool:
        """A wake whose step has not finished yet."""
        with self._cond:
            return self._done < self._asked

    def wake(self) -> None:
        """Have the thread run a step soon (started if there is none); never waits."""
        with self._cond:
            self._asked += 1
            thread = self._thread
            self._stopping = False  # a stop not yet done is called off: the thread goes on
            if thread is None or self._ended or not thread.is_alive():
                self._ended = False
                self._wake = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(self._wake,), name=self.name.value, daemon=True
                )
                self._thread = thread
                thread.start()
            self._wake.set()

    def idle(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the steps asked for so far; True when they are done."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            target = self._asked
            while self._done < target:
                left = deadline - time.monotonic()
                thread = self._thread
                if left <= 0 or thread in (None, threading.current_thread()) or self._ended:
                    return False
                self._cond.wait(left)
            return True

    def stop(self, timeout: float) -> bool:
        """End the thread once the steps asked for so far are done, waiting at most ``timeout`` seconds;
        True when it ended (or there was none)."""
        with self._cond:
            thread = self._thread  # kept: a wake before it ends calls the stop off, never starts a second
            self._stopping = True
            self._wake.set()
            self._cond.notify_all()
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(max(0.0, timeout))
        return not thread.is_alive()

    def _run(self, wake: threading.Event) -> None:
        sleep: float | None = None
        while True:
            wake.wait(sleep)
            wake.clear()
            with self._cond:
                if wake is not self._wake or (self._stopping and self._done >= self._asked):
                    if wake is self._wake:
                        self._ended = True
                    break
                asked = self._asked
            try:
                sleep = self._step()
            except Exception as exc:  # a bug in a step: logged once, the worker goes on
                sleep = None
                if not self._failed:
                    self._failed = True
                    _LOG.warning(
                        "route shadow: the %s worker's step raised %s", self.name.value, type(exc).__name__
                    )
            with self._cond:  # a step covers every wake asked for before it began
                self._done = max(self._done, asked)
                self._cond.notify_all()
            if self._stopping:
                wake.set()  # look again at once: stop once nothing asked for is left
        with self._cond:
            if wake is self._wake:  # not replaced by a newer thread's wake: nothing more runs here
                self._done = self._asked
            self._cond.notify_all()
        if self._last is not None:
            try:
                self._last()
            except Exception:
                _LOG.warning("route shadow: the %s worker failed to close", self.name.value)
