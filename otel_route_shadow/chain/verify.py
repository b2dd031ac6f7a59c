"""Verifying a decision chain: one pass over its lines, in this process or in worker processes.

The pass checks every line as docs/chain-format.md section 8 says (``check``, ``scan``; ``parallel``
with ``jobs > 1``), names the first line that does not verify and why (``diagnosis``), and on request
hashes every line as a Merkle leaf as it goes, so that a caller holding signed checkpoints (``tlog``)
reads the chain once. Lines an authenticated checkpoint vouches for can be hashed only (section 13.7).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any

from otel_route_shadow.chain import parallel
from otel_route_shadow.chain.diagnosis import diagnose
from otel_route_shadow.chain.leaves import LeafSink
from otel_route_shadow.chain.reader import open_chain
from otel_route_shadow.chain.record import GENESIS_HASH
from otel_route_shadow.chain.result import ChainPass, Reason, TornTail, Verdict, VerifyResult
from otel_route_shadow.chain.scan import Options, Progress, ScanState, Stop, scan
from otel_route_shadow.lines import FileHandle, complete_end
from otel_route_shadow.locking import settled_size

__all__ = ["VerifyResult", "verify_chain", "verify_pass"]  # VerifyResult: for log.py, which imports it here


def verify_chain(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    strict: bool = False,
    byte_progress: Callable[[int, int], None] | None = None,
) -> VerifyResult:
    """Verify the chain file at ``path``. See :meth:`RoutingAuditLog.verify`.

    ``progress(records)`` is called now and then with the records verified so far;
    ``byte_progress(done, total)`` with bytes (for a progress bar). ``strict`` adds the payload value
    walk of ``check.check_line``. Raises ``OSError`` (``FileNotFoundError``, ``PermissionError``,
    ``ChainPathError`` for a directory, a FIFO or a device) when the file cannot be read at all; every
    problem *inside* the file is a verdict, never an exception.
    """
    return verify_pass(path, jobs=jobs, progress=progress, strict=strict, byte_progress=byte_progress).result


def verify_pass(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    strict: bool = False,
    unchecked: int = 0,
    mark: int = -1,
    leaves: LeafSink | None = None,
    progress: Callable[[int], None] | None = None,
    byte_progress: Callable[[int, int], None] | None = None,
) -> ChainPass:
    """:func:`verify_chain`, and what a caller holding checkpoints needs from the same read.

    ``leaves`` takes the leaf hash of every complete line, in order (all of them, whatever the
    verdict). The first ``unchecked`` lines are hashed only: the caller holds an authenticated
    checkpoint of that size, whose signer checked them (docs/chain-format.md section 13.7); the
    verdict then describes the chain on that trust (their count, the record hash the last of them
    carries as the link of the next, their ``records-dropped`` events). ``mark`` names a line whose
    byte offset the result reports.
    """
    name = os.fspath(path)
    with io.FileIO(open_chain(name, os.O_RDONLY), "rb") as handle:
        size = settled_size(handle.fileno())
        complete = complete_end(handle, size)
        state = ScanState(0, GENESIS_HASH, 0, 0)
        options = Options(strict, max(0, unchecked), mark)
        hook = _combine(progress, byte_progress, size)
        stop: Stop | None
        if jobs > 1 and complete >= parallel.PARALLEL_MIN_BYTES:
            stop = parallel.scan_parallel(name, handle, state, complete, jobs, options, leaves, hook)
        else:
            stop = scan(handle, state, complete, options, leaves, hook)
        if stop is not None:
            result = _broken(name, handle, stop, complete)
        else:
            result = _complete(name, state, complete, size)
        return ChainPass(result, min(options.unchecked, result.records), state.marked)


def _prefix(state: ScanState) -> dict[str, Any]:
    """The verified prefix, as every verdict reports it."""
    return {
        "records": state.seq,
        "head_seq": state.seq - 1 if state.seq else None,
        "head_hash": state.prev if state.seq else None,
        "dropped_events": state.dropped_events,
        "dropped_records": state.dropped_records,
    }


def _complete(name: str, state: ScanState, complete: int, size: int) -> VerifyResult:
    """Every complete line verified: intact, or a torn tail after them."""
    if complete == size:
        return VerifyResult(path=name, verdict=Verdict.INTACT, bytes_verified=complete, **_prefix(state))
    return VerifyResult(
        path=name,
        verdict=Verdict.TORN_TAIL,
        first_bad_seq=state.seq,
        reason=Reason.TORN_TAIL,
        line=state.lines + 1,
        offset=complete,
        detail=f"{size - complete} bytes after the last newline (an append that did not finish)",
        torn_tail=TornTail(complete, size - complete),
        bytes_verified=complete,
        **_prefix(state),
    )


def _combine(
    progress: Callable[[int], None] | None, byte_progress: Callable[[int, int], None] | None, total: int
) -> Progress | None:
    if progress is None and byte_progress is None:
        return None

    def hook(records: int, done: int) -> None:
        if progress is not None:
            progress(records)
        if byte_progress is not None:
            byte_progress(done, total)

    return hook


def _broken(name: str, handle: FileHandle, stop: Stop, end: int) -> VerifyResult:
    """The verdict on the first line that does not verify."""
    state = stop.state
    if stop.bad is not None:
        reason, detail, first_bad = stop.bad.reason, stop.bad.detail, state.seq
    else:
        reason, detail, first_bad = diagnose(handle, stop, end)
    return VerifyResult(
        path=name,
        verdict=Verdict.BROKEN,
        first_bad_seq=first_bad,
        reason=reason,
        line=state.lines + 1,
        offset=state.offset,
        detail=detail,
        bytes_verified=state.offset,
        **_prefix(state),
    )
