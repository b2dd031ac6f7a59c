"""C2SP ``tlog-cosignature`` v1.1.0-rc.1: a witness's timestamped Ed25519 or ML-DSA-44 cosignature on a
checkpoint.

A cosignature is a signed-note signature line added to the checkpoint note::

    — <witness name> <base64(key id || timestamp || signature)>

Two algorithms (:class:`CosignatureAlgorithm`), told apart by the type byte of the witness's key:
``0x04`` Ed25519 (``cosignature/v1``) and ``0x06`` ML-DSA-44 (FIPS 204, ``subtree/v1``). The rules, one
function each:

* the key id is the first 4 bytes (big-endian) of ``SHA-256(name || 0x0A || type || public key)``
  (:func:`cosignature_key_id`);
* the witness's verifier key is ``<name>+<8 hex digits of key id>+<base64(type || public key)>``, the
  public key 32 bytes (Ed25519) or 1,312 bytes (ML-DSA-44) (:meth:`CosignatureVerifier.parse`, ``str()``);
* the signature is an 8-byte big-endian POSIX timestamp, then a 64-byte Ed25519 or 2,420-byte ML-DSA-44
  signature (:func:`split_timestamped_signature`); the timestamp does not exceed ``2**63 - 1``;
* Ed25519 signs ``cosignature/v1\\ntime <timestamp>\\n`` followed by the whole note text (the checkpoint
  body with its final newline, no signature line) (:func:`cosignature_message`);
* ML-DSA-44 signs (pure ML-DSA, empty context) the ``cosigned_message`` structure: the label
  ``subtree/v1\\n\\0``, the cosigner's name (1 to 255 bytes, length-prefixed), the timestamp, the log's
  origin (1 to 255 bytes, length-prefixed), the range ``[start, end)`` and its 32-byte root hash
  (:func:`subtree_message`); a checkpoint is the range ``[0, size)``. The message does not cover
  extension lines, so a cosignature on a note whose text is not exactly a three-line checkpoint does not
  verify (as torchwood's verifier decides);
* a verifier is given the witnesses' keys; a signature line whose key name and key id match a given
  key is verified, and one that does not verify rejects the whole note (signed-note: "clients SHOULD
  reject the whole note"); lines by any other key are ignored and never counted; a cosignature whose
  timestamp is later than ``now + skew`` is refused: listed, never counted (:func:`verify_cosignatures`);
* cosignature lines are added to a signed note only when they verify and count, one per witness key,
  after the lines the note holds; its text and its lines are never changed (:func:`add_cosignatures`);
* a note passed on to clients that hold the witnesses' keys keeps none of the lines that claim one of
  those keys and do not verify (each would make such a client reject the whole note); every other line
  is kept as it is (:func:`without_false_cosignatures`).

Nothing here reads a clock: the caller passes ``now`` (POSIX seconds). Every failure is a
:class:`CosignatureError` whose ``fault`` says which rule failed (callers match the fault, never the
message).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import hashlib
import re
from collections.abc import Iterable, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PublicKey

from otel_route_shadow.tlog.checkpoint import CheckpointError, parse_checkpoint
from otel_route_shadow.tlog.merkle import HASH_SIZE
from otel_route_shadow.tlog.note import NoteError, NoteSignature, parse_note

__all__ = [
    "DEFAULT_SKEW_S",
    "MAX_TIMESTAMP",
    "CosignatureAlgorithm",
    "CosignatureError",
    "CosignatureFault",
    "CosignatureVerifier",
    "Cosignatures",
    "RefusedCosignature",
    "VerifiedCosignature",
    "add_cosignatures",
    "cosignature_key_id",
    "cosignature_message",
    "split_timestamped_signature",
    "subtree_message",
    "verify_cosignatures",
    "without_false_cosignatures",
]


class CosignatureAlgorithm(enum.IntEnum):
    """A cosignature's algorithm: its value is the type byte in key ids and verifier keys."""

    ED25519 = 4
    ML_DSA_44 = 6

    @property
    def public_key_size(self) -> int:
        return 32 if self is CosignatureAlgorithm.ED25519 else 1312

    @property
    def signature_size(self) -> int:
        return 64 if self is CosignatureAlgorithm.ED25519 else 2420


MAX_TIMESTAMP = 2**63 - 1
DEFAULT_SKEW_S = 300
"""How far in the future (seconds) a cosignature's timestamp may lie and still count: clocks differ."""

_SUBTREE_LABEL = b"subtree/v1\n\0"
_MAX_SHORT_FIELD = 255
_HEX8 = re.compile(r"[0-9a-f]{8}")
_MAX_VKEY = 4096


