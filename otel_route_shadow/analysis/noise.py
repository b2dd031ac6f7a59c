"""The noise baseline: how much of the measured divergence is the legacy route changing on its own.

Diffy compares two runs of the *same* old system to learn what differs by chance, and reports only
the difference above it. Here two consecutive spawns of the same **decision key** (repository, role,
principal, request face, requirement) are two runs of the old system on the same input: when their
legacy routes (provider, model, transport) differ, the legacy route *flaps* (a credit failover that
comes and goes, a ratchet that moves). Per key, over the window, in ``seq`` order:

* ``flap_rate = flaps / (spawns - 1)``, where ``flaps`` counts the consecutive pairs of the key's
  spawns whose legacy routes differ (unknown, None, for a key with one spawn);
* ``divergence_rate = diverged / spawns``;
* ``divergence_above_noise = max(0, divergence_rate - flap_rate)``; for a key with one spawn, nothing
  was measured to subtract, and it is the divergence rate itself (never hides a divergence).

A key *flaps* when ``flaps > 0``; the others are *stable*. Totals over several keys weight each key by
its spawns: ``divergence_above_noise = sum(spawns_k * above_k) / sum(spawns_k)``, and the total flap rate
is ``sum(flaps_k) / sum(spawns_k - 1)``. Figures are exact fractions until they are shown.

Streaming costs no hashing per record: a cell of the analysis's cube holds its key's
:class:`KeyState` and its interned route, so a record's step is one identity test; spawns and
divergences per key are added from the cube's counts at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from otel_route_shadow.analysis.groups import HOST_KEY, key_label, label
from otel_route_shadow.analysis.tally import interval
from otel_route_shadow.shadow import attributes as attr

__all__ = [
    "FLAP_EXAMPLES",
    "FLOAT_EXACT",
    "KEY_ATTRIBUTES",
    "KEY_NAMES",
    "NOISE_DEFINITION",
    "ROUTE_ATTRIBUTES",
    "ROUTE_NAMES",
    "KeyState",
    "NoisePart",
    "NoiseRow",
    "NoiseTable",
    "NoiseTracker",
    "fraction_rate",
]

KEY_NAMES: Final = ("repo", "role", "principal", "request_face", "requirement")
KEY_ATTRIBUTES: Final = (attr.REPO, attr.ROLE, attr.PRINCIPAL, attr.REQUEST_FACE, attr.REQUIREMENT)
"""The decision key: what a spawn asked for, as recorded."""
ROUTE_NAMES: Final = ("provider", "model", "transport")
ROUTE_ATTRIBUTES: Final = (attr.LEGACY_PROVIDER, attr.LEGACY_MODEL, attr.TRANSPORT)
"""The legacy route whose changes between consecutive spawns of a key are the noise."""
FLAP_EXAMPLES: Final = 3
"""The ``seq`` of the first few flaps of each key are kept (a record a receipt can be made from)."""

NOISE_DEFINITION: Final = (
    "per decision key (repo, role, principal, request face, requirement), over the window in seq order: "
    "flap_rate = consecutive spawns whose legacy route (provider, model, transport) differs / (spawns - 1); "
    "divergence_above_noise = max(0, divergence_rate - flap_rate), the divergence rate itself for a key "
    "with one spawn; a key flaps when flap_rate > 0; totals weight each key by its spawns"
)

FLOAT_EXACT: Final = 1 << 26
"""While every key has fewer transitions than this, its flap rate as a float orders the table as the
exact fraction does: two different rates ``a/b`` and ``c/d`` differ by at least ``1/(b*d)``, more than
``2**-52``, and each float is within ``2**-54`` of its fraction (equal fractions give equal floats)."""

_NOTHING: Final[tuple[Any, ...]] = ("(no route yet)",)


class KeyState:
    """One decision key while streaming: its last route, flaps, spawns and divergences per lane."""

    __slots__ = ("diverged", "flap_seqs", "flaps", "last", "routes", "spawns")

    def __init__(self, lanes: int) -> None:
        self.last: tuple[Any, ...] = _NOTHING
        self.flaps = 0
        self.spawns = 0
        self.diverged = [0] * lanes
        self.routes: tuple[tuple[Any, ...], ...] = ()
        """The distinct routes run, in the order first run (tuples, not a set and a list: a monitor
        holds a state per key of every host, and immutable ones cost the garbage collector nothing)."""
        self.flap_seqs: tuple[int, ...] = ()

    def step(self, route: tuple[Any, ...], seq: int) -> None:
        """The key's next spawn in ``seq`` order ran ``route`` (an interned tuple: see
        :meth:`NoiseTracker.route`). Spawns and divergences are counted by the caller (from its cube,
        at the end); a hot loop may test ``state.last is not route`` itself and call this only then."""
        last = self.last
        if last is not route:
            if last is not _NOTHING:
                self.flaps += 1
                if len(self.flap_seqs) < FLAP_EXAMPLES:
                    self.flap_seqs = (*self.flap_seqs, seq)
            self.last = route
            if route not in self.routes:
                self.routes = (*self.routes, route)


class NoiseTracker:
    """Every decision key's :class:`KeyState`, and one object per distinct route (so that equal routes
    are the same object and a step compares identities)."""

    __slots__ = ("keys", "lanes", "routes")

    def __init__(self, lanes: Sequence[str] = ("",)) -> None:
        self.lanes = tuple(lanes)
        self.keys: dict[tuple[Any, ...], KeyState] = {}
        self.routes: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def key(self, key: tuple[Any, ...]) -> KeyState:
        """The state of ``key``: a decision key followed by its host (the log's origin in a fleet
        report, else None), so that spawns of two logs are never consecutive."""
        state = self.keys.get(key)
        if state is None:
            state = self.keys[key] = KeyState(len(self.lanes))
        return state

    def restore_key(
        self,
        key: tuple[Any, ...],
        last: tuple[Any, ...] | None,
        flaps: int,
        routes: Sequence[tuple[Any, ...]],
        flap_seqs: Sequence[int],
    ) -> None:
        """Set a key's state as a saved pass left it (``last`` None: no spawn yet; every route
        interned with :meth:`route`); its spawns and divergences come from the cube at the end."""
        state = self.key(key)
        state.last = _NOTHING if last is None else last
        state.flaps = flaps
        state.routes = tuple(dict.fromkeys(routes))
        state.flap_seqs = tuple(flap_seqs[:FLAP_EXAMPLES])

    def route(self, route: tuple[Any, ...]) -> tuple[Any, ...]:
        return self.routes.setdefault(route, route)

    def of(self, attributes: dict[str, Any]) -> tuple[KeyState, tuple[Any, ...]]:
        """The key state and the interned route of one observation (once per distinct cell)."""
        key = (*map(attributes.get, KEY_ATTRIBUTES), attributes.get(HOST_KEY))
        route = tuple(map(attributes.get, ROUTE_ATTRIBUTES))
        hash((key, route))  # a value no exporter writes (a list) raises TypeError here, not later
        return self.key(key), self.route(route)

    def table(self) -> NoiseTable:
        return NoiseTable(lanes=self.lanes, rows=self.rows())

    def rows(self) -> list[NoiseRow]:
        """A row per key with spawns (the spawns and divergences already added from the cube)."""
        return [
            NoiseRow(
                key=key[:-1],
                host=key[-1],
                spawns=state.spawns,
                flaps=state.flaps,
                routes=len(state.routes),
                diverged=tuple(state.diverged),
                flap_seqs=tuple(state.flap_seqs),
            )
            for key, state in self.keys.items()
            if state.spawns
        ]


def fraction_rate(value: Fraction | None) -> float | None:
    """A rate for output: rounded to 6 places, as every rate of the analyses."""
    return None if value is None else round(float(value), 6)


@dataclass(frozen=True, slots=True)
class NoiseRow:
    """One decision key's figures over the window."""

    key: tuple[Any, ...]
    spawns: int
    flaps: int
    routes: int
    """Distinct legacy routes the key ran."""
    diverged: tuple[int, ...]
    """Per lane (the report has one; whatif has the recorded and the candidate decision)."""
    flap_seqs: tuple[int, ...] = ()
    host: Any = None
    """The origin of the key's log in a fleet report (None for one chain)."""

    @property
    def flapping(self) -> bool:
        return self.flaps > 0

    @property
    def label(self) -> str:
        """The key as the text shows it, after its host in a fleet (one key of two hosts is two rows)."""
        shown = key_label(self.key)
        return shown if self.host is None else f"{label(self.host)}: {shown}"

    @property
    def transitions(self) -> int:
        """Consecutive pairs of the key's spawns."""
        return max(self.spawns - 1, 0)

    @property
    def flap_rate(self) -> Fraction | None:
        return Fraction(self.flaps, self.transitions) if self.transitions else None

    def divergence_rate(self, lane: int = 0) -> Fraction:
        return Fraction(self.diverged[lane], self.spawns)

    def above_noise(self, lane: int = 0) -> Fraction:
        divergence = self.divergence_rate(lane)
        noise = self.flap_rate
        return divergence if noise is None else max(Fraction(0), divergence - noise)

    def excess(self, lane: int = 0) -> Fraction:
        """Spawns diverging above the noise (a fraction of a spawn is possible)."""
        return self.spawns * self.above_noise(lane)

    def as_dict(self, lanes: Sequence[str]) -> dict[str, Any]:
        return {
            **({} if self.host is None else {"host": self.host}),
            "key": dict(zip(KEY_NAMES, self.key, strict=True)),
            "spawns": self.spawns,
            "flaps": self.flaps,
            "flap_rate": fraction_rate(self.flap_rate),
            "routes": self.routes,
            **_lanes(
                lanes,
                lambda lane: {
                    "diverged": self.diverged[lane],
                    "divergence_rate": fraction_rate(self.divergence_rate(lane)),
                    "divergence_interval": interval(self.diverged[lane], self.spawns),
                    "divergence_above_noise": fraction_rate(self.above_noise(lane)),
                },
            ),
            "flap_seqs": list(self.flap_seqs),
        }


