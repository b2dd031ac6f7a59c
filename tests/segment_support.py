"""Segmented chains made by hand from the spec (docs/chain-format.md section 14), for the readers' tests.

A cut as the spec lays it down: the records so far (``X.jsonl``) are hard-linked into
``X.jsonl.segments/<first seq>.jsonl``, and the new live file's first record is a ``segment-anchor``
appended through a fresh ``DecisionChain`` whose head is the previous record (a file holding that one
line; the line is dropped afterwards). With a signer, the checkpoint of size b is signed by the
``Checkpointer`` before the cut, and the anchor carries it: until the writer reads segments, it signs
over a copy of the whole chain as one file (:func:`whole_copy`), whose tiles are the segmented chain's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from otel_route_shadow.chain import ANCHOR_KIND, SEGMENTS_SUFFIX, DecisionChain, segment_name
from otel_route_shadow.logstore import Checkpointer
from otel_route_shadow.tlog import Signer

Payload = Callable[[int], dict[str, Any]]


def decision(i: int) -> dict[str, Any]:
    return {"kind": "route-shadow", "n": i, "agent": f"agent-{i % 3}", "note": "x" * (i % 4) * 30}


def segments_folder(chain: Path) -> Path:
    return Path(str(chain) + SEGMENTS_SUFFIX)


def append(chain: Path, start: int, count: int, payload: Payload = decision) -> None:
    """Append ``count`` records (payloads ``start`` .. ``start + count - 1``) to the live file."""
    with DecisionChain(chain) as log:
        for i in range(start, start + count):
            log.append(payload(i))


def cut(
    chain: Path,
    signer: Signer | None = None,
    origin: str = "",
    tamper: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Close the live file as a segment and start a new live file with its anchor; return the anchor's
    payload. ``tamper`` changes the anchor before it is written (a writer that names a wrong field)."""
    lines = chain.read_bytes().splitlines(keepends=True)
    first = orjson.loads(lines[0])["seq"]
    last = orjson.loads(lines[-1])
    note = None
    if signer is not None:
        note = sign(chain, signer, origin)
    data = chain.read_bytes()
    anchor = {
        "kind": ANCHOR_KIND,
        "segment": segment_name(first),
        "first_seq": first,
        "last_seq": last["seq"],
        "last_record_hash": last["record_hash"],
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "checkpoint": note,
    }
    if tamper is not None:
        anchor = tamper(anchor)
    with tempfile.TemporaryDirectory() as directory:
        fresh = Path(directory) / "live.jsonl"
        fresh.write_bytes(lines[-1])
        with DecisionChain(fresh) as log:
            written = log.append(anchor)
        assert written.payload == anchor, "the anchor was written as given"
        anchor_line = fresh.read_bytes().splitlines(keepends=True)[1]
        temporary = chain.with_name(chain.name + ".cut-tmp")
        temporary.write_bytes(anchor_line)
        folder = segments_folder(chain)
        folder.mkdir(exist_ok=True)
        os.link(chain, folder / segment_name(first))
        os.replace(temporary, chain)
    return anchor


def whole_copy(chain: Path) -> Path:
    """Where the chain's lines are kept as one file, for the Checkpointer to sign over."""
    return chain.parent / (chain.name + ".whole") / chain.name


def sign(chain: Path, signer: Signer, origin: str) -> str:
    """A checkpoint of the whole chain as it stands, signed by the Checkpointer over :func:`whole_copy`
    (its tiles copied to the chain's own ``.tlog`` folder); return the note."""
    whole = whole_copy(chain)
    whole.parent.mkdir(exist_ok=True)
    whole.write_bytes(b"".join(chain_lines(chain)))
    made = Checkpointer(str(whole), origin, signer).checkpoint()
    assert made is not None and made.size == len(chain_lines(chain))
    shutil.copytree(str(whole) + ".tlog", str(chain) + ".tlog", dirs_exist_ok=True)
    return made.note


def segmented_chain(
    chain: Path,
    sizes: list[int],
    payload: Payload = decision,
    signer: Signer | None = None,
    origin: str = "",
    tamper: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[bytes]:
    """A chain cut after each of ``sizes[:-1]`` records of its own (the anchor counts in the segment it
    begins), the last size in the live file; return every line of the chain in order."""
    written = 0
    for index, size in enumerate(sizes):
        own = size - (1 if index else 0)
        append(chain, written, own, payload)
        written += own
        if index < len(sizes) - 1:
            cut(chain, signer, origin, tamper)
    return chain_lines(chain)


def chain_lines(chain: Path) -> list[bytes]:
    """Every line of the chain's files, in order."""
    folder = segments_folder(chain)
    files = sorted(folder.iterdir()) if folder.exists() else []
    return [line for path in [*files, chain] for line in path.read_bytes().splitlines(keepends=True)]


def prune(chain: Path, min_index: int, command: str = "otel-route-shadow prune --below") -> dict[str, Any]:
    """Prune the chain below ``min_index`` (a segment boundary) as the spec lays it down: every closed
    segment below it removed, and ``<chain>.tlog/pruned`` written; return what the file says."""
    folder = segments_folder(chain)
    segments = []
    names = sorted(folder.iterdir())
    for index, path in enumerate(names):
        first = int(path.name[:16])
        if first >= min_index:
            break
        end = int(names[index + 1].name[:16]) if index + 1 < len(names) else min_index
        data = path.read_bytes()
        segments.append(
            {
                "name": path.name,
                "first": first,
                "end": end,
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "archive": None,
            }
        )
        path.unlink()
    pruned = {
        "min_index": min_index,
        "time": 1_790_000_000,
        "command": f"{command} {min_index}",
        "segments": segments,
    }
    (Path(str(chain) + ".tlog") / "pruned").write_bytes(orjson.dumps(pruned))
    return pruned
