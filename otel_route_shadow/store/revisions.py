"""Revisions from the history: one verified (to replay a decision that cites it), all listed, two
compared."""

from __future__ import annotations

from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.files import FileRefused
from otel_route_shadow.store.diff import SnapshotDiff, diff_snapshots
from otel_route_shadow.store.errors import (
    PolicyStoreError,
    RevisionCorruptError,
    RevisionNotFoundError,
    StoreIOError,
)
from otel_route_shadow.store.layout import HISTORY_DIR, StoreLayout, revision_file_name
from otel_route_shadow.store.loading import problem_kind, read_snapshot_file
from otel_route_shadow.store.results import HistoryEntry, SnapshotLoad
from otel_route_shadow.store.snapshot_format import (
    MAX_REVISION,
    SnapshotDocument,
    SnapshotFormatError,
    decode_snapshot,
)

__all__ = ["history", "newest_verifying_revision", "read_revision", "revision", "revision_diff"]


def read_revision(layout: StoreLayout, n: int) -> SnapshotDocument:
    """``history/<n>.json``, verified; :class:`RevisionNotFoundError`, :class:`RevisionCorruptError`,
    or :class:`StoreIOError` when the file cannot be read for reasons outside it."""
    if not 1 <= n <= MAX_REVISION:
        raise RevisionNotFoundError(n, f"revision {n} does not exist (revisions start at 1)")
    relative = f"{HISTORY_DIR}/{revision_file_name(n)}"
    try:
        data = read_snapshot_file(layout.revision_path(n))
    except FileNotFoundError:
        raise RevisionNotFoundError(n, f"revision {n} is not in the history") from None
    except FileRefused as refused:
        if problem_kind(refused) == "unreadable":
            raise StoreIOError(f"{layout.root}: {relative}: {refused.problem}") from None
        raise RevisionCorruptError(n, f"revision {n} ({relative}): {refused.problem}") from None
    try:
        document = decode_snapshot(data)
    except SnapshotFormatError as exc:
        raise RevisionCorruptError(n, f"revision {n} ({relative}) is corrupt: {exc}") from None
    if document.revision != n:
        raise RevisionCorruptError(n, f"{relative} holds revision {document.revision}, not {n}")
    return document


def revision(layout: StoreLayout, n: int) -> PolicySnapshot:
    """The snapshot saved as revision ``n``, verified; revision 0 is the empty set by definition."""
    if n == 0:
        return PolicySnapshot()
    document = read_revision(layout, n)
    return PolicySnapshot(
        policies=document.policies, revision=n, content_hash=document.content_hash, available=True
    )


def history(layout: StoreLayout, current: SnapshotLoad) -> list[HistoryEntry]:
    """Every revision from 1 to the newest, each verified; runs of missing numbers collapsed."""
    try:
        present = layout.history_revisions()
    except OSError as exc:
        raise StoreIOError(
            f"{layout.root}: cannot list {HISTORY_DIR}/: {exc.strerror or type(exc).__name__}"
        ) from None
    entries: list[HistoryEntry] = []
    expected = 1
    for n in present:
        if n > expected:
            entries.append(HistoryEntry(revision=expected, state="missing", through=n - 1))
        entries.append(_history_entry(layout, n, current))
        expected = n + 1
    return entries


def _history_entry(layout: StoreLayout, n: int, current: SnapshotLoad) -> HistoryEntry:
    try:
        document = read_revision(layout, n)
    except RevisionNotFoundError:
        return HistoryEntry(revision=n, state="missing", through=n)
    except (RevisionCorruptError, StoreIOError) as exc:
        return HistoryEntry(revision=n, state="corrupt", problem=str(exc))
    return HistoryEntry(
        revision=n,
        state="ok",
        content_hash=document.content_hash,
        saved_at=document.saved_at,
        policy_count=len(document.policies),
        current=current.state == "ok" and current.revision == n,
    )


def revision_diff(layout: StoreLayout, a: int, b: int) -> SnapshotDiff:
    """Which policies revision ``b`` added, removed or changed relative to revision ``a``."""
    return diff_snapshots(revision(layout, a), revision(layout, b))


def newest_verifying_revision(layout: StoreLayout) -> int | None:
    """The newest revision in the history that verifies: what ``policy export`` + ``policy save``
    can reinstate after a repair."""
    for n in reversed(layout.history_revisions()):
        try:
            revision(layout, n)
        except PolicyStoreError:
            continue
        return n
    return None
