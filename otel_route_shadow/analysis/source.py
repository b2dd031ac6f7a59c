"""Reading a decision chain for analysis: existence, emptiness, verification, then one stream.

Every analysis goes through here, so a missing chain, an empty chain and an unverifiable chain are
refused in one place and in the same words.

*What is read is what was verified.* A chain may be appended to while it is analysed (the factory
does not stop for a report), so the stream ends at the bytes verification covered: records appended
after verification started are not in the figures, and no figure ever comes from an unverified record
of a chain that verified. The reader is a bounded variant of the chain's ``iter_payloads`` (block
reads, one ``orjson`` parse per line, constant memory); with ``--allow-unverified`` it is lenient,
turning a line that is not a record into a ``malformed`` count instead of stopping.

A pruned chain (its log's ``pruned`` file, docs/chain-format.md 14.5) is verified and read from its
minimum index m, as ``verify`` verifies it; its status (:class:`ChainStatus` ``kept``) says what was
pruned, when and by which command, and that the figures start at seq m.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from otel_route_shadow.analysis.evidence import read_checkpoint_note
from otel_route_shadow.analysis.kept import Kept, kept_records
from otel_route_shadow.chain import ChainFormatError, chain_segments, iter_lines, live_path, verify_pass
from otel_route_shadow.files import FileRefused, open_regular
from otel_route_shadow.locking import settled_size
from otel_route_shadow.logstore import LogStore, Pruned, StateError
from otel_route_shadow.processes import mp_context

__all__ = [
    "CONCURRENT_MIN_BYTES",
    "ChainAnalysisError",
    "ChainStatus",
    "EmptyChainError",
    "MissingChainError",
    "NotAChainError",
    "UnverifiedChainError",
    "analyse_chain",
    "chain_status",
    "read_payloads",
    "require_chain_file",
    "stored_bytes",
]

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: records done so far out of ``total`` (0 when unknown)."""

Payloads = Iterator[tuple[int, Any]]

CONCURRENT_MIN_BYTES: Final = 8 << 20
"""Below this size a worker process costs more than it saves: verify first, then read."""

TORN_TAIL: Final = "torn-tail"
UNPARSEABLE: Final = "unparseable"
MAX_KEPT_NOTES: Final = 64
"""The newest checkpoints of the log's ``checkpoints`` file against which a pruned chain's first record
kept is authenticated (the newest one a given key authenticates and that covers it is used)."""
T = TypeVar("T")


class ChainAnalysisError(Exception):
    """The chain cannot be analysed; the message names the file and the reason."""


class MissingChainError(ChainAnalysisError):
    pass


class EmptyChainError(ChainAnalysisError):
    pass


class NotAChainError(ChainAnalysisError):
    """Not one line of the file is a record (its first line is unparseable: too long, not UTF-8,
    not JSON): unusable input, not a chain that fails verification."""


class UnverifiedChainError(ChainAnalysisError):
    """Verification failed and the caller did not allow an unverified chain."""

    def __init__(self, message: str, status: ChainStatus) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ChainStatus:
    """What verification said about the chain the figures come from."""

    path: str
    records: int
    """Records verified (from seq 0 without a break; of a pruned chain, its head seq + 1: the records
    below its minimum index are counted though gone, and ``kept`` says so)."""
    verified: bool
    """True when verification ran and every complete record verified (a torn tail, an append that has
    not finished, is not a record: it is noted, and left out)."""
    checked: bool
    """False when verification was skipped on request; then ``verified`` is False too."""
    head_hash: str | None = None
    first_bad_seq: int | None = None
    reason: str | None = None
    bytes_verified: int = 0
    note: str | None = None
    kept: Kept | None = None
    """Of a pruned chain: its minimum index, what was pruned, and its first record kept authenticated
    (or not); verification and every figure start there."""

    @property
    def start(self) -> int:
        """The first record the figures count: the minimum index of a pruned chain, else 0."""
        return 0 if self.kept is None else self.kept.start

    @property
    def flagged(self) -> bool:
        """Every figure computed from this chain must carry a flag."""
        return not self.verified

    def describe(self) -> str:
        pruned = "" if self.kept is None else f"; {self.kept.sentence()}"
        if self.verified:
            counted = (
                f"{self.records - self.start} records from seq {self.start}"
                if self.kept
                else f"{self.records} records"
            )
            text = f"verified: {counted}" + ("" if self.head_hash is None else f", head {self.head_hash}")
            return (f"{text}; {self.note}" if self.note else text) + pruned
        if not self.checked:
            return "NOT VERIFIED: verification was skipped" + pruned
        where = f" at seq {self.first_bad_seq}" if self.first_bad_seq is not None else ""
        return f"VERIFICATION FAILED{where}: {self.reason or 'chain does not verify'}" + pruned

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "verified": self.verified,
            "checked": self.checked,
            "head_hash": self.head_hash,
            "first_bad_seq": self.first_bad_seq,
            "reason": self.reason,
            "note": self.note,
            "from_seq": self.start,
            "pruned": None if self.kept is None else self.kept.as_dict(),
        }


