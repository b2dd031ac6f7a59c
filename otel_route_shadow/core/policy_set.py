"""``EncodedPolicies``: a policy set held as the canonical JSON of each policy.

A large set loaded from the policy store lives for as long as it is the current revision. Held as
models, each policy is several objects the cyclic garbage collector traverses on every full
collection of the host; held as bytes, the set is one tuple the collector skips. A policy is built
from its encoding when it is asked for, which the resolver does for the few candidates of a context,
not for the set.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from otel_route_shadow.core.policy import RoutingPolicy

__all__ = ["EncodedPolicies"]


class EncodedPolicies(Sequence[RoutingPolicy]):
    """An immutable sequence of policies stored as their canonical encodings.

    ``encodings`` must be canonical JSON of valid policies (every field present, as
    ``canonical_json(policy.model_dump(mode="json"))`` gives): the store verified them before it
    built this. Equal to any sequence of equal policies in the same order.
    """

    __slots__ = ("encodings",)

    def __init__(self, encodings: Sequence[bytes]) -> None:
        self.encodings: tuple[bytes, ...] = tuple(encodings)

    def __len__(self) -> int:
        return len(self.encodings)

    @overload
    def __getitem__(self, index: int) -> RoutingPolicy: ...

    @overload
    def __getitem__(self, index: slice) -> EncodedPolicies: ...

    def __getitem__(self, index: int | slice) -> RoutingPolicy | EncodedPolicies:
        if isinstance(index, slice):
            return EncodedPolicies(self.encodings[index])
        return RoutingPolicy.model_validate_json(self.encodings[index])

    def __iter__(self) -> Iterator[RoutingPolicy]:
        for encoding in self.encodings:
            yield RoutingPolicy.model_validate_json(encoding)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EncodedPolicies):
            return self.encodings == other.encodings
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.encodings)

    def __repr__(self) -> str:
        return f"EncodedPolicies(<{len(self.encodings)} policies>)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (EncodedPolicies, (self.encodings,))
