"""C2SP ``signed-note`` with Ed25519 signatures, key strings as Go's ``golang.org/x/mod/sumdb/note``.

A note is its text (ending in LF), one blank line, then one line per signature::

    — <key name> <base64(key id || signature)>

(U+2014 EM DASH and a space). The key id is the first 4 bytes (big-endian) of
``SHA-256(key name || 0x0A || 0x01 || public key)`` for Ed25519 (type 0x01), which signs the text
exactly as written. Key strings::

    verifier: <name>+<8 hex digits of key id>+<base64(0x01 || 32-byte public key)>
    signer:   PRIVATE+KEY+<name>+<8 hex digits of key id>+<base64(0x01 || 32-byte seed)>

A signer key is secret: no message, ``repr`` or exception of this module ever contains it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import re
from collections.abc import Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = [
    "ALG_ED25519",
    "MAX_KEY_NAME",
    "NoteError",
    "NoteSignature",
    "OpenedNote",
    "SignatureError",
    "Signer",
    "Verifier",
    "check_key_name",
    "check_signatures",
    "key_id",
    "parse_note",
    "sign_note",
]

ALG_ED25519 = 1
_DASH = "\u2014 "
_HEX8 = re.compile(r"[0-9a-f]{8}")
_MAX_SIGNATURES = 100
MAX_KEY_NAME = 256
"""The longest key name accepted, in characters (the spec sets no bound; a name is a short URL)."""


class NoteError(ValueError):
    """A malformed note or key string. Messages never quote a signer key."""


class SignatureError(NoteError):
    """A signature by a known key (name and key id) that does not verify: the note was altered or forged."""


def key_id(name: str, public_key: bytes) -> int:
    """The 32-bit key id of an Ed25519 key called ``name``."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def check_key_name(name: str, *, ascii_only: bool = False) -> None:
    """The signed-note spec's rules for a key name: non-empty, no Unicode space, no ``+``; here also
    printable and at most :data:`MAX_KEY_NAME` characters. ``ascii_only`` (this package's own keys,
    whose key file is ASCII) refuses any other character with a message saying so."""
    # A printable string's only Unicode space is U+0020: every other one is a separator or control.
    if not name or "+" in name or " " in name or not name.isprintable():
        raise NoteError("a key name must be non-empty, printable, without spaces or '+'")
    if len(name) > MAX_KEY_NAME:
        raise NoteError(f"a key name is at most {MAX_KEY_NAME} characters, this one has {len(name)}")
    if ascii_only and not name.isascii():
        raise NoteError(
            "a key name must be ASCII here (the key file holds ASCII only); "
            "use a name such as example.com/route-shadow/host-a"
        )


