"""Verify a chain against signed checkpoints: is every checkpoint a prefix of this chain?

For each note: authenticate it (``bad-signature``, ``unknown-key``, ``key-outside-window``, ``unsigned``,
``malformed``). Then one pass over the chain (``chain.verify_pass``) checks its lines and hashes every line as a leaf as it
goes; the tree over the leaves gives the root at each checkpoint's size (``truncated`` when the chain
is shorter, ``record-changed`` when the root differs). Below the largest authenticated checkpoint the
pass hashes leaves only: its signed root commits to every byte there, and its signer checked those
lines' record hashes and links before signing them (docs/chain-format.md sections 13.6 and 13.7); from
there on every line is checked in full (``broken-chain`` when a checkpoint holds but such a line does
not). When that checkpoint does not hold, the lines below it are read again and checked in full from
the largest one that does (the only second read). Without verifier keys, or with ``strict``, every line
is checked. Two authenticated checkpoints that cannot both be prefixes of one log are a ``fork``. When a
root differs, the first changed seq is found by descending the tree through the stored tiles, each
authenticated against the signed root before use (``first_bad_seq``): O(log n) stored hashes against
the chain's own. A tile that does not authenticate stops the descent: the report names the tile and
the range of seqs the change lies in, never a wrong seq. The tile store's own health is reported apart
from the chain's (``tiles``, see ``health``).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Callable, Sequence

from otel_route_shadow.chain import ChainPass, Verdict, VerifyResult, chain_segments, verify_pass
from otel_route_shadow.logstore.health import TileHealth, check_tiles
from otel_route_shadow.logstore.integrity import TreeSink
from otel_route_shadow.logstore.retained import RetainedTree
from otel_route_shadow.logstore.store import LogStore
from otel_route_shadow.tlog import (
    AuthenticationError,
    Checkpoint,
    KeyWindow,
    NodeReader,
    TileError,
    TileReader,
    TreeLevels,
    authenticate,
    range_hash,
    split_point,
    subtrees,
    tree_hash,
)

__all__ = [
    "ChainCheck",
    "CheckpointVerdict",
    "ConsistencyReason",
    "ConsistencyReport",
    "Located",
    "check_chain",
    "locate_first_changed",
    "verify_against_checkpoints",
]


class ConsistencyReason(enum.StrEnum):
    """Why a checkpoint does not hold for a chain (``ok`` when it does)."""

    OK = "ok"
    """The chain's first ``size`` lines hash to the checkpoint's root."""
    UNSIGNED = "unsigned"
    """The note has no signature although verifier keys were given (without keys: accepted, unauthenticated)."""
    UNKNOWN_KEY = "unknown-key"
    """Only keys not among the given verifier keys signed it: never taken as valid."""
    BAD_SIGNATURE = "bad-signature"
    """A signature by a given key does not verify: the note was altered or forged."""
    KEY_OUTSIDE_WINDOW = "key-outside-window"
    """Signed only by keys of the key set whose windows do not contain its size (a rotated key)."""
    MALFORMED = "malformed"
    """Not a signed note holding a C2SP checkpoint."""
    TRUNCATED = "truncated"
    """The chain has fewer lines than the checkpoint's size: records were cut below it."""
    RECORD_CHANGED = "record-changed"
    """A line before the checkpoint's size differs from what was signed (edit, insert, removal, re-link)."""
    FORK = "fork"
    """Two authenticated checkpoints are inconsistent with each other: the log signed two histories."""
    UNPROVABLE = "unprovable"
    """The chain is pruned (docs/chain-format.md 14.5) and the tiles that stand for its pruned records
    do not authenticate against a signed checkpoint covering them: this one cannot be checked."""
    BROKEN_CHAIN = "broken-chain"
    """Every checkpoint holds but a line does not verify (docs/chain-format.md section 8; the chain's
    verdict names the class).

    Checked for the lines beyond the largest authenticated checkpoint that holds (every line when none
    does, or when no keys were given); below it the signer checked them before signing."""


