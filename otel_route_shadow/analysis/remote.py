"""A fleet log read over HTTP from ``otel-route-shadow serve`` (C2SP tlog-tiles): its checkpoint, then
its entry bundles, each entry a line of the chain.

A remote log is a base URL (``http://host:port/<origin>/``, as ``serve`` prints it). Its newest
checkpoint (``checkpoint``) is checked as a local log's is (signature by a given key, the policy's
quorum); then the entry bundles ``tile/entries/<N>[.p/<W>]`` covering its ``size`` records are read in
order, each entry's leaf hash appended to a compact range, and the root this gives must be the
checkpoint's root: only then are the records (counted as they arrived) used. The server's own
checks are not relied on. Every request goes through ``fetch`` (the caller's bounded HTTP GET: a
deadline for the whole exchange and a cap on the bytes), so a remote that hangs or drips costs at most
its timeout, and one that answers garbage (not a note, not a bundle, not records, another root) is
named and excluded. This module reads nothing from the network itself: the command line passes the
transport (``witness.http_get``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Final

import orjson

from otel_route_shadow.analysis.evidence import PRESENT, LogEvidence, note_evidence
from otel_route_shadow.analysis.fleet import (
    EXCLUDED,
    INCLUDED,
    FleetLog,
    ReportSettings,
    checkpoint_problem,
    with_host,
)
from otel_route_shadow.analysis.report import Aggregation
from otel_route_shadow.logstore import bundle_path
from otel_route_shadow.tlog import (
    CheckpointError,
    CompactRange,
    NoteError,
    Policy,
    Verifier,
    decode_bundle,
    leaf_hash,
    parse_checkpoint,
    parse_note,
)

__all__ = ["MAX_BUNDLE_BYTES", "MAX_NOTE_BYTES", "Fetch", "RemoteError", "read_remote"]

TILE_WIDTH: Final = 256
"""Entries in a full bundle (C2SP tlog-tiles)."""
MAX_NOTE_BYTES: Final = 64 * 1024
MAX_BUNDLE_BYTES: Final = TILE_WIDTH * (2 + 65535)
"""A full bundle: 256 entries of at most 65,535 bytes, each after its 2-byte length."""

Fetch = Callable[[str, int], bytes]
"""``fetch(url, max_bytes)``: the body of a 200 answer to a GET of ``url``, bounded in time and bytes;
any other outcome raises :class:`RemoteError` saying why."""


class RemoteError(Exception):
    """A remote request did not give a usable answer (timeout, unreachable, not 200, too large)."""


def _entries(base: str, size: int, fetch: Fetch, tree: CompactRange) -> Iterator[bytes]:
    """The ``size`` entries of the log at ``base``, bundle by bundle, each leaf appended to ``tree``."""
    for index in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        data = fetch(base + bundle_path(index, width), MAX_BUNDLE_BYTES)
        try:
            entries = decode_bundle(data)
        except ValueError as exc:
            raise RemoteError(f"entry bundle {index}: not a bundle ({exc})") from None
        if len(entries) != width:
            raise RemoteError(f"entry bundle {index}: {len(entries)} entries, not {width}")
        for entry in entries:
            tree.append(leaf_hash(entry))
            yield entry


def seq_and_payload(line: bytes) -> tuple[int, dict[str, Any]] | None:
    """The ``seq`` and ``payload`` of one chain record's line, or None when it is not a record."""
    try:
        record = orjson.loads(line)
        seq, payload = record["seq"], record["payload"]
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
        return None
    if payload.__class__ is not dict or seq.__class__ is not int:
        return None
    return seq, payload


def _payloads(entries: Iterator[bytes]) -> Iterator[tuple[int, Any]]:
    for number, entry in enumerate(entries):
        found = seq_and_payload(entry)
        if found is None:
            raise RemoteError(f"entry {number} is not a chain record")
        yield found


def read_remote(
    url: str,
    fetch: Fetch,
    settings: ReportSettings,
    *,
    verifiers: tuple[Verifier, ...] = (),
    policy: Policy | None = None,
) -> tuple[FleetLog, Aggregation | None]:
    """The remote log at ``url`` checked and counted (the aggregation is None when it is excluded)."""
    base = url if url.endswith("/") else url + "/"
    where = base + "checkpoint"

    def excluded(reason: str, evidence: LogEvidence | None = None) -> tuple[FleetLog, None]:
        origin = None if evidence is None else evidence.origin
        return FleetLog(url, EXCLUDED, origin=origin, reason=reason, evidence=evidence), None

    try:
        note = fetch(where, MAX_NOTE_BYTES).decode("utf-8")
        checkpoint = parse_checkpoint(parse_note(note).text)
    except RemoteError as exc:
        return excluded(f"checkpoint: {exc}")
    except (UnicodeDecodeError, NoteError, CheckpointError) as exc:
        return excluded(f"checkpoint: not a checkpoint note ({exc})")
    now = time.time_ns()
    evidence = note_evidence(where, note, now, 0, verifiers=verifiers, policy=policy, now_ns=now)
    evidence = replace(evidence, written_ns=None, age_ns=None)  # a remote file's time is not known here
    refused = checkpoint_problem(evidence, verifiers, policy)
    if refused is not None or evidence.status != PRESENT:
        return excluded(refused or "no usable checkpoint", evidence)
    tree = CompactRange()
    aggregation = settings.aggregation()
    try:
        aggregation.feed(
            with_host(_payloads(_entries(base, checkpoint.size, fetch, tree)), checkpoint.origin)
        )
    except RemoteError as exc:
        return excluded(str(exc), evidence)
    if tree.root() != checkpoint.root:
        return excluded("its entries do not give its checkpoint's root: not the log it signed", evidence)
    log = FleetLog(
        url,
        INCLUDED,
        origin=checkpoint.origin,
        size=checkpoint.size,
        records=checkpoint.size,
        evidence=replace(evidence, chain_records=checkpoint.size),
        root=checkpoint.root,
    )
    return log, aggregation
