"""Saving a policy set as the next revision: validated, then written atomically and durably."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime

from otel_route_shadow.core import PolicySnapshot, RoutingPolicy, blocking, parse_policies, validate_policies
from otel_route_shadow.files import fsync_directory, write_atomic
from otel_route_shadow.store.errors import (
    CorruptSnapshotError,
    InvalidPolicySetError,
    PolicyStoreError,
    StoreIOError,
)
from otel_route_shadow.store.layout import StoreLayout
from otel_route_shadow.store.loading import SnapshotLoader
from otel_route_shadow.store.results import SaveResult
from otel_route_shadow.store.snapshot_format import (
    MAX_REVISION,
    MAX_SNAPSHOT_BYTES,
    prepare_snapshot,
    render_snapshot,
)

__all__ = ["save", "utc_now"]


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def save(
    layout: StoreLayout,
    loader: SnapshotLoader,
    lock_timeout: float,
    policies: Iterable[RoutingPolicy],
    *,
    strict: bool,
) -> SaveResult:
    """See :meth:`otel_route_shadow.store.RoutingPolicyStore.save`."""
    items = list(policies)
    problems = validate_policies(items)
    if blocking(problems) or (strict and problems):
        raise InvalidPolicySetError(problems)
    warnings = tuple(problems)
    # Validation parsed every item; models (what callers pass) need no second parse.
    parsed = items if all(isinstance(item, RoutingPolicy) for item in items) else parse_policies(items)[0]
    payload = prepare_snapshot(parsed)
    new_hash = payload.content_hash
    layout.ensure_root()
    with layout.writing(lock_timeout):
        layout.remove_temporaries()
        inspection = loader.inspect(locked=True)
        load = inspection.load
        if load.state == "corrupt":
            if not inspection.cacheable or load.problem_kind in ("store-unreadable", "history-unreadable"):
                raise StoreIOError(f"{layout.root}: {load.problem}")
            raise CorruptSnapshotError(load.problem or "corrupt", load.problem_kind or "corrupt")
        if load.state == "ok" and load.content_hash == new_hash:
            return SaveResult("ok", load.snapshot, saved_at=load.saved_at, created=False, warnings=warnings)
        revision = layout.high_water(load.revision, load.claimed_revision) + 1
        if revision > MAX_REVISION:
            raise StoreIOError(f"{layout.root}: revision numbers are exhausted")
        saved_at = utc_now()
        data = render_snapshot(revision, saved_at, payload)
        if len(data) > MAX_SNAPSHOT_BYTES:
            raise PolicyStoreError(
                f"refused: the snapshot would be {len(data)} bytes, over the {MAX_SNAPSHOT_BYTES}-byte limit"
            )
        if not os.path.isdir(layout.history):
            os.makedirs(layout.history, exist_ok=True)
            fsync_directory(layout.root)
        # History first: a crash between the two writes leaves an unused revision number in the
        # history (harmless, never reissued), never a current snapshot without its history copy.
        write_atomic(layout.revision_path(revision), data, exclusive=True)
        write_atomic(layout.current, data)
        if os.path.lexists(layout.marker):
            os.unlink(layout.marker)
            fsync_directory(layout.root)
    # The policies in stored order: what load() returns for these bytes (tests hold the two equal).
    snapshot = PolicySnapshot(
        policies=payload.policies, revision=revision, content_hash=new_hash, available=True
    )
    return SaveResult("ok", snapshot, saved_at=saved_at, created=True, warnings=warnings)