def require_chain_file(path: Path) -> None:
    """Raise :class:`MissingChainError` unless ``path`` is a regular file (opened without blocking),
    :class:`EmptyChainError` when it is empty."""
    if not path.exists():
        raise MissingChainError(f"{path}: no such chain file")
    if path.is_dir():
        raise MissingChainError(f"{path}: is a directory, not a chain file")
    try:
        os.close(open_regular(path))
    except FileNotFoundError:
        raise MissingChainError(f"{path}: no such chain file") from None
    except FileRefused as exc:
        raise MissingChainError(str(exc)) from None
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise MissingChainError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise EmptyChainError(f"{path}: the chain is empty (0 records): nothing to analyse")


def _answer(result: Any) -> dict[str, Any]:
    """The plain values of a ``VerifyResult`` (they cross a process boundary)."""
    verdict = getattr(result, "verdict", None)
    reason = result.reason
    torn = getattr(result, "torn_tail", None)
    return {
        "records": int(result.records),
        "intact": bool(result.intact),
        "verdict": None if verdict is None else str(getattr(verdict, "value", verdict)),
        "head_hash": result.head_hash,
        "first_bad_seq": result.first_bad_seq,
        "reason": None if reason is None else str(getattr(reason, "value", reason)),
        "detail": getattr(result, "detail", None),
        "bytes_verified": int(getattr(result, "bytes_verified", 0) or 0),
        "torn_bytes": int(getattr(torn, "length", 0) or 0),
    }


def _status(chain: Path, answer: dict[str, Any]) -> ChainStatus:
    torn = answer["verdict"] == TORN_TAIL
    reason = answer["reason"]
    if reason is not None and answer["detail"]:
        reason = f"{reason}: {answer['detail']}"
    return ChainStatus(
        path=str(chain),
        records=answer["records"],
        verified=bool(answer["intact"]) or torn,
        checked=True,
        head_hash=answer["head_hash"],
        first_bad_seq=None if torn else answer["first_bad_seq"],
        reason=None if torn else reason,
        bytes_verified=answer["bytes_verified"],
        note=(
            f"a torn tail of {answer['torn_bytes']} bytes after the last record (an append in progress "
            "or interrupted) is not a record and was left out"
        )
        if torn
        else None,
    )


def _judge(chain: Path, status: ChainStatus, allow_unverified: bool) -> None:
    if status.verified and status.records == 0:
        raise EmptyChainError(f"{chain}: the chain is empty (0 records): nothing to analyse")
    if status.first_bad_seq == 0 and (status.reason or "").startswith(UNPARSEABLE):
        raise NotAChainError(
            f"{chain}: not a decision chain: its first line is not a record ({status.reason})"
        )
    if not status.verified and not allow_unverified:
        raise UnverifiedChainError(
            f"{chain}: refusing to analyse an unverifiable chain ({status.describe()}); "
            "pass --allow-unverified to proceed with every figure flagged",
            status,
        )


def read_pruned(chain: Path) -> Pruned | None:
    """The chain's ``pruned`` file (None: never pruned); one that cannot be used is unusable input."""
    try:
        return LogStore(chain).read_pruned()
    except StateError as exc:
        raise ChainAnalysisError(f"{chain}: {exc}") from None


