"""One line's own record hash and its link, checked from its bytes (docs/chain-format.md section 5).

Without parsing JSON: ``record_hash`` is always the line's last member, so the record hash is
recomputed as ``SHA-256(line[:-82] + "}")`` and compared with the 64 hex digits the line ends with; the
link is the ``prev_hash`` member found from the right (a payload's own strings cannot hold an unescaped
quote, so the last ``,"prev_hash":"`` before the record hash is the record's); its ``seq`` and ``v``
are the two members right before the record hash. The signer's check
(``Checkpointer`` and ``catchup``, before a line is signed); verifiers check lines in full with the
chain's own verifier (``chain.verify_pass``), which relies on this check below a signed checkpoint.
"""

from __future__ import annotations

import hashlib

from otel_route_shadow.chain import RECORD_HASH_TAIL, record_hash_of

__all__ = ["GENESIS", "line_holds", "prev_of", "record_hash_holds", "record_hash_of"]

GENESIS = b"0" * 64
"""The link of seq 0: 64 ASCII zeros."""
TAIL = RECORD_HASH_TAIL
"""``,"record_hash":"`` + 64 hex digits + ``"}``: the bytes that always end a line."""
HASH_KEY = b',"record_hash":"'
PREV_KEY = b',"prev_hash":"'


def record_hash_holds(line: bytes) -> bool:
    """The line ends with its record member (all 82 bytes: the key, 64 hex digits, ``"}``), and SHA-256
    of the body before it is the hash it carries."""
    if line[-TAIL : -TAIL + 16] != HASH_KEY or not line.endswith(b'"}'):
        return False
    return hashlib.sha256(line[:-TAIL] + b"}").hexdigest().encode("ascii") == record_hash_of(line)


def prev_of(line: bytes) -> bytes:
    """The line's own ``prev_hash`` value (ASCII hex), ``b""`` when it has none."""
    at = line.rfind(PREV_KEY, 0, len(line) - TAIL)
    return line[at + 14 : at + 78] if at >= 0 else b""


def line_holds(line: bytes, prev: bytes, seq: int) -> bool:
    """The line is record ``seq`` of format version 1 (the members before its record hash), its record
    hash holds and it links to ``prev`` (the previous line's record hash, or ``GENESIS`` for seq 0)."""
    return (
        line[:-TAIL].endswith(b',"seq":%d,"v":1' % seq) and prev_of(line) == prev and record_hash_holds(line)
    )
