"""The cyclic garbage collector paused for a run that builds and keeps many objects and frees none."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then as it was (also a decorator). For a run that
    builds tens of thousands of objects, keeps them to its end and makes no reference cycle: each
    full collection in it would walk every one for nothing, and what it drops is freed by reference
    counting as ever (the monitor's rerun: docs/benchmarks.md, row 11c)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
