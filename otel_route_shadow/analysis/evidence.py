"""The log's evidence status for a report: the last checkpoint beside the chain, and who signed it.

Read from ``<chain>.tlog/checkpoint`` (the latest note, ``docs/chain-format.md`` section 13.4) through
the log's own reader. The file is an input, not a fact: without verifier keys the report only *lists*
the key names on the note's signature lines and says it did not verify them; with keys, each signature
by a given key is checked (``open_note``). Neither checks the checkpoint against the chain's bytes:
that is ``otel-route-shadow verify CHAIN --key VKEY``'s work, and the report says so.

Which signature is the log's own: a line whose key name is the checkpoint's origin (C2SP
tlog-checkpoint asks the log's key to be named after its origin), else the first line (the writer
signs first; witnesses' cosignatures are appended after it). Further lines are listed as
cosignatures, by name only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from otel_route_shadow.store.strict_json import InputFileError, require_regular_file
from otel_route_shadow.tlog import (
    CheckpointError,
    NoteError,
    OpenedNote,
    Verifier,
    open_note,
    parse_checkpoint,
    parse_note,
    read_checkpoint_file,
    tlog_dir,
)

__all__ = [
    "ABSENT",
    "FAILED",
    "NOT_CHECKED",
    "NOT_VERIFIED",
    "PRESENT",
    "UNREADABLE",
    "VERIFIED",
    "VERIFY_HINT",
    "LogEvidence",
    "read_evidence",
]

MAX_CHECKPOINT_BYTES: Final = 64 * 1024
"""A note of a checkpoint and a hundred signature lines is far below this."""

PRESENT: Final = "present"
ABSENT: Final = "absent"
UNREADABLE: Final = "unreadable"

NOT_CHECKED: Final = "not-checked"
"""No verifier key was given: the signature lines are listed, not verified."""
VERIFIED: Final = "verified"
"""A given key's signature on the checkpoint verifies."""
NOT_VERIFIED: Final = "not-verified"
"""Keys were given, but no signature line is by one of them."""
FAILED: Final = "failed"
"""A signature by a given key does not verify."""

VERIFY_HINT: Final = "not verified here; run `otel-route-shadow verify CHAIN --key VKEY`"


@dataclass(frozen=True, slots=True)
class LogEvidence:
    """What the chain's last checkpoint says, and how much of it this report checked."""

    checkpoint_path: str
    status: str
    """:data:`PRESENT`, :data:`ABSENT` or :data:`UNREADABLE` (``problem`` says why)."""
    chain_records: int
    problem: str | None = None
    origin: str | None = None
    size: int | None = None
    written_ns: int | None = None
    """The checkpoint file's modification time (what the disk says)."""
    age_ns: int | None = None
    """How long before the report was made the file was written."""
    signed_by: tuple[str, ...] = ()
    """``name+keyid`` of the log's own signature line(s)."""
    cosigned_by: tuple[str, ...] = ()
    """``name+keyid`` of the further signature lines (witness cosignatures, once witnesses exist)."""
    verification: str = NOT_CHECKED
    verified_by: tuple[str, ...] = ()

    @property
    def records_beyond(self) -> int | None:
        """Records of the chain after the checkpoint's size: not covered by it."""
        return None if self.size is None else max(self.chain_records - self.size, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint_path,
            "status": self.status,
            "problem": self.problem,
            "origin": self.origin,
            "size": self.size,
            "chain_records": self.chain_records,
            "records_beyond": self.records_beyond,
            "written_unix_nano": self.written_ns,
            "age_seconds": None if self.age_ns is None else round(self.age_ns / 1e9, 3),
            "signed_by": list(self.signed_by),
            "cosigned_by": list(self.cosigned_by),
            "verification": self.verification,
            "verified_by": list(self.verified_by),
            "checked_against_chain": False,
            "note": VERIFY_HINT if self.verification == NOT_CHECKED else None,
        }


def read_evidence(
    chain_path: str | os.PathLike[str],
    chain_records: int,
    *,
    verifiers: Sequence[Verifier] = (),
    now_ns: int | None = None,
) -> LogEvidence:
    """The evidence status of the chain at ``chain_path`` (never raises for what is on disk)."""
    path = os.path.join(tlog_dir(os.fspath(chain_path)), "checkpoint")

    def missing(status: str, problem: str | None = None) -> LogEvidence:
        return LogEvidence(path, status, chain_records, problem=problem)

    try:
        require_regular_file(path)
        notes = read_checkpoint_file(path, max_bytes=MAX_CHECKPOINT_BYTES)
        written_ns = os.stat(path).st_mtime_ns
    except InputFileError as exc:
        return missing(ABSENT) if not os.path.lexists(path) else missing(UNREADABLE, str(exc))
    except (OSError, ValueError) as exc:
        return missing(UNREADABLE, str(exc))
    if not notes:
        return missing(UNREADABLE, f"{path}: holds no note")
    try:
        opened = parse_note(notes[-1])
        checkpoint = parse_checkpoint(opened.text)
    except (NoteError, CheckpointError) as exc:
        return missing(UNREADABLE, f"{path}: {exc}")
    signed_by, cosigned_by = _split_signers(opened, checkpoint.origin)
    verification, verified_by = _verify(notes[-1], verifiers)
    now = time.time_ns() if now_ns is None else now_ns
    return LogEvidence(
        checkpoint_path=path,
        status=PRESENT,
        chain_records=chain_records,
        origin=checkpoint.origin,
        size=checkpoint.size,
        written_ns=written_ns,
        age_ns=max(now - written_ns, 0),
        signed_by=signed_by,
        cosigned_by=cosigned_by,
        verification=verification,
        verified_by=verified_by,
    )


def _split_signers(opened: OpenedNote, origin: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = [f"{sig.name}+{sig.key_id:08x}" for sig in opened.signatures]
    if not names:
        return (), ()
    own = [i for i, sig in enumerate(opened.signatures) if sig.name == origin] or [0]
    return tuple(names[i] for i in own), tuple(name for i, name in enumerate(names) if i not in own)


def _verify(note: str, verifiers: Sequence[Verifier]) -> tuple[str, tuple[str, ...]]:
    if not verifiers:
        return NOT_CHECKED, ()
    try:
        opened = open_note(note, verifiers)
    except NoteError:
        return FAILED, ()
    if not opened.verified_by:
        return NOT_VERIFIED, ()
    return VERIFIED, tuple("+".join(key.split("+", 2)[:2]) for key in opened.verified_by)
