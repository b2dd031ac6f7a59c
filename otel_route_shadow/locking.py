"""A ``flock`` with a deadline, shared by the shell packages that lock files (``chain``, ``store``).

Shell code (it sleeps and reads the clock); the pure core never locks anything.
"""

from __future__ import annotations

import fcntl
import time

__all__ = ["flock_bounded", "flock_within"]


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
