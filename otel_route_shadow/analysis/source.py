"""Reading a decision chain for analysis: existence, emptiness, verification, then a stream.

Every analysis command goes through :func:`open_chain` first, so a missing chain, an empty chain and
an unverifiable chain are refused in one place and in the same words. Streaming is the chain's own
``iter_payloads`` (one ``orjson`` parse per line, no pydantic), so memory stays constant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_route_shadow.chain import RoutingAuditLog, iter_payloads

__all__ = [
    "ChainError",
    "ChainStatus",
    "EmptyChainError",
    "MissingChainError",
    "UnverifiedChainError",
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
    result = RoutingAuditLog(chain).verify(jobs=jobs, progress=progress)
    status = ChainStatus(
        path=str(chain),
        records=int(result.records),
        verified=bool(result.intact),
        checked=True,
        head_hash=result.head_hash,
        first_bad_seq=result.first_bad_seq,
        reason=result.reason,
    )
    if status.verified and status.records == 0:
        raise EmptyChainError(f"{chain}: the chain is empty (0 records): nothing to analyse")
    if not status.verified and not allow_unverified:
        raise UnverifiedChainError(
            f"{chain}: refusing to analyse an unverifiable chain ({status.describe()}); "
            "pass --allow-unverified to proceed with every figure flagged",
            status,
        )
    return status


def stream_payloads(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every record's ``(seq, payload)`` in chain order, via the chain's streaming reader."""
    payloads: Iterator[tuple[int, dict[str, Any]]] = iter_payloads(Path(path))
    return payloads
