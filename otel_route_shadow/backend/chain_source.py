"""The decision chain as the audit reads it: ``(seq, payload)`` pairs, streaming, and its verification.

Thin adapters over :mod:`otel_route_shadow.chain` that turn its errors into one-line
:class:`ChainReadError` messages naming the file. The reader checks shapes, not hashes (a torn tail is
skipped, as the chain's readers do); :func:`verify` is the hash-linkage check the audit reports next
to the backend's findings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson

from otel_route_shadow.chain import (
    ChainBytes,
    ChainFormatError,
    VerifyResult,
    iter_payloads,
    verify_pass,
)
from otel_route_shadow.logstore import Pruned

__all__ = ["ChainReadError", "chain_bytes", "iter_chain_payloads", "iter_payloads_from", "verify"]

_VERIFY_HINT = "; `otel-route-shadow verify` checks the chain itself"


class ChainReadError(Exception):
    """The chain file cannot be read as chain records; the message names the file and line."""


def _open_error(path: Path, exc: OSError) -> ChainReadError:
    if isinstance(exc, FileNotFoundError):
        return ChainReadError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return ChainReadError(f"{path}: is a directory")
    return ChainReadError(f"{path}: cannot read: {exc.strerror or exc}")


def iter_chain_payloads(path: str | os.PathLike[str], kept_from: int = 0) -> Iterator[tuple[int, object]]:
    """Every complete record's ``(seq, payload)`` in file order; quarantine events included; of a pruned
    chain, from its minimum index ``kept_from``."""
    p = Path(path)
    if p.is_dir():
        raise ChainReadError(f"{p}: is a directory")
    try:
        yield from iter_payloads(p, kept_from=kept_from)
    except ChainFormatError as exc:
        raise ChainReadError(f"{exc}{_VERIFY_HINT}") from None
    except OSError as exc:
        raise _open_error(p, exc) from None


def chain_bytes(path: str | os.PathLike[str], pruned: Pruned | None) -> ChainBytes:
    """The chain's bytes by chain-wide position (``chain.ChainBytes``): over a segmented chain's files as
    over one, and of a pruned chain (``pruned``, its ``pruned`` file) from its first file kept, the
    bytes of the segments pruned still counted."""
    if pruned is None:
        return ChainBytes(path)
    return ChainBytes(path, pruned.kept_position(), pruned.min_index)


def iter_payloads_from(
    path: str | os.PathLike[str], offset: int, first_seq: int, pruned: Pruned | None = None
) -> Iterator[tuple[int, object]]:
    """``(seq, payload)`` of the complete records from chain-wide position ``offset`` on (the record of
    ``first_seq`` starts there; :func:`chain_bytes`): the tail an incremental audit reads. Shapes are
    checked as the chain's reader does."""
    p = Path(path)
    seq = first_seq
    try:
        with chain_bytes(p, pruned) as data:
            for _, line in data.lines(offset):
                if line is None:
                    raise ChainReadError(f"{p}: line {seq + 1}: longer than any record{_VERIFY_HINT}")
                yield seq, _payload(p, seq, line)
                seq += 1
    except OSError as exc:
        raise _open_error(p, exc) from None


def _payload(path: Path, seq: int, line: bytes) -> object:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ChainReadError(f"{path}: line {seq + 1}: not a record{_VERIFY_HINT}") from None
    if not isinstance(record, dict) or record.get("seq") != seq or "payload" not in record:
        raise ChainReadError(f"{path}: line {seq + 1}: not record seq {seq}{_VERIFY_HINT}")
    return record["payload"]


def verify(path: str | os.PathLike[str], *, jobs: int = 1, start: int = 0) -> VerifyResult:
    """Hash linkage and record hashes (the chain's own check), from ``start`` (a pruned chain's minimum
    index); every problem inside the file is a verdict."""
    p = Path(path)
    try:
        return verify_pass(p, jobs=jobs, start=start).result
    except OSError as exc:
        raise _open_error(p, exc) from None
