"""The C2SP ``tlog-proof`` draft (``c2sp.org/tlog-proof@v1``): one record's offline receipt.

A receipt is lines ending in LF::

    c2sp.org/tlog-proof@v1
    extra <base64>            (optional: opaque data, never trusted)
    index <N>                 (decimal, no leading zero)
    <base64 hash>             (zero or more: the inclusion proof, leaf's sibling first)

    <the checkpoint note, cosignatures included, verbatim>

The rules, one function each: the header line is exact (:func:`_header`); an ``extra`` line, if any,
is canonical base64 (:func:`_extra`); the index is a decimal without leading zero below ``2**63``
(:func:`_index`); each proof line is the canonical base64 of a 32-byte hash, at most 63 of them
(:func:`_proof_lines`); a blank line ends the proof, and the rest is the checkpoint note.

Verifying (:func:`verify_receipt`), in the draft's order: the leaf hash of the record (the chain line
without its LF: ``SHA-256(0x00 || line)``); the checkpoint against the policy (origin, the log's
signature, the witnesses' cosignatures: ``attestation``); the inclusion proof from the leaf to the
checkpoint's root (RFC 6962). The quorum verdict is part of the answer; a quorum that is not met is the
caller's to refuse.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
from collections.abc import Sequence

from otel_route_shadow.tlog.attestation import Attestation, attest_checkpoint
from otel_route_shadow.tlog.checkpoint import parse_size
from otel_route_shadow.tlog.cosignature import DEFAULT_SKEW_S
from otel_route_shadow.tlog.keyset import LogKey
from otel_route_shadow.tlog.merkle import HASH_SIZE, ProofError, leaf_hash, verify_inclusion
from otel_route_shadow.tlog.policy import WitnessPolicy

__all__ = [
    "HEADER",
    "MAX_RECEIPT_BYTES",
    "Receipt",
    "ReceiptError",
    "ReceiptFault",
    "ReceiptVerdict",
    "format_receipt",
    "parse_receipt",
    "verify_receipt",
]

HEADER = "c2sp.org/tlog-proof@v1"
MAX_RECEIPT_BYTES = 64 * 1024
"""The largest receipt read: 63 proof lines and a note of 100 signatures fit well below it."""
MAX_PROOF_LINES = 63
_MAX_INDEX = 2**63 - 1


class ReceiptFault(enum.Enum):
    """Why a receipt was refused: its text (``MALFORMED``) or its inclusion proof (``INCLUSION``)."""

    MALFORMED = "malformed"
    INCLUSION = "inclusion"


class ReceiptError(ValueError):
    """A receipt that breaks ``tlog-proof``, or whose proof does not hold; ``fault`` says which."""

    def __init__(self, fault: ReceiptFault, message: str) -> None:
        super().__init__(message)
        self.fault = fault


@dataclasses.dataclass(frozen=True, slots=True)
class Receipt:
    """Record ``index``'s inclusion ``proof`` in the tree of the checkpoint ``note``; ``extra`` is
    unauthenticated data (``None``: no extra line)."""

    index: int
    proof: tuple[bytes, ...]
    note: str
    extra: bytes | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ReceiptVerdict:
    """A receipt whose record is in the checkpoint ``attestation`` checked, at ``index``."""

    index: int
    extra: bytes | None
    attestation: Attestation


def format_receipt(receipt: Receipt) -> str:
    """The receipt's text."""
    if not 0 <= receipt.index <= _MAX_INDEX:
        raise ReceiptError(ReceiptFault.MALFORMED, "a record index lies in [0, 2**63)")
    if len(receipt.proof) > MAX_PROOF_LINES or any(len(h) != HASH_SIZE for h in receipt.proof):
        raise ReceiptError(ReceiptFault.MALFORMED, f"a proof is at most {MAX_PROOF_LINES} hashes of 32 bytes")
    lines = [HEADER]
    if receipt.extra is not None:
        lines.append("extra " + base64.b64encode(receipt.extra).decode("ascii"))
    lines.append(f"index {receipt.index}")
    lines += [base64.b64encode(h).decode("ascii") for h in receipt.proof]
    return "\n".join(lines) + "\n\n" + receipt.note


def parse_receipt(text: str) -> Receipt:
    """Parse a receipt; :class:`ReceiptError` (``MALFORMED``) names the line that breaks a rule."""
    if len(text) > MAX_RECEIPT_BYTES:
        raise ReceiptError(ReceiptFault.MALFORMED, f"a receipt is at most {MAX_RECEIPT_BYTES} bytes")
    head, blank, note = text.partition("\n\n")
    if not blank:
        raise ReceiptError(ReceiptFault.MALFORMED, "no blank line between the proof and the checkpoint")
    lines = head.split("\n")
    _header(lines[0])
    rest = lines[1:]
    extra = _extra(rest[0]) if rest and rest[0].startswith("extra ") else None
    rest = rest[1:] if extra is not None else rest
    if not rest:
        raise ReceiptError(ReceiptFault.MALFORMED, "no index line")
    return Receipt(_index(rest[0]), _proof_lines(rest[1:]), note, extra)


def _header(line: str) -> None:
    if line != HEADER:
        raise ReceiptError(ReceiptFault.MALFORMED, f"the first line is not {HEADER!r}: not a tlog proof")


def _extra(line: str) -> bytes:
    return _canonical_base64(line.removeprefix("extra "), "the extra line")


def _index(line: str) -> int:
    value = line.removeprefix("index ")
    index = parse_size(value)
    if value == line or index is None or index > _MAX_INDEX:
        raise ReceiptError(
            ReceiptFault.MALFORMED, "the index line is not `index <decimal without leading zero>`"
        )
    return index


def _proof_lines(lines: Sequence[str]) -> tuple[bytes, ...]:
    if len(lines) > MAX_PROOF_LINES:
        raise ReceiptError(ReceiptFault.MALFORMED, f"more than {MAX_PROOF_LINES} proof lines")
    hashes = tuple(_canonical_base64(line, f"proof line {n}") for n, line in enumerate(lines, start=1))
    if any(len(h) != HASH_SIZE for h in hashes):
        raise ReceiptError(ReceiptFault.MALFORMED, "a proof line is not a 32-byte hash")
    return hashes


def _canonical_base64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ReceiptError(ReceiptFault.MALFORMED, f"{what} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise ReceiptError(ReceiptFault.MALFORMED, f"{what} is not canonical base64")
    return raw


def verify_receipt(
    text: str,
    record: bytes,
    policy: WitnessPolicy,
    *,
    now: int,
    skew: int = DEFAULT_SKEW_S,
    logs: Sequence[LogKey] = (),
) -> ReceiptVerdict:
    """Verify that ``record`` (a chain line, with or without its LF) is in the checkpoint of the receipt.

    Raises :class:`ReceiptError` for a malformed receipt or a proof that does not hold, and
    ``AttestationError`` for a checkpoint that is not authentic under ``policy``.
    """
    receipt = parse_receipt(text)
    leaf = leaf_hash(record.removesuffix(b"\n"))
    attestation = attest_checkpoint(receipt.note, policy, now=now, skew=skew, logs=logs)
    checkpoint = attestation.checkpoint
    try:
        verify_inclusion(receipt.index, checkpoint.size, leaf, receipt.proof, checkpoint.root)
    except ProofError as exc:
        raise ReceiptError(ReceiptFault.INCLUSION, f"record {receipt.index}: {exc}") from None
    return ReceiptVerdict(receipt.index, receipt.extra, attestation)