class CosignatureFault(enum.Enum):
    """Which rule a key string, a note or a cosignature broke."""

    MALFORMED_KEY = "malformed-key"
    KEY_TYPE = "key-type"
    KEY_ID = "key-id"
    MALFORMED_NOTE = "malformed-note"
    MALFORMED_SIGNATURE = "malformed-signature"
    TIMESTAMP_RANGE = "timestamp-range"
    BAD_SIGNATURE = "bad-signature"
    FUTURE_TIMESTAMP = "future-timestamp"


class CosignatureError(ValueError):
    """A key string, note or cosignature that breaks ``tlog-cosignature``; ``fault`` names the rule."""

    def __init__(self, fault: CosignatureFault, message: str, witness: str | None = None) -> None:
        super().__init__(message)
        self.fault = fault
        self.witness = witness


def cosignature_key_id(
    name: str, public_key: bytes, algorithm: CosignatureAlgorithm = CosignatureAlgorithm.ED25519
) -> int:
    """``SHA-256(name || 0x0A || type || public key)[:4]`` as a big-endian 32-bit number."""
    material = name.encode("utf-8") + b"\n" + bytes([algorithm]) + public_key
    return int.from_bytes(hashlib.sha256(material).digest()[:4], "big")


def cosignature_message(timestamp: int, text: str) -> bytes:
    """The bytes a witness signs: ``cosignature/v1``, ``time <timestamp>``, then the note text."""
    _check_timestamp(timestamp)
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def subtree_message(name: str, timestamp: int, origin: str, start: int, end: int, root: bytes) -> bytes:
    """The bytes an ML-DSA-44 witness signs: the ``cosigned_message`` of the range ``[start, end)`` of the
    log ``origin`` whose root hash is ``root``, by the cosigner ``name`` at ``timestamp`` (0 when it makes
    no statement about time; always 0 when ``start`` is not 0)."""
    _check_timestamp(timestamp)
    cosigner, log = name.encode("utf-8"), origin.encode("utf-8")
    if not (0 < len(cosigner) <= _MAX_SHORT_FIELD and 0 < len(log) <= _MAX_SHORT_FIELD):
        raise CosignatureError(
            CosignatureFault.MALFORMED_SIGNATURE, "a subtree cosigner name and log origin have 1 to 255 bytes"
        )
    if not 0 <= start <= end <= MAX_TIMESTAMP or len(root) != HASH_SIZE or (start and timestamp):
        raise CosignatureError(
            CosignatureFault.MALFORMED_SIGNATURE,
            "a subtree is a range 0 <= start <= end with a 32-byte hash, timestamped only when start is 0",
        )
    return b"".join(
        [
            _SUBTREE_LABEL,
            bytes([len(cosigner)]),
            cosigner,
            timestamp.to_bytes(8, "big"),
            bytes([len(log)]),
            log,
            start.to_bytes(8, "big"),
            end.to_bytes(8, "big"),
            root,
        ]
    )


def split_timestamped_signature(
    raw: bytes, algorithm: CosignatureAlgorithm = CosignatureAlgorithm.ED25519
) -> tuple[int, bytes]:
    """``(timestamp, signature)`` from the signature bytes of a cosignature line (after the key id): 72
    bytes for Ed25519, 2,428 for ML-DSA-44."""
    if len(raw) != 8 + algorithm.signature_size:
        raise CosignatureError(
            CosignatureFault.MALFORMED_SIGNATURE,
            f"a cosignature has {8 + algorithm.signature_size} bytes after its key id, this one {len(raw)}",
        )
    timestamp = int.from_bytes(raw[:8], "big")
    _check_timestamp(timestamp)
    return timestamp, raw[8:]


def _check_timestamp(timestamp: int) -> None:
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise CosignatureError(CosignatureFault.TIMESTAMP_RANGE, "a cosignature timestamp exceeds 2**63 - 1")