def _with_kept(chain: Path, status: ChainStatus, pruned: Pruned | None, keys: Sequence[str]) -> ChainStatus:
    """The status of a chain verified from its minimum index, with what it keeps; with ``keys``, its first
    record kept authenticated from the signed tree, one that is not the signed leaf a failed verification."""
    if pruned is None:
        return status
    notes: list[str] = []
    if keys:  # the published checkpoint and the newest entries of checkpoints, as verify reads them
        published = read_checkpoint_note(chain)[1]
        notes += [published] if published is not None else []
        with contextlib.suppress(OSError, ValueError):  # none readable: nothing authenticates
            notes += itertools.islice(LogStore(chain).newest_notes(), MAX_KEPT_NOTES)
    kept = kept_records(chain, pruned, notes, keys)
    if kept.problem is None or not status.verified:
        return replace(status, kept=kept)
    return replace(
        status, kept=kept, verified=False, first_bad_seq=kept.start, reason=kept.problem, note=None
    )


def _verify(chain: Path, jobs: int, progress: ProgressFn | None, start: int) -> ChainStatus:
    step = None if progress is None else (lambda done: progress(done, 0))
    try:
        result = verify_pass(chain, jobs=jobs, progress=step, start=start).result
    except OSError as exc:
        raise MissingChainError(f"{chain}: cannot read: {exc.strerror or exc}") from None
    return _status(chain, _answer(result))


def chain_status(
    path: str | Path,
    *,
    verify: bool = True,
    allow_unverified: bool = False,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    keys: Sequence[str] = (),
) -> ChainStatus:
    """Check the chain exists and is not empty, then verify it; a pruned chain from its minimum index,
    as ``verify`` does (its first record kept authenticated from the signed tree with ``keys``, the
    log's verifier keys).

    Raises :class:`MissingChainError`, :class:`EmptyChainError`, or :class:`UnverifiedChainError`
    (only when ``allow_unverified`` is false). With ``verify=False`` nothing is checked beyond the
    file, and the status says so (figures are then flagged as unverified).
    """
    chain = Path(live_path(path))
    require_chain_file(chain)
    pruned = read_pruned(chain)
    if not verify:
        unchecked = ChainStatus(path=str(chain), records=0, verified=False, checked=False)
        return _with_kept(chain, unchecked, pruned, ())
    status = _with_kept(chain, _verify(chain, jobs, progress, _start(pruned)), pruned, keys)
    _judge(chain, status, allow_unverified)
    return status


def _start(pruned: Pruned | None) -> int:
    return 0 if pruned is None else pruned.min_index


def read_payloads(
    path: str | Path, end: int | None = None, *, lenient: bool = False, kept_from: int = 0
) -> Payloads:
    """``(seq, payload)`` of every newline-terminated line in ``[0, end)`` (the whole file when None);
    of a pruned chain, from its minimum index ``kept_from`` (positions count from the file that begins
    there).

    One ``orjson`` parse per line, block reads, constant memory. A line that is not a record raises
    :class:`ChainAnalysisError` naming it; with ``lenient`` it is yielded as ``(-1, None)`` (counted as
    malformed by the analyses) and reading goes on. A line longer than the chain's limit is never
    buffered whole: it raises, or (lenient) is skipped as one malformed line.
    """
    name = os.fspath(path)
    loads = orjson.loads
    lines = iter_lines(name, end, skip_oversize=lenient, kept_from=kept_from)
    while True:
        try:
            number, line = next(lines)
        except StopIteration:
            return
        except ChainFormatError as exc:  # a line over the limit, not lenient
            raise ChainAnalysisError(str(exc)) from None
        try:
            record = loads(line)
            seq = record["seq"]
            payload = record["payload"]
            if payload.__class__ is not dict or seq.__class__ is not int:
                raise TypeError("seq or payload of the wrong type")
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError) as exc:
            if not lenient:
                raise ChainAnalysisError(f"{name}: line {number}: not a chain record ({exc})") from None
            yield -1, None
            continue
        yield seq, payload


# ---------------------------------------------------------------------------------------------
# Verification and analysis in one go.


def _verify_worker(path: str, jobs: int, start: int, conn: Connection) -> None:
    """Runs in a child process: verify (from ``start``, a pruned chain's minimum index) and send back
    plain values."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the host
    try:
        conn.send(_answer(verify_pass(path, jobs=jobs, start=start).result))
    except BaseException as exc:  # report, never leave the parent waiting
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def _complete_size(path: Path, start: int) -> int:
    """The chain's size with no append in flight (appenders write under an exclusive lock): its closed
    segments' from the one that begins at ``start`` (a pruned chain's minimum index) and its live file's."""
    with os.fdopen(open_regular(path), "rb", buffering=0) as handle:  # a FIFO swapped in never blocks
        live = settled_size(handle.fileno())
    closed = [segment for segment in chain_segments(path)[:-1] if (segment.first or 0) >= start]
    return live + sum(os.lstat(segment.path).st_size for segment in closed)  # a link is never followed


