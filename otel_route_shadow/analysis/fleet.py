"""The fleet: one report over many hosts' logs, each verified against its newest checkpoint first.

A *log* is a chain file with its verifiable log beside it (``<chain>.tlog/checkpoint``). Before a
single record of a log is counted, it is checked against the checkpoint it holds (:func:`prepare_log`,
then :func:`check_logs`):

1. the chain is a regular, non-empty file and its hash links verify (``tlog.check_chain``, one pass);
2. the newest checkpoint (``<chain>.tlog/checkpoint``) is present and readable, and its Merkle root
   is the root of the chain's first ``size`` records (the checkpoint is consistent with the bytes);
3. with verifier keys, a given key's signature on it verifies; with a tlog-policy, its log keys
   authenticate it and the witnesses' cosignatures meet the quorum;
4. with keys, no two checkpoints of one size in its ``checkpoints`` file, both authenticated for its
   origin, have two roots (a fork its own key signed; :func:`signed_fork`).

A pruned log (``<chain>.tlog/pruned``, docs/chain-format.md 14.5) is checked and counted from its
minimum index m, the first record it keeps, as ``verify`` checks it: the chain from m on, the tree's
nodes below m read from the tiles authenticated against the checkpoint's root
(``logstore.check_chain``'s retained tree), and the record at m authenticated from the signed tree
(``logstore.authenticate_first_kept``). Its figures are over ``[m, size)``: the records below m are in
no figure, and the report says from which seq each log is counted.

A log that fails any step is *excluded*: named with the reason, and in no figure. Two local logs with
one origin (one log given twice, or a copy) are refused outright (:class:`FleetError`): the fleet would
count the same spawns twice; a remote naming an origin already named is excluded instead. The figures of an included log are over its first ``size`` records (what
its checkpoint vouches for); records beyond it wait for the next checkpoint.

Each observation of an included log carries its log's origin in
:data:`~otel_route_shadow.analysis.groups.HOST_KEY`, which gives the per-host breakdown (``--by host``,
always first) and keeps the noise baseline per host (two spawns of two hosts are never consecutive).
``report`` counts each log apart (:func:`aggregate_log`, in worker processes: :func:`fleet_jobs`), then
derives the figures once over every log's counts (:func:`combine`); ``whatif`` reads the logs one
after the other into one replay (:func:`~otel_route_shadow.analysis.whatif.replay_payloads`). A log's
cells, decision keys and cohorts' durations are its own, so every count of the fleet is the sum of
the counts of its logs' own reports.
"""

from __future__ import annotations

import os
from base64 import b64encode
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from otel_route_shadow.addresses import HttpUrl, UrlError, parse_http_url
from otel_route_shadow.analysis.evidence import (
    FAILED,
    NOT_VERIFIED,
    PRESENT,
    VERIFIED,
    LogEvidence,
    note_evidence,
    read_checkpoint_note,
    stored_notes,
)
from otel_route_shadow.analysis.figures import Report
from otel_route_shadow.analysis.fleet_logs import EXCLUDED, INCLUDED, Fleet, FleetLog
from otel_route_shadow.analysis.groups import HOST_KEY, GroupSpec
from otel_route_shadow.analysis.records import Repeats
from otel_route_shadow.analysis.replaying import CitedLoader
from otel_route_shadow.analysis.report import Aggregation, new_aggregation
from otel_route_shadow.analysis.source import (
    CONCURRENT_MIN_BYTES,
    ChainAnalysisError,
    ChainStatus,
    Payloads,
    read_payloads,
    require_chain_file,
    stored_bytes,
)
from otel_route_shadow.analysis.usage import CitedUsage
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.chain import live_path
from otel_route_shadow.logstore import LogStore, Pruned, StateError, check_kept_chain
from otel_route_shadow.processes import map_in_workers
from otel_route_shadow.tlog import (
    AuthenticationError,
    LogKey,
    Malformed,
    NoteError,
    WitnessPolicy,
    authenticate,
    checkpoint_of,
    subtrees,
)

__all__ = [
    "CHAIN_SUFFIX",
    "FleetError",
    "PendingLog",
    "ReportSettings",
    "aggregate_log",
    "chain_paths",
    "check_logs",
    "checkpoint_problem",
    "combine",
    "fleet_jobs",
    "fleet_specs",
    "is_remote",
    "prepare_log",
    "refuse_shared_origins",
    "signed_fork",
    "summed_usage",
    "verifier_keys",
    "with_host",
]

CHAIN_SUFFIX: Final = ".jsonl"
"""The chains of a folder are its regular files named ``*.jsonl`` (the folder is not recursed)."""
HOST_SPEC: Final[GroupSpec] = ("host",)


