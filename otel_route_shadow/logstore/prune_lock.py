"""The prune lock: an ``flock`` on a chain's segments folder (``X.jsonl.segments/``).

A prune holds it exclusive for its whole run, so two prunes never work at once (``pruning.prune``). A
command that lists and reads a chain's files to judge them (``verify``, ``prove``, ``audit``, ``report``,
``whatif``, ``matrix``) holds it shared while it runs (:func:`prunes_held_off`): no prune removes a file
it listed or raises the minimum index it read, so a verdict never rests on a prune seen half way (a
segment gone taken for a missing one, the records after it for a truncation). A prune waits for such
readers at most its own ``wait`` (a host's retention: 0.25 s, then it tries again after the next
checkpoint), and a reader for a prune at most :data:`READ_WAIT_S`. A chain never cut has no such folder
and nothing to prune: no lock is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from typing import Final

from otel_route_shadow.locking import flock_within, release
from otel_route_shadow.logstore.archives import segments_dir

__all__ = ["READ_WAIT_S", "PruneRunning", "prunes_held_off", "segments_lock"]

READ_WAIT_S: Final = 60.0
"""How long a reading command waits, over all the chains it names, for prunes that are running to end
(read when it is called)."""
_POLL_S: Final = 0.01


class PruneRunning(Exception):
    """A prune of a chain a command is to read held its prune lock past the wait allowed."""


@contextlib.contextmanager
def segments_lock(chain_path: str, mode: int, wait: float) -> Iterator[bool | None]:
    """Hold ``mode`` (``LOCK_EX`` or ``LOCK_SH``) on the chain's segments folder, waiting at most ``wait``
    seconds: yields True while it is held, False when another process held it past the wait, None when
    the chain has no segments folder (nothing held in either case). ``OSError`` when the folder cannot
    be opened as one."""
    try:
        fd = os.open(segments_dir(chain_path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    try:
        yield flock_within(fd, mode, wait, _POLL_S)
    finally:
        release(fd)


@contextlib.contextmanager
def prunes_held_off(chain_paths: Iterable[str], wait: float | None = None) -> Iterator[None]:
    """Hold the prune lock of each chain of ``chain_paths`` shared while the caller reads them, waiting at
    most ``wait`` seconds in all (default :data:`READ_WAIT_S`); :class:`PruneRunning` naming the chain
    whose prune ran past it. A folder that cannot be opened (or no descriptor left) holds nothing: the
    caller reads the chain as it is and says what it finds."""
    deadline = time.monotonic() + (READ_WAIT_S if wait is None else wait)
    with contextlib.ExitStack() as stack:
        for path in chain_paths:
            try:
                held = stack.enter_context(
                    segments_lock(path, fcntl.LOCK_SH, max(0.0, deadline - time.monotonic()))
                )
            except OSError:
                continue
            if held is False:
                waited = READ_WAIT_S if wait is None else wait
                raise PruneRunning(
                    f"{path}: a prune of this chain is running (waited {waited:g} s); nothing was read, "
                    "try again when it ends"
                )
        yield
