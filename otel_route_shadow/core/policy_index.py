"""``PolicyIndex``: one snapshot's enabled policies in precedence order, indexed by exact-set member.

A context's candidates are the AND of one bit mask per match dimension, so resolving costs a few dict
lookups plus the candidates themselves rather than a scan of every policy. The index is built in one
pass over the set, one policy at a time (an ``EncodedPolicies`` builds each policy as it is reached and
drops it), and keeps positions, keys and member tables, never the policies themselves: ``ordered``
reads them from the set on demand. What it keeps is made of tuples of ints and strings, which the
cyclic garbage collector stops tracking, so a large index adds nothing to the host's collections.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from otel_route_shadow.core.canonical import canonical_json
from otel_route_shadow.core.decision import PolicyConsideration
from otel_route_shadow.core.policy import RoutingPolicy, precedence_level
from otel_route_shadow.core.vocabulary import ReasonCode

__all__ = ["PolicyIndex"]

_MATCHED_REASONS = frozenset({ReasonCode.MATCHED, ReasonCode.TIED, ReasonCode.OUTRANKED})
_MASK_MEMO_LIMIT = 4096
"""Value masks kept per dimension once built (the few values a host's spawns keep asking about)."""
_PRIORITY_OFFSET = 2**32
"""Added to ``-priority`` (``-(2**31 - 1)`` .. ``2**31``) so it sorts as an unsigned 8-byte integer."""


def _mask(positions: Iterable[int], size: int) -> int:
    """An int with the given bits set, built in one pass (OR-ing wide ints bit by bit is quadratic)."""
    buffer = bytearray((size + 7) // 8)
    for position in positions:
        buffer[position >> 3] |= 1 << (position & 7)
    return int.from_bytes(buffer, "little")


class _Dimension:
    """Bit masks over the ordered policies for one match dimension.

    A value's mask is built on first use, from the positions that name it, and memoised: building
    one mask per distinct value up front cost a wide int per value for values no spawn asks for. A
    value no policy names admits the open policies only: its mask is :attr:`any` itself, never a copy,
    and nothing is memoised for it (a host whose every spawn has a new principal id keeps no mask per
    spawn).
    """

    __slots__ = ("_masks", "_size", "any", "by_value", "scoped")

    def __init__(self, sets: Sequence[tuple[str, ...]]) -> None:
        size = len(sets)
        any_positions: list[int] = []
        scoped_positions: list[int] = []
        # A value named once (most repositories) keeps an int, not a list: what the build keeps
        # alive until its end stays small.
        by_value: dict[str, int | list[int]] = {}
        for position, values in enumerate(sets):
            if not values:
                any_positions.append(position)
                continue
            scoped_positions.append(position)
            for value in values:
                known = by_value.get(value)
                if known is None:
                    by_value[value] = position
                elif isinstance(known, int):
                    by_value[value] = [known, position]
                else:
                    known.append(position)
        self._size = size
        self.any = _mask(any_positions, size)
        self.scoped = _mask(scoped_positions, size)
        self.by_value: dict[str, tuple[int, ...]] = {
            value: (at,) if isinstance(at, int) else tuple(at) for value, at in by_value.items()
        }
        self._masks: dict[str, int] = {}

    def admit(self, value: str | None) -> int:
        if value is None:
            return self.any
        mask = self._masks.get(value)
        if mask is None:
            positions = self.by_value.get(value)
            if positions is None:
                return self.any
            mask = self.any | _mask(positions, self._size)
            if len(self._masks) >= _MASK_MEMO_LIMIT:
                self._masks.clear()
            self._masks[value] = mask
        return mask


class _Reordered(Sequence[RoutingPolicy]):
    """The policies of ``source`` at ``order``'s positions, read from ``source`` when asked for."""

    __slots__ = ("_order", "_source")

    def __init__(self, source: Sequence[RoutingPolicy], order: tuple[int, ...]) -> None:
        self._source = source
        self._order = order

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> RoutingPolicy: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RoutingPolicy]: ...

    def __getitem__(self, index: int | slice) -> RoutingPolicy | Sequence[RoutingPolicy]:
        if isinstance(index, slice):
            return _Reordered(self._source, self._order[index])
        return self._source[self._order[index]]

    def __iter__(self) -> Iterator[RoutingPolicy]:
        source = self._source
        for position in self._order:
            yield source[position]


def _sort_key(policy: RoutingPolicy, tiebreak: bytes) -> bytes:
    """``(rung, -priority, id, tiebreak)`` as bytes that sort in that order: fixed-width integers,
    then the id (UTF-8 sorts as code points; an id holds no NUL), a NUL, then ``tiebreak``."""
    return (
        precedence_level(policy.match).to_bytes(1, "big")
        + (_PRIORITY_OFFSET - policy.priority).to_bytes(8, "big")
        + policy.id.encode("utf-8", "surrogatepass")
        + b"\x00"
        + tiebreak
    )


class PolicyIndex:
    """The enabled policies of one snapshot, ordered by precedence and indexed by exact-set member.

    Precedence is ``(rung, -priority, id)``. Two policies share it only when they share an id (an
    invalid set that slipped past validation); their canonical content then breaks the tie, so
    insertion order never decides anything, not even there. The explanation rows are immutable and
    memoised per index, so a candidate costs a lookup rather than a new model.
    """

    __slots__ = (
        "_faces",
        "_principals",
        "_repos",
        "_roles",
        "_rows",
        "disabled",
        "disabled_policies",
        "keys",
        "ordered",
    )

    def __init__(self, policies: Iterable[RoutingPolicy]) -> None:
        source: Sequence[RoutingPolicy] = policies if isinstance(policies, Sequence) else tuple(policies)
        heads: list[bytes] = []
        ids: list[str] = []
        flags: list[bool] = []
        matches: list[tuple[tuple[str, ...], ...]] = []
        seen: set[str] = set()
        repeated: set[str] = set()
        for policy in source:  # one policy at a time: an EncodedPolicies builds each one here, once
            (repeated if policy.id in seen else seen).add(policy.id)
            heads.append(_sort_key(policy, b""))
            ids.append(policy.id)
            flags.append(policy.enabled)
            match = policy.match
            matches.append((match.repo_ids, match.roles, match.principal_ids, match.request_faces))
        for position, policy_id in enumerate(ids):
            if policy_id in repeated:
                policy = source[position]
                heads[position] = _sort_key(policy, canonical_json(policy.model_dump(mode="json")))
        enabled = [
            head + position.to_bytes(4, "big") for position, head in enumerate(heads) if flags[position]
        ]
        disabled = [
            head + position.to_bytes(4, "big") for position, head in enumerate(heads) if not flags[position]
        ]
        enabled.sort()
        disabled.sort()
        order = tuple(int.from_bytes(key[-4:], "big") for key in enabled)
        self.ordered: Sequence[RoutingPolicy] = _Reordered(source, order)
        self.keys: tuple[tuple[int, int, str], ...] = tuple(
            (key[0], int.from_bytes(key[1:9], "big") - _PRIORITY_OFFSET, ids[position])
            for key, position in zip(enabled, order, strict=True)
        )
        self.disabled_policies: Sequence[RoutingPolicy] = _Reordered(
            source, tuple(int.from_bytes(key[-4:], "big") for key in disabled)
        )
        self.disabled = len(disabled)
        self._repos = _Dimension([matches[position][0] for position in order])
        self._roles = _Dimension([matches[position][1] for position in order])
        self._principals = _Dimension([matches[position][2] for position in order])
        self._faces = _Dimension([matches[position][3] for position in order])
        self._rows: dict[tuple[int, ReasonCode], PolicyConsideration] = {}

    def repo_scoped(self, mask: int) -> int:
        """The repo-scoped members of ``mask``."""
        return mask & self._repos.scoped

    def candidates(
        self, repo: str | None, *, repo_known: bool, role: str | None, principal: str | None, face: str
    ) -> int:
        """Policies that match every dimension. ``repo`` is the canonical repository identity, or
        None; with an identity that is known but not canonical (``repo_known``), the repo-scoped
        policies that would have matched are candidates too, so the explanation can say why they
        did not."""
        if repo is not None:
            repos = self._repos.admit(repo)
        else:
            repos = self._repos.any | (self._repos.scoped if repo_known else 0)
        return repos & self._roles.admit(role) & self._principals.admit(principal) & self._faces.admit(face)

    def row(self, position: int, reason: ReasonCode) -> PolicyConsideration:
        """The explanation row of the policy at ``position`` for ``reason``."""
        cached = self._rows.get((position, reason))
        if cached is None:
            rung, neg_priority, policy_id = self.keys[position]
            cached = PolicyConsideration(
                policy_id=policy_id,
                rung=rung,
                priority=-neg_priority,
                matched=reason in _MATCHED_REASONS,
                reason=reason.value,
            )
            self._rows[(position, reason)] = cached
        return cached
