"""The leaves of a chain: its complete lines, without LF, read in large blocks.

Leaf i is line i of the chain file exactly as on disk, without the trailing LF (line index == seq).
Bytes after the last LF (a torn tail, or an append in flight) are not a leaf.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

__all__ = ["BLOCK_BYTES", "iter_line_blocks"]

BLOCK_BYTES = 8 * 1024 * 1024


def iter_line_blocks(
    handle: BinaryIO, offset: int, end: int, block_bytes: int = BLOCK_BYTES
) -> Iterator[tuple[int, list[bytes]]]:
    """Yield ``(offset after the block, lines)`` for the complete lines between ``offset`` and ``end``.

    Each block holds whole lines only; a line longer than the block is read on in larger pieces.
    """
    handle.seek(offset)
    carry = b""
    position = offset
    while position < end:
        data = handle.read(min(block_bytes, end - position))
        if not data:
            return
        position += len(data)
        data = carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        lines = data[:cut].split(b"\n")
        yield position - len(carry), lines