def _decode_key_material(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError(f"the {what} is not base64") from None
    if len(raw) != 33 or raw[0] != ALG_ED25519:
        raise NoteError(f"the {what} is not an Ed25519 key (type 0x01 and 32 bytes)")
    return raw[1:]


def _split_key(text: str, fields: int, what: str) -> list[str]:
    parts = text.split("+", fields - 1)
    if len(parts) != fields:
        raise NoteError(f"not a {what} string (<name>+<key id>+<key>)")
    return parts


@dataclasses.dataclass(frozen=True, slots=True)
class Verifier:
    """A named Ed25519 public key that checks note signatures."""

    name: str
    key_id: int
    public_key: bytes

    @classmethod
    def parse(cls, text: str) -> Verifier:
        name, hex_id, material = _split_key(text.strip(), 3, "verifier key")
        check_key_name(name)
        if not _HEX8.fullmatch(hex_id):
            raise NoteError("the verifier key id is not 8 lower-case hex digits")
        public = _decode_key_material(material, "verifier key")
        if key_id(name, public) != int(hex_id, 16):
            raise NoteError("the verifier key id does not match its name and key")
        return cls(name, int(hex_id, 16), public)

    def __str__(self) -> str:
        material = base64.b64encode(bytes([ALG_ED25519]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{material}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


class Signer:
    """A named Ed25519 private key. Its ``repr`` and ``str`` show the name and key id only."""

    __slots__ = ("_key", "key_id", "name", "public_key")

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        check_key_name(name, ascii_only=True)
        self.name = name
        self._key = private_key
        self.public_key = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = key_id(name, self.public_key)

    @classmethod
    def generate(cls, name: str) -> Signer:
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def parse(cls, text: str) -> Signer:
        """Parse a ``PRIVATE+KEY+...`` string; errors never quote it."""
        parts = _split_key(text.strip(), 5, "signer key")
        if parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError(
                "not a signer key string (PRIVATE, KEY, a name, a key id and a key, joined by '+')"
            )
        name, hex_id, material = parts[2:]
        check_key_name(name, ascii_only=True)
        if not _HEX8.fullmatch(hex_id):
            raise NoteError("the signer key id is not 8 lower-case hex digits")
        signer = cls(name, Ed25519PrivateKey.from_private_bytes(_decode_key_material(material, "signer key")))
        if signer.key_id != int(hex_id, 16):
            raise NoteError("the signer key id does not match its name and key")
        return signer

    def secret_string(self) -> str:
        """The ``PRIVATE+KEY+...`` string: only for writing the key file."""
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        seed = self._key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        material = base64.b64encode(bytes([ALG_ED25519]) + seed).decode("ascii")
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{material}"

    def verifier(self) -> Verifier:
        return Verifier(self.name, self.key_id, self.public_key)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"Signer(name={self.name!r}, key_id={self.key_id:08x})"

    __str__ = __repr__


@dataclasses.dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: the key name, the key id and the 64-byte signature."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        blob = base64.b64encode(self.key_id.to_bytes(4, "big") + self.signature).decode("ascii")
        return f"{_DASH}{self.name} {blob}\n"


@dataclasses.dataclass(frozen=True, slots=True)
class OpenedNote:
    """A parsed note: its text, its signatures, and (after :func:`check_signatures`) who verified it."""

    text: str
    signatures: tuple[NoteSignature, ...]
    verified_by: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()


def _check_text(text: str) -> None:
    if not text.endswith("\n") or "\n\n" in text or text.startswith("\n"):
        raise NoteError("the note text must end with one newline and hold no blank line")
    if not text.replace("\n", "").isprintable():
        raise NoteError("the note text holds a control character")


def sign_note(text: str, signers: Sequence[Signer]) -> str:
    """The signed note: ``text``, a blank line, one signature line per signer (``text`` alone if none)."""
    _check_text(text)
    if not signers:
        return text
    message = text.encode("utf-8")
    lines = [NoteSignature(s.name, s.key_id, s.sign(message)).line() for s in signers]
    return text + "\n" + "".join(lines)


def parse_note(note: str) -> OpenedNote:
    """Split a note into text and signature lines (an unsigned note is its text alone)."""
    cut = note.rfind("\n\n")
    if cut < 0:
        _check_text(note)
        return OpenedNote(note, ())
    text, block = note[: cut + 1], note[cut + 2 :]
    _check_text(text)
    if not block.endswith("\n"):
        raise NoteError("the note's last signature line does not end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise NoteError(f"the note has more than {_MAX_SIGNATURES} signatures")
    return OpenedNote(text, tuple(_parse_signature(line) for line in lines))


def _parse_signature(line: str) -> NoteSignature:
    if not line.startswith(_DASH):
        raise NoteError("a signature line does not start with an em dash and a space")
    name, _, blob = line[len(_DASH) :].rpartition(" ")
    check_key_name(name)
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError("a signature is not base64") from None
    if len(raw) < 5:
        raise NoteError("a signature is too short")
    return NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:])


def check_signatures(opened: OpenedNote, verifiers: Sequence[Verifier]) -> OpenedNote:
    """Check each signature of a parsed note (:func:`parse_note`) by a known key.

    A signature by a known key (name and key id) that does not verify raises :class:`SignatureError`;
    signatures by unknown keys are listed in ``unknown`` and never count as valid.
    """
    known = {(v.name, v.key_id): v for v in verifiers}
    message = opened.text.encode("utf-8")
    verified: list[str] = []
    unknown: list[str] = []
    for sig in opened.signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            unknown.append(f"{sig.name}+{sig.key_id:08x}")
        elif verifier.verify(message, sig.signature):
            verified.append(str(verifier))
        else:
            raise SignatureError(f"the signature by {sig.name}+{sig.key_id:08x} does not verify")
    return dataclasses.replace(opened, verified_by=tuple(verified), unknown=tuple(unknown))
