"""The auditor's memory: what an earlier audit proved, so the next one checks only what is new.

An audit that found the chain consistent with every checkpoint held against it records, per origin, in the
auditor's own state file (``audit --state FILE``; never beside the chain, whose holder is the one being
audited): the largest proven checkpoint (size, root), the chain-wide position of the first record after
it, the tree's right edge at that size (its compact range: at most log2(n) hashes) and the (size, root) pairs
of every checkpoint proven so far. The next audit then costs time proportional to the records after
that checkpoint plus O(log n) per checkpoint it has not proven yet:

* a checkpoint already proven is not proven again;
* a new checkpoint at or below the trusted size is proven with a consistency proof from the chain's
  tiles against the trusted root (RFC 6962; a tile the holder forged cannot make a proof verify);
* checkpoints above it are checked by extending the trusted right edge with the leaf hashes of the
  records after the trusted position, taking the root at each checkpoint's size.

A position is chain-wide (docs/chain-format.md 14.4): it counts the bytes of every file of the chain
before it, the segments a prune removed included (their sizes as the ``pruned`` file records them), so it
names the same record after a cut or a prune, and the records after it are read across the segment
boundaries (``chain_source.chain_bytes``).

What this trusts: the records below the trusted size are not re-read, so an edit made to them after
the earlier audit is found only by a full audit (``audit --full``, which also refreshes the state).
When the memory cannot be extended, the audit falls back to the full check and says why: the trusted
size is below the chain's minimum index (the records after it were pruned), the position is not where
record ``size`` begins (past the chain's end, not a line start, a line claiming another seq: a memory
written before positions were chain-wide, or a chain changed below it), the tiles cannot give a proof,
or a root differs on a pruned chain (the full check from the minimum index locates the record).
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_route_shadow.backend.chain_source import chain_bytes
from otel_route_shadow.backend.checkpoints import BackendCheckpoint
from otel_route_shadow.backend.verdict import Consistency, Failure
from otel_route_shadow.chain import ChainBytes, line_seq
from otel_route_shadow.files import FileRefused, write_atomic
from otel_route_shadow.logstore import ChainCheck, LogStore, Pruned, chain_tree, locate_first_changed
from otel_route_shadow.strict_json import StrictJSONError, read_json
from otel_route_shadow.tlog import (
    EMPTY_ROOT,
    AuthenticationError,
    Checkpoint,
    CompactRange,
    KeyWindow,
    ProofError,
    TileError,
    TileReader,
    authenticate,
    consistency_proof,
    leaf_hash,
    subtrees,
    tree_hash,
    verify_consistency,
)

__all__ = ["TrustState", "TrustStateError", "Trusted", "trusted_after", "verify_incremental"]

STATE_VERSION = 1
_MAX_STATE_BYTES = 64 * 1024 * 1024


class TrustStateError(ValueError):
    """The auditor's state file cannot be read or written; the message names it."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class Trusted:
    """What an earlier audit proved for one origin (see the module docstring)."""

    size: int
    root: bytes
    offset: int  # chain-wide position of line ``size`` (the first record after the proven checkpoint)
    edge: tuple[bytes, ...]  # compact range of the first ``size`` leaves, largest subtree first
    proven: frozenset[tuple[int, bytes]] = field(default_factory=frozenset)

    @classmethod
    def empty(cls) -> Trusted:
        """Nothing trusted yet: checking from here is the full check."""
        return cls(0, EMPTY_ROOT, 0, ())

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "root": _b64(self.root),
            "offset": self.offset,
            "edge": [_b64(n) for n in self.edge],
            "proven": sorted([size, _b64(root)] for size, root in self.proven),
        }

    @classmethod
    def from_json(cls, raw: Any) -> Trusted:
        d = base64.b64decode
        trusted = cls(
            size=int(raw["size"]),
            root=d(raw["root"], validate=True),
            offset=int(raw["offset"]),
            edge=tuple(d(n, validate=True) for n in raw["edge"]),
            proven=frozenset((int(s), d(r, validate=True)) for s, r in raw["proven"]),
        )
        if CompactRange(trusted.size, trusted.edge).root() != trusted.root:
            raise ValueError("the right edge does not give the trusted root")
        return trusted


