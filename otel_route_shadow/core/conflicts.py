"""Equal-precedence conflicts, found through an index rather than by comparing every pair.

Two enabled policies conflict when they share a rung and a priority, their matches overlap and their
actions differ. Comparing every pair is quadratic (8,000 policies: 32 million comparisons, and as
many problems when they all conflict), so the search works in three steps:

1. group the enabled policies by ``(rung, priority)``: only members of one group can conflict;
2. inside a group, fold policies with the very same match into one *box*: every pair inside a box
   overlaps, and the number of conflicting pairs among its members follows from how many carry each
   action, without listing them;
3. find the boxes a box overlaps through an index of each match dimension's values: a box on rungs
   1 to 7 always names a value in the rung's key dimension (repository, principal, role or face),
   and a box it overlaps either names one of the same values there or, on the dimensions a rung
   leaves optional, is open; the dimension with the fewest such candidates is the one searched.

Only the first ``limit`` conflicts are built as problems; the rest are counted. The count is exact
unless the search's work exceeds what examining ``budget`` box pairs costs (sets whose boxes overlap
densely, such as thousands of distinct repository lists that all share one repository); it then
stops, and the summary says "at least". The work counted is the work done, not only the pairs found:
examining a candidate pair costs :data:`PAIR_STEPS` steps, and so many index entries read while
gathering a box's candidates (an entry read again through another of the box's values counts again)
or set members a candidate's overlap check may compare cost one step each. A box naming thousands of
values that thousands of other boxes also name is millions of steps, not one per pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from otel_route_shadow.core.policy import (
    PolicyProblem,
    RoutingMatch,
    RoutingPolicy,
    action_key,
    precedence_level,
)
from otel_route_shadow.core.vocabulary import ReasonCode

__all__ = ["ConflictScan", "find_conflicts"]

DIMENSIONS = ("repo_ids", "roles", "principal_ids", "request_faces")
"""The match dimensions, in ladder order."""

DEFAULT_BUDGET = 2_000_000
"""The work of examining this many box pairs, before the count gives up on exactness (about a second)."""

PAIR_STEPS = 32
"""Steps one examined pair costs, in units of one index entry read or one set member compared (what a
pair costs in time, a Python-level check, against what those cost, about 15 ns each)."""

_Member = tuple[int, RoutingPolicy, Hashable]


@dataclass(slots=True)
class _Box:
    """The enabled policies of one group that share one match."""

    match: RoutingMatch
    sets: tuple[frozenset[str], ...]
    members: list[_Member] = field(default_factory=list)
    actions: Counter[Hashable] = field(default_factory=Counter)


@dataclass(slots=True)
class ConflictScan:
    """What :func:`find_conflicts` found: the first conflicts as problems, and how many in all."""

    listed: list[PolicyProblem]
    total: int
    exact: bool


def _pairs_within(box: _Box) -> int:
    n = len(box.members)
    return n * (n - 1) // 2 - sum(k * (k - 1) // 2 for k in box.actions.values())


def _pairs_between(a: _Box, b: _Box) -> int:
    same = sum(count * b.actions.get(key, 0) for key, count in a.actions.items())
    return len(a.members) * len(b.members) - same


def _overlap(a: _Box, b: _Box, searched: int) -> tuple[bool, int]:
    """Whether two boxes overlap, given that they do on dimension ``searched`` (the one ``b`` was found
    through; -1 for none), and the set members the check may compare: the smaller set of each other
    dimension both name."""
    cost = 0
    for dim, (x, y) in enumerate(zip(a.sets, b.sets, strict=True)):
        if dim == searched or not x or not y:
            continue
        cost += min(len(x), len(y))
        if x.isdisjoint(y):
            return False, cost
    return True, cost


def _problem(rung: int, priority: int, a: _Member, b: _Member) -> PolicyProblem:
    (first_index, first), (_, second) = sorted(
        ((a[0], a[1].id), (b[0], b[1].id)), key=lambda item: (item[1], item[0])
    )
    return PolicyProblem(
        code=ReasonCode.EQUAL_PRECEDENCE_CONFLICT,
        policy_id=first,
        index=first_index,
        message=f"{first} and {second} overlap at rung {rung}, priority {priority}, with different actions",
        related=(first, second),
    )


def _conflicting_pairs(a: _Box, b: _Box | None) -> Iterator[tuple[_Member, _Member]]:
    """Member pairs with different actions, inside ``a`` (``b`` None) or across ``a`` and ``b``."""
    if b is None:
        for i, left in enumerate(a.members):
            for right in a.members[i + 1 :]:
                if left[2] != right[2]:
                    yield left, right
        return
    for left in a.members:
        for right in b.members:
            if left[2] != right[2]:
                yield left, right


class _Group:
    """One ``(rung, priority)`` group: its boxes and an index of their match values."""

    def __init__(self, rung: int, priority: int, members: Sequence[_Member]) -> None:
        self.rung, self.priority = rung, priority
        boxes: dict[RoutingMatch, _Box] = {}
        for member in members:
            match = member[1].match
            box = boxes.get(match)
            if box is None:
                box = boxes[match] = _Box(match, tuple(frozenset(getattr(match, d)) for d in DIMENSIONS))
            box.members.append(member)
            box.actions[member[2]] += 1
        self.boxes = list(boxes.values())
        self.open: list[list[int]] = [[] for _ in DIMENSIONS]
        self.by_value: list[dict[str, list[int]]] = [{} for _ in DIMENSIONS]
        for position, box in enumerate(self.boxes):
            for dim, values in enumerate(box.sets):
                if not values:
                    self.open[dim].append(position)
                for value in values:
                    self.by_value[dim].setdefault(value, []).append(position)

    def search(self, position: int) -> tuple[int, list[list[int]] | None, int]:
        """Where to look for the boxes that may overlap the one at ``position``: the most selective
        dimension it names, that dimension's index lists (None for a catch-all box, which every later
        box may overlap) and the number of entries they hold, what reading them costs."""
        box = self.boxes[position]
        best: list[list[int]] | None = None
        best_dim, best_cost = -1, len(self.boxes) - position - 1
        for dim, values in enumerate(box.sets):
            if not values:
                continue
            lists = [self.open[dim], *(self.by_value[dim].get(value, []) for value in values)]
            cost = sum(len(found) for found in lists)
            if best is None or cost < best_cost:
                best, best_dim, best_cost = lists, dim, cost
        return best_dim, best, best_cost

    def candidates(self, position: int, lists: list[list[int]] | None) -> list[int]:
        """The boxes after ``position`` in ``lists`` (every later box for None), each once, in order."""
        if lists is None:  # a catch-all box (rung 8 has only one): every later box is a candidate
            return list(range(position + 1, len(self.boxes)))
        return sorted({other for found in lists for other in found if other > position})


class _Scan:
    def __init__(self, limit: int, budget: int) -> None:
        self.limit, self.budget = limit, budget * PAIR_STEPS
        self.listed: list[PolicyProblem] = []
        self.total = 0
        self.examined = 0  # steps (see PAIR_STEPS)
        self.exact = True

    def add(self, group: _Group, a: _Box, b: _Box | None, count: int) -> None:
        if count <= 0:
            return
        self.total += count
        if len(self.listed) >= self.limit:
            return
        for left, right in _conflicting_pairs(a, b):
            self.listed.append(_problem(group.rung, group.priority, left, right))
            if len(self.listed) >= self.limit:
                return

    def charge(self, steps: int) -> bool:
        """Count ``steps`` of work; False (and the count no longer exact) once past the budget."""
        self.examined += steps
        if self.examined > self.budget:
            self.exact = False
        return self.exact

    def scan(self, group: _Group) -> None:
        for position, box in enumerate(group.boxes):
            self.add(group, box, None, _pairs_within(box))
            searched, lists, cost = group.search(position)
            if not self.charge(cost):  # before reading the lists: their length is known
                return
            for other in group.candidates(position, lists):
                candidate = group.boxes[other]
                overlap, compared = _overlap(box, candidate, searched)
                if not self.charge(PAIR_STEPS + compared):
                    return
                if overlap:
                    self.add(group, box, candidate, _pairs_between(box, candidate))


def find_conflicts(
    indexed: Sequence[tuple[int, RoutingPolicy]], *, limit: int, budget: int = DEFAULT_BUDGET
) -> ConflictScan:
    """Every equal-precedence conflict among the enabled policies: the first ``limit`` as problems
    (one per pair, ``related`` naming both), and the total count (exact unless the work ran past
    that of examining ``budget`` pairs; see the module docstring)."""
    groups: dict[tuple[int, int], list[_Member]] = {}
    for index, policy in indexed:
        if policy.enabled:
            key = (precedence_level(policy.match), policy.priority)
            groups.setdefault(key, []).append((index, policy, action_key(policy.action)))
    scan = _Scan(limit, budget)
    for (rung, priority), members in sorted(groups.items()):
        scan.scan(_Group(rung, priority, members))
        if not scan.exact:
            break
    return ConflictScan(listed=scan.listed, total=scan.total, exact=scan.exact)
