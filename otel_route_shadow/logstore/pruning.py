"""Retention by the C2SP tlog-tiles pruning rules: raise a chain's minimum index to a segment boundary
(docs/chain-format.md section 14.5, docs/operating.md "Retention").

:func:`prune` holds two locks, each waited for at most ``wait`` seconds (:class:`PruneRefused` ``busy``
otherwise, nothing changed): the prune lock (``prune_lock``: an ``flock`` on the chain's segments
folder), exclusive for the whole prune (two prunes never work at once, nor one while a command reads
the chain); and the chain's lock (the ``flock`` every writer takes on the live file) only for two short
steps, so that appends go on while the segments are checked and archived. Closed segments never change,
so that work needs no lock. In steps that a SIGKILL may interrupt anywhere:

1. under the chain's lock: settle what an interrupted prune left (:func:`settle_pruning`): segments below
   the recorded minimum index are removed (the prune had committed), archives at or above it and
   temporaries are removed (it had not); then read ``pruned``, the closed segments and the number of
   records;
2. without it: check every segment to prune before writing anything: each record parses and links, and
   its leaf hashes with a range proof read from the tiles give the root of the checkpoint that covers it
   (the largest one the witness policy's quorum attests, or without a policy the newest one a log key
   signs); a segment beyond that checkpoint is refused (``unwitnessed``) unless forced;
3. without it: write each archive (gzip or plain) and read it back, then its ``.proof``;
4. under the chain's lock again: unless ``pruned`` and every segment file checked are still what the
   work was done for (``busy`` otherwise: the archives written are removed, nothing changed), save
   ``pruned`` through ``LogStore.save_pruned`` (the commit) and remove the pruned segment files;
5. without it, under the log's lock: move the entries of ``checkpoints`` of trees below the new minimum
   index to the archive folder (``note_retirement``; when a checkpoint covers it).

Anything raised before the commit removes the archives this prune wrote. The tree, the tiles and the
origin never change: every retained entry keeps its inclusion proof.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import os
from collections.abc import Iterator, Sequence
from typing import Final

from otel_route_shadow.chain import ChainCorruptError, segment_name, tail_head
from otel_route_shadow.files import (
    FileRefused,
    file_identity,
    fsync_directory,
    open_regular,
    range_blocks,
    remove_temporaries,
    write_atomic,
)
from otel_route_shadow.locking import flock_within, release
from otel_route_shadow.logstore.archives import (
    Segment,
    SegmentRead,
    archive_dir,
    closed_segments,
    gzip_blocks,
    open_segment,
    proof_path,
    read_segment,
    segments_dir,
)
from otel_route_shadow.logstore.note_retirement import RetiredNotes, retire_notes, retirement_due
from otel_route_shadow.logstore.prune_lock import segments_lock
from otel_route_shadow.logstore.pruned import Pruned, PrunedSegment
from otel_route_shadow.logstore.store import LogStore, StateError
from otel_route_shadow.tlog import (
    ArchiveProofDoc,
    AuthenticationError,
    Checkpoint,
    KeyWindow,
    LogKey,
    ProofError,
    TileError,
    TileReader,
    WitnessPolicy,
    attest_notes,
    authenticate,
    check_archive_doc,
    checkpoint_of,
    range_proof,
)

__all__ = [
    "PRUNE_LOCK_WAIT_S",
    "PruneOptions",
    "PruneRefused",
    "PruneResult",
    "Retention",
    "prune",
    "settle_pruning",
]

PRUNE_LOCK_WAIT_S: Final = 5.0
"""How long ``prune`` waits for each of its locks by default (writers hold the chain's for one append)."""
_POLL_S: Final = 0.01
_DAY_S: Final = 86_400


class PruneRefused(Exception):
    """Nothing was pruned: ``kind`` is ``busy`` (another process holds the lock), ``unwitnessed``
    (no witnessed checkpoint covers the records), ``finding`` (a segment does not hold) or ``unusable``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclasses.dataclass(frozen=True, slots=True)
class Retention:
    """What to keep: the newest ``keep_records`` records, the segments closed within ``keep_days`` days,
    or every record from ``min_index`` on; several given: the most kept. None of them: nothing pruned."""

    keep_records: int | None = None
    keep_days: float | None = None
    min_index: int | None = None

    def target(self, segments: Sequence[Segment], total: int, now: float) -> int:
        """The largest minimum index the retention allows (before rounding down to a boundary)."""
        targets = []
        if self.min_index is not None:
            targets.append(self.min_index)
        if self.keep_records is not None:
            targets.append(total - self.keep_records)
        if self.keep_days is not None:
            cutoff = now - self.keep_days * _DAY_S
            old = [s for s in segments if _closed_at(s) < cutoff]
            targets.append(_leading(segments, old))
        return min(targets, default=0)


def _closed_at(segment: Segment) -> float:
    """When a closed segment was closed: its file's modification time (it is never written again)."""
    try:
        return os.stat(segment.path).st_mtime
    except OSError:
        return float("inf")


def _leading(segments: Sequence[Segment], old: Sequence[Segment]) -> int:
    """The end of the longest run of ``old`` segments from the first segment on."""
    end = segments[0].first if segments else 0
    for segment, candidate in zip(segments, old, strict=False):
        if segment != candidate:
            break
        end = segment.end
    return end


@dataclasses.dataclass(frozen=True, slots=True)
class PruneOptions:
    """How to prune: ``compress`` (gzip) or not, ``delete`` instead of archiving, ``force`` past the
    witnessed size; the log ``verifiers`` and the witness ``policy`` that say which checkpoint covers the
    records; ``now`` (POSIX seconds) and ``command`` (the command line, recorded in ``pruned``)."""

    verifiers: Sequence[LogKey]
    policy: WitnessPolicy | None = None
    compress: bool = True
    delete: bool = False
    force: bool = False
    now: int = 0
    command: str = ""
    wait: float = PRUNE_LOCK_WAIT_S


@dataclasses.dataclass(frozen=True, slots=True)
class PruneResult:
    """What :func:`prune` did: the minimum index before and after, the segments pruned now, the
    checkpoint size the proofs are made against (None: none), those pruned without a proof (forced),
    what an interrupted prune had left (segments removed, archives undone), and the entries of
    ``checkpoints`` moved out."""

    before: int
    after: int
    pruned: tuple[PrunedSegment, ...]
    proven_by: int | None
    unproven: tuple[str, ...]
    finished: int
    undone: int
    notes: RetiredNotes


def prune(chain_path: str, retention: Retention, options: PruneOptions) -> PruneResult:
    """Raise the chain's minimum index as ``retention`` allows (see the module docstring)."""
    with _prune_lock(chain_path, options.wait) as locked:
        survey = _survey(chain_path, locked, options.wait)
        before = 0 if survey.previous is None else survey.previous.min_index
        target = retention.target(survey.segments, survey.total, options.now)
        chosen = [s for s in survey.segments if s.end <= target]
        if not chosen:
            notes = _retired(chain_path, before, options, None)
            return PruneResult(before, before, (), None, (), survey.finished, survey.undone, notes)
        store = LogStore(chain_path)
        covering = _covering(store, options)
        _refuse_unwitnessed(chosen, covering, options.force)
        checked = [_checked(store, s, covering) for s in chosen]
        try:
            done = [_archived(chain_path, c, options) for c in checked]
            with _chain_lock(chain_path, options.wait):
                _refuse_changed(chain_path, store, survey.previous, checked)
                _commit(store, survey.previous, done, options)
                _remove_segments(chain_path, chosen)
        except BaseException:
            _undo_uncommitted(chain_path, store, before)
            raise
        unproven = tuple(c.segment.name for c in checked if c.proof is None)
        notes = _retired(chain_path, chosen[-1].end, options, covering)
        return PruneResult(
            before,
            chosen[-1].end,
            tuple(done),
            None if covering is None else covering[0].size,
            unproven,
            survey.finished,
            survey.undone,
            notes,
        )


def _retired(
    chain_path: str, min_index: int, options: PruneOptions, covering: tuple[Checkpoint, str] | None
) -> RetiredNotes:
    """Step 5, after a commit or after one whose step 5 did not run: move the entries of ``checkpoints``
    below ``min_index`` out (``note_retirement``) when its first line may be one and a checkpoint covers
    ``min_index``, whose origin says which entries are the log's."""
    if min_index == 0 or not retirement_due(chain_path, min_index):
        return RetiredNotes()
    try:
        covering = covering or _covering(LogStore(chain_path), options)
    except (OSError, ValueError) as exc:  # checkpoints cannot be read now: the next prune tries again
        return RetiredNotes(left=f"the checkpoint that covers {min_index} cannot be read: {exc}")
    if covering is None or covering[0].size < min_index:
        return RetiredNotes()
    archive, compress = not options.delete, options.compress
    return retire_notes(
        chain_path, covering[0].origin, min_index, archive=archive, compress=compress, wait=options.wait
    )


@contextlib.contextmanager
def _prune_lock(chain_path: str, wait: float) -> Iterator[bool]:
    """Hold the prune lock exclusive (``prune_lock.segments_lock``; yields True). A chain with no
    segments folder was never cut: it has nothing to prune, and no lock is taken (yields False)."""
    with contextlib.ExitStack() as stack:
        try:
            held = stack.enter_context(segments_lock(chain_path, fcntl.LOCK_EX, wait))
        except OSError as exc:
            folder = segments_dir(chain_path)
            raise PruneRefused(
                "unusable", f"{folder}: not a folder prune can open ({exc.strerror})"
            ) from None
        if held is False:
            raise PruneRefused(
                "busy",
                f"{chain_path}: another prune of this chain, or a command reading it, is running "
                f"(waited {wait:g} s); nothing changed",
            )
        yield held is True


@dataclasses.dataclass(frozen=True, slots=True)
class _Survey:
    """What the first step found under the chain's lock: the ``pruned`` file, the closed segments, the
    number of records, and what settling an interrupted prune did (segments removed, archives undone)."""

    previous: Pruned | None
    segments: list[Segment]
    total: int
    finished: int
    undone: int


def _survey(chain_path: str, locked: bool, wait: float) -> _Survey:
    """Under the chain's lock, briefly: settle an interrupted prune, then read ``pruned``, the closed
    segments and the number of records. ``locked``: whether the prune lock is held (it is unless the
    chain had no segments folder)."""
    with _chain_lock(chain_path, wait) as fd:
        if not locked and os.path.lexists(segments_dir(chain_path)):
            raise PruneRefused(
                "busy", f"{chain_path}: cut for the first time as prune began; nothing changed"
            )
        previous = _read_pruned(LogStore(chain_path))
        finished, undone = settle_pruning(chain_path, previous)
        before = 0 if previous is None else previous.min_index
        segments = closed_segments(chain_path)
        if segments and segments[0].first != before:
            raise PruneRefused(
                "finding",
                f"{segments_dir(chain_path)}: the first segment begins at {segments[0].first}, "
                f"not at the minimum index {before}: a segment is missing",
            )
        return _Survey(previous, segments, _total(fd, segments), finished, undone)


@contextlib.contextmanager
def _chain_lock(chain_path: str, wait: float) -> Iterator[int]:
    """Hold the chain's lock (the live file's ``flock``), on the file that is the live file now; yields
    its descriptor."""
    for _ in range(3):
        try:
            fd = open_regular(chain_path)
        except FileNotFoundError:
            raise PruneRefused("unusable", f"{chain_path}: no such chain") from None
        except FileRefused as exc:
            raise PruneRefused("unusable", str(exc)) from None
        try:
            if not flock_within(fd, fcntl.LOCK_EX, wait, _POLL_S):
                raise PruneRefused(
                    "busy",
                    f"{chain_path}: another process holds the chain's lock (waited {wait:g} s); "
                    "nothing changed",
                )
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == file_identity(chain_path):
                yield fd
                return
        finally:
            release(fd)
    raise PruneRefused("busy", f"{chain_path}: the live file keeps being replaced; nothing changed")


def _read_pruned(store: LogStore) -> Pruned | None:
    try:
        return store.read_pruned()
    except (StateError, OSError) as exc:
        raise PruneRefused("unusable", str(exc)) from None


def _total(fd: int, segments: Sequence[Segment]) -> int:
    """The number of records of the chain (one past its last seq), from the live file open at ``fd``
    (locked: no append in flight)."""
    try:
        head, _ = tail_head(fd, os.fstat(fd).st_size)
    except ChainCorruptError as exc:
        raise PruneRefused("finding", f"the live file's last record: {exc}; nothing changed") from None
    if head is not None:
        return head.seq + 1
    return segments[-1].end if segments else 0


def settle_pruning(chain_path: str, pruned: Pruned | None) -> tuple[int, int]:
    """Finish or undo what an interrupted prune left, as ``pruned`` (the store's file) says: remove the
    segments below its minimum index, and the archives and proofs at or above it (and temporaries).
    Returns (segments removed, archive files removed). Call it under the chain's lock and the prune lock.

    ``pruned`` is untrusted: a segment is removed only when it names it with the file's SHA-256 and size
    and its archive is there (:class:`PruneRefused` ``finding`` otherwise, nothing removed)."""
    min_index = 0 if pruned is None else pruned.min_index
    finished = [s for s in closed_segments(chain_path) if s.first < min_index]
    if pruned is not None:
        for segment in finished:
            _check_recorded(chain_path, segment, pruned)
    _remove_segments(chain_path, finished)
    return len(finished), _remove_archives_from(chain_path, min_index)


def _remove_archives_from(chain_path: str, min_index: int) -> int:
    """Remove the archives (and proofs) no committed prune names, of segments at or above ``min_index`` whose
    file is still there (else it is their records' only copy), and killed writers' temporaries; the count."""
    folder, segments = archive_dir(chain_path), segments_dir(chain_path)
    remove_temporaries(folder)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    undone = 0
    for name in names:
        first = int(name[:16]) if name[:16].isascii() and name[:16].isdigit() else -1
        if first >= min_index and os.path.lexists(os.path.join(segments, segment_name(first))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
                undone += 1
    if undone:
        fsync_directory(folder)
    return undone


def _undo_uncommitted(chain_path: str, store: LogStore, before: int) -> None:
    """After a failure: remove the archives this prune wrote (at or above ``before``, the minimum index
    it began from) unless its commit happened (the ``pruned`` file on disk says which; when it cannot be
    read they stay, for the next prune to settle)."""
    with contextlib.suppress(Exception):
        pruned = store.read_pruned()
        _remove_archives_from(chain_path, max(before, 0 if pruned is None else pruned.min_index))


def _check_recorded(chain_path: str, segment: Segment, pruned: Pruned) -> None:
    """Refuse to remove ``segment`` unless ``pruned`` records this very file and its archive exists."""
    entry = next((e for e in pruned.segments if e.name == segment.name), None)
    with _opened(segment.path) as stream:
        read = read_segment(stream, segment.first)
    problem = None
    if entry is None or (entry.first, entry.end) != (segment.first, segment.end):
        problem = "names no such segment"
    elif (entry.sha256, entry.bytes) != (read.sha256, read.size):
        problem = "names another file (SHA-256 or size)"
    elif entry.archive is not None and not _archive_holds(chain_path, segment, entry.archive, read):
        problem = "names an archive that is not this segment's, or does not hold its records"
    if problem is not None:
        raise PruneRefused(
            "finding",
            f"{segment.path} lies below the minimum index {pruned.min_index}, but the pruned file {problem}: "
            "nothing removed",
        )


def _archive_holds(chain_path: str, segment: Segment, archive: str, read: SegmentRead) -> bool:
    """The ``archive`` a ``pruned`` entry names is where :func:`_archived` writes ``segment``'s (plain
    or gzip) and reads back as its very records: a name alone, from an unauthenticated file, is no
    archive."""
    base = os.path.dirname(os.path.abspath(chain_path))
    target = os.path.join(archive_dir(chain_path), segment.name)
    if archive not in (os.path.relpath(target, base), os.path.relpath(target + ".gz", base)):
        return False
    try:
        with _opened(os.path.join(base, archive)) as stream:
            again = read_segment(stream, segment.first)
    except (PruneRefused, OSError, EOFError, ValueError):  # unreadable, not gzip, cut short
        return False
    return (again.leaves, again.sha256) == (read.leaves, read.sha256)


def _covering(store: LogStore, options: PruneOptions) -> tuple[Checkpoint, str] | None:
    """The checkpoint that covers what may be pruned, and its note: the largest the policy's quorum
    attests (its cosignatures checked from the newest checkpoint down until it and every witness's largest
    cosigned size are known: a retention retried after each checkpoint while a witness is down checks the
    checkpoints since, not the log's whole history; all of them while a witness of the policy has cosigned
    none), or without a policy the newest a log key signs (None: there is none)."""
    if options.policy is not None:
        notes = store.notes().notes
        report = attest_notes(  # from the newest down, as verify: the checkpoints before are not checked
            notes, options.policy, now=options.now, logs=options.verifiers, until_known=lambda _: True
        )
        attested = report.attested()
        return None if attested is None else (attested.checkpoint, notes[max(attested.notes)])
    if not options.verifiers:
        return None
    origin = None
    for note in store.newest_notes():
        with contextlib.suppress(AuthenticationError):
            origin = origin or checkpoint_of(note).origin
            return authenticate(note, options.verifiers).checkpoint, note
    names = sorted({(key.verifier if isinstance(key, KeyWindow) else key).name for key in options.verifiers})
    if origin is not None and origin not in names:  # a log key is named for its log's origin
        raise PruneRefused(
            "unusable",
            f"the log's checkpoints are for {origin!r}, the key given is named "
            f"{', '.join(map(repr, names))}: not this log's key; nothing changed",
        )
    return None


def _refuse_unwitnessed(
    chosen: Sequence[Segment], covering: tuple[Checkpoint, str] | None, force: bool
) -> None:
    size = 0 if covering is None else covering[0].size
    if chosen[-1].end > size and not force:
        what = "no checkpoint covers" if covering is None else f"the covering checkpoint has {size} records"
        raise PruneRefused(
            "unwitnessed",
            f"pruning up to {chosen[-1].end} refused: {what} (witnessed by the policy's quorum, or "
            "signed by the log key without a policy); --force prunes anyway; nothing changed",
        )


_Identity = tuple[int, int, int, int]
"""A file's device, inode, size and modification time (ns)."""


def _identity(st: os.stat_result) -> _Identity:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    """A segment checked: what reading it found, its proof (None: no checkpoint covers it), and the
    identity of the file that was read."""

    segment: Segment
    read: SegmentRead
    proof: ArchiveProofDoc | None
    identity: _Identity


def _checked(store: LogStore, segment: Segment, covering: tuple[Checkpoint, str] | None) -> _Checked:
    """Read ``segment`` and prove it against the covering checkpoint (when it covers the segment)."""
    if os.path.islink(segment.path):  # what is read and what is removed would be two files
        raise PruneRefused(
            "finding", f"{segment.path}: a symbolic link, not a segment's file; nothing changed"
        )
    with _opened(segment.path) as stream:
        identity = _identity(os.fstat(stream.fileno()))
        read = read_segment(stream, segment.first)
    if read.problem is None and read.count != segment.end - segment.first:
        read = dataclasses.replace(read, problem=f"{read.count} records, not {segment.end - segment.first}")
    if read.problem is not None:
        raise PruneRefused("finding", f"{segment.path}: {read.problem}; nothing changed")
    if covering is None or covering[0].size < segment.end:
        return _Checked(segment, read, None, identity)
    checkpoint, note = covering
    try:
        hashes = range_proof(
            segment.first, segment.end, checkpoint.size, TileReader(store, checkpoint.size, checkpoint.root)
        )
        doc = ArchiveProofDoc.of(
            checkpoint, note, segment.first, segment.end, (segment.name, read.sha256, read.size), hashes
        )
        check_archive_doc(doc, checkpoint, read.leaves)
    except TileError as exc:
        raise PruneRefused("finding", f"{store.path}: {exc}; nothing changed") from None
    except ProofError as exc:
        raise PruneRefused(
            "finding",
            f"{segment.path}: its records are not those the checkpoint signed ({exc}); nothing changed",
        ) from None
    return _Checked(segment, read, doc, identity)


def _refuse_changed(
    chain_path: str, store: LogStore, previous: Pruned | None, checked: Sequence[_Checked]
) -> None:
    """Under the chain's lock again: refuse (``busy``) unless ``pruned`` is still ``previous`` and every
    segment checked is still a closed segment of the same bounds, in the same file, unchanged."""
    if _read_pruned(store) != previous:
        raise PruneRefused(
            "busy", f"{store.path}: the pruned file changed while prune worked; nothing changed, try again"
        )
    listed = {(s.name, s.first, s.end) for s in closed_segments(chain_path)}
    for c in checked:
        try:
            same = _identity(os.lstat(c.segment.path)) == c.identity
        except FileNotFoundError:
            same = False
        if not same or (c.segment.name, c.segment.first, c.segment.end) not in listed:
            raise PruneRefused(
                "busy",
                f"{c.segment.path}: changed while prune checked and archived it; nothing changed, try again",
            )


@contextlib.contextmanager
def _opened(path: str) -> Iterator[io.IOBase]:
    try:
        stream = open_segment(path)
    except (FileNotFoundError, FileRefused) as exc:
        raise PruneRefused("finding", f"{path}: cannot be read: {exc}; nothing changed") from None
    with stream:
        yield stream


def _file_blocks(path: str) -> Iterator[bytes]:
    fd = open_regular(path)
    try:
        yield from range_blocks(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _archived(chain_path: str, checked: _Checked, options: PruneOptions) -> PrunedSegment:
    """Write the segment's archive and proof (none with ``delete``); the ``pruned`` entry for it."""
    segment, read = checked.segment, checked.read
    relative = None
    if not options.delete:
        folder = archive_dir(chain_path)
        os.makedirs(folder, exist_ok=True)
        name = segment.name + (".gz" if options.compress else "")
        target = os.path.join(folder, name)
        blocks = _file_blocks(segment.path)
        write_atomic(target, gzip_blocks(blocks) if options.compress else blocks)
        with _opened(target) as stream:
            again = read_segment(stream, segment.first)
        if (again.leaves, again.sha256) != (read.leaves, read.sha256):
            raise PruneRefused("finding", f"{target}: reads back other records than {segment.path}")
        if checked.proof is not None:
            write_atomic(proof_path(target), checked.proof.model_dump_json(indent=1).encode("utf-8"))
        relative = os.path.relpath(target, os.path.dirname(os.path.abspath(chain_path)))
    return PrunedSegment(
        name=segment.name,
        first=segment.first,
        end=segment.end,
        sha256=read.sha256,
        bytes=read.size,
        archive=relative,
    )


def _commit(
    store: LogStore, previous: Pruned | None, done: Sequence[PrunedSegment], options: PruneOptions
) -> None:
    earlier = [] if previous is None else list(previous.segments)
    store.save_pruned(
        Pruned(min_index=done[-1].end, time=options.now, command=options.command, segments=[*earlier, *done])
    )


def _remove_segments(chain_path: str, segments: Sequence[Segment]) -> None:
    for segment in segments:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(segment.path)
    if segments:
        fsync_directory(segments_dir(chain_path))