@dataclasses.dataclass(frozen=True, slots=True)
class CheckpointVerdict:
    """One checkpoint's outcome; ``index`` is its position among the notes given."""

    index: int
    reason: ConsistencyReason
    size: int | None = None
    origin: str | None = None
    signed_by: tuple[str, ...] = ()
    first_bad_seq: int | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is ConsistencyReason.OK


@dataclasses.dataclass(frozen=True, slots=True)
class ConsistencyReport:
    """The chain against all checkpoints: ``ok`` only if every one holds."""

    ok: bool
    reason: ConsistencyReason
    verdicts: tuple[CheckpointVerdict, ...]
    first_bad_seq: int | None
    checkpointed_size: int
    chain_size: int
    unprotected: int
    authenticated: bool
    chain_broken_seq: int | None = None
    """The position (0-based line) of the first line that does not verify, checked from the largest
    authenticated checkpoint that holds on (from seq 0 when none does or no keys were given), if any."""
    tiles: TileHealth = dataclasses.field(default_factory=TileHealth)
    """The tile store's health, apart from the chain's (see ``health``)."""

    def to_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        out["reason"] = self.reason.value
        out["verdicts"] = [{**dataclasses.asdict(v), "reason": v.reason.value} for v in self.verdicts]
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Accepted:
    index: int
    checkpoint: Checkpoint
    signed_by: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ChainCheck:
    """The chain's verdict and the checkpoints' report, from one read of the chain (two when the
    largest authenticated checkpoint does not hold)."""

    chain: VerifyResult
    """The chain's own verdict; the lines below ``vouched`` were taken on the checkpoint's trust."""
    report: ConsistencyReport
    tree: TreeLevels | RetainedTree
    """The tree over the leaves of every complete line (of a pruned chain: over the retained lines,
    the pruned ones standing as the authenticated tiles)."""
    vouched: int
    """The size of the largest authenticated checkpoint that holds (0 without keys or with ``strict``)."""
    marked_offset: int | None
    """The byte offset of line ``mark`` (see :func:`check_chain`), when the pass got that far."""


def verify_against_checkpoints(
    chain_path: str,
    notes: Sequence[str],
    verifier_keys: Sequence[str],
    *,
    tiles_dir: str | None = None,
    jobs: int = 1,
    check_tile_store: bool = True,
) -> ConsistencyReport:
    """:func:`check_chain`'s report."""
    return check_chain(
        chain_path, notes, verifier_keys, tiles_dir=tiles_dir, jobs=jobs, check_tile_store=check_tile_store
    ).report


