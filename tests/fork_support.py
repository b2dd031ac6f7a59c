"""A check run in a forked child, bounded: a child that hangs fails its test, never hangs it.

The parent sets up the state a fork may catch (a lock held, a read in flight) explicitly, never by
timing; the child runs ``check`` under ``faulthandler``'s watchdog, which dumps every thread's stack
and exits 1 if the check outlives ``HANG_GUARD_S`` (a C thread of its own: it fires even while the
child's main thread waits on a lock that will never be released).
"""

from __future__ import annotations

import faulthandler
import os
import traceback
from collections.abc import Callable
from typing import Final

HANG_GUARD_S: Final = 30.0
"""How long a child may take before it counts as hung (a bound, not a timing the test depends on)."""


def fork_checking(check: Callable[[], bool], guard_s: float = HANG_GUARD_S) -> int:
    """Fork. In the child: run ``check`` under the hang guard and exit 0 when it returns True, else 1
    (an exception is printed and exits 1). In the parent: the child's pid, for :func:`exit_code`."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            faulthandler.dump_traceback_later(guard_s, exit=True)
            code = 0 if check() else 1
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def exit_code(pid: int) -> int:
    """Wait for the child (bounded by its own hang guard) and return its exit code."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
