"""``RoutingPolicyStore``: versioned, hashed policy snapshots (ADR-0139 D5).

A decision is only replayable if the policy set it cites is durable, versioned and hashed, so the
store keeps every revision, verifies every byte it reads, and refuses to let missing or corrupt
evidence present as a coherent state: ``load()`` answers ``ok``, ``absent`` (never written, resolves
normally) or ``corrupt`` (an empty snapshot marked unavailable, so ``explain`` holds with
``snapshot-unavailable``). Layout and hash are specified in ``docs/policy-store.md``.

``load()`` runs on every spawn. It is total (it never raises) and, when nothing changed, costs a few
``stat`` calls: see :meth:`RoutingPolicyStore.load` for why that is safe.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from otel_route_shadow.core import (
    EMPTY_SET_HASH,
    PolicyProblem,
    PolicySnapshot,
    RoutingPolicy,
    blocking,
    parse_policies,
    validate_policies,
)
from otel_route_shadow.store.collector import collector_paused
from otel_route_shadow.store.diff import SnapshotDiff, diff_snapshots
from otel_route_shadow.store.fsio import (
    ReadFailure,
    StatKey,
    atomic_write,
    exclusive_lock,
    fsync_directory,
    read_regular_file,
    shared_lock,
    stat_key,
)
from otel_route_shadow.store.snapshot_format import (
    MAX_REVISION,
    MAX_SNAPSHOT_BYTES,
    SnapshotDocument,
    SnapshotFormatError,
    decode_snapshot,
    prepare_snapshot,
    render_snapshot,
)
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "CURRENT_FILE",
    "ENVIRONMENT_PROBLEM_KINDS",
    "HISTORY_DIR",
    "LOCK_FILE",
    "PROBLEM_KINDS",
    "QUARANTINE_DIR",
    "REPAIR_MARKER",
    "CorruptSnapshotError",
    "HistoryEntry",
    "InvalidPolicySetError",
    "PolicyStoreError",
    "RepairResult",
    "RevisionCorruptError",
    "RevisionNotFoundError",
    "RevisionUnavailableError",
    "RoutingPolicyStore",
    "SaveResult",
    "SnapshotLoad",
    "StoreIOError",
    "revision_file_name",
]

CURRENT_FILE = "current.json"
HISTORY_DIR = "history"
QUARANTINE_DIR = "quarantine"
REPAIR_MARKER = "repaired.json"
LOCK_FILE = ".lock"
REPAIR_MARKER_FORMAT = "otel-route-shadow/repair-marker/v1"

_REVISION_NAME = re.compile(r"^(\d{10,})\.json$")
_QUARANTINE_NAME = re.compile(r"^\d{8}T\d{6}Z-r(\d+)(?:-\d+)?$")
_MARKER_MAX_BYTES = 64 * 1024
_REVISION_CACHE_LIMIT = 256

State = Literal["ok", "absent", "corrupt"]

PROBLEM_KINDS = frozenset(
    {
        "invalid-json",
        "not-utf8",
        "wrong-schema",
        "hash-mismatch",
        "not-canonical",
        "history-mismatch",
        "history-missing",
        "history-corrupt",
        "current-missing",
        "not-a-regular-file",
        "too-large",
        "unreadable",
        "store-not-a-directory",
        "store-unreadable",
        "history-unreadable",
        "marker-corrupt",
        "internal-error",
    }
)
"""Every ``SnapshotLoad.problem_kind``; each is documented in ``docs/policy-store.md``."""

ENVIRONMENT_PROBLEM_KINDS = frozenset(
    {"store-not-a-directory", "store-unreadable", "history-unreadable", "unreadable", "internal-error"}
)
"""Problem kinds that describe the environment rather than the content (``docs/policy-store.md``)."""

_UNAVAILABLE = PolicySnapshot(policies=(), revision=0, content_hash=EMPTY_SET_HASH, available=False)
_NOTHING_SAVED = "no snapshot has been saved"


def revision_file_name(revision: int) -> str:
    """``history/`` file name of a revision: zero-padded so a plain listing sorts by revision."""
    return f"{revision:010d}.json"


def _now_ns() -> int:
    return time.time_ns()


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------------------------------------------
# Errors


class PolicyStoreError(Exception):
    """Base of every error the store raises; the message is one line and never quotes a file."""


class StoreIOError(PolicyStoreError):
    """The store directory cannot be read or written (not a directory, no space, lock timeout)."""


class CorruptSnapshotError(PolicyStoreError):
    """``save`` over a corrupt store: refused, nothing written.

    A corrupt load reports revision 0; saving through it would issue a revision number a second time,
    and two policy sets cited as one revision destroy replay. Repair is an explicit operator act.
    """

    def __init__(self, problem: str, problem_kind: str) -> None:
        super().__init__(f"the store is corrupt ({problem}); nothing was written; run 'policy repair' first")
        self.problem = problem
        self.problem_kind = problem_kind


class InvalidPolicySetError(PolicyStoreError):
    """``save`` refused a set that fails ``validate_policies``; ``problems`` carries every code."""

    def __init__(self, problems: Iterable[PolicyProblem]) -> None:
        self.problems = tuple(problems)
        codes = sorted({problem.code.value for problem in self.problems})
        super().__init__(
            f"refused: {len(self.problems)} problem(s) in the policy set ({', '.join(codes)}); nothing was written"
        )


class RevisionUnavailableError(PolicyStoreError):
    """A historical revision that cannot be replayed against."""

    def __init__(self, revision: int, message: str) -> None:
        super().__init__(message)
        self.revision = revision


class RevisionNotFoundError(RevisionUnavailableError):
    """The history holds no copy of the revision."""


class RevisionCorruptError(RevisionUnavailableError):
    """The history's copy of the revision does not verify."""


