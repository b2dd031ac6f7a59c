"""The log's evidence status for a report: the last checkpoint beside the chain, and who signed it.

Read from ``<chain>.tlog/checkpoint`` (the latest note, ``docs/chain-format.md`` section 13.4) by the
log's store (``logstore.LogStore.checkpoint_file``: bounded, a FIFO, a device or a link there is
refused, never waited on or followed), and parsed by the log's own note and checkpoint parsers. The file
is an input, not a fact: without verifier keys the report only *lists* the key names on the note's
signature lines and says it did not verify them; with keys, the note is authenticated as every reader
of checkpoints does (``tlog.authenticate``): ``failed`` is its ``bad-signature``, ``not-verified`` its
``unknown-key``, ``key-outside-window`` or ``unsigned``. Neither checks the checkpoint against the chain's bytes:
that is ``otel-route-shadow verify CHAIN --key VKEY``'s work, and the report says so.

With a tlog-policy (``report --witness-policy``), the cosignatures are verified: the note is checked against the
policy (``tlog.attest_notes``: the log's signature by a policy key named for the origin, each
policy witness's cosignature, timestamps no later than now plus the skew) and the report names the
witnesses whose cosignature counts, the quorum, and whether it is met. The cosignatures counted are
those of every note of the same checkpoint in ``checkpoint`` and ``checkpoints`` (where a witness's
cosignature is stored when it comes back), the evidence ``verify --witness-policy`` reads.

The refusals recorded beside the chain (the writer's and the witnesses', :mod:`.refusals`) are part of
the evidence and named with it.

Which line is the log's own signature: among the Ed25519 note signatures (64 signature bytes after
the key id), the one whose key name is the checkpoint's origin (C2SP tlog-checkpoint asks the log's
key to be named after its origin), else the first (the writer signs first). Every other line is
listed as a cosignature, by name only: a witness's ``cosignature/v1`` line (C2SP tlog-cosignature:
72 bytes, a timestamp then the signature) or another signature.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from otel_route_shadow.analysis.refusals import Refusals, read_refusals
from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore import CHECKPOINT_FILE, LogStore
from otel_route_shadow.tlog import (
    AuthenticationError,
    BadSignature,
    CheckpointError,
    LogKey,
    NoteError,
    OpenedNote,
    WitnessPolicy,
    attest_notes,
    authenticate,
    parse_checkpoint,
    parse_note,
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
    "WitnessEvidence",
    "note_evidence",
    "read_checkpoint_note",
    "read_evidence",
    "stored_notes",
]

ED25519_SIGNATURE_BYTES: Final = 64
"""The bytes after the key id on a signed-note Ed25519 signature line (a cosignature has 72)."""

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
class WitnessEvidence:
    """The last checkpoint under a tlog-policy: the policy's witnesses whose cosignature verified and
    counts (``cosigned``), the quorum and whether it is met, the quorum's witnesses ``missing``, those
    whose cosignature lies in the future (not counted), or why the note does not authenticate."""

    quorum: str | None
    met: bool
    cosigned: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    future: tuple[str, ...] = ()
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "quorum": self.quorum,
            "met": self.met,
            "cosigned": list(self.cosigned),
            "missing": list(self.missing),
            "future_timestamps": list(self.future),
            "problem": self.problem,
        }


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
    witnesses: WitnessEvidence | None = None
    """With a policy: the cosignatures verified (None: listed by name only)."""
    refusals: Refusals = field(default_factory=Refusals)
    """The writer's and the witnesses' refusals recorded beside the chain."""

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
            "witnesses": None if self.witnesses is None else self.witnesses.as_dict(),
            "refusals": self.refusals.as_dict(),
            "checked_against_chain": False,
            "note": VERIFY_HINT if self.verification == NOT_CHECKED else None,
        }


def read_evidence(
    chain_path: str | os.PathLike[str],
    chain_records: int,
    *,
    verifiers: Sequence[LogKey] = (),
    now_ns: int | None = None,
    policy: WitnessPolicy | None = None,
) -> LogEvidence:
    """The evidence status of the chain at ``chain_path`` (never raises for what is on disk)."""
    refusals = read_refusals(chain_path)
    path, note, written_ns, problem = read_checkpoint_note(chain_path)
    if note is None:
        status = ABSENT if problem is None else UNREADABLE
        return LogEvidence(path, status, chain_records, problem=problem, refusals=refusals)
    return note_evidence(
        path,
        note,
        written_ns,
        chain_records,
        verifiers=verifiers,
        now_ns=now_ns,
        policy=policy,
        refusals=refusals,
        stored_notes=stored_notes(chain_path) if policy is not None else (),
    )


def read_checkpoint_note(chain_path: str | os.PathLike[str]) -> tuple[str, str | None, int, str | None]:
    """``(path, note, written_ns, problem)`` of the chain's last checkpoint: the note is None when the
    file is absent (problem None) or cannot be read (problem says why). Never raises."""
    store = LogStore(chain_path)
    path = store.file(CHECKPOINT_FILE)
    try:
        note = store.checkpoint_file().decode("utf-8")
        written_ns = store.checkpoint_written_ns()
    except FileNotFoundError:
        return path, None, 0, None
    except (FileRefused, OSError) as exc:
        return path, None, 0, str(exc)
    except UnicodeDecodeError as exc:
        return path, None, 0, f"{path}: not UTF-8 (byte {exc.start})"
    return path, note, written_ns, None


def note_evidence(
    path: str,
    note: str,
    written_ns: int,
    chain_records: int,
    *,
    verifiers: Sequence[LogKey] = (),
    now_ns: int | None = None,
    policy: WitnessPolicy | None = None,
    refusals: Refusals | None = None,
    stored_notes: Sequence[str] = (),
) -> LogEvidence:
    """The evidence status of one checkpoint ``note`` read from ``path`` (never raises); with a
    ``policy``, its cosignatures are gathered from ``stored_notes`` too (the other notes the log
    stored of the same checkpoint: :func:`stored_notes` of a local chain)."""
    refusals = refusals if refusals is not None else Refusals()
    try:
        opened = parse_note(note)
        checkpoint = parse_checkpoint(opened.text)
    except (NoteError, CheckpointError) as exc:
        return LogEvidence(path, UNREADABLE, chain_records, problem=f"{path}: {exc}", refusals=refusals)
    signed_by, cosigned_by = _split_signers(opened, checkpoint.origin)
    if policy is not None:  # the policy's log keys check the log's signature too
        verifiers = [*verifiers, *(log.verifier for log in policy.logs)]  # a key given first keeps its window
    verification, verified_by = _verify(note, verifiers)
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
        witnesses=None
        if policy is None
        else _witnesses([note, *stored_notes], policy, verifiers, now // 10**9),
        refusals=refusals,
    )


def _split_signers(opened: OpenedNote, origin: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the log's signature lines, the cosignature lines), each as ``name+keyid``."""
    lines = [(f"{sig.name}+{sig.key_id:08x}", sig) for sig in opened.signatures]
    signed = [(name, sig) for name, sig in lines if len(sig.signature) == ED25519_SIGNATURE_BYTES]
    cosigned = [name for name, sig in lines if len(sig.signature) != ED25519_SIGNATURE_BYTES]
    own = [name for name, sig in signed if sig.name == origin] or [name for name, _ in signed[:1]]
    others = [name for name, _ in signed if name not in own]
    return tuple(own), tuple(others + cosigned)


