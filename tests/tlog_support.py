"""Helpers shared by the verifiable-log tests (imported as a module; it holds no tests itself)."""

from __future__ import annotations

from pathlib import Path

from otel_route_shadow.chain import RoutingAuditLog
from otel_route_shadow.logstore import Checkpointer, SignedCheckpoint, read_note_file, tlog_dir

ORIGIN = "example.com/route-shadow/test"


def append(
    chain: Path,
    count: int,
    checkpointer: Checkpointer | None = None,
    *,
    every: int = 1,
    start: int = 0,
) -> list[SignedCheckpoint]:
    """Append ``count`` records (``n`` from ``start``); with a checkpointer, checkpoint after every
    ``every`` records. Returns the checkpoints made."""
    made: list[SignedCheckpoint] = []
    with RoutingAuditLog(chain) as log:
        for n in range(start, start + count):
            log.append({"kind": "route-shadow", "n": n})
            if checkpointer is not None and (n - start + 1) % every == 0:
                result = checkpointer.checkpoint()
                if result is not None:
                    made.append(result)
    return made


def lines(chain: Path) -> list[bytes]:
    """The chain's complete lines, without their LF."""
    return chain.read_bytes().split(b"\n")[:-1]


def notes(chain: Path) -> list[str]:
    """The notes of the chain's ``checkpoints`` file."""
    return read_note_file(Path(tlog_dir(chain)) / "checkpoints").notes


def log_dir(chain: Path) -> Path:
    return Path(tlog_dir(chain))
