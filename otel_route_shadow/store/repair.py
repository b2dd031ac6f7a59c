"""``repair``: corrupt evidence moved into ``quarantine/``, so the next save continues the sequence."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from otel_route_shadow.files import fsync_directory, open_regular, write_atomic
from otel_route_shadow.store.errors import StoreIOError
from otel_route_shadow.store.layout import (
    CURRENT_FILE,
    QUARANTINE_DIR,
    REPAIR_MARKER,
    REPAIR_MARKER_FORMAT,
    StoreLayout,
)
from otel_route_shadow.store.loading import SnapshotLoader
from otel_route_shadow.store.results import RepairResult
from otel_route_shadow.store.revisions import newest_verifying_revision
from otel_route_shadow.store.saving import utc_now
from otel_route_shadow.store.snapshot_format import MAX_SNAPSHOT_BYTES

__all__ = ["repair"]

_ENVIRONMENT_FAULTS = ("store-not-a-directory", "store-unreadable", "history-unreadable", "internal-error")


def repair(layout: StoreLayout, loader: SnapshotLoader, lock_timeout: float) -> RepairResult:
    """See :meth:`otel_route_shadow.store.RoutingPolicyStore.repair`."""
    root = layout.root
    if not os.path.lexists(root):
        return RepairResult(repaired=False, state_before="absent")
    if not os.path.isdir(root):
        raise StoreIOError(f"{root}: the store path exists but is not a directory")
    with layout.writing(lock_timeout):
        layout.remove_temporaries()
        load = loader.inspect(locked=True).load
        if load.state != "corrupt":
            next_revision = layout.high_water(load.revision, load.claimed_revision) + 1
            return RepairResult(repaired=False, state_before=load.state, next_revision=next_revision)
        kind = load.problem_kind or "corrupt"
        if kind in _ENVIRONMENT_FAULTS:
            raise StoreIOError(f"{root}: cannot repair: {load.problem}")
        high_water = layout.high_water(load.revision, load.claimed_revision)
        quarantine = _new_quarantine_dir(layout, high_water)
        names = [name for name in (CURRENT_FILE, REPAIR_MARKER) if os.path.lexists(layout.path(name))]
        if kind != "marker-corrupt" and REPAIR_MARKER in names:
            names.remove(REPAIR_MARKER)
        evidence = {
            "format": "otel-route-shadow/repair-evidence/v1",
            "repaired_at": utc_now(),
            "problem": load.problem,
            "problem_kind": kind,
            "claimed_revision": load.claimed_revision,
            "high_water": high_water,
            "files": [_evidence(layout.path(name), name) for name in names],
        }
        write_atomic(os.path.join(quarantine, "evidence.json"), _json_bytes(evidence), exclusive=True)
        marker = {
            "format": REPAIR_MARKER_FORMAT,
            "repaired_at": evidence["repaired_at"],
            "quarantine": f"{QUARANTINE_DIR}/{os.path.basename(quarantine)}",
            "high_water": high_water,
            "problem_kind": kind,
        }
        if REPAIR_MARKER in names:  # a corrupt marker is evidence too; move it before replacing it
            os.rename(layout.marker, os.path.join(quarantine, REPAIR_MARKER))
        # Marker before the move: a reader in between still sees the corrupt current file.
        write_atomic(layout.marker, _json_bytes(marker))
        if CURRENT_FILE in names:
            os.rename(layout.current, os.path.join(quarantine, CURRENT_FILE))
        fsync_directory(quarantine)
        fsync_directory(root)
        reinstatable = newest_verifying_revision(layout)
    loader.forget()
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


def _new_quarantine_dir(layout: StoreLayout, high_water: int) -> str:
    os.makedirs(layout.quarantine, exist_ok=True)
    base = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-r{high_water}"
    for attempt in range(1, 1000):
        name = base if attempt == 1 else f"{base}-{attempt}"
        path = os.path.join(layout.quarantine, name)
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        fsync_directory(layout.quarantine)
        return path
    raise StoreIOError(f"{layout.root}: cannot create a quarantine directory")


def _evidence(path: str, name: str) -> dict[str, Any]:
    """Type, size and SHA-256 of a file being quarantined; never its content. The hash covers at
    most the first ``MAX_SNAPSHOT_BYTES`` bytes (repair holds the writers' lock, and a sparse file
    can claim terabytes); a file cut short has ``"truncated": true`` and ``"sha256_bytes"``, how
    many bytes the hash covers."""
    st = os.lstat(path)
    record: dict[str, Any] = {"name": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if stat.S_ISLNK(st.st_mode):
        record["type"] = "symlink"
        record["symlink_target"] = os.readlink(path)
    elif stat.S_ISREG(st.st_mode):
        record["type"] = "file"
        hasher = hashlib.sha256()
        remaining = MAX_SNAPSHOT_BYTES
        fd = open_regular(path, follow_symlinks=False)
        try:
            while remaining and (chunk := os.read(fd, min(1 << 20, remaining))):
                hasher.update(chunk)
                remaining -= len(chunk)
            truncated = not remaining and os.read(fd, 1) != b""
        finally:
            os.close(fd)
        record["sha256"] = hasher.hexdigest()
        if truncated:
            record["truncated"] = True
            record["sha256_bytes"] = MAX_SNAPSHOT_BYTES
    else:
        record["type"] = "directory" if stat.S_ISDIR(st.st_mode) else "other"
    return record


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
