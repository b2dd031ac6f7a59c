"""``report`` and ``whatif`` over a fleet: local chains (``analysis.fleet``) and remote logs read over
``serve`` (``analysis.remote``), each checked against its newest checkpoint, combined into one result.
See ``docs/reports.md``, "Fleet"."""

from __future__ import annotations

from collections.abc import Sequence

from otel_route_shadow.analysis.fleet import (
    Fleet,
    FleetError,
    FleetLog,
    ReportSettings,
    aggregate_logs,
    chain_paths,
    check_fleet,
    combine,
    fleet_payloads,
    fleet_specs,
    is_remote,
    refuse_shared_origins,
)
from otel_route_shadow.analysis.gaps import MIN_SPAWNS
from otel_route_shadow.analysis.groups import GroupSpec, as_specs
from otel_route_shadow.analysis.remote import Fetch, read_remote
from otel_route_shadow.analysis.replaying import CitedLoader
from otel_route_shadow.analysis.report import Aggregation, Report
from otel_route_shadow.analysis.source import ProgressFn
from otel_route_shadow.analysis.whatif import WhatIfResult, replay_payloads
from otel_route_shadow.analysis.window import TimeWindow
from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.tlog import Policy, Verifier

__all__ = ["build_fleet_report", "fleet_replay"]


def build_fleet_report(
    inputs: Sequence[str],
    *,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    window: TimeWindow | None = None,
    verifiers: Sequence[Verifier] = (),
    policy: Policy | None = None,
    jobs: int = 1,
    cited_loader: CitedLoader | None = None,
    examples: int = 3,
    min_spawns: int = MIN_SPAWNS,
    fetch: Fetch | None = None,
) -> Report:
    """The report over every log of ``inputs`` (chain files, folders of them, ``serve`` URLs read
    through ``fetch``) that verifies against its newest checkpoint; the others are named in
    ``report.fleet`` and in no figure. ``jobs`` worker processes check, then aggregate, several local
    logs at once."""
    paths = chain_paths(inputs)
    remote = [path for path in paths if is_remote(path)]
    if remote and fetch is None:
        raise FleetError(f"{remote[0]}: a remote log, and no way to fetch it was given")
    settings = ReportSettings(fleet_specs(as_specs(by)), window or TimeWindow(), examples, min_spawns)
    local = check_fleet(
        [path for path in paths if not is_remote(path)], verifiers=verifiers, policy=policy, jobs=jobs
    )
    read: dict[str, tuple[FleetLog, Aggregation | None]] = {}
    if fetch is not None:
        for url in remote:
            read[url] = read_remote(url, fetch, settings, verifiers=tuple(verifiers), policy=policy)
    checked = {log.path: log for log in local.logs}
    logs = tuple(read[path][0] if path in read else checked[path] for path in paths)
    refuse_shared_origins([log.origin for log in logs], paths)
    counted = dict(
        zip(
            (log.path for log in local.included),
            aggregate_logs(local.included, settings, jobs=jobs, cited_loader=cited_loader),
            strict=True,
        )
    )
    for url, (_log, aggregation) in read.items():
        if aggregation is not None:
            counted[url] = aggregation
    fleet = Fleet(logs, bool(verifiers), policy is not None)
    return combine(fleet, [counted[log.path] for log in fleet.included], settings)


def fleet_replay(
    inputs: Sequence[str],
    snapshot: PolicySnapshot,
    *,
    candidate_source: str = "candidate",
    cited_loader: CitedLoader | None = None,
    by: Sequence[GroupSpec] | Sequence[str] | None = None,
    window: TimeWindow | None = None,
    examples: int = 3,
    verifiers: Sequence[Verifier] = (),
    policy: Policy | None = None,
    jobs: int = 1,
    progress: ProgressFn | None = None,
) -> WhatIfResult:
    """``whatif`` over every local chain of ``inputs`` that verifies against its newest checkpoint (as
    :func:`build_fleet_report` chooses them; remote logs are for ``report``)."""
    paths = chain_paths(inputs)
    remote = [path for path in paths if is_remote(path)]
    if remote:
        raise FleetError(f"{remote[0]}: whatif reads local chains only")
    fleet = check_fleet(paths, verifiers=verifiers, policy=policy, jobs=jobs)
    result = replay_payloads(
        fleet_payloads(fleet),
        snapshot,
        chain=fleet.status(),
        candidate_source=candidate_source,
        cited_loader=cited_loader,
        by=fleet_specs(as_specs(by)),
        window=window,
        examples=examples,
        progress=progress,
    )
    result.fleet = fleet
    return result
