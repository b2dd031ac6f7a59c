"""The store directory: its file names, the writers' lock, the history listing, the repair marker.

Layout (``docs/policy-store.md``, "Files on disk")::

    STORE/current.json  history/<revision>.json  quarantine/<time>-r<N>/  repaired.json  .lock

Every file is read through :func:`otel_route_shadow.files.read_regular` (no FIFO, no device, no
symbolic link, a bounded read) and written through :func:`otel_route_shadow.files.write_atomic`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from typing import Any

from otel_route_shadow.files import (
    FileRefused,
    fsync_directory,
    open_regular,
    read_regular,
    remove_temporaries,
)
from otel_route_shadow.locking import flock_within, release
from otel_route_shadow.store.errors import PolicyStoreError, StoreIOError
from otel_route_shadow.store.snapshot_format import MAX_REVISION
from otel_route_shadow.strict_json import StrictJSONError, loads_strict

__all__ = [
    "CURRENT_FILE",
    "HISTORY_DIR",
    "LOCK_FILE",
    "QUARANTINE_DIR",
    "REPAIR_MARKER",
    "REPAIR_MARKER_FORMAT",
    "MarkerCorrupt",
    "StoreLayout",
    "revision_file_name",
]

CURRENT_FILE = "current.json"
HISTORY_DIR = "history"
QUARANTINE_DIR = "quarantine"
REPAIR_MARKER = "repaired.json"
LOCK_FILE = ".lock"
REPAIR_MARKER_FORMAT = "otel-route-shadow/repair-marker/v1"

_REVISION_NAME = re.compile(r"([0-9]{10,16})\.json")
_QUARANTINE_NAME = re.compile(r"[0-9]{8}T[0-9]{6}Z-r([0-9]{1,16})(?:-[0-9]+)?")
"""Both matched whole (``fullmatch``), of ASCII digits: no revision has more than 16 (``MAX_REVISION``)."""
_MARKER_MAX_BYTES = 64 * 1024
_MARKER_DEPTH = 2


def revision_file_name(revision: int) -> str:
    """``history/`` file name of a revision: zero-padded so a plain listing sorts by revision."""
    return f"{revision:010d}.json"


class MarkerCorrupt(Exception):
    """``repaired.json`` exists but is not a repair marker; ``transient`` when it could not be read
    for a reason that says nothing about it (too many open files, an I/O error)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class StoreLayout:
    """The paths of one store directory, and the operations on the directory itself."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.current = os.path.join(root, CURRENT_FILE)
        self.history = os.path.join(root, HISTORY_DIR)
        self.quarantine = os.path.join(root, QUARANTINE_DIR)
        self.marker = os.path.join(root, REPAIR_MARKER)
        self.lock_path = os.path.join(root, LOCK_FILE)

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def revision_path(self, revision: int) -> str:
        return os.path.join(self.history, revision_file_name(revision))

    def history_revisions(self) -> list[int]:
        """Revision numbers present in ``history/``; names that are not revisions are ignored."""
        try:
            names = os.listdir(self.history)
        except FileNotFoundError:
            return []
        revisions = []
        for name in names:
            found = _REVISION_NAME.fullmatch(name)
            if found is not None and 1 <= int(found.group(1)) <= MAX_REVISION:
                revisions.append(int(found.group(1)))
        return sorted(revisions)

    def read_marker(self) -> dict[str, Any] | None:
        """The repair marker, None if there is none; :class:`MarkerCorrupt` if it is not one."""
        try:
            data = read_regular(self.marker, _MARKER_MAX_BYTES, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except FileRefused as refused:
            raise MarkerCorrupt(refused.problem, transient=refused.transient) from None
        try:
            marker = loads_strict(data.decode("utf-8"), max_depth=_MARKER_DEPTH)
        except (UnicodeDecodeError, StrictJSONError):
            raise MarkerCorrupt("not valid JSON") from None
        if (
            not isinstance(marker, dict)
            or marker.get("format") != REPAIR_MARKER_FORMAT
            or not isinstance(marker.get("high_water"), int)
            or isinstance(marker.get("high_water"), bool)
            or not 0 <= marker["high_water"] < MAX_REVISION
            or not isinstance(marker.get("repaired_at"), str)
            or not isinstance(marker.get("quarantine"), str)
        ):
            raise MarkerCorrupt("not a repair marker")
        return marker

    def high_water(self, revision: int, claimed: int | None) -> int:
        """The highest revision number ever issued or claimed here; the next save is one above it.

        History alone is not enough: a repaired store may have lost the copy of a revision that
        decisions already cite, so the repair marker and the quarantine names carry the number too.
        """
        candidates = [0, revision, claimed or 0]
        candidates.extend(self.history_revisions())
        try:
            marker = self.read_marker()
        except MarkerCorrupt:
            marker = None
        if marker is not None:
            candidates.append(int(marker["high_water"]))
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for name in os.listdir(self.quarantine):
                found = _QUARANTINE_NAME.fullmatch(name)
                if found is not None and int(found.group(1)) <= MAX_REVISION:
                    candidates.append(int(found.group(1)))
        return max(candidates)

    def ensure_root(self) -> None:
        """Create the store directory (durably) if it does not exist."""
        if os.path.isdir(self.root):
            return
        try:
            os.makedirs(self.root, exist_ok=True)
        except FileExistsError:
            raise StoreIOError(f"{self.root}: the store path exists but is not a directory") from None
        except OSError as exc:
            raise StoreIOError(f"{self.root}: cannot create: {exc.strerror or type(exc).__name__}") from None
        with contextlib.suppress(OSError):
            fsync_directory(os.path.dirname(os.path.abspath(self.root)))

    def remove_temporaries(self) -> None:
        """Remove what writers killed mid-write left behind (under the writers' lock, so no live
        writer of any process has a temporary file here)."""
        for directory in (self.root, self.history, self.quarantine):
            remove_temporaries(directory)

    @contextlib.contextmanager
    def writing(self, timeout: float) -> Iterator[None]:
        """The writers' lock, held for the block; file-system failures become :class:`StoreIOError`."""
        try:
            with exclusive_lock(self.lock_path, timeout):
                yield
        except TimeoutError as exc:
            raise StoreIOError(f"{self.root}: {exc}") from None
        except PolicyStoreError:
            raise
        except FileRefused as exc:  # the lock file is a FIFO, a directory, a link ...
            raise StoreIOError(f"{self.root}: cannot write: {exc}") from None
        except OSError as exc:
            raise StoreIOError(
                f"{self.root}: cannot write: {exc.strerror or type(exc).__name__}"
                + (f" ({os.path.basename(exc.filename)})" if isinstance(exc.filename, str) else "")
            ) from None


