"""Unreachable policies: enabled policies that can never decide, because policies that outrank them
match every context they match. See "Unreachable policies" in ``docs/core.md``.

The check is exact, not a heuristic, because of three facts about the ladder and the contexts:

1. **Only the same rung can cover.** ``Q`` outranks ``P`` when it sits on a lower rung, or on the
   same rung with a higher priority, or with the same priority, an identical action and a smaller id
   (the resolver then marks ``P`` outranked, not tied). For ``Q`` to cover part of ``P`` it must be
   open (any value) on every dimension ``P`` is open on (fact 2), so ``Q`` names a subset of ``P``'s
   dimensions, and a match naming fewer dimensions never sits on a lower rung. So ``Q`` is on ``P``'s
   rung, with its dimensions a subset of ``P``'s.
2. **An open dimension can only be covered by open dimensions.** Every dimension has values no
   policy can name: a context with no repository, a role that is not a worker role, no principal, a
   request face no policy lists. The contexts ``P`` matches with such a value on a dimension ``P`` is
   open on are matched only by policies open there too, and those policies do not look at that
   dimension, so they cover the rest of ``P`` exactly as they cover that slice.
3. **What is left is finite.** On the dimensions ``P`` names, ``P`` matches the product of its sets
   (its *cells*; values no context can carry are left out: a non-canonical repository id, an unknown
   role). ``P`` is unreachable exactly when every cell is matched by some policy that outranks ``P``;
   the policies named are the ones found for the cells.

Every policy's cells go into one map ``(dimensions named, cell) -> best policy there``, and each
cell of ``P`` is looked up once per subset of its dimensions on its rung (at most 8): the check costs
the sum of the policies' cell counts, not a comparison of every pair.

Limits (what the check cannot see): a policy with more than :data:`CELL_LIMIT` cells (for example
100 repositories x 50 principals), or past :data:`MAP_LIMIT` cells in all, is not checked itself,
and enters the map only through a list of large policies that each checked cell consults; when that
list would cost more than :data:`WORK_LIMIT` lookups for one policy, or :data:`TOTAL_WORK_LIMIT` for
the set, that policy is not checked. They are counted in :attr:`Reachability.unchecked` and named by
one note, never reported wrongly. In a set with equal-precedence conflicts (an error of its own), a
policy reported here may also be tied in a conflict in some contexts; it still never decides.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import product

from otel_route_shadow.core.identity import canonicalize_repo
from otel_route_shadow.core.policy import PolicyProblem, RoutingPolicy, action_key, rung_of_shape
from otel_route_shadow.core.vocabulary import ReasonCode, WorkerRole

__all__ = ["CELL_LIMIT", "MAP_LIMIT", "TOTAL_WORK_LIMIT", "WORK_LIMIT", "Reachability", "find_unreachable"]

CELL_LIMIT = 4096
"""Cells (value combinations over the named dimensions) above which a policy is not enumerated."""

WORK_LIMIT = 1_000_000
"""Cell checks against large policies above which one policy is left unchecked."""

TOTAL_WORK_LIMIT = 5_000_000
"""Cell checks against large policies for the whole set; past it, policies that need them are left
unchecked (memory and time stay bounded whatever the set)."""

MAP_LIMIT = 1_000_000
"""Cells held in the map for the whole set; a policy that would exceed it is treated as large."""

_NAMED_LIMIT = 5
"""Covering policies named in a problem's message (all of them are in ``related``)."""

_ROLES = frozenset(role.value for role in WorkerRole)

_Cell = tuple[str, ...]


def _live(dim: int, value: str) -> bool:
    """Whether some context can carry ``value`` on dimension ``dim`` (repo, role, principal, face)."""
    if dim == 0:
        return canonicalize_repo(value) == value
    return dim != 1 or value in _ROLES


@dataclass(slots=True)
class _Entry:
    """One enabled policy as the check sees it."""

    index: int
    policy: RoutingPolicy
    action: Hashable
    shape: tuple[int, ...]
    """The dimensions the match names, in ladder order (0 repo, 1 role, 2 principal, 3 face)."""
    values: tuple[tuple[str, ...], ...]
    """The live values of each named dimension."""
    rung: int
    cells: int

    def iter_cells(self) -> Iterator[_Cell]:
        return product(*self.values)

    def outranks(self, other: _Entry) -> bool:
        """Same rung assumed: higher priority, or equal priority, identical action and smaller id."""
        mine, theirs = self.policy, other.policy
        if mine.priority != theirs.priority:
            return mine.priority > theirs.priority
        return self.action == other.action and mine.id < theirs.id

    def contains(self, shape: tuple[int, ...], cell: _Cell) -> bool:
        """Whether this policy matches ``cell`` (over ``shape``) on every dimension it names."""
        lookup = dict(zip(shape, cell, strict=True))
        return all(lookup.get(dim) in values for dim, values in zip(self.shape, self.values, strict=True))


def _entry(index: int, policy: RoutingPolicy) -> _Entry:
    match = policy.match
    sets = (match.repo_ids, match.roles, match.principal_ids, match.request_faces)
    shape = tuple(dim for dim, values in enumerate(sets) if values)
    values = tuple(tuple(v for v in sets[dim] if _live(dim, v)) for dim in shape)
    cells = 1
    for found in values:
        cells *= len(found)
    rung = rung_of_shape(repo=0 in shape, role=1 in shape, principal=2 in shape, face=3 in shape)
    return _Entry(index, policy, action_key(policy.action), shape, values, rung, cells)


_Subshapes = list[tuple[tuple[int, ...], tuple[int, ...]]]


