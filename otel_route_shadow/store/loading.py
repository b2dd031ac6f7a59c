"""Loading the current snapshot: the verdict (``ok``, ``absent`` or ``corrupt``) and its cache.

``SnapshotLoader.load()`` runs on every spawn. It is total (it never raises) and, when nothing
changed, costs two ``stat`` calls: the verdict is kept with the stat signature of exactly the files it
was read from (``docs/policy-store.md``, "Cheap reload").
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import Protocol, cast

from otel_route_shadow.core import EMPTY_SET_HASH, PolicySnapshot
from otel_route_shadow.files import FileRefused, read_regular
from otel_route_shadow.store.layout import (
    CURRENT_FILE,
    HISTORY_DIR,
    REPAIR_MARKER,
    MarkerCorrupt,
    StoreLayout,
    revision_file_name,
    shared_lock,
)
from otel_route_shadow.store.results import SnapshotLoad
from otel_route_shadow.store.snapshot_format import (
    MAX_SNAPSHOT_BYTES,
    SnapshotDocument,
    SnapshotFormatError,
    decode_snapshot,
)
from otel_route_shadow.worker import AFTER_FORK

__all__ = [
    "UNAVAILABLE",
    "Inspection",
    "LoadSettings",
    "SnapshotLoader",
    "StatKey",
    "corrupt",
    "problem_kind",
    "read_snapshot_file",
    "stat_key",
]

StatKey = tuple[int, int, int, int, int, int] | tuple[str, int] | None
"""(dev, ino, mode, size, mtime_ns, ctime_ns), ("error", errno), or None when the path is absent."""

UNAVAILABLE = PolicySnapshot(policies=(), revision=0, content_hash=EMPTY_SET_HASH, available=False)
_NOTHING_SAVED = "no snapshot has been saved"
_WRITER_BUSY = (
    "current.json is missing and a writer holds the store's lock (the first save between its two "
    "writes, or a process holding .lock): decisions hold until it is released"
)
_REFUSAL_KINDS = {
    "not-regular": "not-a-regular-file",
    "symlink": "not-a-regular-file",
    "too-large": "too-large",
}


def _now_ns() -> int:
    return time.time_ns()


def stat_key(path: str, *, follow: bool = False) -> StatKey:
    """What the cheap-reload signature compares; ctime is in it because no user can set it."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return ("error", exc.errno or 0)
    except ValueError:  # a NUL in the path: load() must stay total, so this is a stable "error"
        return ("error", 0)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _OverInlineBound(Exception):
    """``current.json`` is larger than what :meth:`SnapshotLoader.load_within` may read."""


def read_snapshot_file(path: str, max_bytes: int = MAX_SNAPSHOT_BYTES) -> bytes:
    """A snapshot file's bytes (never following a symbolic link, at most ``max_bytes``).
    ``FileNotFoundError`` passes through; anything else that keeps the file from being read is a
    :class:`~otel_route_shadow.files.FileRefused` (its ``kind`` mapped by :func:`problem_kind`)."""
    return read_regular(path, max_bytes, follow_symlinks=False)


def problem_kind(refused: FileRefused) -> str:
    """The store's problem kind for a file that could not be read."""
    return _REFUSAL_KINDS.get(refused.kind, "unreadable")


@dataclass(frozen=True)
class Inspection:
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


def corrupt(
    kind: str,
    problem: str,
    *,
    claimed: int | None = None,
    history_path: str | None = None,
    cacheable: bool = True,
) -> Inspection:
    load = SnapshotLoad(
        state="corrupt", snapshot=UNAVAILABLE, problem=problem, problem_kind=kind, claimed_revision=claimed
    )
    return Inspection(load, history_path, cacheable)


def _settled(signature: tuple[StatKey, ...], threshold_ns: int) -> bool:
    """True when every file in the signature last changed before ``threshold_ns``.

    A file changed within the racy window could be changed again inside one timestamp tick and keep
    the same signature (git's "racily clean" problem); such a verdict is not cached.
    """
    return all(key is None or len(key) != 6 or key[5] < threshold_ns for key in signature)