@dataclass(frozen=True, slots=True)
class NoisePart:
    """The figures of several keys together (all, the stable ones, the flapping ones)."""

    keys: int
    spawns: int
    flaps: int
    transitions: int
    diverged: tuple[int, ...]
    excess: tuple[Fraction, ...]

    @classmethod
    def of(cls, rows: Sequence[NoiseRow], lanes: int) -> NoisePart:
        return cls(
            keys=len(rows),
            spawns=sum(row.spawns for row in rows),
            flaps=sum(row.flaps for row in rows),
            transitions=sum(row.transitions for row in rows),
            diverged=tuple(sum(row.diverged[lane] for row in rows) for lane in range(lanes)),
            excess=tuple(sum((row.excess(lane) for row in rows), Fraction(0)) for lane in range(lanes)),
        )

    @property
    def flap_rate(self) -> Fraction | None:
        return Fraction(self.flaps, self.transitions) if self.transitions else None

    def divergence_rate(self, lane: int = 0) -> Fraction | None:
        return Fraction(self.diverged[lane], self.spawns) if self.spawns else None

    def above_noise(self, lane: int = 0) -> Fraction | None:
        return self.excess[lane] / self.spawns if self.spawns else None

    def as_dict(self, lanes: Sequence[str]) -> dict[str, Any]:
        return {
            "keys": self.keys,
            "spawns": self.spawns,
            "flaps": self.flaps,
            "transitions": self.transitions,
            "flap_rate": fraction_rate(self.flap_rate),
            **_lanes(
                lanes,
                lambda lane: {
                    "diverged": self.diverged[lane],
                    "divergence_rate": fraction_rate(self.divergence_rate(lane)),
                    "divergence_above_noise": fraction_rate(self.above_noise(lane)),
                },
            ),
        }