# ---------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class SnapshotLoad:
    """What ``load()`` found. ``snapshot`` is always safe to hand to ``explain``.

    ``problem_kind`` is a stable code (``hash-mismatch``, ``history-mismatch``, ...; listed in
    ``docs/policy-store.md``); ``problem`` is the same for people. ``claimed_revision`` is what a
    corrupt file says about itself: shown to operators, never cited (``revision`` is 0 when corrupt).
    """

    state: State
    snapshot: PolicySnapshot
    problem: str | None = None
    problem_kind: str | None = None
    claimed_revision: int | None = None
    saved_at: str | None = None
    note: str | None = None

    @property
    def revision(self) -> int:
        return self.snapshot.revision

    @property
    def content_hash(self) -> str:
        return self.snapshot.content_hash

    @property
    def available(self) -> bool:
        return self.snapshot.available

    @property
    def policy_count(self) -> int:
        return len(self.snapshot.policies)

    @property
    def unreadable(self) -> bool:
        """Corrupt because the environment keeps the store from being read (permissions, a file in
        place of a folder, an I/O error, see ``ENVIRONMENT_PROBLEM_KINDS``), not because of what it
        holds: the instrumentation reports it as a sink fault."""
        return self.state == "corrupt" and self.problem_kind in ENVIRONMENT_PROBLEM_KINDS

    @property
    def history_mismatch(self) -> bool:
        """The current snapshot verifies on its own but is not the copy history kept of its revision:
        somebody edited one of them and recomputed the hash."""
        return self.problem_kind == "history-mismatch"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "revision": self.revision,
            "content_hash": self.content_hash if self.state != "corrupt" else None,
            "policy_count": self.policy_count,
            "available": self.available,
            "saved_at": self.saved_at,
            "problem": self.problem,
            "problem_kind": self.problem_kind,
            "history_mismatch": self.history_mismatch,
            "claimed_revision": self.claimed_revision,
            "note": self.note,
        }


@dataclass(frozen=True)
class SaveResult(SnapshotLoad):
    """The ``ok`` load of the revision just saved (a :class:`SnapshotLoad`, so it drops in wherever
    a load does). ``created`` is False when the store already held this exact set: no revision is
    spent on a set that is already current."""

    created: bool = True
    warnings: tuple[PolicyProblem, ...] = ()
    """Warnings (``unreachable-policy``) of the accepted set, capped per code like every listing."""

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "created": self.created,
            "warnings": [problem.model_dump(mode="json") for problem in self.warnings],
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One revision in the history, or one run of missing revisions (``revision``..``through``)."""

    revision: int
    state: Literal["ok", "corrupt", "missing"]
    content_hash: str | None = None
    saved_at: str | None = None
    policy_count: int | None = None
    problem: str | None = None
    current: bool = False
    through: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "through": self.through,
            "state": self.state,
            "content_hash": self.content_hash,
            "saved_at": self.saved_at,
            "policy_count": self.policy_count,
            "problem": self.problem,
            "current": self.current,
        }


@dataclass(frozen=True)
class RepairResult:
    """What ``repair()`` did, in enough detail for the operator to say it back."""

    repaired: bool
    state_before: State
    problem: str | None = None
    problem_kind: str | None = None
    quarantine: Path | None = None
    moved: tuple[str, ...] = ()
    next_revision: int = 1
    reinstatable: int | None = None
    """The newest history revision that verifies: what ``policy export`` + ``policy save`` can restore."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "repaired": self.repaired,
            "state_before": self.state_before,
            "problem": self.problem,
            "problem_kind": self.problem_kind,
            "quarantine": str(self.quarantine) if self.quarantine is not None else None,
            "moved": list(self.moved),
            "next_revision": self.next_revision,
            "reinstatable": self.reinstatable,
        }


