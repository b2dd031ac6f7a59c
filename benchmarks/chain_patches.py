"""One patch per cache, window or optional cost of the chain's append path, for the variant runs
(``benchmarks.append_variants`` for row 4a, ``benchmarks.seam_variants`` for row 1) that measure each
with and without (``docs/benchmarks.md``, "Caches, windows and threads"). A patch is a context
manager: it changes the process it runs in while it is entered, and puts everything back on exit.

* ``listener``: a line listener that keeps what it is told (``DecisionChain(listener=...)``): the
  cost of the call, per line (the leaf hash is taken lazily, by whoever needs it).
* ``no-head-cache``: every append reads the chain's tail to find its head, as if another writer had
  appended since (the head this instance wrote is never reused).
* ``no-recheck-window``: ``MARKER_RECHECK_NS = 0``: every append looks at the disk for what other
  processes change (a quarantine marker, a spill and a lost file, an unfinished cut: four ``stat``
  calls); the head is still reused.
* ``no-clean-memo``: the sanitizer scans every string for credentials, none remembered clean.
* ``no-secret-key-memo``: ``is_secret_key`` is asked afresh for every member name.
* ``no-template``: the plugin never prepares a payload template, so every record is sanitized and
  encoded whole (row 1 only: row 4a appends through ``append``, which takes no template).
* ``no-durable-memo``: with ``fsync`` durability, an appender never trusts what its own instance
  last synced, but takes the ``.sync`` lock and reads the watermark every time (row 4b).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["PATCHES", "Probe", "swapped"]

Probe = Callable[[], dict[str, int]]


@contextlib.contextmanager
def swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def _listener() -> Iterator[Probe]:
    from otel_route_shadow.chain import log

    heard: list[Any] = []
    original = log.DecisionChain.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.listener = heard.append

    with swapped(log.DecisionChain, "__init__", init):
        yield lambda: {"lines_heard": len(heard)}


@contextlib.contextmanager
def _no_head_cache() -> Iterator[Probe]:
    from otel_route_shadow.chain import log

    def checked_head(self: Any, fd: int, size: int, look: bool) -> Any:
        self._known_size = -1
        return self._prepare(fd, size, look)

    with swapped(log.DecisionChain, "_checked_head", checked_head):
        yield dict


@contextlib.contextmanager
def _no_recheck_window() -> Iterator[Probe]:
    from otel_route_shadow.chain import log

    with swapped(log, "MARKER_RECHECK_NS", 0):
        yield dict


@contextlib.contextmanager
def _no_clean_memo() -> Iterator[Probe]:
    from otel_route_shadow.chain import sanitize
    from otel_route_shadow.core.redaction import cannot_match, redact_text

    def redact_string(text: str) -> tuple[str, int]:
        return (text, 0) if cannot_match(text) else redact_text(text)

    with swapped(sanitize, "redact_string", redact_string):
        yield dict


@contextlib.contextmanager
def _no_secret_key_memo() -> Iterator[Probe]:
    from otel_route_shadow.chain import sanitize
    from otel_route_shadow.core.redaction import is_secret_key

    with swapped(sanitize, "_is_secret_key", is_secret_key):
        yield dict


@contextlib.contextmanager
def _no_template() -> Iterator[Probe]:
    from otel_route_shadow.instrumentation import runtime

    with swapped(runtime, "record_template", lambda attributes: None):
        yield dict


@contextlib.contextmanager
def _no_durable_memo() -> Iterator[Probe]:
    from otel_route_shadow.chain import group_commit

    original = group_commit.GroupCommit.commit

    def commit(self: Any, fd: int, identity: tuple[int, int], end: int) -> None:
        self._durable = 0
        original(self, fd, identity, end)

    with swapped(group_commit.GroupCommit, "commit", commit):
        yield dict


PATCHES: dict[str, Callable[[], contextlib.AbstractContextManager[Probe]]] = {
    "listener": _listener,
    "no-head-cache": _no_head_cache,
    "no-recheck-window": _no_recheck_window,
    "no-clean-memo": _no_clean_memo,
    "no-secret-key-memo": _no_secret_key_memo,
    "no-template": _no_template,
    "no-durable-memo": _no_durable_memo,
}
