"""The leaves of a chain: its complete lines, without LF, read in large blocks.

Leaf i is line i of the chain file exactly as on disk, without the trailing LF (line index == seq).
Bytes after the last LF (a torn tail, or an append in flight) are not a leaf.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

__all__ = ["BLOCK_BYTES", "iter_blocks", "iter_line_blocks"]

BLOCK_BYTES = 8 * 1024 * 1024


def iter_blocks(
    handle: BinaryIO, offset: int, end: int, block_bytes: int = BLOCK_BYTES
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset after the block, block)`` for the complete lines between ``offset`` and ``end``:
    each block is whole lines joined by LF, its last LF dropped. A line longer than the block is read
    on in larger pieces."""
    handle.seek(offset)
    carry = b""
    position = offset
    while position < end:
        data = handle.read(min(block_bytes, end - position))
        if not data:
            return
        position += len(data)
        data = carry + data if carry else data
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        yield position - len(carry), data[:cut]


def iter_line_blocks(
    handle: BinaryIO, offset: int, end: int, block_bytes: int = BLOCK_BYTES
) -> Iterator[tuple[int, list[bytes]]]:
    """:func:`iter_blocks` with each block split into its lines."""
    for after, block in iter_blocks(handle, offset, end, block_bytes):
        yield after, block.split(b"\n")