@contextlib.contextmanager
def _holding(fd: int, mode: int, timeout: float, poll: float) -> Iterator[None]:
    """Take ``mode`` on ``fd`` within ``timeout`` (a hung writer becomes an error, not a hang),
    hold it for the block, then unlock and close ``fd`` (``locking.release``)."""
    try:
        if not flock_within(fd, mode, timeout, poll):
            raise TimeoutError(f"could not lock the store within {timeout:g} s")
        yield
    finally:
        release(fd)


@contextlib.contextmanager
def exclusive_lock(path: str, timeout: float) -> Iterator[None]:
    """``flock`` on a lock file: serialises writers across processes and across threads.

    Each call opens its own descriptor, and ``flock`` locks belong to the open file description, so
    two threads of one process exclude each other as two processes do.
    """
    fd = open_regular(path, os.O_RDWR | os.O_CREAT, 0o644, follow_symlinks=False)
    with _holding(fd, fcntl.LOCK_EX, timeout, 0.005):
        yield


@contextlib.contextmanager
def shared_lock(path: str, timeout: float) -> Iterator[None]:
    """Wait out any writer holding :func:`exclusive_lock`, for a reader that needs a stable view.

    Opens read-only and never creates the file: a reader may lack write access, and a missing lock
    file means no writer has ever started here.
    """
    try:
        fd = open_regular(path, follow_symlinks=False)
    except FileNotFoundError:
        yield
        return
    with _holding(fd, fcntl.LOCK_SH, timeout, 0.002):
        yield