def _witnesses(
    notes: Sequence[str], policy: WitnessPolicy, verifiers: Sequence[LogKey], now: int
) -> WitnessEvidence:
    """The policy's verdict on the checkpoint of ``notes[0]``, its cosignatures gathered from every note
    of the same checkpoint among the others too."""
    report = attest_notes(notes, policy, now=now, logs=verifiers)
    found = next((c for c in report.checkpoints if 0 in c.notes), None)
    if found is None:
        problem = next((p.detail for p in report.problems if p.index == 0), "not authenticated")
        return WitnessEvidence(policy.quorum, False, problem=problem)
    quorum = found.quorum
    return WitnessEvidence(policy.quorum, quorum.met, found.cosigned_by, quorum.missing, found.future)


def stored_notes(chain_path: str | os.PathLike[str]) -> list[str]:
    """The notes of the chain's ``checkpoints`` file (:meth:`LogStore.notes`); none when it cannot be
    read (``verify`` names why)."""
    try:
        return list(LogStore(chain_path).notes().notes)
    except (OSError, ValueError, FileRefused):
        return []


def _verify(note: str, verifiers: Sequence[LogKey]) -> tuple[str, tuple[str, ...]]:
    if not verifiers:
        return NOT_CHECKED, ()
    try:
        signed_by = authenticate(note, verifiers).signed_by
    except BadSignature:
        return FAILED, ()
    except AuthenticationError:  # unknown-key, unsigned (the note parsed above)
        return NOT_VERIFIED, ()
    return VERIFIED, tuple("+".join(key.split("+", 2)[:2]) for key in signed_by)
