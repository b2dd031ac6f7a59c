"""A segmented chain's closed segments and their archives (docs/chain-format.md sections 14.5-14.6).

A chain is named by its live file ``X.jsonl``; its closed segments are ``X.jsonl.segments/<first seq, 16
digits>.jsonl`` (records ``[first, next segment's first)``), archived segments are
``X.jsonl.archive/<same name>`` or ``<same name>.gz`` with ``<same name>.proof`` beside either: an
``tlog.ArchiveProofDoc`` proving the archive's records are leaves ``[first, end)`` of a signed tree.

:func:`read_segment` streams one segment (plain or gzip, never unpacked to disk): every line must be a
record (``chain.check_line``), its ``seq`` the next one and its ``prev_hash`` the previous record's hash
(the first record's ``prev_hash`` cannot be checked here: it belongs to the record before the segment);
it returns the leaf hashes, the SHA-256 and the size of the uncompressed bytes. :func:`check_archive`
checks an archive offline against its proof and a verifier key, with no other file.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import itertools
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from pydantic import ValidationError

from otel_route_shadow.chain import (
    MAX_LINE_BYTES,
    SEGMENTS_SUFFIX,
    ChainCorruptError,
    Good,
    chain_segments,
    check_line,
    fast_run,
    read_head,
)
from otel_route_shadow.files import FileRefused, file_identity, open_regular, read_regular
from otel_route_shadow.strict_json import StrictJSONError, loads_strict, schema_problem
from otel_route_shadow.tlog import (
    ArchiveProofDoc,
    AuthenticationError,
    Checkpoint,
    LogKey,
    Malformed,
    ProofError,
    authenticate,
    check_archive_doc,
    leaf_hash,
)

__all__ = [
    "ArchiveProblem",
    "Segment",
    "SegmentRead",
    "archive_dir",
    "check_archive",
    "closed_segments",
    "gzip_blocks",
    "open_segment",
    "proof_path",
    "read_proof",
    "read_segment",
    "segments_dir",
]

_BLOCK: Final = 1 << 20
_MAX_PROOF_FILE: Final = 1 << 20
_GZIP_LEVEL: Final = 6
_BATCH: Final = 4096
_BATCH_BYTES: Final = 8 << 20
"""Lines checked at a time: up to 4,096 of them or 8 MiB (plus one line: 12 MiB at the 4 MiB line limit)."""


def segments_dir(chain_path: str) -> str:
    """``X.jsonl.segments``: the folder of a chain's closed segments."""
    return chain_path + SEGMENTS_SUFFIX


def archive_dir(chain_path: str) -> str:
    """``X.jsonl.archive``: the folder of a chain's archived segments."""
    return chain_path + ".archive"


def proof_path(archive: str) -> str:
    """The ``.proof`` file of an archive: its name without ``.gz``, then ``.proof``."""
    return archive.removesuffix(".gz") + ".proof"


@dataclasses.dataclass(frozen=True, slots=True)
class Segment:
    """A closed segment: its file name, its path and its records ``[first, end)``."""

    name: str
    path: str
    first: int
    end: int


def closed_segments(chain_path: str) -> list[Segment]:
    """The chain's closed segments in chain order (none for a chain never cut). A segment that is still
    the live file (the same inode: a cut in progress) is not closed and not listed."""
    listed = chain_segments(chain_path)[:-1]  # the folder checked: a directory, not too many entries
    if not listed:
        return []
    live = file_identity(chain_path)
    closed = [(os.path.basename(s.path), s.path) for s in listed if file_identity(s.path) != live]
    ends = [int(n[:16]) for n, _ in closed[1:]]
    if closed:
        ends.append(_live_first(chain_path, closed[-1][1]))
    return [Segment(n, p, int(n[:16]), end) for (n, p), end in zip(closed, ends, strict=True)]