def check_chain(
    chain_path: str,
    notes: Sequence[str],
    verifier_keys: Sequence[str],
    *,
    tiles_dir: str | None = None,
    jobs: int = 1,
    strict: bool = False,
    check_tile_store: bool = True,
    byte_progress: Callable[[int, int], None] | None = None,
    start: int = 0,
) -> ChainCheck:
    """Check ``chain_path`` against every note, authenticated with ``verifier_keys`` (verifier keys or
    key-set lines, ``tlog.KeyWindow``). A bad key string raises ``NoteError``; a
    chain that cannot be read at all raises ``OSError``.

    ``tiles_dir`` (default ``<chain>.tlog``) holds the tiles used to locate a changed record and whose
    health is reported; ``jobs`` worker processes run the pass (see the module docstring; ``strict``
    adds the payload value walk to every line's check, so no line is taken on trust).
    ``check_tile_store=False`` skips the tile store's health check (for benchmarks). The pass also
    finds where the line at the largest accepted checkpoint's size begins (``marked_offset``).

    ``start`` (a pruned chain's minimum index m): the pass reads the chain from m on, and the tree's
    nodes below m are read from the tiles, authenticated against the largest accepted checkpoint of a
    size >= m (:class:`RetainedTree`); every checkpoint is judged against that tree (one of a size
    below m: through those tiles alone), ``unprovable`` when the tiles do not authenticate.
    """
    path = os.fspath(chain_path)
    tiles = LogStore(path, tiles_dir)
    verifiers = [KeyWindow.parse(key) for key in verifier_keys]
    verdicts: dict[int, CheckpointVerdict] = {}
    accepted: list[_Accepted] = []
    for index, note in enumerate(notes):
        try:
            authenticated = authenticate(note, verifiers)
        except AuthenticationError as exc:
            verdicts[index] = _unauthenticated(index, exc)
        else:
            accepted.append(_Accepted(index, authenticated.checkpoint, authenticated.signed_by))
    trusting = bool(verifiers) and not strict
    largest = max((a.checkpoint.size for a in accepted), default=0)
    sink = TreeSink()
    chain = verify_pass(
        path,
        jobs=jobs,
        strict=strict,
        unchecked=largest if trusting else 0,
        mark=largest,
        leaves=sink,
        byte_progress=byte_progress,
        verifiers=verifiers,
        start=start,
    )
    problems: list[str] = []
    tree = sink.tree() if start == 0 else sink.retained(start, _below(tiles, accepted, start, problems))
    for item in accepted:
        verdicts[item.index] = _judge(tree, tiles, item, problems)
    _mark_forks(accepted, verdicts)
    _mark_forks_through_tiles(accepted, verdicts, tiles)
    ordered = [verdicts[i] for i in range(len(notes))]
    vouched = _vouched_size(ordered, trusting)
    if vouched < chain.unchecked:  # the largest did not hold: check what it would have vouched for
        chain = verify_pass(
            path, jobs=jobs, strict=strict, unchecked=vouched, mark=largest, verifiers=verifiers, start=start
        )
    health = _tile_health(tiles, tree, ordered, problems, check_tile_store)
    segmented = start > 0 or len(chain_segments(path)) > 1
    report = _report(ordered, tree.size, _broken_line(chain, segmented), bool(verifiers), health)
    return ChainCheck(chain.result, report, tree, vouched, chain.marked_offset)


def _below(tiles: LogStore, accepted: list[_Accepted], start: int, problems: list[str]) -> TileReader | None:
    """The tiles of the largest accepted checkpoint covering ``[0, start)`` whose tiles give its nodes
    below ``start`` (a damaged right edge of the newest: an older one's, the damage added to
    ``problems``), else the largest's: what stands for a pruned chain's records (None when no accepted
    checkpoint covers them)."""
    covering = sorted(
        {a.checkpoint.size: a.checkpoint for a in accepted if a.checkpoint.size >= start}.items()
    )
    readers = [TileReader(tiles, size, checkpoint.root) for size, checkpoint in reversed(covering)]
    for number, reader in enumerate(readers):
        try:
            for height, index in subtrees(0, start):
                reader.node(height, index)
        except (TileError, ValueError, OSError) as exc:
            if number == 0 and isinstance(exc, TileError) and len(readers) > 1:
                problems.append(str(exc))
            continue
        return reader
    return readers[0] if readers else None


def _broken_line(chain: ChainPass, segmented: bool) -> int | None:
    """The chain's position of its first line that does not verify: of a segmented chain, the seq the
    pass expected there (``line`` counts within the file it is in), else its line number."""
    result = chain.result
    if result.verdict is not Verdict.BROKEN or result.line is None:
        return None
    return result.first_bad_seq if segmented and result.first_bad_seq is not None else result.line - 1


def _unauthenticated(index: int, exc: AuthenticationError) -> CheckpointVerdict:
    found = exc.checkpoint
    return CheckpointVerdict(
        index,
        ConsistencyReason(exc.reason),
        size=found.size if found is not None else None,
        origin=found.origin if found is not None else None,
        detail=str(exc),
    )


_CHANGED = (ConsistencyReason.RECORD_CHANGED, ConsistencyReason.FORK)


