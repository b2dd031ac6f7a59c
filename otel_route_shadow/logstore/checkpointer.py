"""The writer: catch the tree up with the chain, prove it consistent, sign and publish a checkpoint.

Synchronous and bounded, no thread and no clock (the plugin's schedule lives in
``instrumentation.checkpointing``). Several processes may append to one chain, so the tree lives in
``<chain>.tlog/``; one :meth:`Checkpointer.checkpoint` takes its lock without waiting (another process
checkpointing: this one skips) and then:

1. **Knows what it signed**: the last checkpoint this process signed (held in memory), the newest
   note of its origin in ``checkpoints`` and the published ``checkpoint``, each authenticated by its
   own key (``anchoring``: a newest note that does not verify, or a larger signed size shown by
   ``state`` or a witness, is a refusal). The largest is the *base* every new tree must extend.
2. **Trusts nothing on disk it has not authenticated**: it continues from its own cursor
   (``catchup.Cursor``) when that is at least the base; else it resumes at the base from the ``state``
   hint, taken only when the tiles authenticate against the base's signed root (``tiles.TileReader``) and
   the chain's line at the hint is the leaf the tiles hold. When the hint is missing or wrong, or the tiles
   are lost or damaged, it **rebuilds** the tree from the chain: re-hashing the lines and comparing the
   root at the size of every checkpoint it published (rewriting their tiles as each root matches); a pruned
   chain's from its minimum index, the tree below it taken from the tiles the base authenticates
   (``SegmentFiles.first_kept``). A rebuild is bounded per call like any catch-up; nothing is signed before
   it reaches the base.
3. **Catches up** (at most ``max_leaves`` lines and ``max_bytes`` bytes), checking each line's record
   hash and link before it becomes a leaf (``catchup``).
4. **Proves before it signs**: the tiles of the new tree are written durably, read back through a
   ``TileReader`` for the new root, and a consistency proof from every checkpoint it knows it signed is
   computed and verified (``merkle.verify_consistency``). Then it signs, writes ``state``, appends the
   note to ``checkpoints`` and replaces ``checkpoint`` (the publication order of section 13.6), and
   only then removes partial tiles whose full tile exists and appends the chain-wide positions of the
   lines ``256 k`` it passed to ``entries-index`` (a hint for cutting entry bundles, section 13.9).

Anything that contradicts what was signed (the chain cut below a signed size or rewritten under it, a
line whose record hash or link fails, a proof that does not verify) is a **refusal**: logged once,
appended to ``refusals``, and never signed again by this object (a segment a prune removed during the
call is none: the call starts once more, its tree resumed from what was signed). Every other failure is
contained (kept in ``failed`` and logged once, unless the caller reports it: ``retries``; the cursor is
dropped and rebuilt from what can be authenticated). ``checkpoint``
never raises; listeners are told of each checkpoint after it is durably published.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Final

from otel_route_shadow.chain import MAX_LINE_BYTES, WrittenLine
from otel_route_shadow.lines import FileHandle
from otel_route_shadow.logstore.anchoring import (
    ANCHOR_REFUSALS,
    ROLLED_BACK,
    UNVERIFIED_CHECKPOINT,
    OwnNotes,
    claimed_size,
    is_acknowledged,
    newest_of_origin,
    published_note,
    signed_elsewhere,
)
from otel_route_shadow.logstore.catchup import DEFAULT_SLICE_LEAVES, Cursor, extend, still_holds
from otel_route_shadow.logstore.entries import append_index_offsets
from otel_route_shadow.logstore.links import record_hash_of
from otel_route_shadow.logstore.segment_files import SegmentFiles
from otel_route_shadow.logstore.signed import SignedCheckpoint, default_origin
from otel_route_shadow.logstore.store import REFUSALS_FILE, LogStore, State, StateError, TreeHint
from otel_route_shadow.logstore.tile_sweep import TileSweep
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.tlog import (
    HASH_SIZE,
    TILE_HEIGHT,
    TILE_WIDTH,
    Checkpoint,
    ProofError,
    Signer,
    Tile,
    TileError,
    TileReader,
    TreeBuilder,
    consistency_proof,
    leaf_hash,
    partial_tiles,
    sign_note,
    verify_consistency,
)
from otel_route_shadow.worker import AFTER_FORK

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_LEAVES", "Checkpointer"]


DEFAULT_MAX_LEAVES: Final = 65536
"""Most lines one call adds; a larger backlog is caught up over the next calls."""
DEFAULT_MAX_BYTES: Final = 8 * 1024 * 1024
"""Most chain bytes one call reads (at least one line of the 4 MiB maximum always fits)."""
_MIN_BYTES: Final = 4 * 1024 * 1024 + 1

_REFUSAL_TEXT: Final = {
    "truncated": "the chain was cut below what was signed",
    "rewritten": "the chain no longer holds what was signed (replaced, forked or edited)",
    "broken-link": "a line's record hash, link or seq does not hold (its seq is in the refusal)",
    "fork": "the new tree is not consistent with a checkpoint already signed",
    **ANCHOR_REFUSALS,
}
"""What each refusal reason means, for the one warning logged."""


class _Refused(Exception):
    """The chain or the tree contradicts what was signed; ``made`` is a checkpoint signed before the
    refusal (up to the line before a broken one), if any."""

    def __init__(self, reason: str, detail: dict[str, int], made: SignedCheckpoint | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.made = made


class _Rebuild(Exception):
    """What is on disk cannot be authenticated: rebuild the tree from the chain (the message says why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Work:
    """What one :meth:`Checkpointer.checkpoint` call may do: its bounds, the lines it is given, and
    what it calls between slices."""

    max_leaves: int
    max_bytes: int
    appended: Sequence[WrittenLine]
    pause: Callable[[], None]


@dataclasses.dataclass(slots=True)
class _Rebuilding:
    """A rebuild in progress: the published checkpoints still to reach, smallest first."""

    targets: list[Checkpoint]


class Checkpointer:
    """Keeps a chain's tree and checkpoints: see the module docstring. The caller makes one call at a
    time (``instrumentation.checkpointing`` serializes its thread and shutdown); a call made from inside
    another (a listener's) returns None."""

    def __init__(
        self,
        chain_path: str,
        origin: str | None = None,
        signer: Signer | Sequence[Signer] | None = None,
        *,
        max_leaves: int = DEFAULT_MAX_LEAVES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        slice_leaves: int = DEFAULT_SLICE_LEAVES,
        pause: Callable[[], None] | None = None,
        retries: bool = True,
    ) -> None:
        self.chain_path = os.fspath(chain_path)
        self.signers: tuple[Signer, ...] = (
            () if signer is None else (signer,) if isinstance(signer, Signer) else tuple(signer)
        )
        """The log's signing keys, named for its origin: every checkpoint carries a signature by each (a
        key rotation's transition window has two)."""
        self.origin = origin or (self.signers[0].name if self.signers else default_origin(self.chain_path))
        if self.signers and self.signers[0].name != self.origin:  # its notes would authenticate to no one
            raise ValueError(f"the signing key is named {self.signers[0].name!r}, not for {self.origin!r}")
        self.max_leaves = max(1, max_leaves)
        self.max_bytes = max(_MIN_BYTES, max_bytes)
        self.slice_leaves = max(1, slice_leaves)
        self.pause: Callable[[], None] = pause or (lambda: None)
        self.directory = LogStore(self.chain_path)
        self.notes = OwnNotes(self.directory, self.origin, [signer.verifier() for signer in self.signers])
        self.refused: str | None = None
        self.last: SignedCheckpoint | None = None
        self.behind = False
        """True when the last call left lines (or a rebuild) for the next one."""
        self.failed: Exception | None = None
        """What the last call failed with (an I/O error, a file it cannot use; without its traceback, which
        would hold the call's frames), None when it did not."""
        self.retries = retries
        """False: a failure is not logged (its caller reports :attr:`failed`, never retrying: ``rotate``)."""
        self.witness_floor: Callable[[], int | None] = lambda: 0
        """The largest size a witness holds for this log, None while it is being asked: nothing is
        signed until it is known, and a size above every authenticated checkpoint is a refusal."""
        self._cursor: Cursor | None = None
        self._rebuilding: _Rebuilding | None = None
        self._started = False
        self._repaired = False
        self._sweep = TileSweep()
        self._rebuild_next: str | None = None
        self._completed: list[tuple[int, int]] = []
        self._running = False
        self._listeners: list[Callable[[SignedCheckpoint], None]] = []
        self._failed_listeners: set[int] = set()
        self._logged: set[str] = set()
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (``worker.AFTER_FORK``): the parent's thread's call (``_running`` copied True)
        is none of this process's; the next call resumes from what was signed."""
        self._running, self._cursor, self._rebuilding, self.behind = False, None, None, False

    @property
    def size(self) -> int:
        """The size of the tree this writer holds (0 before it holds one)."""
        return self._cursor.size if self._cursor is not None else 0

    @property
    def offset(self) -> int:
        """The chain offset just after the last line of the tree this writer holds (0 before it holds
        one): the lines a later call may be given start there."""
        return self._cursor.offset if self._cursor is not None else 0

    @property
    def live_records(self) -> int:
        """Records of the tree this writer holds in the file its tree ends in (the live file, once the
        tree is caught up): the tree's size less that file's first seq (0 before it holds a tree)."""
        return self._cursor.size - self._cursor.segment if self._cursor is not None else 0

    def add_listener(self, listener: Callable[[SignedCheckpoint], None]) -> None:
        """Call ``listener`` after each checkpoint is durably published (its exceptions are logged once)."""
        self._listeners.append(listener)

    def checkpoint(
        self,
        *,
        max_leaves: int | None = None,
        max_bytes: int | None = None,
        appended: Sequence[WrittenLine] = (),
        pause: Callable[[], None] | None = None,
    ) -> SignedCheckpoint | None:
        """Catch up (bounded), prove, sign and publish. Returns the checkpoint published by this call,
        None when none was (nothing new, a rebuild still under way, the lock held elsewhere, refused,
        or a failure, logged once). Never raises.

        ``appended``: lines this process wrote (a ``DecisionChain`` listener's), taken as given
        instead of read; any other line is read and checked. ``pause``: called between slices of the
        catch-up instead of the one given at construction."""
        if self.refused is not None or self._running:
            return None
        self._running = True
        leaves = self.max_leaves if max_leaves is None else max(1, max_leaves)
        window = self.max_bytes if max_bytes is None else max(_MIN_BYTES, max_bytes)
        work = _Work(leaves, window, appended, self.pause if pause is None else pause)
        self.failed = None
        try:
            made = self._locked(work)
        except _Refused as refusal:
            self._refuse(refusal)
            made = refusal.made
        except Exception as exc:  # contained: the host is never disturbed
            self._cursor, self._rebuilding, name = None, None, type(exc).__name__
            self.failed, exc.__context__, exc.__cause__ = exc.with_traceback(None), None, None  # no frames
            if self.retries:
                self._log_once(name, "checkpoint failed (%s: %s); will retry", name, exc)
            return None
        finally:
            self._running = False
        if made is not None:
            self.last = made
            self._notify(made)
        return made

    # -- one call, under the directory's lock --------------------------------------------------------

    def _locked(self, work: _Work) -> SignedCheckpoint | None:
        if not os.path.isdir(self.directory.path):
            if not os.path.exists(self.chain_path):
                return None  # no chain yet: nothing to checkpoint
            os.makedirs(self.directory.path, exist_ok=True)
        with self.directory.lock() as held:
            if not held:
                return None  # another process is checkpointing this chain right now
            if self.witness_floor() is None:
                self.behind = True  # asked again after the next record, until the witnesses answered
                return None
            anchors = self._anchors()
            if not self._started:
                self._started = True
                self.directory.remove_temporaries(max((a.size for a in anchors), default=0))
            try:
                files = SegmentFiles(self.chain_path, self.directory)
            except FileNotFoundError:
                if anchors:
                    raise _Refused("truncated", _detail(max(a.size for a in anchors), 0)) from None
                return None
            with files:
                try:
                    return self._catch_up(files, anchors, work)
                except _Refused as refusal:
                    if refusal.reason != "truncated" or not files.pruned_since():
                        raise
            # A prune committed meanwhile removed a segment this call was to read: once more, as anew.
            self._cursor, self._rebuilding = None, None
            with SegmentFiles(self.chain_path, self.directory) as files:
                return self._catch_up(files, self._anchors(), work)

    def _catch_up(
        self, files: SegmentFiles, anchors: list[Checkpoint], work: _Work
    ) -> SignedCheckpoint | None:
        """Extend the tree in the file of the cursor's segment (a closed segment it has not finished,
        or the live file), then publish."""
        base = max(anchors, key=lambda a: a.size, default=None)
        cursor = self._cursor
        if cursor is None or (base is not None and cursor.size < base.size and self._rebuilding is None):
            cursor = self._resume(files, base)  # a rebuild under way goes on where it stopped
        chain, end = self._segment(files, cursor)
        live = cursor.segment == files.live_first
        problem = still_holds(chain, cursor, end)
        if problem is not None:
            raise _Refused(problem, _detail(cursor.size, end, cursor.offset))
        before = cursor.hint()
        window = min(end, cursor.offset + work.max_bytes)
        budget = work.max_leaves
        while True:
            target = self._rebuilding.targets[0] if self._rebuilding is not None else None
            size = cursor.size
            step = budget if target is None else min(budget, target.size - size)
            extension = extend(
                chain,
                cursor,
                window,
                step,
                slice_leaves=self.slice_leaves,
                pause=work.pause,
                appended=work.appended if live else (),
            )
            budget -= cursor.size - size
            if target is None or cursor.size != target.size:
                break
            self._reached(cursor, target, end)
            if budget == 0:
                break
        self._cursor = cursor
        self.behind = self._rebuilding is not None or extension.more or window < end
        if not live and cursor.offset == end and extension.broken is None:
            cursor.next_segment()  # the closed segment is all in the tree: the next call goes on
            self.behind = True
        if self._rebuilding is not None:
            detail = _detail(self._rebuilding.targets[0].size, end, cursor.offset)
            if extension.broken is not None:
                raise _Refused("broken-link", {**detail, "seq": extension.broken})
            if live and window == end and not extension.more:
                raise _Refused("truncated", detail)
            return None
        made = self._publish(cursor, anchors, base, before)
        if extension.broken is not None:
            detail = {**_detail(cursor.size, end, cursor.offset), "seq": extension.broken}
            raise _Refused("broken-link", detail, made)
        return made

    # -- what this writer signed ----------------------------------------------------------------------

    def _anchors(self) -> list[Checkpoint]:
        """The checkpoints every new tree must extend: the last one this object signed, the newest entry
        of its origin in ``checkpoints``, the one claiming the largest size there and the published
        ``checkpoint``, each authenticated by its key (``anchoring``); a refusal when either entry does
        not authenticate, or when a larger signed size is shown elsewhere, unless the operator
        acknowledged that very refusal."""
        found = [self.last.checkpoint()] if self.last is not None else []
        newest = newest_of_origin(self.directory, self.origin)
        own = None if newest is None else self.notes.own(newest)
        unverified = newest is not None and own is None
        if newest is not None and own is None:
            self._unless_acknowledged(UNVERIFIED_CHECKPOINT, claimed_size(newest))
            own = next((c for n in self.directory.newest_notes() if (c := self.notes.own(n))), None)
        largest = self.notes.largest()
        largest_own = None if largest is None or largest == newest else self.notes.own(largest)
        if largest is not None and largest != newest and largest_own is None and not unverified:
            # One refusal at a time: with the newest entry's acknowledged, ``acknowledged`` (one
            # refusal) could never hold both, and each would bring the other back.
            self._unless_acknowledged(UNVERIFIED_CHECKPOINT, claimed_size(largest))
        published = published_note(self.directory)
        for checkpoint in (own, largest_own, None if published is None else self.notes.own(published)):
            if checkpoint is not None and checkpoint not in found:
                found.append(checkpoint)
        # The same: the signed sizes of the history an acknowledged unverified newest entry claims (a key
        # replaced without a window) are that refusal's, not a rolled-back one that would bring it back.
        held = [c.size for c in found] + ([claimed_size(newest)] if unverified and newest is not None else [])
        signed = max(signed_elsewhere(self.directory), self.witness_floor() or 0)
        if signed > max(held, default=0):
            self._unless_acknowledged(ROLLED_BACK, signed)
        return found

    def _unless_acknowledged(self, reason: str, size: int) -> None:
        if not is_acknowledged(self.directory, reason, self.origin, size):
            raise _Refused(reason, _detail(size, -1))
        self._log_once(
            reason, "signing on for %s: the operator acknowledged %s at %d", self.directory.path, reason, size
        )

    def signed_note(self, size: int) -> str | None:
        """The newest note of this log for a tree of exactly ``size`` leaves that its key authenticates,
        as stored in ``checkpoints`` (with the cosignatures stored with it), else as this object signed
        it; None when there is none."""
        note = self.notes.signed(size)
        return note or (self.last.note if self.last is not None and self.last.size == size else None)

    # -- resuming -------------------------------------------------------------------------------------

    def _segment(self, files: SegmentFiles, cursor: Cursor) -> tuple[FileHandle, int]:
        """The file the cursor's tree goes on in, and its size. When a prune removed the segment the tree
        ends (``pruned`` says so, and its file is gone), the next one: its anchor must link to the tree's
        last line. A claim for a file still there is not believed (for the live one, logged once: a closed
        one may lie between a prune's commit and its unlink); any other closed segment missing is the
        chain cut below what was signed."""
        claimed = cursor.offset > 0 and files.was_pruned(cursor.segment, cursor.size) is not None
        try:
            found = files.open(cursor.segment)
        except FileNotFoundError:
            if not claimed:
                raise _Refused("truncated", {**_detail(cursor.size, -1), "segment": cursor.segment}) from None
            cursor.next_segment()
            return self._segment(files, cursor)
        if claimed and cursor.segment == files.live_first:
            message = "not believing %s/pruned: the segment %d it says was pruned is still in the chain"
            self._log_once("pruned-claim", message, self.directory.path, cursor.segment)
        return found

    def _resume(self, files: SegmentFiles, base: Checkpoint | None) -> Cursor:
        """The cursor at ``base``: from the ``state`` hint when everything it rests on authenticates,
        else a rebuild from the chain's first line (of a pruned chain, its first line kept)."""
        self._rebuilding = None
        if base is None:
            return Cursor(TreeBuilder())
        try:
            if self._rebuild_next is not None:
                raise _Rebuild(self._rebuild_next)
            return self._from_hint(files, base)
        except _Rebuild as why:
            self._log_once(
                f"rebuild:{why}", "rebuilding the tree of %s from the chain: %s", self.chain_path, why
            )
        self._rebuild_next = None
        # A pruned chain's tree of m through an older checkpoint when the base's tiles fail (a damaged edge).
        published = self.notes.published()
        older = [c for c in reversed(published) if files.pruned is not None and c.size < base.size]
        for tree in [base, *older]:
            if (start := files.first_kept(TileReader(self.directory, tree.size, tree.root))).size:
                break
        targets = [c for c in published if start.size < c.size <= base.size]
        if not targets or targets[-1] != base:
            targets.append(base)
        self._rebuilding = _Rebuilding(targets)
        return start

    def _from_hint(self, files: SegmentFiles, base: Checkpoint) -> Cursor:
        try:
            state = self.directory.read_state()
        except StateError as exc:
            raise _Rebuild(str(exc)) from None
        hint = None if state is None else state.hint_for(base.size)
        if hint is None:
            raise _Rebuild("no state for the last signed tree")
        reader = TileReader(self.directory, base.size, base.root)
        try:
            edge = reader.edge()
            leaf = reader.node(0, base.size - 1)
        except TileError as exc:
            raise _Rebuild(f"tiles unusable: {exc}") from None
        if leaf == bytes.fromhex(hint.last_leaf) and (prev := files.link_past_pruned(hint)) is not None:
            start = files.start(base.size)
            return Cursor(TreeBuilder(base.size, edge), 0, 0, leaf, prev, [], base.size, hint, start)
        if not 0 < hint.offset - hint.last_start <= MAX_LINE_BYTES + 1:  # never read whole: a rebuild
            raise _Rebuild("the state's last line is longer than a line can be")
        try:
            chain, end = files.open(hint.segment or 0)
        except FileNotFoundError:
            raise _Rebuild("the state names a segment the chain does not have") from None
        if hint.offset > end:
            raise _Rebuild("the state points past the end of its file")
        chain.seek(max(0, hint.last_start - 1))
        data = chain.read(hint.offset - hint.last_start + (1 if hint.last_start else 0)) or b""
        line = data[1:] if hint.last_start else data
        whole = (hint.last_start == 0 or data[:1] == b"\n") and line.endswith(b"\n")
        if not (whole and leaf_hash(line[:-1]) == leaf == bytes.fromhex(hint.last_leaf)):
            raise _Rebuild("the state does not point at the last signed line")
        return Cursor(
            TreeBuilder(base.size, edge),
            hint.offset,
            hint.last_start,
            leaf,
            record_hash_of(line[:-1]),
            segment=hint.segment or 0,
            base=files.start(hint.segment or 0),
        )

    def _reached(self, cursor: Cursor, target: Checkpoint, end: int) -> None:
        """A rebuild reached a published size: its root must be the signed one; its tiles are written."""
        assert self._rebuilding is not None
        if cursor.builder.root() != target.root:
            raise _Refused("rewritten", _detail(target.size, end, cursor.offset))
        self._write_tiles(cursor.builder)
        self._rebuilding.targets.pop(0)
        if not self._rebuilding.targets:
            self._rebuilding = None

    # -- publishing -----------------------------------------------------------------------------------

    def _publish(
        self, cursor: Cursor, anchors: list[Checkpoint], base: Checkpoint | None, before: TreeHint | None
    ) -> SignedCheckpoint | None:
        """Write the tiles, prove the new tree consistent with every anchor, sign, then write ``state``
        and publish the note."""
        if cursor.size == (base.size if base is not None else 0):
            return None
        self._write_tiles(cursor.builder)
        root = cursor.builder.root()
        reader = TileReader(self.directory, cursor.size, root)
        try:
            for anchor in anchors:
                proof = consistency_proof(anchor.size, cursor.size, reader)
                verify_consistency(anchor.size, cursor.size, anchor.root, root, proof)
            self._keep_published_partials(reader)
            self._sweep.check(reader)  # a full tile replaced under this process: rebuilt below
        except ProofError:
            raise _Refused("fork", _detail(cursor.size, -1, cursor.offset)) from None
        except TileError as exc:
            # Tiles that do not read back (an older tile damaged on disk): rebuild them from the chain.
            self._cursor, self._rebuild_next = None, f"tiles do not read back: {exc}"
            self._log_once("unreadable-tiles", "not signing yet: %s", self._rebuild_next)
            return None
        made = self._sign(Checkpoint(self.origin, cursor.size, root))
        hint = cursor.hint()
        assert hint is not None
        previous = before if before is not None and before.size != hint.size else None
        self.directory.write_state(State(**hint.model_dump(), checkpointed=hint.size, previous=previous))
        self.directory.append_note(made.note)
        self.directory.publish(made.note)
        completed, self._completed = self._completed, []
        for level, index in completed:
            self.directory.remove_partials(level, index)
        starts, cursor.bundle_starts = cursor.bundle_starts, []
        append_index_offsets(self.directory.path, starts)
        return made

    def _write_tiles(self, builder: TreeBuilder) -> None:
        """Write the completed tiles and the partial ones of the builder's size, durably; the completed
        ones' partial tiles are removed after the next publication."""
        full = builder.take_full()
        partials = builder.partials()
        self.directory.save_tiles(
            [Tile(level, index) for level, index, _ in full] + [Tile(*p[:3]) for p in partials],
            [data for *_, data in full] + [data for *_, data in partials],
        )
        self._completed.extend((level, index) for level, index, _ in full)

    def _keep_published_partials(self, reader: TileReader) -> None:
        """Once per process: make sure the partial tiles of every published checkpoint whose full tile
        does not exist yet are there and right (C2SP tlog-tiles serves them until then; older writers
        removed them, an attacker may have changed them). Each is a prefix of the new tree's
        authenticated incomplete tile of its level: one read per tile, a write only when it differs, so
        the notes need not be authenticated here (a note's size only selects a prefix)."""
        if self._repaired:
            return
        self._repaired = True
        sizes = self.notes.take_published_sizes()
        for size in sorted(size for size in sizes if size <= reader.size):  # it signed none larger
            for tile in partial_tiles(size):
                if (reader.size >> (TILE_HEIGHT * tile.level)) // TILE_WIDTH != tile.index:
                    continue  # its full tile exists by now
                data = reader.tile(tile.level, tile.index)[: tile.width * HASH_SIZE]
                self.directory.save_tiles([tile], [data])

    def _sign(self, checkpoint: Checkpoint) -> SignedCheckpoint:
        note = sign_note(checkpoint.text(), self.signers)
        name = self.signers[0].name if self.signers else None
        return SignedCheckpoint(
            checkpoint.origin, checkpoint.size, checkpoint.root, note, bool(self.signers), name
        )

    # -- refusing, telling ----------------------------------------------------------------------------

    def _refuse(self, refusal: _Refused) -> None:
        self.refused = refusal.reason
        self._cursor, self._rebuilding, self.behind = None, None, False
        _LOG.warning(
            "route-shadow: not signing checkpoints for %s any more: %s (recorded in %s)",
            self.chain_path,
            _REFUSAL_TEXT.get(refusal.reason, refusal.reason),
            self.directory.file(REFUSALS_FILE),
        )
        with contextlib.suppress(OSError):
            self.directory.append_refusal({"reason": refusal.reason, "origin": self.origin, **refusal.detail})

    def _notify(self, made: SignedCheckpoint) -> None:
        for listener in self._listeners:
            try:
                listener(made)
            except Exception as exc:
                if id(listener) not in self._failed_listeners:
                    self._failed_listeners.add(id(listener))
                    _LOG.warning("route-shadow: a checkpoint listener failed (%s)", type(exc).__name__)

    def _log_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._logged:
            self._logged.add(key)
            _LOG.warning("route-shadow: " + message, *args)


def _detail(tree_size: int, chain_bytes: int, expected_offset: int = -1) -> dict[str, int]:  # -1: not known
    return {"tree_size": tree_size, "expected_offset": expected_offset, "chain_bytes": chain_bytes}