@dataclasses.dataclass(frozen=True, slots=True)
class CosignatureVerifier:
    """A witness's public key: its name, key id, algorithm and public key (32-byte Ed25519, type 0x04, or
    1,312-byte ML-DSA-44, type 0x06)."""

    name: str
    key_id: int
    public_key: bytes
    algorithm: CosignatureAlgorithm = CosignatureAlgorithm.ED25519

    @classmethod
    def parse(cls, vkey: str) -> CosignatureVerifier:
        """Parse ``<name>+<key id>+<base64(type || key)>``; the key id must match the name and key."""
        name, hex_id, material = _split_vkey(vkey)
        algorithm, public_key = _decode_key_material(material)
        verifier = cls.from_public_key(name, public_key, algorithm)
        if verifier.key_id != int(hex_id, 16):
            raise CosignatureError(
                CosignatureFault.KEY_ID, "the witness key id does not match its name and key"
            )
        return verifier

    @classmethod
    def from_public_key(
        cls, name: str, public_key: bytes, algorithm: CosignatureAlgorithm = CosignatureAlgorithm.ED25519
    ) -> CosignatureVerifier:
        """The verifier of the witness ``name`` whose ``algorithm`` public key is ``public_key``."""
        _check_name(name)
        if len(public_key) != algorithm.public_key_size:
            raise CosignatureError(
                CosignatureFault.KEY_TYPE,
                f"a type 0x{algorithm:02x} witness key holds {algorithm.public_key_size} bytes of key",
            )
        return cls(name, cosignature_key_id(name, public_key, algorithm), public_key, algorithm)

    def __str__(self) -> str:
        material = base64.b64encode(bytes([self.algorithm]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{material}"

    def signs(self, line: NoteSignature) -> bool:
        """Whether a signature line claims this key (same key name and key id)."""
        return line.name == self.name and line.key_id == self.key_id

    def timestamp_of(self, text: str, line: NoteSignature) -> int:
        """Verify ``line`` on the note text ``text``; its timestamp, or ``CosignatureError``."""
        timestamp, signature = split_timestamped_signature(line.signature, self.algorithm)
        try:
            if self.algorithm is CosignatureAlgorithm.ML_DSA_44:
                checkpoint = parse_checkpoint(text)
                message = subtree_message(
                    self.name, timestamp, checkpoint.origin, 0, checkpoint.size, checkpoint.root
                )
                MLDSA44PublicKey.from_public_bytes(self.public_key).verify(signature, message)
            else:
                Ed25519PublicKey.from_public_bytes(self.public_key).verify(
                    signature, cosignature_message(timestamp, text)
                )
        except (InvalidSignature, ValueError, CheckpointError, CosignatureError):
            raise CosignatureError(
                CosignatureFault.BAD_SIGNATURE,
                f"the cosignature by {self.name}+{self.key_id:08x} does not verify",
                witness=str(self),
            ) from None
        return timestamp


def _split_vkey(vkey: str) -> tuple[str, str, str]:
    if len(vkey) > _MAX_VKEY:
        raise CosignatureError(CosignatureFault.MALFORMED_KEY, "the witness key is too long")
    parts = vkey.split("+", 2)
    if len(parts) != 3:
        raise CosignatureError(CosignatureFault.MALFORMED_KEY, "not a witness key (<name>+<key id>+<key>)")
    name, hex_id, material = parts
    _check_name(name)
    if not _HEX8.fullmatch(hex_id):
        raise CosignatureError(
            CosignatureFault.MALFORMED_KEY, "the witness key id is not 8 lower-case hex digits"
        )
    return name, hex_id, material


def _check_name(name: str) -> None:
    if not name or "+" in name or " " in name or not name.isprintable():  # see note.check_key_name
        raise CosignatureError(
            CosignatureFault.MALFORMED_KEY, "a witness key name must be non-empty, without spaces or '+'"
        )


def _decode_key_material(material: str) -> tuple[CosignatureAlgorithm, bytes]:
    try:
        raw = base64.b64decode(material, validate=True)
    except (binascii.Error, ValueError):
        raise CosignatureError(CosignatureFault.MALFORMED_KEY, "the witness key is not base64") from None
    if not raw or raw[0] not in {a.value for a in CosignatureAlgorithm}:
        raise CosignatureError(
            CosignatureFault.KEY_TYPE,
            "not a cosignature key (type 0x04 Ed25519 or 0x06 ML-DSA-44): a witness key has another type",
        )
    return CosignatureAlgorithm(raw[0]), raw[1:]


@dataclasses.dataclass(frozen=True, slots=True)
class VerifiedCosignature:
    """A cosignature that verified: by ``verifier``, made at ``timestamp`` (POSIX seconds)."""

    verifier: CosignatureVerifier
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class RefusedCosignature:
    """A cosignature by a given key that verified but does not count (``fault``: why)."""

    verifier: CosignatureVerifier
    timestamp: int
    fault: CosignatureFault


@dataclasses.dataclass(frozen=True, slots=True)
class Cosignatures:
    """What a note's signature lines say about the given witnesses.

    ``verified``: one entry per given witness whose cosignature verified (the earliest timestamp when it
    signed more than once); ``refused``: cosignatures that verified but do not count; ``ignored``: how
    many lines were by keys not given (the log's own signature among them).
    """

    text: str
    verified: tuple[VerifiedCosignature, ...]
    refused: tuple[RefusedCosignature, ...]
    ignored: int

    def verifiers(self) -> frozenset[CosignatureVerifier]:
        """The witnesses whose cosignature counts."""
        return frozenset(c.verifier for c in self.verified)


def verify_cosignatures(
    note: str, witnesses: Iterable[CosignatureVerifier], *, now: int, skew: int = DEFAULT_SKEW_S
) -> Cosignatures:
    """Check the cosignature lines of ``note`` against the keys in ``witnesses`` (see the module)."""
    text, lines = _parse(note)
    known = tuple(witnesses)
    verified: dict[CosignatureVerifier, int] = {}
    refused: list[RefusedCosignature] = []
    ignored = 0
    for line in lines:
        claimed = [w for w in known if w.signs(line)]
        if not claimed:
            ignored += 1
            continue
        verifier, timestamp = _verify_line(text, line, claimed)
        if timestamp > now + skew:
            refused.append(RefusedCosignature(verifier, timestamp, CosignatureFault.FUTURE_TIMESTAMP))
        else:
            verified[verifier] = min(timestamp, verified.get(verifier, timestamp))
    ordered = tuple(VerifiedCosignature(w, verified[w]) for w in dict.fromkeys(known) if w in verified)
    return Cosignatures(text, ordered, tuple(refused), ignored)


def _parse(note: str) -> tuple[str, Sequence[NoteSignature]]:
    try:
        opened = parse_note(note)
    except NoteError as exc:
        raise CosignatureError(CosignatureFault.MALFORMED_NOTE, str(exc)) from None
    return opened.text, opened.signatures


def _verify_line(
    text: str, line: NoteSignature, claimed: Sequence[CosignatureVerifier]
) -> tuple[CosignatureVerifier, int]:
    """The key (of those claiming the line's name and key id) under which ``line`` verifies."""
    first, *others = claimed
    for verifier in others:  # keys sharing a name and key id: rare, but each is tried
        try:
            return verifier, verifier.timestamp_of(text, line)
        except CosignatureError:
            continue
    return first, first.timestamp_of(text, line)


def add_cosignatures(
    note: str,
    lines: Sequence[str],
    witnesses: Iterable[CosignatureVerifier],
    *,
    now: int,
    skew: int = DEFAULT_SKEW_S,
) -> str:
    """``note`` (a signed checkpoint note) with those of ``lines`` that are cosignatures of its text by one
    of ``witnesses`` that verify and count (timestamp at most ``now + skew``), appended after its own
    lines; a witness key the note already carries keeps its line. The note's text and lines are never
    changed. An unsigned note is returned as it is (no witness cosigns one). Raises
    :class:`CosignatureError` when a line by a given key does not verify, or the lines are not note
    signature lines."""
    text, present = _parse(note)
    block = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if not present or not block:
        return note
    found = verify_cosignatures(text + "\n" + block, witnesses, now=now, skew=skew)
    _, offered = _parse(text + "\n" + block)
    counted = found.verifiers()
    held = {(s.name, s.key_id) for s in present}
    added: list[str] = []
    for line in offered:
        if (line.name, line.key_id) in held or not any(w.signs(line) for w in counted):
            continue
        timestamp, _ = split_timestamped_signature(line.signature, _algorithm_of(line, counted))
        if timestamp > now + skew:
            continue
        held.add((line.name, line.key_id))
        added.append(line.line())
    return note + "".join(added)


def without_false_cosignatures(
    note: str, witnesses: Iterable[CosignatureVerifier]
) -> tuple[str, tuple[str, ...]]:
    """``note`` without its signature lines that claim a key of ``witnesses`` (key name and key id) and
    do not verify on its text, and the keys those lines claimed (``<name>+<key id>``). The lines kept are
    kept byte for byte, in order; a cosignature that verifies is kept whatever its timestamp (a client
    checks signatures, not clocks). Raises :class:`CosignatureError` when ``note`` is not a signed note."""
    text, lines = _parse(note)
    known = tuple(witnesses)
    raw = note[len(text) + 1 :].split("\n")[:-1]  # the lines after the blank line, as sent
    kept: list[str] = []
    dropped: list[str] = []
    for line, original in zip(lines, raw, strict=True):
        claimed = [w for w in known if w.signs(line)]
        try:
            if claimed:
                _verify_line(text, line, claimed)
        except CosignatureError:
            dropped.append(f"{line.name}+{line.key_id:08x}")
            continue
        kept.append(original + "\n")
    if not dropped:
        return note, ()
    return (text + "\n" + "".join(kept) if kept else text), tuple(dropped)


def _algorithm_of(line: NoteSignature, witnesses: Iterable[CosignatureVerifier]) -> CosignatureAlgorithm:
    """The algorithm of the witness key that ``line`` claims (one of ``witnesses`` does)."""
    return next(w.algorithm for w in witnesses if w.signs(line))
