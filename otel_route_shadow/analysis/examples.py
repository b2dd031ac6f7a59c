"""Examples of a kind of record (a divergence code, a what-if change): the lowest-``seq`` few of each,
whatever order the records are processed in. An example names its record's ``seq``: what a receipt
for one decision is made from (``otel-route-shadow prove CHAIN --seq N``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["Examples"]

K = TypeVar("K", bound=Hashable)


class Examples(Generic[K]):
    """The ``limit`` lowest-seq examples of each kind ``K``; each example is a dict with a ``seq``."""

    __slots__ = ("bars", "by_kind", "limit", "open_bar")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_kind: dict[K, list[dict[str, Any]]] = {}
        self.bars: dict[K, int] = {}
        """Per kind whose examples are all taken: the highest seq kept (a later one is not wanted)."""
        self.open_bar = sys.maxsize if limit > 0 else -1
        """The bar of a kind not in :attr:`bars`: ``seq < bar`` is wanted."""

    def wants(self, kind: K, seq: int) -> bool:
        """Whether an example at ``seq`` would be kept (saves building one that would not); a caller
        on a hot path may test ``seq < bars.get(kind, open_bar)`` itself, which is the same."""
        return seq < self.bars.get(kind, self.open_bar)

    def offer(self, kind: K, seq: int, build: Callable[[], dict[str, Any]]) -> None:
        if not self.wants(kind, seq):
            return
        bucket = self.by_kind.setdefault(kind, [])
        if len(bucket) < self.limit:
            bucket.append(build())
        else:
            bucket[-1] = build()
        bucket.sort(key=lambda example: example["seq"])
        if len(bucket) == self.limit:
            self.bars[kind] = bucket[-1]["seq"]

    def restore(self, kind: K, examples: list[dict[str, Any]]) -> None:
        """Set the examples of ``kind`` (the lowest-seq ``limit`` of them are kept)."""
        kept = sorted(examples, key=lambda example: example["seq"])[: max(self.limit, 0)]
        if not kept:
            return
        self.by_kind[kind] = kept
        if len(kept) == self.limit:
            self.bars[kind] = kept[-1]["seq"]
