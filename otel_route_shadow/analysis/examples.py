"""Examples of a kind of record (a divergence code, a what-if change): the lowest-``seq`` few of each,
whatever order the records are processed in. An example names its record's ``seq``: what a receipt
for one decision is made from (``otel-route-shadow prove CHAIN --seq N``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["Examples"]

K = TypeVar("K", bound=Hashable)


class Examples(Generic[K]):
    """The ``limit`` lowest-seq examples of each kind ``K``; each example is a dict with a ``seq``."""

    __slots__ = ("by_kind", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_kind: dict[K, list[dict[str, Any]]] = {}

    def wants(self, kind: K, seq: int) -> bool:
        """Whether an example at ``seq`` would be kept (saves building one that would not)."""
        bucket = self.by_kind.get(kind)
        return self.limit > 0 and (bucket is None or len(bucket) < self.limit or seq < bucket[-1]["seq"])

    def offer(self, kind: K, seq: int, build: Callable[[], dict[str, Any]]) -> None:
        if self.limit <= 0:
            return
        bucket = self.by_kind.setdefault(kind, [])
        if len(bucket) < self.limit:
            bucket.append(build())
        elif seq < bucket[-1]["seq"]:
            bucket[-1] = build()
        else:
            return
        bucket.sort(key=lambda example: example["seq"])
