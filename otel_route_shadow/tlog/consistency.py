"""Verify a chain against signed checkpoints: is every checkpoint a prefix of this chain?

For each note: authenticate it (``bad-signature``, ``unknown-key``, ``unsigned``, ``malformed``), then
recompute the tree over the chain's lines in one pass that hashes each byte once (leaf hashes only),
taking the root at each checkpoint's size (``truncated`` when the chain is shorter, ``record-changed``
when the root differs). Record hashes and links are then checked only for the lines the largest
authenticated checkpoint that holds does not cover (``broken-chain``): below it the signed root commits
to every byte, and the signer checked those lines' record hashes and links before signing them
(docs/chain-format.md sections 13.6 and 13.7). Without verifier keys, or when no checkpoint holds,
every line is checked. Two authenticated checkpoints that cannot both be prefixes of one log are a
``fork``. When a root differs, the first changed seq is found through the stored tiles after they are
authenticated against the signed root (``first_bad_seq``), by descending the tree: O(log n) stored
hashes against the chain's own.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from collections.abc import Sequence

from otel_route_shadow.tlog.checkpoint import Checkpoint, CheckpointError, parse_checkpoint
from otel_route_shadow.tlog.integrity import ChainScan, TreeLevels, first_broken_seq, scan_with_tree
from otel_route_shadow.tlog.merkle import split_point
from otel_route_shadow.tlog.note import NoteError, Verifier, open_note
from otel_route_shadow.tlog.tiles import TileError, TileStore

__all__ = ["CheckpointVerdict", "ConsistencyReason", "ConsistencyReport", "verify_against_checkpoints"]


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
    MALFORMED = "malformed"
    """Not a signed note holding a C2SP checkpoint."""
    TRUNCATED = "truncated"
    """The chain has fewer lines than the checkpoint's size: records were cut below it."""
    RECORD_CHANGED = "record-changed"
    """A line before the checkpoint's size differs from what was signed (edit, insert, removal, re-link)."""
    FORK = "fork"
    """Two authenticated checkpoints are inconsistent with each other: the log signed two histories."""
    BROKEN_CHAIN = "broken-chain"
    """Every checkpoint holds but a line's record hash or link does not (``verify`` names the class).

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
    """The first seq whose own record hash or link fails (checked from the bytes, from the largest
    authenticated checkpoint that holds on; from seq 0 when none does or no keys were given), if any."""

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


def verify_against_checkpoints(
    chain_path: str,
    notes: Sequence[str],
    verifier_keys: Sequence[str],
    *,
    tiles_dir: str | None = None,
    jobs: int = 1,
) -> ConsistencyReport:
    """Check ``chain_path`` against every note. A bad verifier key string raises ``NoteError``.

    ``tiles_dir`` (default ``<chain>.tlog``) holds the tiles used to locate a changed record; ``jobs``
    worker processes hash the chain (leaf hashes: each byte hashed once), then check record hashes and
    links, without parsing JSON, from the largest authenticated checkpoint that holds on (see the module
    docstring; from seq 0 without keys or when none holds).
    """
    tiles = tiles_dir if tiles_dir is not None else os.fspath(chain_path) + ".tlog"
    verifiers = [Verifier.parse(key) for key in verifier_keys]
    verdicts: dict[int, CheckpointVerdict] = {}
    accepted: list[_Accepted] = []
    for index, note in enumerate(notes):
        outcome = _authenticate(index, note, verifiers)
        if isinstance(outcome, CheckpointVerdict):
            verdicts[index] = outcome
        else:
            accepted.append(outcome)
    path = os.fspath(chain_path)
    scan, tree = scan_with_tree(path, jobs)
    for item in accepted:
        verdicts[item.index] = _judge(scan, tree, tiles, item)
    _mark_forks(accepted, verdicts)
    _mark_forks_through_tiles(accepted, verdicts, tiles)
    ordered = [verdicts[i] for i in range(len(notes))]
    broken = first_broken_seq(path, scan, _vouched_size(ordered, bool(verifiers)), jobs)
    return _report(ordered, scan, broken, bool(verifiers))


def _vouched_size(verdicts: list[CheckpointVerdict], keyed: bool) -> int:
    """The size of the largest authenticated checkpoint that holds (0 without keys or when none does):
    its signed root commits to the bytes of every line below it, and its signer checked their record
    hashes and links before signing, so the link pass starts there."""
    if not keyed:
        return 0
    return max((v.size or 0 for v in verdicts if v.ok), default=0)


def _authenticate(index: int, note: str, verifiers: Sequence[Verifier]) -> _Accepted | CheckpointVerdict:
    try:
        opened = open_note(note, verifiers)
    except NoteError as exc:
        reason = (
            ConsistencyReason.BAD_SIGNATURE if "does not verify" in str(exc) else ConsistencyReason.MALFORMED
        )
        return CheckpointVerdict(index, reason, detail=str(exc))
    try:
        checkpoint = parse_checkpoint(opened.text)
    except CheckpointError as exc:
        return CheckpointVerdict(index, ConsistencyReason.MALFORMED, detail=str(exc))
    base = {"size": checkpoint.size, "origin": checkpoint.origin}
    if verifiers and not opened.verified_by:
        if opened.unknown:
            detail = "signed only by keys not given: " + ", ".join(opened.unknown)
            return CheckpointVerdict(index, ConsistencyReason.UNKNOWN_KEY, detail=detail, **base)  # type: ignore[arg-type]
        return CheckpointVerdict(index, ConsistencyReason.UNSIGNED, detail="no signature", **base)  # type: ignore[arg-type]
    return _Accepted(index, checkpoint, opened.verified_by)


def _judge(scan: ChainScan, tree: TreeLevels, tiles: str, item: _Accepted) -> CheckpointVerdict:
    cp = item.checkpoint
    base = {"index": item.index, "size": cp.size, "origin": cp.origin, "signed_by": item.signed_by}
    if cp.size > scan.size:
        detail = f"the chain has {scan.size} records, the checkpoint {cp.size}"
        return CheckpointVerdict(reason=ConsistencyReason.TRUNCATED, detail=detail, **base)  # type: ignore[arg-type]
    if tree.root(cp.size) == cp.root:
        return CheckpointVerdict(reason=ConsistencyReason.OK, **base)  # type: ignore[arg-type]
    first = locate_first_changed(tree, cp, tiles)
    detail = (
        f"first changed record: seq {first}"
        if first is not None
        else "the stored tiles do not match the signed root either; the changed record cannot be located"
    )
    return CheckpointVerdict(
        reason=ConsistencyReason.RECORD_CHANGED,
        first_bad_seq=first,
        detail=detail,
        **base,  # type: ignore[arg-type]
    )


def _mark_forks(accepted: list[_Accepted], verdicts: dict[int, CheckpointVerdict]) -> None:
    """An accepted checkpoint that fails while a larger one holds, or two of one size with two roots."""
    holding = [a for a in accepted if verdicts[a.index].ok]
    for item in accepted:
        verdict = verdicts[item.index]
        if verdict.reason is not ConsistencyReason.RECORD_CHANGED:
            continue
        witness = next((h for h in holding if h.checkpoint.size >= item.checkpoint.size), None)
        if witness is not None:
            detail = (
                f"inconsistent with the checkpoint of size {witness.checkpoint.size}, which the chain matches"
            )
            verdicts[item.index] = dataclasses.replace(verdict, reason=ConsistencyReason.FORK, detail=detail)


def _mark_forks_through_tiles(
    accepted: list[_Accepted], verdicts: dict[int, CheckpointVerdict], tiles: str
) -> None:
    """Two checkpoints the chain matches neither of can still contradict each other: when the stored
    tiles reproduce the root of a larger one (so its signature vouches for them), a smaller one whose
    root they do not reproduce was signed on another history."""
    changed = [a for a in accepted if verdicts[a.index].reason is ConsistencyReason.RECORD_CHANGED]
    if len(changed) < 2:
        return
    store = TileStore(tiles, _stored_size(tiles))
    roots: dict[int, bytes | None] = {}

    def stored_root(size: int) -> bytes | None:
        if size not in roots:
            try:
                roots[size] = store.root(size) if size <= store.size else None
            except TileError:
                roots[size] = None
        return roots[size]

    anchors = [a for a in changed if stored_root(a.checkpoint.size) == a.checkpoint.root]
    for item in changed:
        if stored_root(item.checkpoint.size) in (None, item.checkpoint.root):
            continue
        anchor = next((a for a in anchors if a.checkpoint.size >= item.checkpoint.size), None)
        if anchor is not None:
            detail = f"inconsistent with the checkpoint of size {anchor.checkpoint.size} (through the tiles it signs)"
            verdicts[item.index] = dataclasses.replace(
                verdicts[item.index], reason=ConsistencyReason.FORK, detail=detail
            )


def _report(
    verdicts: list[CheckpointVerdict], scan: ChainScan, broken: int | None, keyed: bool
) -> ConsistencyReport:
    chain_size = scan.size
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
    )


def locate_first_changed(tree: TreeLevels, checkpoint: Checkpoint, tiles_dir: str) -> int | None:
    """The first seq whose line differs from what ``checkpoint`` signed, found through the stored tiles.

    The tiles are first authenticated: the root they give for ``checkpoint.size`` must be the signed
    root. Then the tree is descended from the root, comparing the chain's subtree hashes with the
    stored ones: the left subtree when it differs, else the right. None when the tiles are missing
    or do not match the signed root.
    """
    store = TileStore(tiles_dir, _stored_size(tiles_dir))
    try:
        if store.size < checkpoint.size or store.root(checkpoint.size) != checkpoint.root:
            return None
        lo, hi = 0, checkpoint.size
        while hi - lo > 1:
            k = split_point(hi - lo)
            if tree.range_hash(lo, lo + k) != store.range_hash(lo, lo + k):
                hi = lo + k
            else:
                lo = lo + k
        return lo
    except TileError:
        return None


def _stored_size(directory: str) -> int:
    try:
        with open(os.path.join(directory, "state"), encoding="utf-8") as handle:
            size = json.load(handle).get("size", 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return size if isinstance(size, int) else 0
