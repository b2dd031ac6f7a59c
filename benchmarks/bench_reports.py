"""Row 5: ``report`` and ``whatif`` against ``verify`` on the same (large) chain, in process.

* verify: ``DecisionChain(chain).verify()`` (one process);
* report: ``otel_route_shadow.analysis.build_report(chain)`` with its default breakdowns (it verifies
  the chain too, in a worker process on a multi-core machine, while it aggregates), the noise baseline,
  the served route, the divergent decisions' examples and the log evidence included;
* whatif: ``otel_route_shadow.analysis.replay(chain, candidate, cited_loader=...)``: the demo policy
  set plus one policy (so some decisions change), with the chain's own store as the cited-snapshot
  loader, so every record's integrity is checked as well.

The three are interleaved with their order rotated each run; the ratios are report/verify and
whatif/verify per run.
"""

from __future__ import annotations

from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, interleaved, ratios, timed, unavailable
from benchmarks.payloads import demo_policies


def _candidate() -> Any:
    from otel_route_shadow.core import PolicySnapshot, RoutingPolicy, policy_set_hash

    policies = [
        *demo_policies(),
        RoutingPolicy.model_validate(
            {
                "id": "implementers-on-zai",
                "priority": 5,
                "match": {"roles": ["implementer"]},
                "action": {"provider_lock": "zai-harness", "requirement_map": {"high-reasoning": "glm-5.1"}},
            }
        ),
    ]
    return PolicySnapshot(policies=tuple(policies), revision=0, content_hash=policy_set_hash(policies))


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    n = cfg.chain_records
    report_row = Row(
        id="5a",
        title="report vs verify",
        measured=f"report, {n:,}-record chain",
        unit="s",
        baseline_label="verify",
        ratio_label="of verify",
        target=Target("<=", 2.0),
    )
    whatif_row = Row(
        id="5b",
        title="whatif vs verify",
        measured=f"whatif, {n:,}-record chain",
        unit="s",
        baseline_label="verify",
        ratio_label="of verify",
        target=Target("<=", 2.0),
    )
    try:
        from otel_route_shadow.analysis import build_report, cited_loader, replay
        from otel_route_shadow.chain import DecisionChain
    except ImportError as exc:
        why = f"analysis or chain not importable yet: {exc}"
        return [unavailable(report_row, why), unavailable(whatif_row, why)]
    try:
        chains = context.chains
        path = chains.large()
        candidate = _candidate()
        loader = cited_loader(chains.store_dir)
        outcome: dict[str, Any] = {}

        def verify() -> None:
            result = DecisionChain(path).verify()
            if not result.intact:
                raise RuntimeError(f"verify rejected the benchmark chain: {result.reason}")

        def report() -> None:
            outcome["report"] = build_report(path)

        def whatif() -> None:
            outcome["whatif"] = replay(path, candidate, cited_loader=loader)

        verify()
        times = interleaved(
            {
                "verify": lambda: timed(verify),
                "report": lambda: timed(report),
                "whatif": lambda: timed(whatif),
            },
            cfg.slow_runs,
        )
        verify_s = Stats.of(times["verify"])
        for row, name in ((report_row, "report"), (whatif_row, "whatif")):
            row.ours, row.baseline, row.runs = Stats.of(times[name]), verify_s, cfg.slow_runs
            row.ratio = ratios(times[name], times["verify"])
        rep, wif = outcome["report"], outcome["whatif"]
        report_row.extras["spawns"] = rep.spawns
        report_row.extras["flagged"] = rep.flagged
        report_row.extras["flapping_keys"] = len(rep.noise.flapping)
        whatif_row.extras["replayed"] = wif.replayed
        whatif_row.extras["changed"] = wif.changed
        whatif_row.extras["integrity_findings"] = wif.integrity_findings
        whatif_row.extras["integrity_unchecked"] = wif.integrity.unchecked
        if rep.flagged or wif.flagged or wif.integrity_findings:
            for row in (report_row, whatif_row):
                row.notes.append("WARNING: the analysis flagged the benchmark chain; see extras")
        report_row.notes.append("in process: build_report(chain), default breakdowns, verification included")
        whatif_row.notes.append("in process: replay(chain, demo set + 1 policy, cited_loader=chain's store)")
    except Exception as exc:
        return [errored(report_row, exc), errored(whatif_row, exc)]
    return [report_row.judge(), whatif_row.judge()]