def _live_first(chain_path: str, last_segment: str) -> int:
    """The live file's first seq; when it holds no record, the seq after the last segment's last."""
    try:
        fd = open_regular(chain_path)
    except FileNotFoundError:
        fd = -1
    if fd >= 0:
        try:
            first = os.pread(fd, MAX_LINE_BYTES + 1, 0).split(b"\n", 1)
        finally:
            os.close(fd)
        if len(first) == 2 and isinstance(checked := check_line(first[0]), Good):
            return checked.seq
    try:
        head = read_head(last_segment)
    except ChainCorruptError:
        head = None
    return 0 if head is None else head.seq + 1


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentRead:
    """What :func:`read_segment` found: the leaf hashes (concatenated), the SHA-256 (hex) and size of
    the uncompressed bytes, and the first problem (None: every record parses and links)."""

    leaves: bytes
    sha256: str
    size: int
    problem: str | None = None

    @property
    def count(self) -> int:
        return len(self.leaves) // 32


def read_segment(stream: io.IOBase, first: int, max_bytes: int | None = None) -> SegmentRead:
    """Read ``stream`` (a segment's bytes, uncompressed) as records ``first, first + 1 ...`` (see the module
    docstring), in batches of lines checked the quick way (``chain.fast_run``) with each line it declines
    checked exactly; stops at the first problem, or at the batch that goes past ``max_bytes`` (a problem)."""
    digest, leaves, size = hashlib.sha256(), bytearray(), 0
    prev: str | None = None
    seq = first
    for batch in _batches(stream):
        for line in batch:
            digest.update(line)
            size += len(line)
        if max_bytes is not None and size > max_bytes:
            return SegmentRead(bytes(leaves), digest.hexdigest(), size, f"more than {max_bytes} bytes")
        lines = list(itertools.takewhile(lambda line: line.endswith(b"\n"), batch))
        lines = [line[:-1] for line in lines]
        index = 0
        while index < len(batch):
            if prev is not None and index < len(lines):
                seq, prev, index = fast_run(lines, index, len(lines), seq, prev)
                if index == len(batch):
                    break
            checked = _line_problem(batch[index], seq, prev)
            if isinstance(checked, str):
                leaves += b"".join(leaf_hash(line) for line in lines[:index])
                return SegmentRead(bytes(leaves), digest.hexdigest(), size, f"record {seq}: {checked}")
            prev, seq, index = checked.record_hash, seq + 1, index + 1
        leaves += b"".join(leaf_hash(line) for line in lines)
    return SegmentRead(bytes(leaves), digest.hexdigest(), size)


def _batches(stream: io.IOBase) -> Iterator[list[bytes]]:
    """The stream's lines (each with its LF; a last one or one over the line limit without), in lists of at
    most :data:`_BATCH` lines and about :data:`_BATCH_BYTES` bytes."""
    batch: list[bytes] = []
    held = 0
    while line := stream.readline(MAX_LINE_BYTES + 1):
        batch.append(line)
        held += len(line)
        if len(batch) == _BATCH or held >= _BATCH_BYTES:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _line_problem(line: bytes, seq: int, prev: str | None) -> Good | str:
    if not line.endswith(b"\n"):
        return "a line without its LF (torn), or longer than any record"
    checked = check_line(line[:-1])
    if not isinstance(checked, Good):
        return f"{checked.reason.value}: {checked.detail}"
    if checked.seq != seq:
        return f"seq {checked.seq} where {seq} was expected"
    if prev is not None and checked.prev_hash != prev:
        return "its prev_hash is not the previous record's hash"
    return checked


def open_segment(path: str, max_bytes: int | None = None) -> io.IOBase:
    """A segment or archive for reading, uncompressed as it is read when its name ends in ``.gz``. With
    ``max_bytes``, a file larger than that on disk is refused before a byte is read (``too-large``)."""
    fd = open_regular(path)
    if max_bytes is not None and (size := os.fstat(fd).st_size) > max_bytes:
        os.close(fd)
        raise FileRefused(path, "too-large", f"{size} bytes, more than {max_bytes}")
    raw = io.BufferedReader(io.FileIO(fd, "rb"), _BLOCK)  # never a read per byte
    return gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw


def _gzip_bound(size: int) -> int:
    """More than any gzip file of ``size`` bytes can be (zlib's ``deflateBound`` is ``size + size / 4096 +
    size / 16384 + size / 2**25`` and a few bytes; a gzip header, here with no name, about 20)."""
    return size + (size >> 10) + 4096