class FleetError(ChainAnalysisError):
    """The fleet cannot be reported at all: no chain given or found, or two logs with one origin."""


def is_remote(location: str) -> bool:
    """True for a log given by URL (``serve``'s ``http://host:port/<origin>/``; the scheme in any case)."""
    return location[:8].lower().startswith(("http://", "https://"))


def chain_paths(inputs: Sequence[str]) -> list[str]:
    """The logs named by ``inputs``: each a chain (its live file, a closed segment or its segments
    folder), a remote log's URL, or a folder whose ``*.jsonl`` regular files (sorted by name) are its
    chains. A path that does not exist, and a URL that cannot be requested (``addresses.parse_http_url``:
    named by its place among ``inputs``, never quoted, for it may hold a credential), is a
    :class:`FleetError`; so is a URL given twice (its log would be counted twice)."""
    found: list[str] = []
    urls: dict[HttpUrl, int] = {}
    for position, named in enumerate(inputs, 1):
        if is_remote(named):
            try:
                url = parse_http_url(named)  # one log however written: host case, default port, last "/"
            except UrlError as exc:
                raise FleetError(f"the remote log given as chain {position}: {exc}") from None
            url = replace(url, path=url.path.rstrip("/"))
            if url in urls:
                raise FleetError(
                    f"the remote logs given as chains {urls[url]} and {position} are one URL: one log given "
                    "twice; refused (the fleet would count its spawns twice)"
                )
            urls[url] = position
        item = named if is_remote(named) else live_path(named)  # a segment or segments folder: its chain
        path = Path(item)
        if path.is_dir():
            chains = sorted(
                str(child)
                for child in path.iterdir()
                if child.name.endswith(CHAIN_SUFFIX) and not child.name.startswith(".")
            )
            if not chains:
                raise FleetError(f"{item}: a folder with no *{CHAIN_SUFFIX} chain in it")
            found.extend(chains)
        elif is_remote(item) or path.exists() or path.is_symlink():
            found.append(item)
        else:
            raise FleetError(f"{item}: no such chain file or folder")
    if not found:
        raise FleetError("no chain given")
    return found


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What checking one chain against one checkpoint found (plain values: it crosses processes)."""

    problem: str | None
    records: int = 0
    end: int = 0
    frontier: tuple[bytes, ...] = ()


def _check_against(
    path: str, note: str, size: int, keys: tuple[str, ...], pruned: Pruned | None = None
) -> _Verdict:
    """Verify the chain at ``path`` and its consistency with the checkpoint ``note`` of ``size``; of a
    ``pruned`` chain, from its minimum index, its first record kept authenticated from the signed tree."""
    try:
        checked, problem = check_kept_chain(path, pruned, [note], keys, check_tile_store=False)
    except (OSError, NoteError) as exc:
        return _Verdict(f"cannot be checked: {exc}")
    if problem is not None:
        return _Verdict(f"its first record kept does not verify: {problem}")
    chain, report = checked.chain, checked.report
    if not chain.intact:
        reason = getattr(chain.reason, "value", chain.reason)
        return _Verdict(f"the chain does not verify: seq {chain.first_bad_seq}: {reason}", chain.records)
    verdict = report.verdicts[0]
    if not verdict.ok:
        bad = "" if verdict.first_bad_seq is None else f", first changed seq {verdict.first_bad_seq}"
        detail = f" ({verdict.detail})" if verdict.detail else ""
        return _Verdict(
            f"the chain is not consistent with its checkpoint of size {size}: "
            f"{verdict.reason.value}{bad}{detail}",
            chain.records,
        )
    end = checked.marked_offset if checked.marked_offset is not None else chain.bytes_verified
    frontier = tuple(checked.tree.node(height, index) for height, index in subtrees(0, size))
    return _Verdict(None, chain.records, end, frontier)


_SIGNATURE: Final = {
    NOT_VERIFIED: "not signed by any given key valid for its size",
    FAILED: "signed by a given key, and that signature does not verify",
}
"""Why a checkpoint's signature excludes its log, by its verification."""


def checkpoint_problem(
    evidence: LogEvidence, verifiers: Sequence[LogKey], policy: WitnessPolicy | None
) -> str | None:
    if evidence.status != PRESENT:
        why = evidence.problem or "no checkpoint beside the chain: nothing vouches for it"
        return f"no usable checkpoint: {why}"
    if (verifiers or policy is not None) and evidence.verification != VERIFIED:
        return f"its checkpoint is {_SIGNATURE.get(evidence.verification, evidence.verification)}"
    witnesses = evidence.witnesses
    if policy is not None and (witnesses is None or not witnesses.met):
        missing = (
            "" if witnesses is None else (witnesses.problem or f"missing {', '.join(witnesses.missing)}")
        )
        return f"its checkpoint's cosignatures do not meet the policy's quorum ({missing})"
    return None


