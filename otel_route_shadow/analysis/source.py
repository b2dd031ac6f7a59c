"""Reading a decision chain for analysis: existence, emptiness, verification, then a stream.

Every analysis command goes through :func:`open_chain` first, so a missing chain, an empty chain and
an unverifiable chain are refused in one place and in the same words. Streaming is the chain's own
``iter_payloads`` (one ``orjson`` parse per line, no pydantic), so memory stays constant.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Final, TypeVar

from otel_route_shadow.chain import RoutingAuditLog, iter_payloads

__all__ = [
    "ChainError",
    "ChainStatus",
    "EmptyChainError",
    "MissingChainError",
    "UnverifiedChainError",
    "analyse_chain",
    "open_chain",
    "stream_payloads",
]

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: records done so far out of ``total`` (0 when unknown)."""


class ChainError(Exception):
    """The chain cannot be analysed; the message names the file and the reason."""


class MissingChainError(ChainError):
    pass


class EmptyChainError(ChainError):
    pass


class UnverifiedChainError(ChainError):
    """Verification failed and the caller did not allow an unverified chain."""

    def __init__(self, message: str, status: ChainStatus) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ChainStatus:
    """What verification said about the chain the figures come from."""

    path: str
    records: int
    verified: bool
    """True only when verification ran and the chain is intact."""
    checked: bool
    """False when verification was skipped on request; then ``verified`` is False too."""
    head_hash: str | None = None
    first_bad_seq: int | None = None
    reason: str | None = None

    @property
    def flagged(self) -> bool:
        """Every figure computed from this chain must carry a flag."""
        return not self.verified

    def describe(self) -> str:
        if self.verified:
            return f"verified: {self.records} records, head {self.head_hash}"
        if not self.checked:
            return "NOT VERIFIED: verification was skipped"
        where = f" at seq {self.first_bad_seq}" if self.first_bad_seq is not None else ""
        return f"VERIFICATION FAILED{where}: {self.reason or 'chain does not verify'}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "verified": self.verified,
            "checked": self.checked,
            "head_hash": self.head_hash,
            "first_bad_seq": self.first_bad_seq,
            "reason": self.reason,
        }