@dataclass(frozen=True)
class _Inspection:
    load: SnapshotLoad
    history_path: str | None
    """The history file the verdict depends on; its stat joins the reload signature."""
    cacheable: bool
    """False for failures that say nothing about content (EMFILE, EIO): retry on the next load."""


@dataclass(frozen=True)
class _CacheEntry:
    signature: tuple[StatKey, ...]
    history_path: str | None
    load: SnapshotLoad


def _corrupt(
    kind: str,
    problem: str,
    *,
    claimed: int | None = None,
    history_path: str | None = None,
    cacheable: bool = True,
) -> _Inspection:
    load = SnapshotLoad(
        state="corrupt", snapshot=_UNAVAILABLE, problem=problem, problem_kind=kind, claimed_revision=claimed
    )
    return _Inspection(load, history_path, cacheable)


def _settled(signature: tuple[StatKey, ...], threshold_ns: int) -> bool:
    """True when every file in the signature last changed before ``threshold_ns``.

    A file changed within the racy window could be changed again inside one timestamp tick and keep
    the same signature (git's "racily clean" problem); such a verdict is not cached.
    """
    return all(key is None or len(key) != 6 or key[5] < threshold_ns for key in signature)


# ---------------------------------------------------------------------------------------------------
# The store


class RoutingPolicyStore:
    """Versioned, hashed policy snapshots under one directory (layout: ``docs/policy-store.md``).

    Thread-safe. Writers (``save``, ``repair``) serialise on ``flock`` of ``.lock``. Readers take no
    file lock, because every file they read is replaced by ``rename`` and history files never change;
    the one exception is confirming that ``current.json`` is really missing (see :meth:`_inspect`).
    """

    racy_window_ns: int = 1_000_000_000
    """How recent a change must be for a verdict not to be cached; at least the coarsest timestamp
    granularity the store may sit on (1 s covers ext3, HFS+ and most network file systems)."""
    lock_timeout: float = 30.0

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._root = os.fspath(root)
        self._current = os.path.join(self._root, CURRENT_FILE)
        self._history = os.path.join(self._root, HISTORY_DIR)
        self._quarantine = os.path.join(self._root, QUARANTINE_DIR)
        self._marker = os.path.join(self._root, REPAIR_MARKER)
        self._lock_path = os.path.join(self._root, LOCK_FILE)
        self._cache: _CacheEntry | None = None
        self._reload_lock = threading.Lock()
        self._full_loads = 0
        self._revisions: dict[int, tuple[StatKey, SnapshotDocument, PolicySnapshot]] = {}
        self._last_decoded: tuple[bytes, SnapshotDocument] | None = None

    def __repr__(self) -> str:
        return f"RoutingPolicyStore({self._root!r})"

    @property
    def full_loads(self) -> int:
        """How many ``load()`` calls actually read and verified files (the rest were served cached)."""
        return self._full_loads

    # -- reading ------------------------------------------------------------------------------------

    def load(self) -> SnapshotLoad:
        """The current snapshot's verdict. Never raises.

        Unchanged case: compare a stat signature (device, inode, mode, size, mtime and ctime of the
        files the verdict was read from: ``current.json`` and the history copy of its revision, or,
        without a current file, the store directory, ``history/`` and the repair marker; see
        ``_signature``) with the one taken when the cached verdict was computed. ``rename`` gives
        a new inode; an in-place edit moves ctime, which no user can set back (``os.utime`` restores
        mtime, not ctime). A verdict is cached only once its files are older than
        ``racy_window_ns``, so a same-size edit inside one coarse timestamp tick is still re-read.
        """
        entry = self._cache
        if entry is not None and self._signature(entry.history_path) == entry.signature:
            return entry.load
        with self._reload_lock:
            entry = self._cache
            if entry is not None and self._signature(entry.history_path) == entry.signature:
                return entry.load
            return self._reload()

    def peek(self) -> SnapshotLoad | None:
        """The cached verdict if the store has not changed since it was read, else None; reads no
        file (the same stat comparison as :meth:`load`'s fast path). Lets a caller decide where a
        re-read should run before paying for it (the instrumentation's background prefetch)."""
        entry = self._cache
        if entry is not None and self._signature(entry.history_path) == entry.signature:
            return entry.load
        return None

    def current_size(self) -> int | None:
        """The size in bytes of ``current.json`` if it is a regular file (not followed if a
        symlink), else None: what a re-read would have to parse, known from one ``lstat``."""
        try:
            st = os.lstat(self._current)
        except OSError:
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def _reload(self) -> SnapshotLoad:
        started = _now_ns()
        try:
            inspection = self._inspect()
        except Exception as exc:  # load() is total: the processor must never see a store fault
            inspection = _corrupt(
                "internal-error", f"internal error while loading: {type(exc).__name__}", cacheable=False
            )
        self._full_loads += 1
        signature = self._signature(inspection.history_path)
        if inspection.cacheable and _settled(signature, started - self.racy_window_ns):
            self._cache = _CacheEntry(signature, inspection.history_path, inspection.load)
        else:
            self._cache = None
        return inspection.load

    def _signature(self, history_path: str | None) -> tuple[StatKey, ...]:
        """The stats of exactly the files the cached verdict was read from.

        With ``current.json`` decoded (``history_path`` known), the verdict reads nothing but that
        file and the history's copy of its revision: a save renames a new ``current.json`` in, a
        repair moves it out, and a store directory that vanishes, turns into a file or loses its
        permissions makes ``current.json`` itself stat differently. Two stats, then, on the path
        every seam call takes. Without it, the verdict also depends on the listing of ``history/``
        and on the repair marker, so those are compared too.
        """
        if history_path is not None:
            return (stat_key(self._current), stat_key(history_path))
        return (
            stat_key(self._root, follow=True),
            stat_key(self._current),
            stat_key(self._history),
            stat_key(self._marker),
        )

    def _revision_path(self, revision: int) -> str:
        return os.path.join(self._history, revision_file_name(revision))

    def _inspect(self, *, locked: bool = False) -> _Inspection:
        """Read and verify everything the verdict depends on, uncached.

        ``locked``: the caller holds the writers' lock. A reader that finds history but no current
        file may be looking at the first save between its two renames, so that verdict is only
        given after waiting for the writers' lock and looking again.
        """
        inspection = self._inspect_unlocked()
        if locked or inspection.load.problem_kind != "current-missing":
            return inspection
        try:
            with shared_lock(self._lock_path, self.lock_timeout):
                return self._inspect_unlocked()
        except (OSError, TimeoutError) as exc:
            return _corrupt("store-unreadable", f"cannot lock the store to read it: {exc}", cacheable=False)

    def _inspect_unlocked(self) -> _Inspection:
        """The store's verdict, one named check after another; the first that fails is the verdict."""
        problem = self._root_problem()
        if problem is not None:
            return problem
        try:
            data = read_regular_file(self._current, MAX_SNAPSHOT_BYTES)
        except FileNotFoundError:
            return self._inspect_without_current()
        except ReadFailure as failure:
            return _corrupt(failure.kind, f"{CURRENT_FILE}: {failure}", cacheable=not failure.transient)
        try:
            current = self._decode_current(data)
        except SnapshotFormatError as exc:
            return _corrupt(exc.kind, f"{CURRENT_FILE}: {exc}", claimed=exc.claimed_revision)
        revision = current.revision
        history_path = self._revision_path(revision)
        problem = self._history_problem(current, data, history_path)
        if problem is not None:
            return problem
        snapshot = PolicySnapshot(
            policies=current.policies, revision=revision, content_hash=current.content_hash, available=True
        )
        return _Inspection(SnapshotLoad("ok", snapshot, saved_at=current.saved_at), history_path, True)

    def _decode_current(self, data: bytes) -> SnapshotDocument:
        """``decode_snapshot(data)``, or the document this store decoded last if ``data`` are the very
        same bytes (a verified document is a function of its bytes alone, so it is exact).

        What it buys: within the racy window after a save (1 s) a verdict is not cached, so a host
        reads ``current.json`` again on every look, one or two extra reads per save; each used to
        decode the whole snapshot again (about 0.5 s and 72,000 new objects at 8,000 policies, and
        the full garbage collections they trigger, which stop every thread of the host). Now they
        cost a read and a byte comparison. Cost: the last bytes decoded stay in memory (2.5 MB at
        8,000 policies; at most ``MAX_SNAPSHOT_BYTES``).
        """
        last = self._last_decoded
        if last is not None and last[0] == data:
            return last[1]
        document = decode_snapshot(data)
        self._last_decoded = (data, document)
        return document

    def _root_problem(self) -> _Inspection | None:
        """The store directory is missing (absent), unreadable, or not a directory; else None."""
        try:
            root_stat = os.stat(self._root)
        except FileNotFoundError:
            return _Inspection(SnapshotLoad("absent", PolicySnapshot(), note=_NOTHING_SAVED), None, True)
        except OSError as exc:
            return _corrupt(
                "store-unreadable",
                f"cannot read the store directory: {exc.strerror or type(exc).__name__}",
                cacheable=exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG),
            )
        if not stat.S_ISDIR(root_stat.st_mode):
            return _corrupt("store-not-a-directory", "the store path exists but is not a directory")
        return None

    def _history_problem(
        self, current: SnapshotDocument, data: bytes, history_path: str
    ) -> _Inspection | None:
        """The history's copy of ``current``'s revision is missing, unreadable, corrupt, of another
        revision, or not the same snapshot (a hand edit of either file); else None."""
        revision = current.revision
        relative = f"{HISTORY_DIR}/{revision_file_name(revision)}"
        corrupt = functools.partial(_corrupt, claimed=revision, history_path=history_path)
        try:
            history_data = read_regular_file(history_path, MAX_SNAPSHOT_BYTES)
        except FileNotFoundError:
            return corrupt(
                "history-missing",
                f"{CURRENT_FILE} is revision {revision}, but the history has no copy of it ({relative})",
            )
        except ReadFailure as failure:
            return corrupt(
                "history-corrupt",
                f"the history's copy of revision {revision} ({relative}): {failure}",
                cacheable=not failure.transient,
            )
        try:
            # save() writes the very same bytes to both files: equal bytes need no second decode.
            kept = current if history_data == data else decode_snapshot(history_data)
        except SnapshotFormatError as exc:
            return corrupt(
                "history-corrupt", f"the history's copy of revision {revision} ({relative}) is corrupt: {exc}"
            )
        if kept.revision != revision:
            return corrupt("history-corrupt", f"{relative} holds revision {kept.revision}, not {revision}")
        if (kept.content_hash, kept.saved_at) != (current.content_hash, current.saved_at):
            what = (
                f"hash {current.content_hash[:12]} vs {kept.content_hash[:12]}"
                if kept.content_hash != current.content_hash
                else "saved_at differs"
            )
            return corrupt(
                "history-mismatch",
                f"{CURRENT_FILE} does not match the history's copy of its own revision {revision} ({what}): "
                "one of them was edited after it was saved",
            )
        return None

    def _inspect_without_current(self) -> _Inspection:
        try:
            revisions = self._history_revisions()
        except OSError as exc:
            return _corrupt(
                "history-unreadable",
                f"cannot list {HISTORY_DIR}/: {exc.strerror or type(exc).__name__}",
                cacheable=exc.errno not in (errno.EMFILE, errno.ENFILE, errno.EIO, errno.ENOMEM),
            )
        try:
            marker = self._read_marker()
        except ReadFailure as failure:
            return _corrupt("marker-corrupt", f"{REPAIR_MARKER}: {failure}", cacheable=not failure.transient)
        if marker is not None:
            note = (
                f"repaired at {marker['repaired_at']}; the corrupt snapshot was moved to "
                f"{marker['quarantine']}; no managed policy applies until the next save "
                f"(revision {marker['high_water'] + 1})"
            )
            return _Inspection(SnapshotLoad("absent", PolicySnapshot(), note=note), None, True)
        if revisions:
            return _corrupt(
                "current-missing",
                f"{CURRENT_FILE} is missing but the history holds revisions up to {revisions[-1]}",
            )
        return _Inspection(SnapshotLoad("absent", PolicySnapshot(), note=_NOTHING_SAVED), None, True)

    def _history_revisions(self) -> list[int]:
        """Revision numbers present in ``history/``; names that are not revisions are ignored."""
        try:
            names = os.listdir(self._history)
        except FileNotFoundError:
            return []
        revisions = []
        for name in names:
            found = _REVISION_NAME.match(name)
            if found is not None and 1 <= int(found.group(1)) <= MAX_REVISION:
                revisions.append(int(found.group(1)))
        return sorted(revisions)

    def _read_marker(self) -> dict[str, Any] | None:
        try:
            data = read_regular_file(self._marker, _MARKER_MAX_BYTES)
        except FileNotFoundError:
            return None
        try:
            marker = loads_strict(data.decode("utf-8"))
        except (UnicodeDecodeError, StrictJSONError):
            raise ReadFailure("marker-corrupt", "not valid JSON") from None
        if (
            not isinstance(marker, dict)
            or marker.get("format") != REPAIR_MARKER_FORMAT
            or not isinstance(marker.get("high_water"), int)
            or isinstance(marker.get("high_water"), bool)
            or not 0 <= marker["high_water"] < MAX_REVISION
            or not isinstance(marker.get("repaired_at"), str)
            or not isinstance(marker.get("quarantine"), str)
        ):
            raise ReadFailure("marker-corrupt", "not a repair marker")
        return marker

    def revision(self, n: int) -> PolicySnapshot:
        """The snapshot saved as revision ``n``, verified, to replay a decision that cites it.

        Revision 0 is the empty set by definition (what an absent store reports). Raises
        :class:`RevisionNotFoundError` or :class:`RevisionCorruptError`.
        """
        if n == 0:
            return PolicySnapshot()
        return self._read_revision(n)[1]

    def _read_revision(self, n: int) -> tuple[SnapshotDocument, PolicySnapshot]:
        """History files never change once written, so a verified one is cached under its stat key."""
        if not 1 <= n <= MAX_REVISION:
            raise RevisionNotFoundError(n, f"revision {n} does not exist (revisions start at 1)")
        path = self._revision_path(n)
        cached = self._revisions.get(n)
        if cached is not None and stat_key(path) == cached[0]:
            return cached[1], cached[2]
        started = _now_ns()
        relative = f"{HISTORY_DIR}/{revision_file_name(n)}"
        try:
            data = read_regular_file(path, MAX_SNAPSHOT_BYTES)
        except FileNotFoundError:
            raise RevisionNotFoundError(n, f"revision {n} is not in the history") from None
        except ReadFailure as failure:
            if failure.kind == "unreadable":
                raise StoreIOError(f"{self._root}: {relative}: {failure}") from None
            raise RevisionCorruptError(n, f"revision {n} ({relative}): {failure}") from None
        try:
            document = decode_snapshot(data)
        except SnapshotFormatError as exc:
            raise RevisionCorruptError(n, f"revision {n} ({relative}) is corrupt: {exc}") from None
        if document.revision != n:
            raise RevisionCorruptError(n, f"{relative} holds revision {document.revision}, not {n}")
        snapshot = PolicySnapshot(
            policies=document.policies, revision=n, content_hash=document.content_hash, available=True
        )
        key = stat_key(path)
        if _settled((key,), started - self.racy_window_ns):
            if len(self._revisions) >= _REVISION_CACHE_LIMIT:
                self._revisions.clear()
            self._revisions[n] = (key, document, snapshot)
        return document, snapshot

    def history(self) -> list[HistoryEntry]:
        """Every revision from 1 to the newest, each verified; runs of missing numbers collapsed."""
        try:
            present = self._history_revisions()
        except OSError as exc:
            raise StoreIOError(
                f"{self._root}: cannot list {HISTORY_DIR}/: {exc.strerror or type(exc).__name__}"
            ) from None
        current = self.load()
        entries: list[HistoryEntry] = []
        expected = 1
        for n in present:
            if n > expected:
                entries.append(HistoryEntry(revision=expected, state="missing", through=n - 1))
            entries.append(self._history_entry(n, current))
            expected = n + 1
        return entries

    def _history_entry(self, n: int, current: SnapshotLoad) -> HistoryEntry:
        try:
            document, snapshot = self._read_revision(n)
        except RevisionNotFoundError:
            return HistoryEntry(revision=n, state="missing", through=n)
        except (RevisionCorruptError, StoreIOError) as exc:
            return HistoryEntry(revision=n, state="corrupt", problem=str(exc))
        return HistoryEntry(
            revision=n,
            state="ok",
            content_hash=snapshot.content_hash,
            saved_at=document.saved_at,
            policy_count=len(snapshot.policies),
            current=current.state == "ok" and current.revision == n,
        )

    def diff(self, a: int, b: int) -> SnapshotDiff:
        """Which policies revision ``b`` added, removed or changed relative to revision ``a``."""
        return diff_snapshots(self.revision(a), self.revision(b))

    # -- writing ------------------------------------------------------------------------------------

    def _ensure_root(self) -> None:
        if os.path.isdir(self._root):
            return
        try:
            os.makedirs(self._root, exist_ok=True)
        except FileExistsError:
            raise StoreIOError(f"{self._root}: the store path exists but is not a directory") from None
        except OSError as exc:
            raise StoreIOError(f"{self._root}: cannot create: {exc.strerror or type(exc).__name__}") from None
        with contextlib.suppress(OSError):
            fsync_directory(os.path.dirname(os.path.abspath(self._root)))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            with exclusive_lock(self._lock_path, self.lock_timeout):
                yield
        except TimeoutError as exc:
            raise StoreIOError(f"{self._root}: {exc}") from None
        except PolicyStoreError:
            raise
        except OSError as exc:
            raise StoreIOError(
                f"{self._root}: cannot write: {exc.strerror or type(exc).__name__}"
                + (f" ({os.path.basename(exc.filename)})" if isinstance(exc.filename, str) else "")
            ) from None

    def _high_water(self, load: SnapshotLoad) -> int:
        """The highest revision number ever issued or claimed here; the next save is one above it.

        History alone is not enough: a repaired store may have lost the copy of a revision that
        decisions already cite, so the repair marker and the quarantine names carry the number too.
        """
        candidates = [0, load.revision, load.claimed_revision or 0]
        candidates.extend(self._history_revisions())
        try:
            marker = self._read_marker()
        except ReadFailure:
            marker = None
        if marker is not None:
            candidates.append(int(marker["high_water"]))
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for name in os.listdir(self._quarantine):
                found = _QUARANTINE_NAME.match(name)
                if found is not None and int(found.group(1)) <= MAX_REVISION:
                    candidates.append(int(found.group(1)))
        return max(candidates)

    def save(self, policies: Iterable[RoutingPolicy], *, strict: bool = False) -> SaveResult:
        """Validate, then write the set as the next revision, atomically and durably.

        Raises :class:`InvalidPolicySetError` (with every problem's code) before touching the disk
        when the set has an error, or, with ``strict``, a warning (``unreachable-policy``);
        :class:`CorruptSnapshotError` over a corrupt store, :class:`StoreIOError` when the directory
        cannot be written. Saving the set the store already holds creates no revision. The warnings
        of an accepted set are on the result (``SaveResult.warnings``).

        This is the one place a whole set is validated: a load trusts a snapshot by its hash.
        """
        with collector_paused():  # the bulk build: see store/collector.py for what that buys
            items = list(policies)
            problems = validate_policies(items)
            if blocking(problems) or (strict and problems):
                raise InvalidPolicySetError(problems)
            warnings = tuple(problems)
            parsed, _ = parse_policies(items)
            payload = prepare_snapshot(parsed)
        new_hash = payload.content_hash
        self._ensure_root()
        with self._locked():
            with collector_paused():  # reading the current revision is a bulk build too
                inspection = self._inspect(locked=True)
            load = inspection.load
            if load.state == "corrupt":
                if not inspection.cacheable or load.problem_kind in (
                    "store-unreadable",
                    "history-unreadable",
                ):
                    raise StoreIOError(f"{self._root}: {load.problem}")
                raise CorruptSnapshotError(load.problem or "corrupt", load.problem_kind or "corrupt")
            if load.state == "ok" and load.content_hash == new_hash:
                return SaveResult(
                    "ok", load.snapshot, saved_at=load.saved_at, created=False, warnings=warnings
                )
            revision = self._high_water(load) + 1
            if revision > MAX_REVISION:
                raise StoreIOError(f"{self._root}: revision numbers are exhausted")
            saved_at = _utc_now()
            data = render_snapshot(revision, saved_at, payload)
            if len(data) > MAX_SNAPSHOT_BYTES:
                raise PolicyStoreError(
                    f"refused: the snapshot would be {len(data)} bytes, over the {MAX_SNAPSHOT_BYTES}-byte limit"
                )
            if not os.path.isdir(self._history):
                os.makedirs(self._history, exist_ok=True)
                fsync_directory(self._root)
            # History first: a crash between the two writes leaves an unused revision number in the
            # history (harmless, never reissued), never a current snapshot without its history copy.
            atomic_write(self._history, revision_file_name(revision), data, exclusive=True)
            atomic_write(self._root, CURRENT_FILE, data, exclusive=False)
            if os.path.lexists(self._marker):
                os.unlink(self._marker)
                fsync_directory(self._root)
        # The policies in stored order: what load() returns for these bytes (tests hold the two equal).
        snapshot = PolicySnapshot(
            policies=payload.policies, revision=revision, content_hash=new_hash, available=True
        )
        return SaveResult("ok", snapshot, saved_at=saved_at, created=True, warnings=warnings)

    def repair(self) -> RepairResult:
        """Move corrupt evidence into ``quarantine/`` and let the next save continue the sequence.

        Nothing is deleted and nothing is reinstated automatically: which policy set should apply is
        the operator's call, and ``reinstatable`` names the newest revision history can vouch for.
        Until the next save the store reads ``absent`` with a note (an explicit operator decision,
        recorded in ``repaired.json``), never ``absent`` by accident.
        """
        if not os.path.lexists(self._root):
            return RepairResult(repaired=False, state_before="absent")
        if not os.path.isdir(self._root):
            raise StoreIOError(f"{self._root}: the store path exists but is not a directory")
        with self._locked():
            load = self._inspect(locked=True).load
            if load.state != "corrupt":
                return RepairResult(
                    repaired=False, state_before=load.state, next_revision=self._high_water(load) + 1
                )
            kind = load.problem_kind or "corrupt"
            if kind in ("store-not-a-directory", "store-unreadable", "history-unreadable", "internal-error"):
                raise StoreIOError(f"{self._root}: cannot repair: {load.problem}")
            high_water = self._high_water(load)
            quarantine = self._new_quarantine_dir(high_water)
            names = [name for name in (CURRENT_FILE, REPAIR_MARKER) if os.path.lexists(self._path(name))]
            if kind != "marker-corrupt" and REPAIR_MARKER in names:
                names.remove(REPAIR_MARKER)
            evidence = {
                "format": "otel-route-shadow/repair-evidence/v1",
                "repaired_at": _utc_now(),
                "problem": load.problem,
                "problem_kind": kind,
                "claimed_revision": load.claimed_revision,
                "high_water": high_water,
                "files": [self._evidence(name) for name in names],
            }
            atomic_write(quarantine, "evidence.json", _json_bytes(evidence), exclusive=True)
            relative = f"{QUARANTINE_DIR}/{os.path.basename(quarantine)}"
            marker = {
                "format": REPAIR_MARKER_FORMAT,
                "repaired_at": evidence["repaired_at"],
                "quarantine": relative,
                "high_water": high_water,
                "problem_kind": kind,
            }
            if REPAIR_MARKER in names:  # a corrupt marker is evidence too; move it before replacing it
                os.rename(self._marker, os.path.join(quarantine, REPAIR_MARKER))
            # Marker before the move: a reader in between still sees the corrupt current file.
            atomic_write(self._root, REPAIR_MARKER, _json_bytes(marker), exclusive=False)
            if CURRENT_FILE in names:
                os.rename(self._current, os.path.join(quarantine, CURRENT_FILE))
            fsync_directory(quarantine)
            fsync_directory(self._root)
            reinstatable = self._newest_verifying_revision()
        self._cache = None
        return RepairResult(
            repaired=True,
            state_before="corrupt",
            problem=load.problem,
            problem_kind=kind,
            quarantine=Path(quarantine),
            moved=tuple(names),
            next_revision=high_water + 1,
            reinstatable=reinstatable,
        )

    def _path(self, name: str) -> str:
        return os.path.join(self._root, name)

    def _new_quarantine_dir(self, high_water: int) -> str:
        os.makedirs(self._quarantine, exist_ok=True)
        base = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-r{high_water}"
        for attempt in range(1, 1000):
            name = base if attempt == 1 else f"{base}-{attempt}"
            path = os.path.join(self._quarantine, name)
            try:
                os.mkdir(path)
            except FileExistsError:
                continue
            fsync_directory(self._quarantine)
            return path
        raise StoreIOError(f"{self._root}: cannot create a quarantine directory")

    def _evidence(self, name: str) -> dict[str, Any]:
        """Type, size and SHA-256 of a file being quarantined; never its content."""
        path = self._path(name)
        st = os.lstat(path)
        record: dict[str, Any] = {"name": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if stat.S_ISLNK(st.st_mode):
            record["type"] = "symlink"
            record["symlink_target"] = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            record["type"] = "file"
            hasher = hashlib.sha256()
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                while chunk := os.read(fd, 1 << 20):
                    hasher.update(chunk)
            finally:
                os.close(fd)
            record["sha256"] = hasher.hexdigest()
        else:
            record["type"] = "directory" if stat.S_ISDIR(st.st_mode) else "other"
        return record

    def _newest_verifying_revision(self) -> int | None:
        for n in reversed(self._history_revisions()):
            try:
                self.revision(n)
            except PolicyStoreError:
                continue
            return n
        return None


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