@dataclass(frozen=True, slots=True)
class PendingLog:
    """A log whose checkpoint note is usable (signature and quorum as asked): its chain is next."""

    path: str
    note: str
    evidence: LogEvidence
    root: bytes
    pruned: Pruned | None = None
    """The log's ``pruned`` file (None: never pruned)."""

    @property
    def start(self) -> int:
        """The first record the log keeps (its minimum index; 0 when never pruned)."""
        return 0 if self.pruned is None else self.pruned.min_index

    @property
    def pruned_bytes(self) -> int:
        """The bytes of the pruned segments, as the ``pruned`` file records them."""
        return 0 if self.pruned is None else self.pruned.kept_position()


def prepare_log(
    path: str, verifiers: Sequence[LogKey], policy: WitnessPolicy | None
) -> FleetLog | PendingLog:
    """The checks of a log that read no record: the chain file, its newest checkpoint, its signature
    and quorum (and its ``pruned`` file). An excluded :class:`FleetLog`, or the :class:`PendingLog`
    whose chain is to check."""
    try:
        require_chain_file(Path(path))
        pruned = LogStore(path).read_pruned()
    except ChainAnalysisError as exc:
        return FleetLog(path, EXCLUDED, reason=str(exc))
    except StateError as exc:
        return FleetLog(path, EXCLUDED, reason=f"its pruned-records file cannot be used: {exc}")
    where, note, written_ns, problem = read_checkpoint_note(path)
    notes = stored_notes(path) if note is not None and (verifiers or policy is not None) else []
    evidence = (
        note_evidence(
            where,
            note,
            written_ns,
            0,
            verifiers=verifiers,
            policy=policy,
            stored_notes=notes if policy is not None else (),
        )
        if note is not None
        else LogEvidence(where, "absent" if problem is None else "unreadable", 0, problem=problem)
    )
    refused = checkpoint_problem(evidence, verifiers, policy)
    if refused is None and note is not None and evidence.verification == VERIFIED:
        keys = [*verifiers, *(log.verifier for log in policy.logs)] if policy is not None else verifiers
        refused = signed_fork([note, *notes], evidence.origin, keys)
    if refused is not None or note is None:
        return FleetLog(path, EXCLUDED, origin=evidence.origin, reason=refused, evidence=evidence)
    return PendingLog(path, note, evidence, checkpoint_of(note).root, pruned)


def signed_fork(notes: Sequence[str], origin: str | None, verifiers: Sequence[LogKey]) -> str | None:
    """Why ``notes`` prove a fork of the log ``origin``: two checkpoints of one size with two roots, each
    authenticated by ``verifiers`` (a root by any of its notes); or None. Only sizes noted with two roots
    are authenticated."""
    roots: dict[int, dict[bytes, list[str]]] = {}
    for note in notes:
        try:
            checkpoint = checkpoint_of(note)
        except Malformed:
            continue
        if checkpoint.origin == origin:
            roots.setdefault(checkpoint.size, {}).setdefault(checkpoint.root, []).append(note)
    for size, notes_by_root in sorted(roots.items()):
        if len(notes_by_root) < 2:
            continue
        signed = [
            root for root, of_root in notes_by_root.items() if any(_signed(n, verifiers) for n in of_root)
        ]
        if len(signed) > 1:
            shown = " and ".join(b64encode(root).decode() for root in signed[:2])
            return (
                f"a fork: its checkpoints file holds two checkpoints of {size} records signed by its key, "
                f"with the roots {shown}"
            )
    return None


def _signed(note: str, verifiers: Sequence[LogKey]) -> bool:
    try:
        authenticate(note, verifiers)
    except AuthenticationError:
        return False
    return True


def fleet_jobs(pending: Sequence[PendingLog], jobs: int | None) -> int:
    """The worker processes that check and count ``pending``: ``jobs`` when given; else, as a single
    chain's report chooses to verify in a worker beside its reading (``source.use_concurrent``), one
    per CPU (at most one per log) when the logs' files (``source.stored_bytes``: a cut chain's
    segments too) total ``CONCURRENT_MIN_BYTES`` or more on a machine with two or more CPUs, and none
    (this process) otherwise."""
    if jobs is not None:
        return jobs
    cpus = os.cpu_count() or 1
    if cpus < 2 or sum(stored_bytes(log.path) for log in pending) < CONCURRENT_MIN_BYTES:
        return 1
    return min(cpus, len(pending))