def _tile_health(
    tiles: LogStore,
    tree: TreeLevels | RetainedTree,
    verdicts: list[CheckpointVerdict],
    problems: list[str],
    check: bool,
) -> TileHealth:
    if not check:
        return TileHealth(note="not checked (switched off)")
    if isinstance(tree, RetainedTree):
        note = (
            f"the chain is pruned below seq {tree.start}: the tiles standing for the pruned records were "
            "authenticated against the signed roots, the others not compared with the records"
        )
        return TileHealth(note=note, damaged=tuple(dict.fromkeys(problems)))

    health = check_tiles(tiles, tree, [v.size for v in verdicts if v.ok and v.size])
    changed = [v.size for v in verdicts if v.reason in _CHANGED and v.size]
    if problems and changed and check_tiles(tiles, tree, changed).ok:
        # The tiles are the chain's own tree at those sizes: a checkpoint of another tree stopped the
        # descent (a fork, a rewrite), not a damaged tile; its verdict says so.
        problems = []
    if problems:
        known = set(health.damaged)
        damaged = (*health.damaged, *(p for p in dict.fromkeys(problems) if p not in known))
        health = dataclasses.replace(health, damaged=damaged)
    return health


def _vouched_size(verdicts: list[CheckpointVerdict], trusting: bool) -> int:
    """The size of the largest authenticated checkpoint that holds (0 without keys, with ``strict`` or
    when none does): its signed root commits to the bytes of every line below it, and its signer
    checked their record hashes and links before signing, so the full check starts there."""
    if not trusting:
        return 0
    return max((v.size or 0 for v in verdicts if v.ok), default=0)


def _judge(
    tree: TreeLevels | RetainedTree, tiles: LogStore, item: _Accepted, problems: list[str]
) -> CheckpointVerdict:
    cp = item.checkpoint
    base = {"index": item.index, "size": cp.size, "origin": cp.origin, "signed_by": item.signed_by}
    if cp.size > tree.size:
        detail = f"the chain has {tree.size} records, the checkpoint {cp.size}"
        return CheckpointVerdict(reason=ConsistencyReason.TRUNCATED, detail=detail, **base)  # type: ignore[arg-type]
    try:
        root = tree_hash(tree, cp.size)
    except (TileError, ValueError) as exc:  # a pruned chain's: the tiles below its minimum index
        if isinstance(exc, TileError):
            problems.append(str(exc))
        return CheckpointVerdict(reason=ConsistencyReason.UNPROVABLE, detail=str(exc), **base)  # type: ignore[arg-type]
    if root == cp.root:
        return CheckpointVerdict(reason=ConsistencyReason.OK, **base)  # type: ignore[arg-type]
    located = locate_first_changed(tree, cp, tiles)
    if located.tile_problem is not None:
        problems.append(str(located.tile_problem))
    return CheckpointVerdict(
        reason=ConsistencyReason.RECORD_CHANGED,
        first_bad_seq=located.seq,
        detail=located.detail(),
        **base,  # type: ignore[arg-type]
    )


def _mark_forks(accepted: list[_Accepted], verdicts: dict[int, CheckpointVerdict]) -> None:
    """An accepted checkpoint that fails while a larger one holds, or two of one size with two roots."""
    holding = [a for a in accepted if verdicts[a.index].ok]
    for item in accepted:
        verdict = verdicts[item.index]
        if verdict.reason is not ConsistencyReason.RECORD_CHANGED:
            continue
        cp = item.checkpoint
        same = [h for h in holding if h.checkpoint.origin == cp.origin]
        if holding and not same:  # another log's checkpoint: no fork of this one
            origins = ", ".join(sorted({repr(h.checkpoint.origin) for h in holding}))
            detail = (
                f"a checkpoint of another log, {cp.origin!r} (the chain matches checkpoints of {origins})"
            )
            verdicts[item.index] = dataclasses.replace(verdict, detail=detail)
            continue
        witness = next((h for h in same if h.checkpoint.size >= cp.size), None)
        if witness is not None:
            detail = (
                f"inconsistent with the checkpoint of size {witness.checkpoint.size}, which the chain matches"
            )
            verdicts[item.index] = dataclasses.replace(verdict, reason=ConsistencyReason.FORK, detail=detail)


