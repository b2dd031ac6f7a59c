"""What a pruned chain keeps (docs/chain-format.md 14.4-14.5): its minimum index m, as the log's
``pruned`` file says, and its first record kept, authenticated from the signed tree
(``logstore.authenticate_first_kept``) when keys are given, never from its own ``prev_hash``.

Every command that reads a chain's records reads them from m on and says, in these words, what was
pruned, when and by which command, and that its figures start at seq m.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from otel_route_shadow.logstore import LogStore, Pruned, PrunedError, authenticate_first_kept

__all__ = ["Kept", "kept_records"]


@dataclass(frozen=True, slots=True)
class Kept:
    """A pruned chain's records from its minimum index on: the ``pruned`` file, and its first record
    kept authenticated from the signed tree (``proven``, a sentence), or why not (``problem``);
    neither when no key was given."""

    pruned: Pruned
    proven: str | None = None
    problem: str | None = None

    @property
    def start(self) -> int:
        """The first record kept: the chain's minimum index."""
        return self.pruned.min_index

    def lines(self) -> list[str]:
        """What was pruned, and how the first record kept was authenticated (or that it was not)."""
        lines = [self.pruned.describe()]
        if self.proven is not None:
            lines.append(self.proven)
        elif self.problem is None:
            lines.append(f"seq {self.start}, the first record kept, not authenticated (give --key)")
        return lines

    def sentence(self) -> str:
        """One line for a report's chain status: its figures start at seq m, and why."""
        return f"figures start at seq {self.start}, the first record kept: " + "; ".join(self.lines())

    def as_dict(self) -> dict[str, object]:
        return {
            "min_index": self.pruned.min_index,
            "time": self.pruned.time,
            "command": self.pruned.command,
            "segments": len(self.pruned.segments),
            "describe": self.pruned.describe(),
            "first_kept": self.proven,
            "problem": self.problem,
        }


def kept_records(
    path: str | os.PathLike[str], pruned: Pruned, notes: Sequence[str] = (), keys: Sequence[str] = ()
) -> Kept:
    """The chain at ``path`` pruned below ``pruned.min_index``; with ``keys``, its first record kept
    authenticated against the newest of ``notes`` they authenticate."""
    if not keys:
        return Kept(pruned)
    try:
        return Kept(pruned, proven=authenticate_first_kept(LogStore(path), pruned, notes, keys))
    except PrunedError as exc:
        return Kept(pruned, problem=str(exc))
