"""The main job: run the demo factory under the real instrumentation, then verify and summarise.

Everything is local and embedded by default (policy store and chain in one folder, spans to the
console); with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set the spans go over OTLP/HTTP instead. The chain's
checkpoints are signed with the key ``OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY`` names, else with the demo
log's own key, generated in that folder on the first run (``log.key``, mode 0600) and reused after; its public verifier key goes to ``log.vkey`` and the summary names the
``verify`` command an auditor runs with it.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from otel_route_shadow.chain import DecisionChain, iter_payloads
from otel_route_shadow.core import mechanism_class
from otel_route_shadow.demo import factory
from otel_route_shadow.files import write_atomic
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, environment_variables
from otel_route_shadow.logstore import (
    REFUSALS_FILE,
    LogStore,
    StateError,
    check_kept_chain,
    generate_key_file,
    read_signing_keys,
)
from otel_route_shadow.shadow import RECORD_KIND
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.store import (
    PolicyFile,
    RoutingPolicyStore,
    parse_policy_document,
    read_policy_file,
)
from otel_route_shadow.strict_json import loads_strict

__all__ = ["DEFAULT_PROJECT", "DemoSummary", "default_policy_file", "run_demo"]

DEFAULT_PROJECT = "route-shadow-demo"
"""Phoenix groups spans by the resource attribute ``openinference.project.name``."""
DEMO_ORIGIN = "localhost/route-shadow/demo"
"""The demo log's origin, its signing key's name."""


def default_policy_file() -> PolicyFile:
    """The embedded demo policy set (a project-X-uses-z.ai policy among others)."""
    text = resources.files("otel_route_shadow.demo").joinpath("policies.json").read_text("utf-8")
    return parse_policy_document(loads_strict(text), "<embedded demo policies>")


@dataclass
class DemoSummary:
    spawns: int = 0
    records: int = 0
    agreed: int = 0
    managed: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    divergence_by_mechanism: Counter[str] = field(default_factory=Counter)
    divergence_by_transport: Counter[str] = field(default_factory=Counter)
    spawns_by_mechanism: Counter[str] = field(default_factory=Counter)
    spawns_by_class: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    served: Counter[str] = field(default_factory=Counter)
    claim_mismatches: int = 0
    bypass: int = 0
    chain_intact: bool = False
    chain_records: int = 0
    chain_head: str | None = None
    chain_problem: str | None = None
    chain_checked: bool = True
    """False when there was nothing to check the chain against (no checkpoint signed)."""
    snapshot_revision: int = 0
    snapshot_hash: str = ""
    chain_path: str = ""
    contained_errors: int = 0
    verifier_key: str = ""
    verify_command: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "spawns": self.spawns,
            "records": self.records,
            "agreement_rate": self.agreed / self.records if self.records else None,
            "managed_share": self.managed / self.records if self.records else None,
            "outcomes": dict(self.outcomes),
            "divergence_by_mechanism": dict(self.divergence_by_mechanism),
            "divergence_by_transport": dict(self.divergence_by_transport),
            "spawns_by_mechanism": dict(self.spawns_by_mechanism),
            "spawns_by_mechanism_class": dict(self.spawns_by_class),
            "findings": dict(self.findings),
            "served": dict(self.served),
            "claim_mismatches": self.claim_mismatches,
            "bypass_spawns": self.bypass,
            "bypass_share": self.bypass / self.records if self.records else None,
            "chain": {
                "path": self.chain_path,
                "intact": self.chain_intact,
                "records": self.chain_records,
                "head_hash": self.chain_head,
                "problem": self.chain_problem,
                "checked": self.chain_checked,
            },
            "snapshot": {"revision": self.snapshot_revision, "hash": self.snapshot_hash},
            "contained_errors": self.contained_errors,
            "auditor": {"verifier_key": self.verifier_key, "verify": self.verify_command},
        }


def _one_line(span: ReadableSpan) -> str:
    a = span.attributes or {}
    return (
        f"span {span.name:<40} legacy={a.get(attr.LEGACY_PROVIDER)}/{a.get(attr.LEGACY_MECHANISM)}"
        f" via {a.get(attr.TRANSPORT)}  policy={a.get(attr.OUTCOME)}:{a.get(attr.REASON)}"
        f"  agreed={a.get(attr.AGREED)}\n"
    )


def _span_exporter(console: TextIO | None) -> SpanExporter | None:
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if console is None:
        return None
    return ConsoleSpanExporter(out=console, formatter=_one_line)


def _prepare_store(store_dir: Path, policies: PolicyFile) -> tuple[int, str]:
    """Save the policy set (the store spends no revision on a set that is already current)."""
    result = RoutingPolicyStore(store_dir).save(list(policies.policies))
    return result.revision, result.content_hash


def _summarise(chain: Path, after_seq: int, summary: DemoSummary) -> None:
    for seq, payload in iter_payloads(chain):
        if seq <= after_seq or payload.get("kind") != RECORD_KIND:
            continue
        a = payload.get("attributes", {})
        summary.records += 1
        mechanism = str(a.get(attr.LEGACY_MECHANISM))
        transport = str(a.get(attr.TRANSPORT))
        summary.spawns_by_mechanism[mechanism] += 1
        summary.spawns_by_class[str(mechanism_class(mechanism) or "unknown")] += 1
        summary.findings.update(code for code in str(a.get(attr.FINDING) or "").split(",") if code)
        summary.served[str(a.get(attr.SERVED_STATUS, "unknown"))] += 1
        if a.get(attr.CLAIM_MISMATCH) is not None:
            summary.claim_mismatches += 1
        summary.outcomes[f"{a.get(attr.OUTCOME)}:{a.get(attr.REASON)}"] += 1
        if a.get(attr.POLICY_SOURCE) == "managed-policy":
            summary.managed += 1
        if a.get(attr.AGREED) is True:
            summary.agreed += 1
        else:
            summary.divergence_by_mechanism[mechanism] += 1
            summary.divergence_by_transport[transport] += 1
        if transport == "direct-http":
            summary.bypass += 1


def run_demo(
    out_dir: Path,
    spawns: int = 120,
    policy_path: Path | None = None,
    console: TextIO | None = None,
    project: str = DEFAULT_PROJECT,
) -> DemoSummary:
    """Run ``spawns`` spawns through the four instrumented seams; return the verified summary."""
    policies = read_policy_file(policy_path) if policy_path is not None else default_policy_file()
    if not policies.valid:
        codes = ", ".join(sorted({problem.code.value for problem in policies.problems}))
        raise ValueError(f"{policies.source}: policy set has problems ({codes}); run `policy check`")
    out_dir.mkdir(parents=True, exist_ok=True)
    store_dir, chain_path = out_dir / "store", out_dir / "chain.jsonl"
    summary = DemoSummary(spawns=spawns, chain_path=str(chain_path))
    summary.snapshot_revision, summary.snapshot_hash = _prepare_store(store_dir, policies)
    key_path, vkey_path, summary.verifier_key = _demo_log_key(out_dir)
    summary.verify_command = shlex.join(
        ["otel-route-shadow", "verify", str(chain_path), "--key", str(vkey_path)]
    )
    audit = DecisionChain(chain_path)
    head = audit.head()
    after_seq = head.seq if head is not None else -1

    provider = TracerProvider(
        resource=Resource.create({"service.name": "route-shadow-demo", "openinference.project.name": project})
    )
    exporter = _span_exporter(console)
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    settings = factory.FactorySettings()
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider,
        seams=factory.seam_specs(),
        store=store_dir,
        chain_path=chain_path,
        signing_key=key_path,
        settings=settings,
    )
    try:
        for job in factory.plan_jobs(spawns, settings):
            factory.dispatch(job)
        runtime = instrumentor.runtime
        summary.contained_errors = sum(runtime.errors.values()) if runtime is not None else 0
    finally:
        instrumentor.uninstrument()
        provider.shutdown()

    _verify(chain_path, summary)
    _summarise(chain_path, after_seq, summary)
    return summary


def _verify(chain_path: Path, summary: DemoSummary) -> None:
    """The chain checked as the auditor's ``verify --key`` checks it: against its newest checkpoint,
    from its minimum index when a prune (the host's retention, or ``prune``) removed its oldest records."""
    store = LogStore(str(chain_path))
    try:
        pruned = store.read_pruned()
        note = store.checkpoint_file().decode("utf-8")  # the one way it is read: bounded, no link followed
    except FileNotFoundError:  # nothing signed: the log's refusals say why when it refused
        refusals = store.file(REFUSALS_FILE)
        summary.chain_checked = False
        summary.chain_problem = "no checkpoint was signed" + (
            f": the writer refused to sign (why: {refusals})" if os.path.lexists(refusals) else ""
        )
        return
    except (StateError, OSError, ValueError) as exc:
        summary.chain_intact, summary.chain_problem = False, str(exc)
        return
    checked, first_kept = check_kept_chain(str(chain_path), pruned, [note], [summary.verifier_key])
    result = checked.chain
    summary.chain_intact = bool(result.intact) and first_kept is None and checked.report.ok
    summary.chain_records = int(result.records)
    summary.chain_head = result.head_hash
    if not result.intact:
        summary.chain_problem = f"{result.reason} at seq {result.first_bad_seq}"
    elif first_kept is not None:
        summary.chain_problem = f"its first record kept: {first_kept}"
    elif not checked.report.ok:
        summary.chain_problem = "not consistent with its checkpoints"


def _demo_log_key(out_dir: Path) -> tuple[Path, Path, str]:
    """The demo log's signing key file: the one ``OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY`` names, else the demo's
    own in ``out_dir`` (generated when absent); the file holding its
    verifier key (rewritten on every run), and that verifier key. A chain already there without the key
    was checkpointed unsigned by an earlier version: refused (ValueError), since its auditor's check
    would fail on those checkpoints."""
    key_path, vkey_path = out_dir / "log.key", out_dir / "log.vkey"
    configured = os.environ.get(environment_variables.OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY, "")
    if configured:  # the host's own key, as the plugin takes it
        key_path = Path(configured)
        signer = read_signing_keys(configured)[0]
    elif key_path.exists():
        signer = read_signing_keys(str(key_path))[0]
    elif (out_dir / "chain.jsonl").exists():
        raise ValueError(
            f"{out_dir}: holds a demo chain checkpointed without the demo's signing key (an earlier "
            "version made it): remove the folder (`make clean`) or pass another --out"
        )
    else:
        signer = generate_key_file(DEMO_ORIGIN, str(key_path))
    verifier_key = str(signer.verifier())
    write_atomic(vkey_path, (verifier_key + "\n").encode("ascii"))
    return key_path, vkey_path, verifier_key


def format_summary(summary: DemoSummary) -> str:
    def rate(part: int, whole: int) -> str:
        return f"{100.0 * part / whole:.1f}%" if whole else "n/a"

    lines = [
        "",
        f"route-shadow demo: {summary.spawns} spawns, {summary.records} chain records this run",
        f"  policy snapshot    revision {summary.snapshot_revision}, hash {summary.snapshot_hash[:16]}...",
        f"  agreement          {rate(summary.agreed, summary.records)} "
        f"({summary.agreed}/{summary.records}); managed policies claimed {rate(summary.managed, summary.records)}",
        f"  bypass traffic     {rate(summary.bypass, summary.records)} of spawns are direct-http "
        "(no gateway policy could bind them)",
        "  outcomes           " + ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())),
        "  mechanism classes  " + ", ".join(f"{k} {v}" for k, v in sorted(summary.spawns_by_class.items())),
        "  findings           "
        + (", ".join(f"{k} {v}" for k, v in sorted(summary.findings.items())) or "none")
        + " (reported, never suppressed)",
        "  served route       "
        + ", ".join(f"{state} {summary.served.get(state, 0)}" for state in ("same", "differs", "unknown"))
        + " (a spawn served by another route than the one chosen is served-differs, never agreement)",
        "  divergence by mechanism:",
    ]
    for mechanism, total in sorted(summary.spawns_by_mechanism.items()):
        diverged = summary.divergence_by_mechanism.get(mechanism, 0)
        lines.append(f"    {mechanism:<16} {diverged:>4}/{total:<4} ({rate(diverged, total)})")
    lines.append("  divergence by transport:")
    for transport, diverged in sorted(summary.divergence_by_transport.items()):
        lines.append(f"    {transport:<16} {diverged:>4}")
    verdict = "intact" if summary.chain_intact else f"BROKEN: {summary.chain_problem}"
    if not summary.chain_checked:
        verdict = f"NOT CHECKED: {summary.chain_problem}"
    head = f", head {summary.chain_head}" if summary.chain_head else ""
    lines.append(
        f"  chain              {summary.chain_path}: {verdict}, {summary.chain_records} records{head}"
    )
    lines.append(f"  log key            {summary.verifier_key} (checkpoints are signed with it)")
    lines.append(f"  auditor's check    {summary.verify_command}")
    if summary.claim_mismatches:
        lines.append(f"  claim mismatches   {summary.claim_mismatches} (recorded with the derived values)")
    if summary.contained_errors:
        lines.append(f"  contained errors   {summary.contained_errors} (the spawns proceeded; see the log)")
    return "\n".join(lines)