class TrustState:
    """The auditor's state file: ``{"version": 1, "origins": {origin: Trusted}}``; updated atomically
    (several chains of a fleet audit may write it, from threads of one process)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        try:
            raw = read_json(self.path, _MAX_STATE_BYTES)
        except FileNotFoundError:
            return {}
        except FileRefused as exc:
            raise TrustStateError(f"{self.path}: not an audit state file ({exc.problem})") from None
        except StrictJSONError as exc:
            raise TrustStateError(f"not an audit state file: {exc}") from None
        except OSError as exc:
            raise TrustStateError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if (
            not isinstance(raw, dict)
            or raw.get("version") != STATE_VERSION
            or not isinstance(raw.get("origins"), dict)
        ):
            raise TrustStateError(f"{self.path}: not an audit state file (version {STATE_VERSION})")
        origins: dict[str, Any] = raw["origins"]
        return origins

    def check(self) -> None:
        """Read the whole file as a state file (absent: an empty state) or raise ``TrustStateError``:
        what an audit with this state would refuse, found before anything else is done."""
        with self._lock:
            origins = self._load()
        for number, entry in enumerate(origins.values(), start=1):
            try:
                Trusted.from_json(entry)
            except (KeyError, TypeError, ValueError) as exc:
                raise TrustStateError(f"{self.path}: entry {number}: unreadable ({exc})") from None

    def get(self, origin: str) -> Trusted | None:
        with self._lock:
            entry = self._load().get(origin)
        if entry is None:
            return None
        try:
            return Trusted.from_json(entry)
        except (KeyError, TypeError, ValueError) as exc:
            raise TrustStateError(f"{self.path}: origin {origin!r}: unreadable entry ({exc})") from None

    def put(self, origin: str, trusted: Trusted) -> None:
        with self._lock:
            origins = self._load()
            origins[origin] = trusted.to_json()
            body = json.dumps({"version": STATE_VERSION, "origins": origins}, sort_keys=True, indent=1)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.path, (body + "\n").encode("utf-8"), mode=0o600)
            except OSError as exc:
                raise TrustStateError(f"{self.path}: cannot write: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------------------------------
# Checking from the trusted point on
# --------------------------------------------------------------------------------------------------


class _Fallback(Exception):
    """The incremental path cannot be taken; the full check must run (the message says why)."""


def _authenticate(note: str, verifiers: Sequence[KeyWindow]) -> Checkpoint | Failure:
    """``tlog.authenticate``, its failures as the verdict's ``Failure`` (same reason names)."""
    try:
        return authenticate(note, verifiers).checkpoint
    except AuthenticationError as exc:
        found = exc.checkpoint
        return Failure(exc.reason, found.size if found is not None else None, None, str(exc))


def _prove_old(chain: str, checkpoint: Checkpoint, trusted: Trusted) -> Failure | None:
    """A checkpoint at or below the trusted size: consistent with the trusted root?"""
    if (checkpoint.size, checkpoint.root) in trusted.proven:
        return None
    if checkpoint.size == trusted.size:
        if checkpoint.root == trusted.root:
            return None
        return Failure("fork", checkpoint.size, None, "a second root for the size the last audit proved")
    tiles = TileReader(LogStore(chain), trusted.size, trusted.root)  # authenticated against the trusted root
    try:
        proof = consistency_proof(checkpoint.size, trusted.size, tiles)
        verify_consistency(checkpoint.size, trusted.size, checkpoint.root, trusted.root, proof)
    except TileError as exc:
        raise _Fallback(f"the tiles give no proof for size {checkpoint.size} ({exc})") from None
    except ProofError:
        detail = f"not a prefix of the tree of size {trusted.size} the last audit proved"
        return Failure("fork", checkpoint.size, None, detail)
    return None


@dataclass
class _Walk:
    """Extending the trusted right edge over the records after it."""

    edge: CompactRange
    best: tuple[int, bytes, int, tuple[bytes, ...]] | None = None  # size, root, offset, edge


def _walk_new(
    chain: str, trusted: Trusted, new: list[Checkpoint], pruned: Pruned | None
) -> tuple[list[Failure], _Walk, int]:
    """Roots at each new checkpoint's size from the leaves after the trusted position, read across the
    chain's files; the chain's size."""
    walk = _Walk(CompactRange(trusted.size, trusted.edge))
    wanted = sorted(new, key=lambda c: c.size)
    failures: list[Failure] = []
    i = 0
    with chain_bytes(chain, pruned) as data:
        for position, line in _lines_after(data, trusted):
            walk.edge.append(leaf_hash(line))
            after = position + len(line) + 1
            while i < len(wanted) and wanted[i].size == walk.edge.size:
                failures += _judge(chain, wanted[i], walk, after, pruned)
                i += 1
    if i < len(wanted) and walk.edge.size == trusted.size:
        raise _Fallback(f"no record follows the remembered position {trusted.offset}")
    for checkpoint in wanted[i:]:
        detail = f"the chain has {walk.edge.size} records, the checkpoint {checkpoint.size}"
        failures.append(Failure("truncated", checkpoint.size, None, detail))
    return failures, walk, walk.edge.size


