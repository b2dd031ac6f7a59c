"""The first record a pruned chain keeps, authenticated from the signed tree (docs/chain-format.md
section 14.4): its leaf hash against the level-0 tile a checkpoint's root authenticates, never its own
``prev_hash``, whose record is gone."""

from __future__ import annotations

from collections.abc import Sequence

from otel_route_shadow.chain import chain_line
from otel_route_shadow.logstore.consistency import ChainCheck, check_chain
from otel_route_shadow.logstore.pruned import Pruned
from otel_route_shadow.logstore.store import LogStore
from otel_route_shadow.tlog import (
    AuthenticationError,
    KeyWindow,
    Malformed,
    TileError,
    TileReader,
    authenticate,
    checkpoint_of,
    leaf_hash,
)

__all__ = ["PrunedError", "authenticate_first_kept", "check_kept_chain"]


class PrunedError(ValueError):
    """The first record kept is not the signed tree's."""


def authenticate_first_kept(
    store: LogStore, pruned: Pruned, notes: Sequence[str], keys: Sequence[str]
) -> str:
    """Authenticate record ``min_index`` from the signed tree: the largest of ``notes`` that ``keys``
    authenticate and that covers it, and whose tiles hold, gives a root (the notes are tried largest
    first, so one signature is checked when the largest verifies), the level-0 tile holding its leaf is
    authenticated against that root, and the chain's line must hash to that leaf. Returns the size of the tree it
    was proven in (as a sentence); raises :class:`PrunedError` naming what does not hold."""
    m = pruned.min_index
    verifiers = [KeyWindow.parse(key) for key in keys]
    leaf, newest, failed = None, None, None
    for size, note in sorted(((_size(note), note) for note in notes), key=lambda sized: -sized[0]):
        if size <= m:
            break
        try:  # the largest that verifies and whose tiles give the leaf (a damaged right edge: an older one)
            newest = authenticate(note, verifiers).checkpoint
            leaf = TileReader(store, newest.size, newest.root).node(0, m)
            break
        except AuthenticationError:
            continue
        except (TileError, ValueError) as exc:
            failed = failed or exc
    if newest is None:
        raise PrunedError(f"no checkpoint the given keys authenticate covers seq {m}, the first record kept")
    if leaf is None:
        raise PrunedError(f"seq {m} cannot be authenticated: {failed}")
    line = chain_line(store.chain_path, m)
    if line is None:
        raise PrunedError(f"the chain holds no line for seq {m}, the first record kept")
    if leaf != leaf_hash(line):
        raise PrunedError(
            f"seq {m}, the first record kept, is not the leaf the checkpoint of size {newest.size} signed"
        )
    return f"seq {m} authenticated from the signed tree of size {newest.size}"


def _size(note: str) -> int:
    """The tree size ``note`` claims, its signatures not checked (-1 for one that is not a checkpoint)."""
    try:
        return checkpoint_of(note).size
    except Malformed:
        return -1


def check_kept_chain(
    path: str,
    pruned: Pruned | None,
    notes: Sequence[str],
    keys: Sequence[str],
    *,
    check_tile_store: bool = True,
) -> tuple[ChainCheck, str | None]:
    """:func:`check_chain` of the chain at ``path`` against ``notes``, from its minimum index when ``pruned``
    (its ``pruned`` file; None: never pruned), and why its first record kept is not the signed tree's
    (:func:`authenticate_first_kept` against ``notes``), or None. Raises as :func:`check_chain` does."""
    start = 0 if pruned is None else pruned.min_index
    checked = check_chain(path, notes, keys, check_tile_store=check_tile_store, start=start)
    if pruned is None or not start:
        return checked, None
    try:
        authenticate_first_kept(LogStore(path), pruned, notes, keys)
    except PrunedError as exc:
        return checked, str(exc)
    return checked, None