def gzip_blocks(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """A gzip file of ``blocks``, in blocks (for ``files.write_atomic``)."""
    packer = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 31)
    for block in blocks:
        yield packer.compress(block)
    yield packer.flush()


class ArchiveProblem(Exception):
    """An archive that does not verify: ``finding`` (a record, the proof or the note does not hold) or
    not (a file that cannot be read or parsed)."""

    def __init__(self, message: str, *, finding: bool) -> None:
        super().__init__(message)
        self.finding = finding


def read_proof(path: str) -> ArchiveProofDoc:
    """The proof document at ``path``; :class:`ArchiveProblem` (not a finding) when it cannot be used."""
    try:
        return ArchiveProofDoc.model_validate(loads_strict(read_regular(path, _MAX_PROOF_FILE)))
    except FileNotFoundError:
        raise ArchiveProblem(f"{path}: no proof file beside the archive", finding=False) from None
    except (FileRefused, StrictJSONError, UnicodeDecodeError) as exc:
        raise ArchiveProblem(f"{path}: {exc}", finding=False) from None
    except ValidationError as exc:
        raise ArchiveProblem(f"{path}: not an archive proof: {schema_problem(exc)}", finding=False) from None


def _authentic(note: str, verifiers: Sequence[LogKey], source: str) -> Checkpoint:
    try:
        return authenticate(note, verifiers).checkpoint
    except Malformed as exc:
        raise ArchiveProblem(f"{source}: {exc}", finding=False) from None
    except AuthenticationError as exc:
        raise ArchiveProblem(f"{source}: {exc.reason}: {exc}", finding=True) from None


def check_archive(
    archive: str, verifiers: Sequence[LogKey], note: str | None = None
) -> tuple[ArchiveProofDoc, SegmentRead]:
    """Check ``archive`` against its proof (at :func:`proof_path`): the proof's note is
    signed by one of ``verifiers``; ``note``, when given, is too and holds the same tree (origin, size,
    root); every record parses and links; the records' leaf hashes with the proof give that tree's root;
    the uncompressed bytes are the SHA-256 and size the proof names. :class:`ArchiveProblem` otherwise."""
    doc = read_proof(proof_path(archive))
    signed = _authentic(doc.checkpoint, verifiers, "the proof's checkpoint")
    if note is not None:
        given = _authentic(note, verifiers, "--checkpoint")
        if (given.origin, given.size, given.root) != (signed.origin, signed.size, signed.root):
            raise ArchiveProblem(
                f"--checkpoint is the tree of {given.size} leaves of {given.origin!r}; the archive is proven "
                f"against the tree of {signed.size} leaves of {signed.origin!r}",
                finding=True,
            )
    try:  # bounded by the size the proof names: gzip reads zero padding after its data a byte at a time
        with open_segment(archive, _gzip_bound(doc.size) if archive.endswith(".gz") else doc.size) as stream:
            read = read_segment(stream, doc.first, doc.size)
    except FileNotFoundError:
        raise ArchiveProblem(f"{archive}: no such archive", finding=False) from None
    except FileRefused as exc:
        if exc.kind == "too-large":
            raise ArchiveProblem(
                f"{archive}: {exc.problem} allowed for the segment of {doc.size} bytes its proof names",
                finding=True,
            ) from None
        raise ArchiveProblem(str(exc), finding=False) from None
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveProblem(f"{archive}: cannot be read: {exc}", finding=True) from None
    if read.problem is not None:
        named = ", the size its proof names" if read.size > doc.size else ""
        raise ArchiveProblem(f"{archive}: {read.problem}{named}", finding=True)
    try:
        check_archive_doc(doc, signed, read.leaves)
    except ProofError as exc:
        raise ArchiveProblem(
            f"{archive}: records [{doc.first}, {doc.first + read.count}): {exc}", finding=True
        ) from None
    if (read.sha256, read.size) != (doc.sha256, doc.size):
        raise ArchiveProblem(
            f"{archive}: not the segment file the proof names (SHA-256 or size)", finding=True
        )
    return doc, read