def check_logs(
    pending: Sequence[PendingLog], keys: tuple[str, ...], jobs: int | None = None
) -> list[FleetLog]:
    """Each pending log's chain verified against its checkpoint (in :func:`fleet_jobs` processes)."""
    verdicts = map_in_workers(
        _check_against,
        [(log.path, log.note, log.evidence.size or 0, keys, log.pruned) for log in pending],
        fleet_jobs(pending, jobs),
    )
    return [
        FleetLog(
            log.path,
            INCLUDED if verdict.problem is None else EXCLUDED,
            origin=log.evidence.origin,
            size=log.evidence.size or 0,
            records=verdict.records,
            reason=verdict.problem,
            evidence=replace(log.evidence, chain_records=verdict.records),
            end=verdict.end,
            root=log.root,
            frontier=verdict.frontier,
            start=log.start,
            pruned_bytes=log.pruned_bytes,
        )
        for log, verdict in zip(pending, verdicts, strict=True)
    ]


def verifier_keys(verifiers: Sequence[LogKey], policy: WitnessPolicy | None) -> tuple[str, ...]:
    """The key strings that authenticate the logs' checkpoints: the given ones and the policy's."""
    policy_keys = [str(log.verifier) for log in policy.logs] if policy is not None else []
    return tuple(dict.fromkeys([*map(str, verifiers), *policy_keys]))


def refuse_shared_origins(origins: Sequence[str | None], paths: Sequence[str]) -> None:
    """Raise :class:`FleetError` when two logs name one origin (one log given twice, or a copy)."""
    seen: dict[str, str] = {}
    for origin, path in zip(origins, paths, strict=True):
        if origin is None:
            continue
        if origin in seen:
            raise FleetError(
                f"{seen[origin]} and {path} are both logs of origin {origin!r}: one log given "
                "twice, or a copy; refused (the fleet would count its spawns twice)"
            )
        seen[origin] = path


def with_host(payloads: Payloads, host: str) -> Payloads:
    """The payloads of one log, each observation's attributes carrying ``host`` (:data:`HOST_KEY`)."""
    for seq, payload in payloads:
        attributes = payload.get("attributes") if payload.__class__ is dict else None
        if attributes.__class__ is dict:
            attributes[HOST_KEY] = host
        yield seq, payload


def counted_payloads(log: FleetLog) -> Payloads:
    """The records an included local log counts: from its first record kept to its checkpoint."""
    return read_payloads(log.path, log.end, kept_from=log.start)


def fleet_specs(specs: Sequence[GroupSpec]) -> tuple[GroupSpec, ...]:
    """The breakdowns of a fleet report: per host first, then those asked for."""
    return (HOST_SPEC, *(spec for spec in specs if spec != HOST_SPEC))


@dataclass(frozen=True, slots=True)
class ReportSettings:
    """What every log's aggregation of one fleet report shares (plain values: it crosses processes)."""

    by: tuple[GroupSpec, ...]
    window: TimeWindow
    examples: int
    min_spawns: int

    def aggregation(self, cited_loader: CitedLoader | None = None) -> Aggregation:
        """An empty aggregation with these settings."""
        chain = ChainStatus(path="", records=0, verified=True, checked=True)
        return new_aggregation(
            chain=chain,
            by=self.by,
            window=self.window,
            cited_loader=cited_loader,
            examples=self.examples,
            min_spawns=self.min_spawns,
        )


def aggregate_log(
    log: FleetLog, settings: ReportSettings, cited_loader: CitedLoader | None = None
) -> Aggregation:
    """The aggregation of one included log's counted records, each tagged with its origin."""
    aggregation = settings.aggregation(cited_loader)
    aggregation.feed(with_host(counted_payloads(log), log.origin or log.path))
    aggregation.cube.repeats = Repeats()  # a cache of the pass, not a count: nothing to carry over
    return aggregation


def summed_usage(aggregations: Sequence[Aggregation]) -> CitedUsage | None:
    """The replayed policy usage of the logs' aggregations made with a store, summed (None without)."""
    usages = [aggregation.usage for aggregation in aggregations if aggregation.usage is not None]
    if not usages:
        return None
    for usage in usages[1:]:
        usages[0].absorb(usage)
    return usages[0]


def combine(
    fleet: Fleet,
    aggregations: Sequence[Aggregation],
    settings: ReportSettings,
    usage: CitedUsage | None = None,
) -> Report:
    """One report from the included logs' aggregations, its figures derived once over all of them,
    with the replayed policy usage of a store (its logs' ``CitedUsage`` summed) when one was given."""
    total = settings.aggregation().finish(aggregations)
    if usage is not None:
        total.usage, total.usage_not_replayed = usage.tables(), usage.not_replayed
    total.chain = fleet.status()
    total.fleet = fleet
    return total
