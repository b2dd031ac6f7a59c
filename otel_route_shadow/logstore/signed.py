"""A checkpoint as the writer signed and published it, and the log's default origin."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import socket

from otel_route_shadow.tlog import Checkpoint, checkpoint_of, parse_note

__all__ = ["SignedCheckpoint", "default_origin", "signed_checkpoint_from_note"]


@dataclasses.dataclass(frozen=True, slots=True)
class SignedCheckpoint:
    """A checkpoint as appended to the checkpoint file: ``note`` is the whole signed-note text
    (for an unsigned checkpoint, the checkpoint text alone)."""

    origin: str
    size: int
    root: bytes
    note: str
    signed: bool
    key_name: str | None

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.origin, self.size, self.root)


def default_origin(chain_path: str) -> str:
    """``<host>/route-shadow/<16 hex of SHA-256(absolute chain path)>``: stable across restarts."""
    host = re.sub(r"[^a-z0-9.-]", "-", socket.gethostname().lower()) or "localhost"
    digest = hashlib.sha256(os.path.abspath(chain_path).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{host}/route-shadow/{digest[:16]}"


def signed_checkpoint_from_note(note: str) -> SignedCheckpoint:
    """Rebuild a ``SignedCheckpoint`` from a note (signatures are not checked here)."""
    opened = parse_note(note)
    checkpoint = checkpoint_of(note)
    key = opened.signatures[0].name if opened.signatures else None
    return SignedCheckpoint(
        checkpoint.origin, checkpoint.size, checkpoint.root, note, bool(opened.signatures), key
    )