class LoadSettings(Protocol):
    """What loading reads from its store at each use (tests and hosts may change them)."""

    racy_window_ns: int
    """How recent a change must be for a verdict not to be cached."""
    read_lock_wait: float
    """The longest :meth:`SnapshotLoader.load` waits for the writers' lock (see :meth:`inspect`)."""


class SnapshotLoader:
    """The current snapshot's verdict, read and verified, cached under its files' stat signature.

    Readers take no file lock, because every file they read is replaced by ``rename`` and history
    files never change; the one exception is confirming that ``current.json`` is really missing
    (see :meth:`inspect`).
    """

    def __init__(self, layout: StoreLayout, settings: LoadSettings) -> None:
        self.layout = layout
        self.settings = settings
        self.full_loads = 0
        """How many ``load()`` calls actually read and verified files (the rest were served cached)."""
        self._cache: _CacheEntry | None = None
        self._reload_lock = threading.Lock()
        self._reloaded: tuple[int, SnapshotLoad | None] = (0, None)
        """How many reloads have finished, and the verdict of the last one."""
        self._last_decoded: tuple[bytes, SnapshotDocument] | None = None
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): a read in flight at fork time (a spawn's,
        or the background prefetch's) left ``_reload_lock`` copied held, which nothing here would ever
        release: the child's first read waited for it without bound. The cache is kept: it and
        ``_last_decoded`` are each replaced whole, never written in part."""
        self._reload_lock = threading.Lock()

    def load(self) -> SnapshotLoad:
        """The current snapshot's verdict. Never raises.

        Unchanged case: compare a stat signature (device, inode, mode, size, mtime and ctime of the
        files the verdict was read from, see :meth:`_signature`) with the one taken when the cached
        verdict was computed. ``rename`` gives a new inode; an in-place edit moves ctime, which no
        user can set back. A verdict is cached only once its files are older than
        ``racy_window_ns``, so a same-size edit inside one coarse timestamp tick is still re-read.

        Concurrent calls make one re-read: a call that waited while another re-read returns that
        re-read's verdict, cached or not, so no call waits for the writers' lock after another
        call's wait (each wait is at most ``read_lock_wait``, see :meth:`inspect`).
        """
        return cast(SnapshotLoad, self.load_within(MAX_SNAPSHOT_BYTES))  # never over the store's bound

    def load_within(self, max_bytes: int) -> SnapshotLoad | None:
        """:meth:`load`, or None when ``current.json`` is over ``max_bytes``: measured on the open file,
        so one renamed in after the caller's size check is refused too, and nothing is decoded. A
        spawn reads a small snapshot itself this way and leaves a large one to a background read."""
        entry = self._cache
        if entry is not None and self._signature(entry.history_path) == entry.signature:
            return entry.load
        finished = self._reloaded[0]
        with self._reload_lock:
            entry = self._cache
            if entry is not None and self._signature(entry.history_path) == entry.signature:
                return entry.load
            count, last = self._reloaded
            if count != finished and last is not None:
                return last
            try:
                return self._reload(max_bytes)
            except _OverInlineBound:
                return None

    def peek(self) -> SnapshotLoad | None:
        """The cached verdict if the store has not changed since it was read, else None; reads no
        file (the same stat comparison as :meth:`load`'s fast path)."""
        entry = self._cache
        if entry is not None and self._signature(entry.history_path) == entry.signature:
            return entry.load
        return None

    def forget(self) -> None:
        """Drop the cached verdict (after a repair moved files)."""
        self._cache = None

    def current_size(self) -> int | None:
        """The size in bytes of ``current.json`` if it is a regular file (not followed if a
        symlink), else None: what a re-read would have to parse, known from one ``lstat``."""
        try:
            st = os.lstat(self.layout.current)
        except OSError:
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def _reload(self, current_bound: int = MAX_SNAPSHOT_BYTES) -> SnapshotLoad:
        started = _now_ns()
        try:
            inspection = self.inspect(current_bound=current_bound)
        except _OverInlineBound:
            raise
        except Exception as exc:  # load() is total: the processor must never see a store fault
            inspection = corrupt(
                "internal-error", f"internal error while loading: {type(exc).__name__}", cacheable=False
            )
        self.full_loads += 1
        signature = self._signature(inspection.history_path)
        if inspection.cacheable and _settled(signature, started - self.settings.racy_window_ns):
            self._cache = _CacheEntry(signature, inspection.history_path, inspection.load)
        else:
            self._cache = None
        self._reloaded = (self._reloaded[0] + 1, inspection.load)
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
        layout = self.layout
        if history_path is not None:
            return (stat_key(layout.current), stat_key(history_path))
        return (
            stat_key(layout.root, follow=True),
            stat_key(layout.current),
            stat_key(layout.history),
            stat_key(layout.marker),
        )

    def inspect(self, *, locked: bool = False, current_bound: int = MAX_SNAPSHOT_BYTES) -> Inspection:
        """Read and verify everything the verdict depends on, uncached.

        ``locked``: the caller holds the writers' lock. A reader that finds history but no current
        file may be looking at the first save between its two renames, so that verdict is only
        given under the writers' lock, looking again. ``load()`` runs inside spawns, so it waits for
        that lock at most ``read_lock_wait`` (a few milliseconds); a lock still held then is a
        verdict that holds decisions and is not cached: ``absent`` with an unavailable snapshot
        marked ``loading``, as while the first snapshot is read, never ``current-missing``.

        ``current_bound``: :meth:`load_within`'s bound on ``current.json`` (see :meth:`_inspect_unlocked`).
        """
        inspection = self._inspect_unlocked(current_bound)
        if locked or inspection.load.problem_kind != "current-missing":
            return inspection
        try:
            with shared_lock(self.layout.lock_path, self.settings.read_lock_wait):
                return self._inspect_unlocked(current_bound)
        except TimeoutError:
            busy = PolicySnapshot(available=False, loading=True)
            return Inspection(SnapshotLoad("absent", busy, note=_WRITER_BUSY), None, False)
        except OSError as exc:
            return corrupt("store-unreadable", f"cannot lock the store to read it: {exc}", cacheable=False)

    def _inspect_unlocked(self, current_bound: int) -> Inspection:
        """The store's verdict, one named check after another; the first that fails is the verdict.
        ``current.json`` over ``current_bound`` (below the store's own bound) raises
        :class:`_OverInlineBound` before it is read."""
        problem = self._root_problem()
        if problem is not None:
            return problem
        try:
            data = read_snapshot_file(self.layout.current, current_bound)
        except FileNotFoundError:
            return self._inspect_without_current()
        except FileRefused as refused:
            if refused.kind == "too-large" and current_bound < MAX_SNAPSHOT_BYTES:
                raise _OverInlineBound from None
            return corrupt(
                problem_kind(refused), f"{CURRENT_FILE}: {refused.problem}", cacheable=not refused.transient
            )
        try:
            current = self._decode_current(data)
        except SnapshotFormatError as exc:
            return corrupt(exc.kind, f"{CURRENT_FILE}: {exc}", claimed=exc.claimed_revision)
        revision = current.revision
        history_path = self.layout.revision_path(revision)
        problem = self._history_problem(current, data, history_path)
        if problem is not None:
            return problem
        snapshot = PolicySnapshot(
            policies=current.policies, revision=revision, content_hash=current.content_hash, available=True
        )
        return Inspection(SnapshotLoad("ok", snapshot, saved_at=current.saved_at), history_path, True)

    def _decode_current(self, data: bytes) -> SnapshotDocument:
        """``decode_snapshot(data)``, or the document decoded last if ``data`` are the very same bytes
        (a verified document is a function of its bytes alone, so that is exact). Within the racy
        window after a save a verdict is not cached, so every look at the store reads
        ``current.json`` again; this makes each such read a byte comparison instead of a decode. It
        keeps the last bytes decoded and their document (at most ``MAX_SNAPSHOT_BYTES`` each)."""
        last = self._last_decoded
        if last is not None and last[0] == data:
            return last[1]
        document = decode_snapshot(data)
        self._last_decoded = (data, document)
        return document

    def _root_problem(self) -> Inspection | None:
        """The store directory is missing (absent), unreadable, or not a directory; else None."""
        try:
            root_stat = os.stat(self.layout.root)
        except FileNotFoundError:
            return Inspection(SnapshotLoad("absent", PolicySnapshot(), note=_NOTHING_SAVED), None, True)
        except OSError as exc:
            return corrupt(
                "store-unreadable",
                f"cannot read the store directory: {exc.strerror or type(exc).__name__}",
                cacheable=exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG),
            )
        if not stat.S_ISDIR(root_stat.st_mode):
            return corrupt("store-not-a-directory", "the store path exists but is not a directory")
        return None

    def _history_problem(
        self, current: SnapshotDocument, data: bytes, history_path: str
    ) -> Inspection | None:
        """The history's copy of ``current``'s revision is missing, unreadable, corrupt, of another
        revision, or not the same snapshot (a hand edit of either file); else None."""
        revision = current.revision
        relative = f"{HISTORY_DIR}/{revision_file_name(revision)}"
        failed = functools.partial(corrupt, claimed=revision, history_path=history_path)
        try:
            history_data = read_snapshot_file(history_path)
        except FileNotFoundError:
            return failed(
                "history-missing",
                f"{CURRENT_FILE} is revision {revision}, but the history has no copy of it ({relative})",
            )
        except FileRefused as refused:
            return failed(
                "history-corrupt",
                f"the history's copy of revision {revision} ({relative}): {refused.problem}",
                cacheable=not refused.transient,
            )
        try:
            # save() writes the very same bytes to both files: equal bytes need no second decode.
            kept = current if history_data == data else decode_snapshot(history_data)
        except SnapshotFormatError as exc:
            return failed(
                "history-corrupt", f"the history's copy of revision {revision} ({relative}) is corrupt: {exc}"
            )
        if kept.revision != revision:
            return failed("history-corrupt", f"{relative} holds revision {kept.revision}, not {revision}")
        if (kept.content_hash, kept.saved_at) != (current.content_hash, current.saved_at):
            what = (
                f"hash {current.content_hash[:12]} vs {kept.content_hash[:12]}"
                if kept.content_hash != current.content_hash
                else "saved_at differs"
            )
            return failed(
                "history-mismatch",
                f"{CURRENT_FILE} does not match the history's copy of its own revision {revision} ({what}): "
                "one of them was edited after it was saved",
            )
        return None

    def _inspect_without_current(self) -> Inspection:
        try:
            revisions = self.layout.history_revisions()
        except OSError as exc:
            return corrupt(
                "history-unreadable",
                f"cannot list {HISTORY_DIR}/: {exc.strerror or type(exc).__name__}",
                cacheable=exc.errno not in (errno.EMFILE, errno.ENFILE, errno.EIO, errno.ENOMEM),
            )
        try:
            marker = self.layout.read_marker()
        except MarkerCorrupt as exc:
            return corrupt("marker-corrupt", f"{REPAIR_MARKER}: {exc}", cacheable=not exc.transient)
        # A marker explains a missing current file only if no revision was saved after its repair: a
        # save killed after writing current.json and before removing the marker leaves a stale one.
        if marker is not None and (not revisions or revisions[-1] <= marker["high_water"]):
            note = (
                f"repaired at {marker['repaired_at']}; the corrupt snapshot was moved to "
                f"{marker['quarantine']}; no managed policy applies until the next save "
                f"(revision {marker['high_water'] + 1})"
            )
            return Inspection(SnapshotLoad("absent", PolicySnapshot(), note=note), None, True)
        if revisions:
            return corrupt(
                "current-missing",
                f"{CURRENT_FILE} is missing but the history holds revisions up to {revisions[-1]}",
            )
        return Inspection(SnapshotLoad("absent", PolicySnapshot(), note=_NOTHING_SAVED), None, True)