def _require_file(path: Path) -> None:
    if not path.exists():
        raise MissingChainError(f"{path}: no such chain file")
    if path.is_dir():
        raise MissingChainError(f"{path}: is a directory, not a chain file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise MissingChainError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if size == 0:
        raise EmptyChainError(f"{path}: the chain is empty (0 records): nothing to analyse")


def _status(chain: Path, result: Any) -> ChainStatus:
    reason = result.reason
    detail = getattr(result, "detail", None)
    text = None if reason is None else str(getattr(reason, "value", reason))
    if text is not None and detail:
        text = f"{text}: {detail}"
    return ChainStatus(
        path=str(chain),
        records=int(result.records),
        verified=bool(result.intact),
        checked=True,
        head_hash=result.head_hash,
        first_bad_seq=result.first_bad_seq,
        reason=text,
    )


def _judge(chain: Path, status: ChainStatus, allow_unverified: bool) -> None:
    if status.verified and status.records == 0:
        raise EmptyChainError(f"{chain}: the chain is empty (0 records): nothing to analyse")
    if not status.verified and not allow_unverified:
        raise UnverifiedChainError(
            f"{chain}: refusing to analyse an unverifiable chain ({status.describe()}); "
            "pass --allow-unverified to proceed with every figure flagged",
            status,
        )


def open_chain(
    path: str | Path,
    *,
    verify: bool = True,
    allow_unverified: bool = False,
    jobs: int = 1,
    progress: ProgressFn | None = None,
) -> ChainStatus:
    """Check the chain exists and is not empty, then verify it.

    Raises :class:`MissingChainError`, :class:`EmptyChainError`, or :class:`UnverifiedChainError`
    (only when ``allow_unverified`` is false). With ``verify=False`` nothing is checked beyond the
    file, and the status says so (figures are then flagged as unverified).
    """
    chain = Path(path)
    _require_file(chain)
    if not verify:
        return ChainStatus(path=str(chain), records=0, verified=False, checked=False)
    step = None if progress is None else (lambda done: progress(done, 0))
    status = _status(chain, RoutingAuditLog(chain).verify(jobs=jobs, progress=step))
    _judge(chain, status, allow_unverified)
    return status


def stream_payloads(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every record's ``(seq, payload)`` in chain order, via the chain's streaming reader."""
    payloads: Iterator[tuple[int, dict[str, Any]]] = iter_payloads(Path(path))
    return payloads


# ---------------------------------------------------------------------------------------------
# Verification and analysis in one go.

CONCURRENT_MIN_BYTES: Final = 8 << 20
"""Below this size a worker process costs more than it saves: verify first, then read."""

T = TypeVar("T")


def _verify_worker(path: str, jobs: int, conn: Connection) -> None:
    """Runs in a child process: verify and send back what :func:`_status` needs (plain values)."""
    try:
        result = RoutingAuditLog(Path(path)).verify(jobs=jobs)
        reason = result.reason
        conn.send(
            {
                "records": int(result.records),
                "intact": bool(result.intact),
                "head_hash": result.head_hash,
                "first_bad_seq": result.first_bad_seq,
                "reason": None if reason is None else str(getattr(reason, "value", reason)),
                "detail": getattr(result, "detail", None),
            }
        )
    except BaseException as exc:  # report, never hang the parent
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def _mp_context() -> Any:
    """``fork`` when this process has a single thread (cheap, nothing re-imported), else ``spawn``."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def use_concurrent(path: str | Path, concurrent: bool | None) -> bool:
    if concurrent is not None:
        return concurrent
    try:
        size = Path(path).stat().st_size
    except OSError:
        return False
    return size >= CONCURRENT_MIN_BYTES and (os.cpu_count() or 1) >= 2


def analyse_chain(
    path: str | Path,
    consume: Callable[[Iterator[tuple[int, dict[str, Any]]], int], T],
    *,
    verify: bool = True,
    allow_unverified: bool = False,
    jobs: int = 1,
    verify_progress: ProgressFn | None = None,
    concurrent: bool | None = None,
) -> tuple[ChainStatus, T]:
    """Verify the chain and run ``consume(payloads, records_hint)`` over it; return both.

    Serially (verify, then read) for small chains, or with ``concurrent=False``. For large chains on
    a machine with two or more CPUs (or ``concurrent=True``) verification runs in a worker process
    while this one reads: the wall time is then about the longer of the two, not their sum. Either
    way nothing is returned before verification has finished, and an unverifiable chain raises
    :class:`UnverifiedChainError` (unless allowed) whatever the reading produced.
    """
    chain = Path(path)
    if not verify or not use_concurrent(chain, concurrent):
        status = open_chain(
            chain, verify=verify, allow_unverified=allow_unverified, jobs=jobs, progress=verify_progress
        )
        return status, consume(stream_payloads(chain), status.records)
    _require_file(chain)
    context = _mp_context()
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(
        target=_verify_worker, args=(str(chain), jobs, sender), name="route-shadow-verify"
    )
    worker.start()
    sender.close()
    try:
        failure: BaseException | None = None
        value: T | None = None
        try:
            value = consume(stream_payloads(chain), 0)
        except Exception as exc:  # judged below: a broken chain explains a failed read
            failure = exc
        try:
            answer = receiver.recv()
        except EOFError:
            answer = {"error": "the verification worker exited without an answer"}
    finally:
        receiver.close()
        worker.join(timeout=5)
        if worker.is_alive():
            worker.terminate()
            worker.join()
    if "error" in answer:
        raise ChainError(f"{chain}: verification failed to run: {answer['error']}")
    status = _status(chain, SimpleNamespace(**answer))
    _judge(chain, status, allow_unverified)
    if failure is not None:
        if isinstance(failure, ChainError):
            raise failure
        raise ChainError(f"{chain}: cannot read the chain: {failure}") from failure
    assert value is not None
    return status, value
