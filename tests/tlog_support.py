"""Helpers shared by the verifiable-log tests (imported as a module; it holds no tests itself)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.logstore import Checkpointer, LogStore, SignedCheckpoint, read_note_file, tlog_dir
from otel_route_shadow.tlog import Signer, partial_tiles

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
    with DecisionChain(chain) as log:
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


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """The tests' oracle for RFC 6962's MTH, written apart from ``tlog.merkle``: pair the nodes of each
    level left to right, an odd last node going up as it is."""
    level = list(hashes)
    if not level:
        return hashlib.sha256(b"").digest()
    while len(level) > 1:
        pairs = [
            hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        level = pairs + level[len(pairs) * 2 :]
    return level[0]


def key_file(path: Path, *signers: Signer) -> str:
    """The key file at ``path`` (created with mode 0600, as ``key generate`` writes one) holding
    ``signers``, one a line, as ``cat new.key >> log.key`` leaves it."""
    if path.exists():
        path.unlink()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write("".join(signer.secret_string() + "\n" for signer in signers))
    return str(path)


def edge_tiles(chain: Path, size: int, prefix: str = "/log/") -> dict[str, bytes]:
    """What ``serve`` answers for the right edge's tiles of the tree of ``size`` (below 65,536 records,
    the level-1 tile of every full bundle among them), by request path under ``prefix``."""
    store = LogStore(str(chain))
    return {prefix + tile.path: store.read_tiles([tile])[0] for tile in partial_tiles(size)}