def _mark_forks_through_tiles(
    accepted: list[_Accepted], verdicts: dict[int, CheckpointVerdict], tiles: LogStore
) -> None:
    """Two checkpoints the chain matches neither of can still contradict each other: when the stored
    tiles authenticate against a larger one's signed root, a smaller one whose root they do not give
    was signed on another history."""
    changed = [a for a in accepted if verdicts[a.index].reason is ConsistencyReason.RECORD_CHANGED]
    if len(changed) < 2:
        return
    for anchor in sorted(changed, key=lambda a: a.checkpoint.size, reverse=True):
        reader = TileReader(tiles, anchor.checkpoint.size, anchor.checkpoint.root)
        for item in changed:
            cp = item.checkpoint
            if item is anchor or cp.size > anchor.checkpoint.size or cp.origin != anchor.checkpoint.origin:
                continue
            if verdicts[item.index].reason is ConsistencyReason.FORK:
                continue
            try:
                root = tree_hash(reader, cp.size)
            except TileError:
                break  # these tiles do not authenticate against this checkpoint: they vouch for nothing
            if root != cp.root:
                detail = f"inconsistent with the checkpoint of size {anchor.checkpoint.size} (through the tiles it signs)"
                verdicts[item.index] = dataclasses.replace(
                    verdicts[item.index], reason=ConsistencyReason.FORK, detail=detail
                )


def _report(
    verdicts: list[CheckpointVerdict], chain_size: int, broken: int | None, keyed: bool, tiles: TileHealth
) -> ConsistencyReport:
    bad = [v for v in verdicts if not v.ok]
    good = [v.size or 0 for v in verdicts if v.ok]
    checkpointed = max(good, default=0)
    first_bad = min((v.first_bad_seq for v in bad if v.first_bad_seq is not None), default=None)
    reason = bad[0].reason if bad else ConsistencyReason.OK
    if not bad and broken is not None:
        reason = ConsistencyReason.BROKEN_CHAIN
    return ConsistencyReport(
        ok=reason is ConsistencyReason.OK,
        reason=reason,
        chain_broken_seq=broken,
        verdicts=tuple(verdicts),
        first_bad_seq=first_bad,
        checkpointed_size=checkpointed,
        chain_size=chain_size,
        unprotected=max(0, chain_size - checkpointed),
        authenticated=keyed and bool(good),
        tiles=tiles,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Located:
    """Where the first changed record lies: ``seq`` when found, else the range ``[lo, hi)`` it lies in
    and the tile that stopped the descent."""

    seq: int | None
    lo: int
    hi: int
    tile_problem: TileError | None = None

    def detail(self) -> str:
        if self.seq is not None:
            return f"first changed record: seq {self.seq}"
        return (
            f"the first changed record lies in seq {self.lo}..{self.hi - 1}; the tiles cannot narrow it "
            f"further ({self.tile_problem})"
        )


def locate_first_changed(tree: NodeReader, checkpoint: Checkpoint, tiles: LogStore) -> Located:
    """The first seq whose line differs from what ``checkpoint`` signed, found through the stored tiles,
    each authenticated against the signed root before use (``tiles.TileReader``).

    The tree is descended from the root, comparing the chain's subtree hashes (``tree``) with the
    stored ones: the left subtree when it differs, else the right. A tile that is missing or does not
    authenticate stops the descent where it is."""
    reader = TileReader(tiles, checkpoint.size, checkpoint.root)
    lo, hi = 0, checkpoint.size
    try:
        while hi - lo > 1:
            k = split_point(hi - lo)
            if range_hash(tree, lo, lo + k) != range_hash(reader, lo, lo + k):
                hi = lo + k
            else:
                lo = lo + k
    except TileError as exc:
        return Located(None, lo, hi, exc)
    return Located(lo, lo, hi)
