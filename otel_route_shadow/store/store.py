"""``RoutingPolicyStore``: versioned, hashed policy snapshots (ADR-0139 D5).

A decision is only replayable if the policy set it cites is durable, versioned and hashed, so the
store keeps every revision, verifies every byte it reads, and refuses to let missing or corrupt
evidence present as a coherent state: ``load()`` answers ``ok``, ``absent`` (never written, resolves
normally) or ``corrupt`` (an empty snapshot marked unavailable, so ``explain`` holds with
``snapshot-unavailable``). Layout and hash are specified in ``docs/policy-store.md``.

The facade over the modules that hold each part: ``loading`` (the verdict and its cache),
``saving``, ``revisions`` (one revision, the history, a diff) and ``repair``; ``layout`` owns the
directory and its lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from otel_route_shadow.core import PolicySnapshot, RoutingPolicy
from otel_route_shadow.store import repair as repairing
from otel_route_shadow.store import revisions, saving
from otel_route_shadow.store.diff import SnapshotDiff
from otel_route_shadow.store.layout import StoreLayout
from otel_route_shadow.store.loading import SnapshotLoader
from otel_route_shadow.store.results import HistoryEntry, RepairResult, SaveResult, SnapshotLoad

__all__ = ["COMMAND_READ_WAIT_S", "RoutingPolicyStore"]

COMMAND_READ_WAIT_S: Final = 5.0
"""How long a command's ``load()`` waits for a writer (the first save's few milliseconds between its two
writes): a command that read the store meanwhile said no snapshot was saved."""


class RoutingPolicyStore:
    """Versioned, hashed policy snapshots under one directory (layout: ``docs/policy-store.md``).

    Thread-safe. Writers (``save``, ``repair``) serialise on ``flock`` of ``.lock``. Readers take no
    file lock, because every file they read is replaced by ``rename`` and history files never change;
    the one exception is confirming that ``current.json`` is really missing, for which ``load()``
    waits at most ``read_lock_wait``.
    """

    racy_window_ns: int = 1_000_000_000
    """How recent a change must be for a verdict not to be cached; at least the coarsest timestamp
    granularity the store may sit on (1 s covers ext3, HFS+ and most network file systems)."""
    lock_timeout: float = 30.0
    """How long ``save`` and ``repair`` wait for another writer."""
    read_lock_wait: float = 0.005
    """How long ``load()`` waits for a writer before holding decisions, when ``current.json`` is
    missing and the history is not (the first save between its two writes); short, because
    ``load()`` runs inside spawns (``docs/policy-store.md``, "Writes"). A command, which no spawn
    waits for, gives :data:`COMMAND_READ_WAIT_S` instead."""

    def __init__(self, root: str | Path, *, read_lock_wait: float | None = None) -> None:
        if read_lock_wait is not None:
            self.read_lock_wait = read_lock_wait
        self.root = Path(root)
        self._layout = StoreLayout(os.fspath(root))
        self._loader = SnapshotLoader(self._layout, self)

    def __repr__(self) -> str:
        return f"RoutingPolicyStore({self._layout.root!r})"

    @property
    def full_loads(self) -> int:
        """How many ``load()`` calls actually read and verified files (the rest were served cached)."""
        return self._loader.full_loads

    # -- reading ------------------------------------------------------------------------------------

    def load(self) -> SnapshotLoad:
        """The current snapshot's verdict. Never raises; two ``stat`` calls when nothing changed
        (see :class:`otel_route_shadow.store.loading.SnapshotLoader`)."""
        return self._loader.load()

    def load_within(self, max_bytes: int) -> SnapshotLoad | None:
        """:meth:`load`, or None without decoding anything when ``current.json`` is over ``max_bytes``
        (measured on the open file, so a larger one saved after a size check is caught too)."""
        return self._loader.load_within(max_bytes)

    def peek(self) -> SnapshotLoad | None:
        """The cached verdict if the store has not changed since it was read, else None; reads no
        file. Lets a caller decide where a re-read should run before paying for it (the
        instrumentation's background prefetch)."""
        return self._loader.peek()

    def current_size(self) -> int | None:
        """The size in bytes of ``current.json`` if it is a regular file (not followed if a
        symlink), else None: what a re-read would have to parse, known from one ``lstat``."""
        return self._loader.current_size()

    def revision(self, n: int) -> PolicySnapshot:
        """The snapshot saved as revision ``n``, verified, to replay a decision that cites it.

        Revision 0 is the empty set by definition (what an absent store reports). Raises
        :class:`RevisionNotFoundError` or :class:`RevisionCorruptError`.
        """
        return revisions.revision(self._layout, n)

    def history(self, current: SnapshotLoad | None = None) -> list[HistoryEntry]:
        """Every revision from 1 to the newest, each verified; runs of missing numbers collapsed.
        ``current``: the caller's ``load()`` (which marks the current revision), so it is not read twice."""
        return revisions.history(self._layout, current if current is not None else self.load())

    def diff(self, a: int, b: int) -> SnapshotDiff:
        """Which policies revision ``b`` added, removed or changed relative to revision ``a``."""
        return revisions.revision_diff(self._layout, a, b)

    # -- writing ------------------------------------------------------------------------------------

    def save(self, policies: Iterable[RoutingPolicy], *, strict: bool = False) -> SaveResult:
        """Validate, then write the set as the next revision, atomically and durably.

        Raises :class:`InvalidPolicySetError` (with every problem's code) before touching the disk
        when the set has an error, or, with ``strict``, a warning (``unreachable-policy``);
        :class:`CorruptSnapshotError` over a corrupt store, :class:`StoreIOError` when the directory
        cannot be written. Saving the set the store already holds creates no revision. The warnings
        of an accepted set are on the result (``SaveResult.warnings``).

        This is the one place a whole set is validated: a load trusts a snapshot by its hash.
        """
        return saving.save(self._layout, self._loader, self.lock_timeout, policies, strict=strict)

    def repair(self) -> RepairResult:
        """Move corrupt evidence into ``quarantine/`` and let the next save continue the sequence.

        Nothing is deleted and nothing is reinstated automatically: which policy set should apply is
        the operator's call, and ``reinstatable`` names the newest revision history can vouch for.
        Until the next save the store reads ``absent`` with a note (an explicit operator decision,
        recorded in ``repaired.json``), never ``absent`` by accident.
        """
        return repairing.repair(self._layout, self._loader, self.lock_timeout)