@dataclass
class NoiseTable:
    """Every decision key of the window, with the stable and the flapping part."""

    lanes: tuple[str, ...] = ("",)
    rows: list[NoiseRow] = field(default_factory=list)

    flapping: list[NoiseRow] = field(init=False)
    """The keys whose legacy route changed at least once, most flapping first (only they are listed:
    the other rows are summed, in no order)."""

    def __post_init__(self) -> None:
        flapping = [row for row in self.rows if row.flapping]
        floats = all(row.transitions < FLOAT_EXACT for row in flapping)
        flapping.sort(key=_row_order if floats else _exact_row_order)
        self.flapping = flapping

    def part(self, which: str = "total") -> NoisePart:
        """``total``, ``stable`` or ``flapping``."""
        if which == "stable":
            rows = [row for row in self.rows if not row.flapping]
        elif which == "flapping":
            rows = self.flapping
        else:
            rows = self.rows
        return NoisePart.of(rows, len(self.lanes))

    def as_dict(self) -> dict[str, Any]:
        return {
            "definition": NOISE_DEFINITION,
            "key": list(KEY_NAMES),
            "route": list(ROUTE_NAMES),
            "total": self.part("total").as_dict(self.lanes),
            "stable": self.part("stable").as_dict(self.lanes),
            "flapping": self.part("flapping").as_dict(self.lanes),
            "flapping_keys": [row.as_dict(self.lanes) for row in self.flapping],
        }


def _row_order(row: NoiseRow) -> tuple[Any, ...]:
    """Most flapping first, then most spawns, then by key: the flap rate as a float (see
    :data:`FLOAT_EXACT`), a tenth of the cost of comparing fractions."""
    transitions = row.transitions
    return (
        -(row.flaps / transitions) if transitions else 0.0,
        -row.spawns,
        tuple(["" if v is None else str(v) for v in (*row.key, row.host)]),
    )


def _exact_row_order(row: NoiseRow) -> tuple[Any, ...]:
    """:func:`_row_order` with the flap rate as a fraction (a key of more transitions than
    :data:`FLOAT_EXACT`)."""
    return (-(row.flap_rate or 0), *_row_order(row)[1:])


def _lanes(lanes: Sequence[str], figures: Any) -> dict[str, Any]:
    """One lane's figures inline (the report), or each lane's under its name (whatif)."""
    if len(lanes) == 1:
        result: dict[str, Any] = figures(0)
        return result
    return {name: figures(i) for i, name in enumerate(lanes)}
