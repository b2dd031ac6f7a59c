"""The logs of a fleet report as the report names them: each :class:`FleetLog` included (verified
against its newest checkpoint) or excluded with its reason, the :class:`Fleet` of them, and what a
monitor's state file did (:class:`Followed`). Checking and counting them is
:mod:`~otel_route_shadow.analysis.fleet`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from otel_route_shadow.analysis.evidence import LogEvidence
from otel_route_shadow.analysis.source import ChainStatus

__all__ = ["EXCLUDED", "INCLUDED", "Fleet", "FleetLog", "Followed"]

INCLUDED: Final = "included"
EXCLUDED: Final = "excluded"


@dataclass(frozen=True, slots=True)
class FleetLog:
    """One log of the fleet: included (verified against its newest checkpoint) or excluded, and why."""

    path: str
    status: str
    origin: str | None = None
    size: int = 0
    """The records counted: the size of the checkpoint the log was verified against."""
    records: int = 0
    """The chain's records (those beyond ``size`` are not counted)."""
    reason: str | None = None
    evidence: LogEvidence | None = None
    end: int = 0
    """The byte offset where the log's record ``size`` begins: reading stops there."""
    root: bytes = b""
    """The checkpoint's root hash (of the first ``size`` records)."""
    frontier: tuple[bytes, ...] = ()
    """The roots of the perfect subtrees of the first ``size`` records (``tlog.CompactRange``)."""
    start: int = 0
    """The first seq counted: 0, or of a pruned log its minimum index (the first record kept of a
    local log, the served minimum index of a remote one); the records below it are in no figure."""
    pruned_bytes: int = 0
    """The bytes of a local log's pruned segments, as its ``pruned`` file records them (a monitor's
    state counts positions with them, so that a later prune does not move them)."""

    @property
    def included(self) -> bool:
        return self.status == INCLUDED

    @property
    def counted(self) -> int:
        """The records counted: those in ``[start, size)`` of an included log."""
        return max(0, self.size - self.start) if self.included else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "origin": self.origin,
            "records_counted": self.counted,
            "from_seq": self.start,
            "chain_records": self.records,
            "reason": self.reason,
            "evidence": None if self.evidence is None else self.evidence.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class Followed:
    """With a monitor's state file: which logs were extended from it and which read in full, and why."""

    extended: tuple[str, ...]
    rebuilt: tuple[str, ...]
    warnings: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "extended": list(self.extended),
            "rebuilt": list(self.rebuilt),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class Fleet:
    """The logs of one fleet report, in the order given."""

    logs: tuple[FleetLog, ...] = ()
    keys_given: bool = False
    policy_given: bool = False
    followed: Followed | None = None
    """Set when the fleet was followed from a state file (``analysis.monitor``)."""

    @property
    def included(self) -> list[FleetLog]:
        return [log for log in self.logs if log.included]

    @property
    def excluded(self) -> list[FleetLog]:
        return [log for log in self.logs if not log.included]

    @property
    def pruned(self) -> list[FleetLog]:
        """The included logs counted from a minimum index above 0 (pruned: their records below it are
        in no figure)."""
        return [log for log in self.included if log.start > 0]

    def status(self) -> ChainStatus:
        """The fleet as the report's chain: verified, its records the sum of the counted ones."""
        counted = sum(log.counted for log in self.included)
        name = f"fleet of {len(self.logs)} logs ({len(self.excluded)} excluded)"
        return ChainStatus(path=name, records=counted, verified=True, checked=True)

    def as_dict(self) -> dict[str, Any]:
        return {
            "logs": len(self.logs),
            "included": len(self.included),
            "excluded": len(self.excluded),
            "pruned": len(self.pruned),
            "records_counted": sum(log.counted for log in self.included),
            "checked_with": self.checked_with(),
            "hosts": [log.as_dict() for log in self.logs],
            "state": None if self.followed is None else self.followed.as_dict(),
        }

    def checked_with(self) -> str:
        """What each included log's checkpoint was checked with."""
        if self.policy_given:
            return (
                "checkpoint consistent with the chain, its log signature and its witnesses' quorum verified"
            )
        if self.keys_given:
            return "checkpoint consistent with the chain, its signature verified by a given key"
        return "checkpoint consistent with the chain; its signature not verified (no --key or --witness-policy given)"
