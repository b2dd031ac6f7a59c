"""A ``flock`` with a deadline, shared by every shell package that locks files (``chain``, ``store``,
``tlog``, ``analysis``), and the size of a file with no append in flight.

Shell code (it sleeps and reads the clock); the pure core never locks anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Final

__all__ = ["SETTLE_POLL_S", "SETTLE_WAIT_S", "flock_bounded", "flock_within", "release", "settled_size"]

SETTLE_WAIT_S: Final = 5.0
"""How long :func:`settled_size` waits for an append in flight (read when it is called)."""
SETTLE_POLL_S: Final = 0.002
"""How often :func:`settled_size` tries the shared lock while it waits."""


def flock_within(fd: int, mode: int, timeout: float, poll: float) -> bool:
    """Take ``mode`` (``LOCK_EX`` or ``LOCK_SH``) on ``fd`` within ``timeout`` seconds.

    Returns False when the deadline passed with the lock still held elsewhere; an uncontended lock
    costs one non-blocking ``flock``. Polls every ``poll`` seconds (never past the deadline), so a
    process that holds the lock and hangs delays the caller by ``timeout`` at most.
    """
    deadline = None
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            now = time.monotonic()
            deadline = now + timeout if deadline is None else deadline
            if now >= deadline:
                return False
            time.sleep(min(poll, deadline - now))


def flock_bounded(fd: int, mode: int, timeout: float | None, poll: float) -> bool:
    """:func:`flock_within`, or with ``timeout`` None a blocking ``flock`` (always True). A lock that is
    free is taken at once, in this call."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if timeout is None:
        fcntl.flock(fd, mode)
        return True
    return flock_within(fd, mode, timeout, poll)


def settled_size(fd: int) -> int:
    """The size of the file open at ``fd`` with no append in flight.

    Appenders write under an exclusive ``flock``; the size is taken under a shared one, waited for at
    most :data:`SETTLE_WAIT_S` seconds. When the lock cannot be had (the deadline passed: a writer hung
    holding it; or a filesystem without ``flock``) the size is taken as it is, so the bytes after the
    last LF may be an append in flight: every reader treats them as a torn tail, never as a line. Never waits longer than :data:`SETTLE_WAIT_S`.
    """
    try:
        locked = flock_within(fd, fcntl.LOCK_SH, SETTLE_WAIT_S, SETTLE_POLL_S)
    except OSError:
        locked = False
    try:
        return os.fstat(fd).st_size
    finally:
        if locked:
            fcntl.flock(fd, fcntl.LOCK_UN)


def release(fd: int) -> None:
    """Give back ``fd``'s ``flock`` and close it. Unlocked first: a process forked while the lock was
    held has a copy of the descriptor, which shares the lock, and closing ours alone would leave the
    child holding it for its whole life."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
