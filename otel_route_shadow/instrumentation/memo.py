"""The shadow runtime's one memo (``ShadowRuntime.memo``; what it saves: docs/benchmarks.md, "Caches,
windows and threads")."""

from __future__ import annotations

import threading
from typing import Any, Final

from otel_route_shadow.worker import AFTER_FORK

__all__ = ["MEMO_SIZE", "RuntimeMemo"]

MEMO_SIZE: Final = 4096


class RuntimeMemo:
    """The runtime's one memo: a bounded map from a pure key to what was derived from it.

    Keys of the four kinds cannot collide: ``bytes`` (pydantic's JSON of a context seen clean ->
    its canonical JSON), a 6-tuple (seam, canonical context, snapshot hash, revision, availability,
    load state -> the decision record), a 4-tuple starting with ``"index"`` (snapshot identity
    -> its ``PolicyIndex``) and a 4-tuple starting with ``"served"`` (a decision record with a served
    route -> what its record adds, and its payload template: ``served.SERVED_KEY``). Every value is a pure function of its key, so a hit is exact, never a
    guess, and nothing here depends on time. Only clean contexts are keys, so no secret is kept.
    At ``limit`` entries the oldest goes first; reads take no lock (a dict read is atomic).
    """

    __slots__ = ("__weakref__", "_entries", "_lock", "get", "limit")

    def __init__(self, limit: int = MEMO_SIZE) -> None:
        self.limit = limit
        self._entries: dict[Any, Any] = {}
        self._lock = threading.Lock()
        self.get = self._entries.get
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): a lock another thread of the parent's
        held at fork was copied held. The entries are kept (each ``put`` leaves the map whole)."""
        self._lock = threading.Lock()

    def put(self, key: Any, value: Any) -> None:
        if self.limit <= 0:
            return
        with self._lock:
            while len(self._entries) >= self.limit:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = value

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._entries.values())
