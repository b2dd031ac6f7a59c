"""The checkpoint a cut's anchor carries: the tree caught up to the cut's size and signed, then the
chain cut (``chain.cut_chain``, docs/chain-format.md section 14)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Final

from otel_route_shadow.chain import ChainCut, CutRefused, cut_chain, segment_name
from otel_route_shadow.files import FileRefused
from otel_route_shadow.logstore.archives import open_segment, read_segment, segments_dir
from otel_route_shadow.logstore.checkpointer import Checkpointer
from otel_route_shadow.logstore.signed import signed_checkpoint_from_note
from otel_route_shadow.tlog import HASH_SIZE, ProofError, TileError, TileReader, range_proof, verify_range

__all__ = ["CUT_CATCH_UP_STEPS", "CUT_SIGN_POLL_S", "CUT_SIGN_WAIT_S", "cut_signed", "note_for_cut"]

CUT_SIGN_POLL_S: Final = 0.01
"""How often a cut asks the checkpointer again while another process holds the log's lock."""
CUT_CATCH_UP_STEPS: Final = 64
"""Checkpointer steps (each bounded) a cut may take to catch the tree up before it takes the chain's lock."""
_STALLED_STEPS: Final = 3
"""Checkpointer steps in a row that add no leaf, the tree behind, after which a cut with no bound on its
catch-up (``rotate``) stops (a step into the next segment adds none; a tree that cannot grow would add none
for ever). The plugin's cut has its bound, and a tree waiting for its witnesses is not stuck."""
CUT_SIGN_WAIT_S: Final = 0.25
"""Longest the plugin's cut waits, the chain's lock held, for another process checkpointing: past it the
cut is given up (nothing changed) and tried again after the next checkpoint, so spawns never wait on a
busy log for longer."""


def note_for_cut(checkpointer: Checkpointer, size: int, timeout: float) -> str:
    """The signed note of the tree of exactly ``size`` leaves, catching the tree up to it first (the
    chain's lock held by the caller: the chain ends at ``size``); waits at most ``timeout`` seconds
    for another process checkpointing. Raises :class:`CutRefused` when it cannot be had."""
    deadline = time.monotonic() + timeout
    while True:
        checkpointer.checkpoint(max_leaves=1 << 62, max_bytes=1 << 62)
        if checkpointer.refused is not None:
            raise CutRefused(f"the log refuses to sign checkpoints ({checkpointer.refused}); not cutting")
        if checkpointer.failed is not None:
            raise CutRefused(f"a checkpoint failed ({_named(checkpointer.failed)}); not cutting")
        if checkpointer.size == size and not checkpointer.behind:
            note = checkpointer.signed_note(size)
            if note is not None:
                return note
        if time.monotonic() >= deadline:
            raise CutRefused(f"no checkpoint of size {size} could be signed within {timeout} s; not cutting")
        time.sleep(CUT_SIGN_POLL_S)


def cut_signed(
    checkpointer: Checkpointer,
    timeout: float | None,
    sign_wait: float = CUT_SIGN_WAIT_S,
    catch_up: int | None = CUT_CATCH_UP_STEPS,
    pause: Callable[[], None] | None = None,
    check_live: bool = False,
    live: tuple[int, int] | None = None,
) -> ChainCut | None:
    """Cut the checkpointer's chain (``chain.cut_chain``), its anchor carrying the checkpoint of the
    cut's size when the log signs (null when it has no key). The tree is caught up before the chain's
    lock is taken (``timeout``: the longest wait for it), so only the lines appended meanwhile are added
    under it; ``sign_wait``: the longest wait then for another process checkpointing. ``catch_up``: the
    most checkpointer steps before the lock (None: as many as it takes); a tree still behind after them
    is not cut (None: tried again after the next checkpoint), so appenders never wait on a catch-up. With
    None a checkpoint that fails stops the cut: its ``OSError`` (a file of the log folder it cannot use) is
    raised as it is, anything else as :class:`CutRefused`. ``pause``: called between slices of it (the
    host's background thread gives the interpreter back).
    ``check_live``: before the cut, read the live file's records the signed tree covers and refuse to seal
    them unless they are its leaves (:func:`check_live_signed`; ``rotate``: one more read of the file).
    ``live``: the live file found due, as ``chain.cut_chain`` takes it (not cut once another process cut it)."""
    if not checkpointer.signers:
        return cut_chain(checkpointer.chain_path, sign=None, timeout=timeout, live=live)
    steps = stalled = 0
    while True:
        size = checkpointer.size
        checkpointer.checkpoint(pause=pause)
        steps += 1
        if checkpointer.refused is not None:
            raise CutRefused(f"the log refuses to sign checkpoints ({checkpointer.refused}); not cutting")
        if checkpointer.failed is not None and catch_up is None:  # the plugin's cut tries again later
            if isinstance(checkpointer.failed, OSError):  # a log folder's file it cannot use: unusable input
                raise checkpointer.failed
            raise CutRefused(f"a checkpoint failed ({_named(checkpointer.failed)}); not cutting")
        if not checkpointer.behind:
            break
        if catch_up is not None and steps >= catch_up:
            return None
        stalled = stalled + 1 if checkpointer.size == size else 0
        if catch_up is None and stalled >= _STALLED_STEPS:  # "as many as it takes" never ends otherwise
            raise CutRefused(
                f"the log's tree stayed at {checkpointer.size} records for {stalled} steps while behind the "
                "chain (a line longer than a step reads, or a tile it cannot write: `verify --key` says "
                "which); not cutting"
            )
    if check_live:
        check_live_signed(checkpointer)
    return cut_chain(
        checkpointer.chain_path,
        sign=lambda size: note_for_cut(checkpointer, size, sign_wait),
        timeout=timeout,
        live=live,
    )


def _named(failure: Exception) -> str:
    return f"{type(failure).__name__}: {failure}"


def check_live_signed(checkpointer: Checkpointer) -> None:
    """Refuse (:class:`CutRefused`) to seal a live file whose records below the tree the checkpointer holds
    (caught up, signed) are not its leaves: a record edited or rewritten after it was signed. The tree's
    resume checks only the last line it signed; this reads the live file once, each record parsed and
    linked, and proves its leaves against the signed root with a range proof from the tiles."""
    size, first = checkpointer.size, checkpointer.size - checkpointer.live_records
    note = checkpointer.signed_note(size)
    if note is None or first >= size:
        return  # nothing of the live file signed: the checkpointer checks each record before it signs one
    signed = signed_checkpoint_from_note(note)
    path = checkpointer.chain_path
    try:
        with open_segment(path) as stream:
            read = read_segment(stream, first)
        if read.count < size - first:
            problem = f"{read.problem}, below the signed size {size}"
            if os.path.lexists(os.path.join(segments_dir(path), segment_name(first))):
                problem = "another process cut the chain meanwhile"
            raise CutRefused(f"{path}: {problem}; not cutting")
        leaves = read.leaves[: (size - first) * HASH_SIZE]
        proof = range_proof(first, size, size, TileReader(checkpointer.directory, size, signed.root))
        verify_range(first, size, size, leaves, proof, signed.root)
    except (OSError, FileRefused, TileError) as exc:
        raise CutRefused(
            f"{path}: its records cannot be checked against the signed tree ({exc}); not cutting"
        ) from None
    except ProofError:
        raise CutRefused(
            f"{path}: its records [{first}, {size}) are not those the checkpoint of size {size} signed "
            "(edited after they were signed: `verify --key` names the first); not cutting"
        ) from None
