"""Writers that keep a chain's file lock between appends, and the thread that gives it back.

Process-local shell state. A writer holding its lock registers here; one daemon thread per process
gives a hold back once its writer goes idle (the writer itself runs only when there is a record),
and a reader in this process asks for the lock back before it takes its shared lock, rather than
waiting for that thread.
"""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol

__all__ = ["Holder", "release_holds", "reset_after_fork", "watch"]

_MIN_WAIT_S: Final = 0.0001
_LINGER_S: Final = 0.05


class Holder(Protocol):
    def hold_identity(self) -> tuple[int, int]:
        """(device, inode) of the file whose lock is held."""
        ...

    def release_hold_if_due(self, now: int) -> int | None:
        """Give the lock back if it is due; return when to look again, or None when not holding."""
        ...

    def release_hold(self) -> None:
        """Give the lock back now (waits for an append in flight)."""
        ...


class _Keeper:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        # Strong references: a writer dropped while it holds the lock still gets it given back.
        self._holders: set[Holder] = set()
        self._thread: threading.Thread | None = None

    def watch(self, holder: Holder) -> None:
        with self._cond:
            self._holders.add(holder)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="route-shadow-chain-lock", daemon=True)
                self._thread.start()
            self._cond.notify()

    def holders(self) -> list[Holder]:
        with self._cond:
            return list(self._holders)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._holders:
                    self._cond.wait(_LINGER_S)
                    if not self._holders:
                        # Nothing held: end, so that an idle process is single-threaded again
                        # (parallel verify forks only then). watch() starts a new thread.
                        self._thread = None
                        return
                holders = list(self._holders)
            now = time.monotonic_ns()
            wake: int | None = None
            for holder in holders:
                due = holder.release_hold_if_due(now)
                if due is None:
                    with self._cond:
                        self._holders.discard(holder)
                else:
                    wake = due if wake is None else min(wake, due)
            if wake is not None:
                with self._cond:
                    self._cond.wait(max((wake - time.monotonic_ns()) / 1e9, _MIN_WAIT_S))


_KEEPER = _Keeper()


def watch(holder: Holder) -> None:
    """``holder`` has just taken a hold: give it back when it is due."""
    _KEEPER.watch(holder)


def release_holds(identity: tuple[int, int]) -> None:
    """Give back every hold this process has on the file ``identity`` (a reader is about to lock it)."""
    for holder in _KEEPER.holders():
        if holder.hold_identity() == identity:
            holder.release_hold()


def reset_after_fork() -> None:
    """In a forked child: no keeper thread, and the parent's holds are the parent's."""
    global _KEEPER
    _KEEPER = _Keeper()
