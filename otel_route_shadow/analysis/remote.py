"""A fleet log read over HTTP from ``otel-route-shadow serve`` (C2SP tlog-tiles): its checkpoint, then
its entry bundles, each entry a line of the chain.

A remote log is a base URL (``http://host:port/<origin>/``, as ``serve`` prints it). Its newest
checkpoint (``checkpoint``) is checked as a local log's is (signature by a given key, the policy's
quorum); then its minimum index m' (``min-index``, docs/chain-format.md 14.5; a log that does not
publish one is read from 0) and the entry bundles ``tile/entries/<N>[.p/<W>]`` from m' to its ``size``
are read in order. Each bundle is checked before any of its records is used: the root of a full
bundle's leaf hashes must be the node its level-1 tile holds for it, a partial bundle's leaf hashes the
right edge's level-0 tile, each tile read from the server and authenticated against the checkpoint's
root (``tlog.TileReader``: one level-1 tile per 65,536 records, tiles that end above m', which a pruned
log still serves). So a tile hash or an entry the server altered is caught without trusting it, and
no record it made up is ever counted or held. The records below m' are in no figure. A read that the
log's host pruned under (a 410 Gone) is made once more from its new minimum index.

The checks that read no entry (checkpoint, minimum index) make a :class:`PendingRemote`
(:func:`prepare_remote`); :func:`count_remote` reads it from m', counting each bundle once it is checked
and dropping the counts when a later one is not the log's. A replay cannot drop what it has replayed, so ``whatif``
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
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
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
    TILE_HEIGHT,
    TILE_WIDTH,
    LogKey,
    Malformed,
    Tile,
    TileError,
    TileReader,
    WitnessPolicy,
    checkpoint_of,
    decode_bundle,
    leaf_hash,
    parse_size,
    perfect_root,
    subtrees,
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
CACHED_TILES: Final = 64
"""Tiles a read keeps besides the right edge (as ``serve``'s reader): memory flat in the log's size."""

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
    """The log's minimum index m' (``min-index``; 0 when the server publishes none): one line holding a
    whole number at most ``size``, at an entry bundle's start unless it is ``size``."""
    try:
        text = fetch(base + "min-index", MAX_MIN_INDEX_BYTES)
    except RemoteError as exc:
        if exc.status == NOT_FOUND:
            return 0
        raise RemoteError(f"min-index: {exc}") from None
    number, newline, rest = text.decode("ascii", "replace").partition("\n")  # as ``serve`` writes it
    found = parse_size(number) if newline and not rest else None  # as a checkpoint's size is read
    if found is None:
        raise RemoteError(f"min-index: not a whole number of at most 19 digits on one line ({text[:32]!r})")
    if found > size or (found % TILE_WIDTH and found != size):
        raise RemoteError(
            f"min-index {found}: not an entry bundle's start within the checkpoint's {size} records"
        )
    return found


class _ServedTiles:
    """The tiles of the log at ``base`` (a :class:`~otel_route_shadow.tlog.TileStorage` for
    :class:`~otel_route_shadow.tlog.TileReader`, which authenticates what it reads), each read with
    one bounded request."""

    def __init__(self, base: str, fetch: Fetch) -> None:
        self.base = base
        self.fetch = fetch

    def read_tiles(self, tiles: Sequence[Tile]) -> list[bytes]:
        return [self.fetch(self.base + tile.path, HEADER_BYTES + tile.width * HASH_SIZE) for tile in tiles]

    def save_tiles(self, tiles: Sequence[Tile], data: Sequence[bytes]) -> None:
        raise TypeError("a served log's tiles are read, never written")


def _tree(log: PendingRemote) -> TileReader:
    """The tree the log's checkpoint signs, read from its served tiles."""
    return TileReader(_ServedTiles(log.base, log.fetch), log.size, log.root, cache=CACHED_TILES)


def _signed(tree: TileReader, index: int, leaves: Sequence[bytes]) -> bool:
    """Whether ``leaves`` are entry bundle ``index``'s leaf hashes in ``tree``: a full bundle's root is
    the node of height 8 its level-1 tile holds; a partial one (the right edge) is its level-0 tile."""
    if len(leaves) == TILE_WIDTH:
        return perfect_root(leaves) == tree.node(TILE_HEIGHT, index)
    return b"".join(leaves) == tree.tile(0, index)


def _bundles(base: str, start: int, size: int, fetch: Fetch) -> Iterator[tuple[int, bytes, list[bytes]]]:
    """``(index, bytes, entries)`` of each entry bundle covering ``[start, size)``, from the one
    holding ``start``, each of the width the tree of ``size`` gives it. A daemon thread fetches up to
    :data:`AHEAD` bundles ahead of the one the caller uses (each request bounded by ``fetch``) and stops
    at the first that fails; a caller that stops early, or a process that exits, never waits for the
    request under way."""
    indexes = iter(range(start // TILE_WIDTH, -(-size // TILE_WIDTH)) if start < size else ())
    requests: queue.SimpleQueue[tuple[int, Future[bytes]] | None] = queue.SimpleQueue()

    def get(index: int) -> bytes:
        width = min(TILE_WIDTH, size - index * TILE_WIDTH)
        return fetch(base + bundle_path(index, width), HEADER_BYTES + MAX_BUNDLE_BYTES)

    def fetch_ahead() -> None:
        failed = False
        while (request := requests.get()) is not None:
            index, future = request
            if failed or not future.set_running_or_notify_cancel():
                future.cancel()
                continue
            try:
                future.set_result(get(index))
            except BaseException as exc:  # the caller's to raise
                future.set_exception(exc)
                failed = True

    def ask(index: int) -> tuple[int, Future[bytes]]:
        future: Future[bytes] = Future()
        requests.put((index, future))
        return index, future

    threading.Thread(target=fetch_ahead, name="route-shadow-bundles", daemon=True).start()
    ahead = deque(ask(index) for index in islice(indexes, AHEAD))
    try:
        while ahead:
            index, pending = ahead.popleft()
            data = pending.result()
            ahead.extend(ask(following) for following in islice(indexes, 1))
            try:
                entries = decode_bundle(data)
            except ValueError as exc:
                raise RemoteError(f"entry bundle {index}: not a bundle ({exc})") from None
            width = min(TILE_WIDTH, size - index * TILE_WIDTH)
            if len(entries) != width:
                raise RemoteError(f"entry bundle {index}: {len(entries)} entries, not {width}")
            yield index, data, entries
    finally:
        for _, future in ahead:
            future.cancel()
        requests.put(None)


def _entries(
    log: PendingRemote,
    start: int,
    tree: TileReader,
    add_leaf: Callable[[bytes], None] | None = None,
    add_bundle: Callable[[bytes], None] | None = None,
) -> Iterator[bytes]:
    """The entries ``[start, size)`` of the log, bundle by bundle from the one holding ``start`` (its
    entries below ``start`` passed over), each bundle given only once it is checked against ``tree``
    (:func:`_signed`); each leaf hash passed to ``add_leaf`` and each bundle's SHA-256 to
    ``add_bundle``."""
    for index, data, entries in _bundles(log.base, start, log.size, log.fetch):
        leaves = [leaf_hash(entry) for entry in entries]
        try:
            signed = _signed(tree, index, leaves)
        except TileError as exc:
            raise _forged(exc) from None
        if not signed:
            raise RemoteError(
                f"entry bundle {index}: its entries do not give its checkpoint's root: not the log it signed"
            )
        if add_bundle is not None:
            add_bundle(hashlib.sha256(data).digest())
        first = max(0, start - index * TILE_WIDTH)
        if add_leaf is not None:
            for leaf in leaves[first:]:
                add_leaf(leaf)
        yield from entries[first:]


def _frontier(tree: TileReader, size: int) -> list[bytes]:
    """The roots of the perfect subtrees of the first ``size`` leaves (the right edge), from ``tree``."""
    try:
        return [tree.node(height, index) for height, index in subtrees(0, size)]
    except TileError as exc:
        raise _forged(exc) from None


def _forged(exc: TileError) -> RemoteError:
    return RemoteError(f"its tiles do not give its checkpoint's root ({exc}): not the log it signed")


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
    url: str, fetch: Fetch, verifiers: Sequence[LogKey] = (), policy: WitnessPolicy | None = None
) -> FleetLog | PendingRemote:
    """The checks of a remote log that read no entry: its checkpoint (signature, quorum) and its
    minimum index. An excluded :class:`FleetLog`, or the :class:`PendingRemote` whose entries are next."""
    base = url if url.endswith("/") else url + "/"
    where = base + "checkpoint"
    try:
        note = fetch(where, MAX_NOTE_BYTES).decode("utf-8")
        checkpoint = checkpoint_of(note)
    except RemoteError as exc:
        return FleetLog(url, EXCLUDED, reason=f"checkpoint: {exc}")
    except (UnicodeDecodeError, Malformed) as exc:
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
    add_leaf: Callable[[bytes], None] | None = None,
    add_bundle: Callable[[bytes], None] | None = None,
    tree: TileReader | None = None,
) -> Payloads:
    """``(seq, payload)`` of the log's records ``[start, size)``, each bundle checked first (see
    :func:`_entries`; ``tree``: the log's, else read here), each observation's attributes carrying its
    origin (``fleet.with_host``). Raises :class:`RemoteError`."""
    entries = _entries(log, start, tree or _tree(log), add_leaf, add_bundle)
    return with_host(_payloads(entries, start), log.evidence.origin or log.path)


def _checked(
    log: PendingRemote,
    consume: Callable[[Payloads], object],
    add_bundle: Callable[[bytes], None] | None = None,
) -> FleetLog:
    """The log read once from its minimum index, its records passed to ``consume`` bundle by bundle,
    each once it is checked against the checkpoint's tree: included when every one is. Raises
    :class:`RemoteError` when a request fails or a bundle or tile is not the log's."""
    tree = _tree(log)
    consume(remote_records(log, log.start, add_bundle=add_bundle, tree=tree))
    return log.included(log.start, _frontier(tree, log.size))


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
