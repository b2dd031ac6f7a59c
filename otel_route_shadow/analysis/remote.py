"""A fleet log read over HTTP from ``otel-route-shadow serve`` (C2SP tlog-tiles): its checkpoint, then
its entry bundles, each entry a line of the chain.

A remote log is a base URL (``http://host:port/<origin>/``, as ``serve`` prints it). Its newest
checkpoint (``checkpoint``) is checked as a local log's is (signature by a given key, the policy's
quorum); then its minimum index m' (``min-index``, docs/chain-format.md 14.5; a log that does not
publish one is read from 0) and the entry bundles ``tile/entries/<N>[.p/<W>]`` from m' to its ``size``
are read in order, each entry's leaf hash appended to a compact range that begins at m' with the hashes
of the complete subtrees of ``[0, m')``, read from the served tiles (each from the tile that holds it,
``tlog.node_tile``: tiles that end above m', which a pruned log still serves). The root this gives must
be the checkpoint's root: only then are the records (counted as they arrived) used, so a tile hash or
an entry the server altered is caught without trusting it. The records below m' are in no figure. A
read that the log's host pruned under (a 410 Gone) is made once more from its new minimum index.

The checks that read no entry (checkpoint, minimum index) make a :class:`PendingRemote`
(:func:`prepare_remote`); :func:`count_remote` reads it from m', counting as it reads and dropping the
counts when the root is not the checkpoint's. A replay cannot drop what it has replayed, so ``whatif``
checks the log whole first (:func:`check_remote`, keeping each bundle's SHA-256), then reads it again
(:class:`CheckedRemote`), using a bundle only when it is the very bytes checked. A monitor's rerun
(``analysis.monitor``) reads only from its state's size on (:func:`remote_records`): the bundle that
holds that index, its entries below it passed over, and the bundles after it.

Every request goes through ``fetch`` (the caller's bounded HTTP GET: a deadline for the whole exchange
and a cap on the bytes), so a request to a remote that hangs or drips costs at most its timeout (per
request: a log's read makes one per bundle of its checkpoint's size), and a remote that answers
garbage (not a note, not a bundle, not a tile, not records, another root) is named and excluded. This
module reads nothing from the network itself: the command line passes the transport
(``cli.fleet.remote_fetch``: a kept-alive ``witness.Connection`` per remote).
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any, Final, TypeVar

import orjson

from otel_route_shadow.analysis.evidence import PRESENT, LogEvidence, note_evidence
from otel_route_shadow.analysis.fleet import ReportSettings, checkpoint_problem, with_host
from otel_route_shadow.analysis.fleet_logs import EXCLUDED, INCLUDED, FleetLog
from otel_route_shadow.analysis.report import Aggregation
from otel_route_shadow.analysis.source import Payloads
from otel_route_shadow.logstore import bundle_path
from otel_route_shadow.tlog import (
    HASH_SIZE,
    TILE_WIDTH,
    CheckpointError,
    CompactRange,
    LogKey,
    NoteError,
    Policy,
    decode_bundle,
    leaf_hash,
    node_tile,
    parse_checkpoint,
    parse_note,
    parse_size,
    subtrees,
    tile_node,
)

__all__ = [
    "GONE",
    "MAX_BUNDLE_BYTES",
    "CheckedRemote",
    "Fetch",
    "PendingRemote",
    "RemoteError",
    "check_remote",
    "count_remote",
    "prepare_remote",
    "remote_records",
]

MAX_NOTE_BYTES: Final = 64 * 1024
MAX_BUNDLE_BYTES: Final = TILE_WIDTH * (2 + 65535)
"""A full bundle: 256 entries of at most 65,535 bytes, each after its 2-byte length."""
HEADER_BYTES: Final = 16 * 1024
"""What an answer's status line and headers may take (the transport's byte bound counts them)."""
MAX_MIN_INDEX_BYTES: Final = HEADER_BYTES + 32
"""``min-index``: one decimal number and a newline."""
NOT_FOUND: Final = 404
GONE: Final = 410
AHEAD: Final = 2
"""Entry bundles requested ahead of the one being counted (row 11d, docs/benchmarks.md)."""

_Read = TypeVar("_Read")

Fetch = Callable[[str, int], bytes]
"""``fetch(url, max_bytes)``: the body of a 200 answer to a GET of ``url``, bounded in time and bytes;
any other outcome raises :class:`RemoteError` saying why."""


class RemoteError(Exception):
    """A remote request did not give a usable answer (timeout, unreachable, not 200, too large);
    ``status``: the HTTP status of an answer that was not 200 (None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _min_index(base: str, size: int, fetch: Fetch) -> int:
    """The log's minimum index m' (``min-index``; 0 when the server publishes none): a whole number at
    most ``size``, at an entry bundle's start unless it is ``size``."""
    try:
        text = fetch(base + "min-index", MAX_MIN_INDEX_BYTES)
    except RemoteError as exc:
        if exc.status == NOT_FOUND:
            return 0
        raise RemoteError(f"min-index: {exc}") from None
    found = parse_size(text.strip().decode("ascii", "replace"))  # as a checkpoint's size is read
    if found is None:
        raise RemoteError(f"min-index: not a whole number of at most 19 digits ({text[:32]!r})")
    if found > size or (found % TILE_WIDTH and found != size):
        raise RemoteError(
            f"min-index {found}: not an entry bundle's start within the checkpoint's {size} records"
        )
    return found


def _pruned_range(base: str, size: int, start: int, fetch: Fetch) -> CompactRange:
    """The compact range of the first ``start`` leaves of the tree of ``size``: each complete subtree of
    ``[0, start)`` read from the served tile that holds it (unauthenticated: the caller's root check
    judges them)."""
    tiles: dict[str, bytes] = {}
    nodes: list[bytes] = []
    for height, index in subtrees(0, start):
        tile = node_tile(size, height, index)
        if tile.path not in tiles:
            data = fetch(base + tile.path, HEADER_BYTES + tile.width * HASH_SIZE)
            if len(data) != tile.width * HASH_SIZE:
                raise RemoteError(f"{tile.path}: {len(data)} bytes, not {tile.width} hashes")
            tiles[tile.path] = data
        nodes.append(tile_node(tiles[tile.path], height, index))  # the tile holds it: node_tile
    return CompactRange(start, nodes)


def _bundles(base: str, start: int, size: int, fetch: Fetch) -> Iterator[tuple[int, bytes, list[bytes]]]:
    """``(index, bytes, entries)`` of each entry bundle covering ``[start, size)``, from the one
    holding ``start``, each of the width the tree of ``size`` gives it. One thread fetches up to
    :data:`AHEAD` bundles ahead of the one the caller uses (each request bounded by ``fetch``); a
    caller that stops early leaves at most the request under way to finish on its own."""
    indexes = iter(range(start // TILE_WIDTH, -(-size // TILE_WIDTH)) if start < size else ())

    def get(index: int) -> bytes:
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        return fetch(base + bundle_path(index, width), HEADER_BYTES + MAX_BUNDLE_BYTES)

    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="route-shadow-bundles")
    try:
        ahead = deque((index, reader.submit(get, index)) for index in islice(indexes, AHEAD))
        while ahead:
            index, pending = ahead.popleft()
            data = pending.result()
            for following in islice(indexes, 1):
                ahead.append((following, reader.submit(get, following)))
            try:
                entries = decode_bundle(data)
            except ValueError as exc:
                raise RemoteError(f"entry bundle {index}: not a bundle ({exc})") from None
            width = min(TILE_WIDTH, size - index * TILE_WIDTH)
            if len(entries) != width:
                raise RemoteError(f"entry bundle {index}: {len(entries)} entries, not {width}")
            yield index, data, entries
    finally:
        reader.shutdown(wait=False, cancel_futures=True)


def _entries(
    base: str,
    start: int,
    size: int,
    fetch: Fetch,
    add_leaf: Callable[[bytes], None],
    add_bundle: Callable[[bytes], None] | None = None,
) -> Iterator[bytes]:
    """The entries ``[start, size)`` of the log at ``base``, bundle by bundle from the one holding
    ``start`` (its entries below ``start`` passed over), each leaf hash passed to ``add_leaf`` and each
    bundle's SHA-256 to ``add_bundle``."""
    for index, data, entries in _bundles(base, start, size, fetch):
        if add_bundle is not None:
            add_bundle(hashlib.sha256(data).digest())
        for entry in entries[max(0, start - index * TILE_WIDTH) :]:
            add_leaf(leaf_hash(entry))
            yield entry


def _entries_again(
    base: str, start: int, size: int, fetch: Fetch, digests: Sequence[bytes]
) -> Iterator[bytes]:
    """The entries ``[start, size)`` read a second time: each bundle must be the very bytes whose
    SHA-256 the first read kept (``digests``, in order)."""
    for (index, data, entries), digest in zip(_bundles(base, start, size, fetch), digests, strict=True):
        if hashlib.sha256(data).digest() != digest:
            raise RemoteError(f"entry bundle {index}: not the bytes it served when the log was checked")
        yield from entries[max(0, start - index * TILE_WIDTH) :]


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


def _payloads(entries: Iterator[bytes], start: int) -> Iterator[tuple[int, Any]]:
    for number, entry in enumerate(entries, start=start):
        found = seq_and_payload(entry)
        if found is None:
            raise RemoteError(f"entry {number} is not a chain record")
        yield found


@dataclass(frozen=True, slots=True)
class PendingRemote:
    """A remote log whose checkpoint is usable (signature and quorum as asked) and whose minimum index
    was read: its entries are next, through ``fetch``."""

    path: str
    """The log's URL as given."""
    evidence: LogEvidence
    root: bytes
    start: int
    """The served minimum index m' (0 when the log was never pruned)."""
    fetch: Fetch
    note: str = ""
    """The checkpoint note, as served."""

    @property
    def base(self) -> str:
        return self.path if self.path.endswith("/") else self.path + "/"

    @property
    def size(self) -> int:
        return self.evidence.size or 0

    def excluded(self, reason: str) -> FleetLog:
        return FleetLog(
            self.path, EXCLUDED, origin=self.evidence.origin, reason=reason, evidence=self.evidence
        )

    def included(self, start: int, frontier: Sequence[bytes]) -> FleetLog:
        """The log counted from seq ``start`` to its checkpoint (``frontier``: the roots of the perfect
        subtrees of its first ``size`` records)."""
        return FleetLog(
            self.path,
            INCLUDED,
            origin=self.evidence.origin,
            size=self.size,
            records=self.size,
            evidence=replace(self.evidence, chain_records=self.size),
            root=self.root,
            frontier=tuple(frontier),
            start=start,
        )


def prepare_remote(
    url: str, fetch: Fetch, verifiers: Sequence[LogKey] = (), policy: Policy | None = None
) -> FleetLog | PendingRemote:
    """The checks of a remote log that read no entry: its checkpoint (signature, quorum) and its
    minimum index. An excluded :class:`FleetLog`, or the :class:`PendingRemote` whose entries are next."""
    base = url if url.endswith("/") else url + "/"
    where = base + "checkpoint"
    try:
        note = fetch(where, MAX_NOTE_BYTES).decode("utf-8")
        checkpoint = parse_checkpoint(parse_note(note).text)
    except RemoteError as exc:
        return FleetLog(url, EXCLUDED, reason=f"checkpoint: {exc}")
    except (UnicodeDecodeError, NoteError, CheckpointError) as exc:
        return FleetLog(url, EXCLUDED, reason=f"checkpoint: not a checkpoint note ({exc})")
    now = time.time_ns()
    evidence = note_evidence(where, note, now, 0, verifiers=verifiers, policy=policy, now_ns=now)
    evidence = replace(evidence, written_ns=None, age_ns=None)  # a remote file's time is not known here
    pending = PendingRemote(url, evidence, checkpoint.root, 0, fetch, note)
    refused = checkpoint_problem(evidence, verifiers, policy)
    if refused is not None or evidence.status != PRESENT:
        return pending.excluded(refused or "no usable checkpoint")
    try:
        return replace(pending, start=_min_index(base, checkpoint.size, fetch))
    except RemoteError as exc:
        return pending.excluded(str(exc))


def remote_records(
    log: PendingRemote,
    start: int,
    add_leaf: Callable[[bytes], None],
    add_bundle: Callable[[bytes], None] | None = None,
) -> Payloads:
    """``(seq, payload)`` of the log's records ``[start, size)`` (see :func:`_entries`), each
    observation's attributes carrying its origin (``fleet.with_host``). Raises :class:`RemoteError`."""
    entries = _entries(log.base, start, log.size, log.fetch, add_leaf, add_bundle)
    return with_host(_payloads(entries, start), log.evidence.origin or log.path)


def _checked(
    log: PendingRemote,
    consume: Callable[[Payloads], object],
    add_bundle: Callable[[bytes], None] | None = None,
) -> FleetLog:
    """The log read once from its minimum index, its records passed to ``consume``: included when the
    leaves (with the served tiles' hashes below the minimum index) give its checkpoint's root. Raises
    :class:`RemoteError` when a request fails."""
    tree = _pruned_range(log.base, log.size, log.start, log.fetch)
    consume(remote_records(log, log.start, tree.append, add_bundle))
    if tree.root() != log.root:
        pruned = f" with the served tiles' hashes of its records below {log.start}" if log.start else ""
        return log.excluded(f"its entries{pruned} do not give its checkpoint's root: not the log it signed")
    return log.included(log.start, tree.nodes)


def _risen(log: PendingRemote) -> int | None:
    """The log's minimum index now, when its host's retention raised it above ``log.start`` within the
    checkpoint's tree since it was read; None when it did not, or cannot be read."""
    try:
        start = _min_index(log.base, log.size, log.fetch)
    except RemoteError:
        return None
    return start if start > log.start else None


def _read(log: PendingRemote, read: Callable[[PendingRemote], _Read]) -> FleetLog | _Read:
    """``read(log)``; once more from the log's new minimum index when its host pruned what the read was
    to fetch meanwhile (a 410 Gone: :func:`_risen`). The log excluded, saying why, when a request fails."""
    try:
        return read(log)
    except RemoteError as exc:
        start = _risen(log) if exc.status == GONE else None
        if start is None:
            return log.excluded(str(exc))
    try:
        return read(replace(log, start=start))
    except RemoteError as again:
        return log.excluded(str(again))


def count_remote(log: PendingRemote, settings: ReportSettings) -> tuple[FleetLog, Aggregation | None]:
    """The remote log counted from its minimum index (the aggregation is None when it is excluded)."""

    def read(log: PendingRemote) -> tuple[FleetLog, Aggregation]:
        aggregation = settings.aggregation()  # a read again counts from nothing
        return _checked(log, aggregation.feed), aggregation

    found = _read(log, read)
    if isinstance(found, FleetLog):
        return found, None
    checked, aggregation = found
    return checked, aggregation if checked.included else None


@dataclass(frozen=True, slots=True)
class CheckedRemote:
    """A remote log read once and found to be the log its checkpoint signs, with the SHA-256 of each
    entry bundle it served: :meth:`payloads` reads it again, bundle by bundle, and uses a bundle only
    when it is those very bytes."""

    log: PendingRemote
    digests: tuple[bytes, ...]

    def payloads(self) -> Payloads:
        """``(seq, payload)`` of the records ``[start, size)`` again, each tagged with the log's origin.
        Raises :class:`RemoteError` when a bundle is not what the check read, or cannot be read."""
        log = self.log
        entries = _entries_again(log.base, log.start, log.size, log.fetch, self.digests)
        return with_host(_payloads(entries, log.start), log.evidence.origin or log.path)

    def since_pruned(self) -> CheckedRemote | None:
        """This log from its host's minimum index now, when a prune since the check raised it within the
        checkpoint's tree (the bundles below it left out); None when it did not rise or cannot be read."""
        log = self.log
        start = _risen(log)
        if start is None:
            return None
        kept = -(-log.size // TILE_WIDTH) - start // TILE_WIDTH if start < log.size else 0
        return CheckedRemote(replace(log, start=start), self.digests[len(self.digests) - kept :])


def check_remote(log: PendingRemote) -> tuple[FleetLog, CheckedRemote | None]:
    """The remote log checked as :func:`count_remote` checks it, every record read and none counted,
    for a caller that uses its records only once the whole log is known good (``whatif``): the
    :class:`CheckedRemote` that reads them again is None when the log is excluded."""

    def read(log: PendingRemote) -> tuple[FleetLog, CheckedRemote]:
        digests: list[bytes] = []
        checked = _checked(log, _drain, digests.append)
        return checked, CheckedRemote(log, tuple(digests))  # this read's log: its start

    found = _read(log, read)
    if isinstance(found, FleetLog):
        return found, None
    checked, again = found
    return checked, again if checked.included else None


def _drain(payloads: Payloads) -> None:
    for _ in payloads:
        pass