def _lines_after(data: ChainBytes, trusted: Trusted) -> Iterator[tuple[int, bytes]]:
    """The chain's lines from the trusted position on, once it is shown to be where record
    ``trusted.size`` begins (:class:`_Fallback` otherwise, and for a line longer than a record)."""
    offset, size = trusted.offset, trusted.size
    if not data.start <= offset <= data.size or (offset > data.start and data.pread(1, offset - 1) != b"\n"):
        raise _Fallback(f"the remembered position {offset} is not a line start of this chain")
    for position, line in data.lines(offset):
        if line is None:
            raise _Fallback(f"the line at position {position} is longer than any record")
        if position == offset and line_seq(line) != size:
            raise _Fallback(f"the line at the remembered position {offset} is not record {size}")
        yield position, line


def _judge(
    chain: str, checkpoint: Checkpoint, walk: _Walk, position: int, pruned: Pruned | None
) -> list[Failure]:
    if walk.edge.root() == checkpoint.root:
        walk.best = (checkpoint.size, checkpoint.root, position, tuple(walk.edge.nodes))
        return []
    if pruned is not None:
        raise _Fallback(
            f"the root at size {checkpoint.size} differs; the full check from the minimum index locates it"
        )
    # Reads the whole chain again: only when something broke.
    located = locate_first_changed(chain_tree(chain), checkpoint, LogStore(chain))
    return [Failure("record-changed", checkpoint.size, located.seq, located.detail())]


def verify_incremental(
    chain: str,
    checkpoints: Sequence[BackendCheckpoint],
    keys: Sequence[str],
    trusted: Trusted,
    pruned: Pruned | None = None,
) -> tuple[Consistency, Trusted | None] | str:
    """The chain against the checkpoints held against the chain from ``trusted`` on, and the new trusted point (None
    when anything failed); ``pruned``: the chain's ``pruned`` file (None: never pruned). When the full check must
    run instead, why (see the module docstring)."""
    verifiers = [KeyWindow.parse(k) for k in keys]
    failures: list[Failure] = []
    old: list[Checkpoint] = []
    new: list[Checkpoint] = []
    for held in checkpoints:
        outcome = _authenticate(held.note, verifiers)
        if isinstance(outcome, Failure):
            failures.append(outcome)
        else:
            (old if outcome.size <= trusted.size else new).append(outcome)
    try:
        if pruned is not None and trusted.size < pruned.min_index:
            raise _Fallback(
                f"the auditor's memory ends at seq {trusted.size}, below the minimum index {pruned.min_index}: "
                "the records after it were pruned"
            )
        failures += [f for c in old if (f := _prove_old(chain, c, trusted))]
        walked, walk, chain_size = _walk_new(chain, trusted, new, pruned)
    except _Fallback as exc:
        return str(exc)
    except (OSError, ValueError) as exc:
        return f"the chain cannot be read from the remembered position ({exc})"
    failures += walked
    ok_sizes = [c.size for c in old + new if not any(f.size == c.size for f in failures)]
    checkpointed = max([trusted.size, *ok_sizes]) if not any(not f.judges_checkpoint for f in failures) else 0
    consistency = Consistency(checkpointed, chain_size, tuple(failures))
    if failures:
        return consistency, None
    best = walk.best
    proven = trusted.proven | {(c.size, c.root) for c in old + new}
    if best is None:
        return consistency, Trusted(trusted.size, trusted.root, trusted.offset, trusted.edge, proven)
    size, root, offset, edge = best
    return consistency, Trusted(size, root, offset, edge, proven)


def trusted_after(check: ChainCheck, pruned: Pruned | None) -> Trusted | None:
    """What a full check proved, for the auditor's memory (no second read): the largest checkpoint the
    chain matches, the chain-wide position where the record after it begins (the pass counts from the
    first file kept; ``pruned``, the chain's ``pruned`` file, adds the bytes before it), the tree's right
    edge there and every checkpoint proven. None when a checkpoint failed, or the pass did not reach
    that line."""
    verdicts = check.report.verdicts
    if not verdicts or not all(v.ok for v in verdicts) or check.marked_offset is None:
        return None
    tree = check.tree
    size = check.report.checkpointed_size
    edge = tuple(tree.node(height, index) for height, index in subtrees(0, size))
    proven = frozenset((v.size, tree_hash(tree, v.size)) for v in verdicts if v.size is not None)
    offset = check.marked_offset + (0 if pruned is None else pruned.kept_position())
    return Trusted(size, tree_hash(tree, size), offset, edge, proven)
