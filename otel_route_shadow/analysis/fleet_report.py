"""``report`` and ``whatif`` over a fleet: local chains (``analysis.fleet``) and remote logs read over
``serve`` (``analysis.remote``), each checked against its newest checkpoint, combined into one result.
See ``docs/reports.md``, "Fleet"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from otel_route_shadow.analysis.figures import Report
from otel_route_shadow.analysis.fleet import (
    FleetError,
    PendingLog,
    ReportSettings,
    chain_paths,
    check_logs,
    combine,
    counted_payloads,
    fleet_specs,
    is_remote,
    prepare_log,
    refuse_shared_origins,
    summed_usage,
    verifier_keys,
    with_host,
)
from otel_route_shadow.analysis.fleet_logs import EXCLUDED, Fleet, FleetLog
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import GroupSpec, as_specs
from otel_route_shadow.analysis.log_pass import count_logs
from otel_route_shadow.analysis.remote import (
    GONE,
    CheckedRemote,
    Fetch,
    PendingRemote,
    RemoteError,
    check_remote,
    count_remote,
    prepare_remote,
)
from otel_route_shadow.analysis.replaying import CitedLoader
from otel_route_shadow.analysis.report import Aggregation
from otel_route_shadow.analysis.source import Payloads, ProgressFn
from otel_route_shadow.analysis.whatif import WhatIfResult, replay_payloads
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.tlog import LogKey, WitnessPolicy

__all__ = ["build_fleet_report", "count_pending", "fleet_replay", "prepare_logs"]


def build_fleet_report(
    inputs: Sequence[str],
    *,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    window: TimeWindow | None = None,
    verifiers: Sequence[LogKey] = (),
    policy: WitnessPolicy | None = None,
    jobs: int | None = None,
    cited_loader: CitedLoader | None = None,
    examples: int = 3,
    min_spawns: int = MIN_SPAWNS,
    fetch: Fetch | None = None,
) -> Report:
    """The report over every log of ``inputs`` (chain files, folders of them, ``serve`` URLs read
    through ``fetch``) that verifies against its newest checkpoint; the others are named in
    ``report.fleet`` and in no figure. ``jobs`` worker processes check, then aggregate, several local
    logs at once (None: as ``fleet.fleet_jobs`` chooses)."""
    settings = ReportSettings(fleet_specs(as_specs(by)), window or TimeWindow(), examples, min_spawns)
    prepared = prepare_logs(chain_paths(inputs), verifiers, policy, fetch)
    pending = [item for item in prepared if not isinstance(item, FleetLog)]
    keys = verifier_keys(verifiers, policy)
    counted: dict[str, tuple[FleetLog, Aggregation | None]] = {
        log.path: (log, aggregation)
        for log, aggregation in count_pending(pending, settings, keys, jobs=jobs, cited_loader=cited_loader)
    }
    counted.update((item.path, (item, None)) for item in prepared if isinstance(item, FleetLog))
    fleet = Fleet(tuple(counted[item.path][0] for item in prepared), bool(verifiers), policy is not None)
    aggregations = [
        aggregation for log in fleet.included if (aggregation := counted[log.path][1]) is not None
    ]
    return combine(fleet, aggregations, settings, summed_usage(aggregations))


def count_pending(
    pending: Sequence[PendingLog | PendingRemote],
    settings: ReportSettings,
    keys: tuple[str, ...],
    *,
    jobs: int | None = None,
    cited_loader: CitedLoader | None = None,
) -> list[tuple[FleetLog, Aggregation | None]]:
    """Each pending log checked and counted (its aggregation None when it is excluded): the local ones
    as ``log_pass.count_logs`` does (``jobs``, ``cited_loader``), the remote ones through their entry
    bundles (``remote.count_remote``)."""
    local = [item for item in pending if isinstance(item, PendingLog)]
    counted = count_logs(local, settings, keys, jobs=jobs, cited_loader=cited_loader)
    return [*counted, *(count_remote(item, settings) for item in pending if isinstance(item, PendingRemote))]


def prepare_logs(
    paths: Sequence[str], verifiers: Sequence[LogKey], policy: WitnessPolicy | None, fetch: Fetch | None
) -> list[FleetLog | PendingLog | PendingRemote]:
    """Each log's checks that read no record: a local chain's (``fleet.prepare_log``), a remote log's
    checkpoint and minimum index through ``fetch`` (``remote.prepare_remote``). Raises
    :class:`~otel_route_shadow.analysis.fleet.FleetError` for a remote log without ``fetch``, and when
    two local logs name one origin. A remote naming the origin of a local log, or of a remote before it, is excluded, not
    the whole fleet (a server, or whoever sits between, chooses what a remote names); an excluded log's
    origin names nothing."""
    prepared: list[FleetLog | PendingLog | PendingRemote] = []
    for path in paths:
        if not is_remote(path):
            prepared.append(prepare_log(path, verifiers, policy))
        elif fetch is None:
            raise FleetError(f"{path}: a remote log, and no way to fetch it was given")
        else:
            prepared.append(prepare_remote(path, fetch, verifiers, policy))
    local = [item for item in prepared if not is_remote(item.path)]
    refuse_shared_origins([_origin(item) for item in local], [item.path for item in local])
    seen = {origin: item.path for item in local if (origin := _origin(item)) is not None}
    for at, item in enumerate(prepared):
        origin = _origin(item)
        if origin is None or not is_remote(item.path):
            continue
        if origin in seen:
            reason = f"its origin {origin!r} is also {seen[origin]}'s: one log given twice, or a copy"
            prepared[at] = FleetLog(item.path, EXCLUDED, origin=origin, reason=reason, evidence=item.evidence)
        else:
            seen[origin] = item.path
    return prepared


def _origin(item: FleetLog | PendingLog | PendingRemote) -> str | None:
    """The origin a log names, None when it was excluded already (its checkpoint not taken)."""
    if isinstance(item, FleetLog):
        return None if item.status == EXCLUDED else item.origin
    return item.evidence.origin


def fleet_replay(
    inputs: Sequence[str],
    snapshot: PolicySnapshot,
    *,
    candidate_source: str = "candidate",
    cited_loader: CitedLoader | None = None,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    window: TimeWindow | None = None,
    examples: int = 3,
    verifiers: Sequence[LogKey] = (),
    policy: WitnessPolicy | None = None,
    jobs: int | None = None,
    fetch: Fetch | None = None,
    progress: ProgressFn | None = None,
) -> WhatIfResult:
    """``whatif`` over every log of ``inputs`` that verifies against its newest checkpoint (as
    :func:`build_fleet_report` chooses them), one after the other into one replay. Every log is checked
    whole before the replay starts: a local chain by ``fleet.check_logs``, a remote one read once through
    ``fetch`` (``remote.check_remote``) and again for the replay, each bundle the very bytes checked.
    Raises :class:`~otel_route_shadow.analysis.fleet.FleetError` when a remote log cannot be read again
    as it was checked: its records are then partly replayed, and no figure is given."""
    prepared = prepare_logs(chain_paths(inputs), verifiers, policy, fetch)
    local = iter(
        check_logs(
            [item for item in prepared if isinstance(item, PendingLog)],
            verifier_keys(verifiers, policy),
            jobs,
        )
    )
    logs: list[FleetLog] = []
    again: dict[str, CheckedRemote] = {}
    for item in prepared:
        if isinstance(item, PendingLog):
            logs.append(next(local))
        elif isinstance(item, PendingRemote):
            log, checked = check_remote(item)
            logs.append(log)
            if checked is not None:
                again[log.path] = checked
        else:
            logs.append(item)
    fleet = Fleet(tuple(logs), bool(verifiers), policy is not None)
    moved: dict[str, int] = {}
    result = replay_payloads(
        _replayed(fleet, again, moved),
        snapshot,
        chain=fleet.status(),
        candidate_source=candidate_source,
        cited_loader=cited_loader,
        by=fleet_specs(as_specs(by)),
        window=window,
        examples=examples,
        progress=progress,
    )
    if moved:  # replayed from a minimum index risen since their check: counted from there
        fleet = replace(
            fleet, logs=tuple(replace(log, start=moved.get(log.path, log.start)) for log in fleet.logs)
        )
        result.chain = fleet.status()
    result.fleet = fleet
    return result


def _replayed(fleet: Fleet, remote: dict[str, CheckedRemote], moved: dict[str, int]) -> Payloads:
    """Every counted record of the fleet's included logs, one log after the other, tagged with its
    origin: a local log's from its file, a remote one's read again (:class:`CheckedRemote`). A remote
    log whose host pruned its first bundles since its check (410 Gone before any of its records was
    replayed) is replayed from its new minimum index, put in ``moved``."""
    for log in fleet.included:
        checked = remote.get(log.path)
        if checked is None:
            yield from with_host(counted_payloads(log), log.origin or log.path)
            continue
        replayed = False
        try:
            for item in checked.payloads():
                replayed = True
                yield item
        except RemoteError as exc:
            later = None if replayed or exc.status != GONE else checked.since_pruned()
            if later is None:
                pruned = "; its host pruned it under the replay (run again)" if exc.status == GONE else ""
                raise FleetError(
                    f"{log.path}: read again for the replay after its check passed: {exc}{pruned}; "
                    "no figure is given"
                ) from None
            moved[log.path] = later.log.start
            try:
                yield from later.payloads()
            except RemoteError as again:
                raise FleetError(
                    f"{log.path}: read again for the replay from its minimum index {later.log.start}, "
                    f"pruned since its check: {again}; no figure is given"
                ) from None
