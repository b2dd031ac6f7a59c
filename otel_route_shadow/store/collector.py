"""``collector_paused``: the cyclic garbage collector held off around one bulk build of a save.

What it buys (row 8b, ``.venv/bin/python -m benchmarks --only 8a,8b``, loaded 2-CPU container,
2026-12-01; see ``docs/benchmarks.md``): a save validates, dumps and encodes every policy, which
allocates several container objects per policy that all stay alive until the save ends. The heap
growth triggers collections that traverse it again and again (full ones over the whole process):
at 80,000 policies they were about a third of the save (5.8 s of 17.3 s) and made it grow about 20x
for 10x the policies. Paused, the same work grows about 10x (linear). What the collector would
have freed meanwhile is reference cycles only; the save's own objects are freed by reference
counting as before.

Host safety (a host may call ``RoutingPolicyStore.save`` itself): nothing is changed for longer than
the block, and the setting is restored exactly. The collector is only paused if it was enabled on
entry (a host that disabled it keeps it disabled), and only re-enabled if it is still disabled at
the end (a host thread that enabled it meanwhile keeps it enabled); concurrent blocks share one
pause, and the last one out ends it, also when the block raises. What it cannot tell apart: a host
thread that calls ``gc.disable()`` *during* a save sees it enabled again when the save ends. No
``gc.freeze()``: it would move every object of the host to the permanent generation, not only ours.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_depth = 0
"""Blocks currently inside ``collector_paused`` that paused the collector (or joined a pause)."""


def _enter() -> bool:
    global _depth
    with _lock:
        if _depth == 0 and not gc.isenabled():
            return False  # disabled by the host: nothing to pause, nothing to restore
        _depth += 1
        gc.disable()
        return True


def _leave() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and not gc.isenabled():
            gc.enable()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic collector off for the block; the setting on exit is the one on entry."""
    joined = _enter()
    try:
        yield
    finally:
        if joined:
            _leave()