def stored_bytes(path: str | Path) -> int:
    """The bytes of a chain's files, its closed segments and its live file (0 when they cannot be
    listed or sized)."""
    try:
        return sum(os.stat(segment.path).st_size for segment in chain_segments(path))
    except OSError:
        return 0


def use_concurrent(path: str | Path, concurrent: bool | None) -> bool:
    if concurrent is not None:
        return concurrent
    return stored_bytes(path) >= CONCURRENT_MIN_BYTES and (os.cpu_count() or 1) >= 2


def analyse_chain(
    path: str | Path,
    consume: Callable[[Payloads, int], T],
    *,
    verify: bool = True,
    allow_unverified: bool = False,
    jobs: int = 1,
    verify_progress: ProgressFn | None = None,
    concurrent: bool | None = None,
    keys: Sequence[str] = (),
) -> tuple[ChainStatus, T]:
    """Verify the chain and run ``consume(payloads, records_hint)`` over what verified; return both.

    Serially (verify, then read up to the bytes verified) for small chains or with
    ``concurrent=False``. For large chains on a machine with two or more CPUs (or with
    ``concurrent=True``) verification runs in a worker process while this one reads up to the size
    the file had when the command started (taken before the worker starts, so the worker verifies at
    least that much): the wall time is about the longer of the two rather than their sum. Either way
    nothing is returned before verification has finished, and an unverifiable chain raises
    :class:`UnverifiedChainError` (unless allowed) whatever the reading produced. A pruned chain is
    verified and read from its minimum index (see :func:`chain_status`; ``keys`` as there).
    """
    chain = Path(live_path(path))
    require_chain_file(chain)
    pruned = read_pruned(chain)
    start = _start(pruned)
    concurrently = verify and use_concurrent(chain, concurrent)
    outcome = _concurrent(chain, consume, jobs, start) if concurrently else None
    if outcome is not None:
        status, value, end = outcome
        status = _with_kept(chain, status, pruned, keys)
        _judge(chain, status, allow_unverified)
        if status.verified and value is not None and status.bytes_verified >= end:
            return status, value
        # The read failed or the file shrank under us (verified), or the chain does not verify
        # (allowed): read again, knowing the verdict.
    else:
        status = chain_status(
            chain,
            verify=verify,
            allow_unverified=allow_unverified,
            jobs=jobs,
            progress=verify_progress,
            keys=keys,
        )
    if status.verified:
        return status, consume(read_payloads(chain, status.bytes_verified, kept_from=start), status.records)
    # Unverified, and allowed (or not checked): read everything that is there, leniently.
    return status, consume(read_payloads(chain, None, lenient=True, kept_from=start), status.records)


def _concurrent(
    chain: Path, consume: Callable[[Payloads, int], T], jobs: int, start: int
) -> tuple[ChainStatus, T | None, int] | None:
    """Verify in a worker while reading up to the size the file has now; the value is None when the
    reading failed (a line that is not a record: the verdict will say why). None when no worker can
    be started here (a daemonic process, a sandbox): the caller then goes the serial way."""
    end = _complete_size(chain, start)
    context = mp_context()
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(
        target=_verify_worker, args=(str(chain), jobs, start, sender), name="route-shadow-verify"
    )
    try:
        worker.start()
    except (AssertionError, OSError, RuntimeError):
        receiver.close()
        sender.close()
        return None
    sender.close()
    value: T | None = None
    try:
        with contextlib.suppress(ChainAnalysisError):
            value = consume(read_payloads(chain, end, kept_from=start), 0)
        try:
            answer: dict[str, Any] = receiver.recv()
        except EOFError:
            answer = {"error": "the verification worker exited without an answer"}
    finally:
        receiver.close()
        worker.join(timeout=5)
        if worker.is_alive():
            worker.terminate()
            worker.join()
    if "error" in answer:
        raise ChainAnalysisError(f"{chain}: verification failed to run: {answer['error']}")
    return _status(chain, answer), value, end