def _subshapes(shape: tuple[int, ...], rung: int) -> _Subshapes:
    """Subsets of ``shape`` on the same rung, each with the positions that project a cell onto it."""
    found = []
    for mask in range(1 << len(shape)):
        positions = tuple(i for i in range(len(shape)) if mask >> i & 1)
        sub = tuple(shape[i] for i in positions)
        if rung_of_shape(repo=0 in sub, role=1 in sub, principal=2 in sub, face=3 in sub) == rung:
            found.append((sub, positions))
    return found


@dataclass(slots=True)
class _CellMap:
    """``(shape, cell)`` -> the best policy there, and per ``(priority, action)`` the smallest id."""

    best: dict[tuple[tuple[int, ...], _Cell], _Entry] = field(default_factory=dict)
    tied: dict[tuple[tuple[int, ...], _Cell, int, Hashable], _Entry] = field(default_factory=dict)
    large: dict[int, list[_Entry]] = field(default_factory=dict)
    size: int = 0

    def add(self, entry: _Entry) -> None:
        if entry.cells > CELL_LIMIT or self.size + entry.cells > MAP_LIMIT:
            self.large.setdefault(entry.rung, []).append(entry)
            return
        self.size += entry.cells
        priority = entry.policy.priority
        for cell in entry.iter_cells():
            key = (entry.shape, cell)
            best = self.best.get(key)
            if best is None or (-priority, entry.policy.id) < (-best.policy.priority, best.policy.id):
                self.best[key] = entry
            tied_key = (entry.shape, cell, priority, entry.action)
            first = self.tied.get(tied_key)
            if first is None or entry.policy.id < first.policy.id:
                self.tied[tied_key] = entry

    def coverer(self, target: _Entry, shape: tuple[int, ...], cell: _Cell) -> _Entry | None:
        """A policy of ``shape`` that matches ``cell`` and outranks ``target``, if any."""
        best = self.best.get((shape, cell))
        if best is None or best.policy.priority < target.policy.priority:
            return None
        if best.policy.priority > target.policy.priority:
            return best
        first = self.tied.get((shape, cell, target.policy.priority, target.action))
        return first if first is not None and first.outranks(target) else None


@dataclass(slots=True)
class Reachability:
    """The unreachable policies as problems, and how many policies the limits left unchecked."""

    problems: list[PolicyProblem]
    unchecked: int


def _cell_coverer(
    cells: _CellMap, target: _Entry, subshapes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]], cell: _Cell
) -> _Entry | None:
    for shape, positions in subshapes:
        found = cells.coverer(target, shape, tuple(cell[i] for i in positions))
        if found is not None:
            return found
    for large in cells.large.get(target.rung, ()):
        if (
            set(large.shape) <= set(target.shape)
            and large.outranks(target)
            and large.contains(target.shape, cell)
        ):
            return large
    return None


def _coverers(cells: _CellMap, target: _Entry, subshapes: _Subshapes) -> list[_Entry] | None:
    """The policies that together cover every cell of ``target``, or None when a cell is left."""
    found: dict[str, _Entry] = {}
    for cell in target.iter_cells():
        coverer = _cell_coverer(cells, target, subshapes, cell)
        if coverer is None:
            return None
        found.setdefault(coverer.policy.id, coverer)
    entries = sorted(found.values(), key=lambda e: (-e.policy.priority, e.policy.id))
    for single in entries:  # name one policy when one of those found covers every cell alone
        if all(single.contains(target.shape, cell) for cell in target.iter_cells()):
            return [single]
    return entries


def _problem(target: _Entry, coverers: Sequence[_Entry]) -> PolicyProblem:
    ids = [entry.policy.id for entry in coverers]
    named = ", ".join(ids[:_NAMED_LIMIT]) + (
        f" and {len(ids) - _NAMED_LIMIT} more" if len(ids) > _NAMED_LIMIT else ""
    )
    how = f"{named} outranks it" if len(ids) == 1 else f"{named} together outrank it"
    return PolicyProblem(
        code=ReasonCode.UNREACHABLE_POLICY,
        policy_id=target.policy.id,
        index=target.index,
        message=f"can never decide: {how} wherever it matches (rung {target.rung})",
        related=tuple(sorted(ids)),
    )


def _unchecked_note(count: int) -> PolicyProblem:
    return PolicyProblem(
        code=ReasonCode.UNREACHABLE_POLICY,
        message=(
            f"{count:,} enabled policies not checked for reachability: their matches are over the "
            "check's size limits (docs/core.md, 'Unreachable policies')"
        ),
        count=0,
    )


def find_unreachable(indexed: Sequence[tuple[int, RoutingPolicy]]) -> Reachability:
    """Every enabled policy that no context can reach, with the policies that cover it.

    Policies the limits leave unchecked are counted, and named by one note (``count`` 0) so that
    ``policy check`` says the check was incomplete rather than staying silent.
    """
    entries = [_entry(index, policy) for index, policy in indexed if policy.enabled]
    cells = _CellMap()
    for entry in entries:
        cells.add(entry)
    problems: list[PolicyProblem] = []
    unchecked = 0
    work = 0
    shapes: dict[tuple[int, ...], _Subshapes] = {}
    for entry in entries:
        if entry.cells == 0:
            continue  # matches no context at all: its members are errors of their own
        cost = entry.cells * len(cells.large.get(entry.rung, ()))
        if entry.cells > CELL_LIMIT or cost > WORK_LIMIT or work + cost > TOTAL_WORK_LIMIT:
            unchecked += 1
            continue
        work += cost
        subshapes = shapes.get(entry.shape)
        if subshapes is None:
            subshapes = shapes[entry.shape] = _subshapes(entry.shape, entry.rung)
        coverers = _coverers(cells, entry, subshapes)
        if coverers is not None:
            problems.append(_problem(entry, coverers))
    if unchecked:
        problems.append(_unchecked_note(unchecked))
    return Reachability(problems=problems, unchecked=unchecked)
