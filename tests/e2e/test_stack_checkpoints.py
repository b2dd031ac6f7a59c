"""End to end: the backend witnesses the log. Real hosts (the demo under the plugin, separate
processes) send spans and checkpoint spans through rotel to Phoenix; ``audit`` proves each chain
against the checkpoints Phoenix holds for its origin.

Each attack has its expected verdict and exit code: truncation, head pruning, rewrite with recomputed
hashes, forged insert, an edit under a 30% sampler, nothing witnessed, two (here three) origins in one
project, a forged key, and a URL that is not Phoenix. Hosts run once per module (Phoenix is slow to
start and heavy; the stack is shared by the session).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from otel_route_shadow.backend import BackendNotFound, PhoenixBackend, QueryWindow
from otel_route_shadow.cli import main
from otel_route_shadow.logstore import generate_key_file
from otel_route_shadow.shadow import checkpoint_attributes as cpa
from otel_route_shadow.tlog import Signer

from . import chainfile

pytestmark = pytest.mark.e2e

SPAWNS = 120
CHECKPOINT_EVERY = 10
SAMPLE = "0.3"  # a 30% trace sampler on every host


@dataclass
class Host:
    origin: str
    out: Path
    key: str  # the verifier key

    @property
    def chain(self) -> Path:
        return self.out / "chain.jsonl"


def _start_host(
    stack: Any, project: str, out: Path, origin: str, key_file: Path, *, export: bool = True
) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ROUTE_SHADOW_"))}
    env.update(
        {
            "OTEL_TRACES_SAMPLER": "traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": SAMPLE,
            "OTEL_PYTHON_ROUTE_SHADOW_ORIGIN": origin,
            "OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY": str(key_file),
            "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS": str(CHECKPOINT_EVERY),
        }
    )
    if export:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = stack.endpoints.otlp_http_endpoint
    exe = Path(sys.executable).with_name("otel-route-shadow")
    argv = [str(exe), "demo", "--spawns", str(SPAWNS), "--out", str(out), "--project", project, "--quiet"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _host(tmp: Path, name: str) -> tuple[Host, Path]:
    origin = f"e2e.test/route-shadow/{name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True, exist_ok=True)
    key_file = tmp / f"{name}.key"
    signer = generate_key_file(origin, str(key_file))
    return Host(origin, tmp / name, str(signer.verifier())), key_file


def wait_for_checkpoint(backend: PhoenixBackend, origin: str, size: int, timeout: float = 90.0) -> None:
    """Poll until Phoenix holds the checkpoint of ``size`` for ``origin`` (export is asynchronous)."""
    deadline = time.monotonic() + timeout
    window = QueryWindow(10**9, time.time_ns() + 3600 * 10**9)
    seen: list[int] = []
    while time.monotonic() < deadline:
        try:
            spans = backend.fetch_spans(window, {cpa.ORIGIN: origin})
            seen = sorted(int(s.attributes[cpa.SIZE]) for s in spans)  # type: ignore[call-overload]
            if size in seen:
                return
        except BackendNotFound:
            pass
        time.sleep(0.5)
    pytest.fail(f"checkpoint of size {size} for {origin} never reached Phoenix (seen {seen})")


def wait_for_sampled_spans(backend: PhoenixBackend, host: Host, timeout: float = 90.0) -> None:
    """Poll until Phoenix holds the span of every record the host's sampler kept (its decision is the
    trace id's: ``TraceIdRatioBased``). The checkpoints' spans go through a pipeline of their own, so
    one reaching Phoenix says nothing of the seams' spans; an audit before them finds too few."""
    sampler = TraceIdRatioBased(float(SAMPLE))
    payloads = chainfile.payloads(host.chain)
    kept = {
        p["span_id"]
        for p in payloads
        if "trace_id" in p and int(p["trace_id"], 16) & sampler.TRACE_ID_LIMIT < sampler.bound
    }
    assert 0.1 * len(payloads) < len(kept) < 0.6 * len(payloads), len(kept)  # the 30% sampler
    starts = [int(p["start_time_unix_nano"]) for p in payloads]
    window = QueryWindow(min(starts), max(starts) + 1)
    deadline = time.monotonic() + timeout
    missing = kept
    while time.monotonic() < deadline:
        missing = kept - {s.span_id for s in backend.fetch_spans(window)}
        if not missing:
            return
        time.sleep(0.5)
    pytest.fail(f"{len(missing)} of the {len(kept)} sampled spans of {host.origin} never reached Phoenix")


@dataclass
class Fleet:
    project: str
    backend: str
    rotel: str
    hosts: list[Host]
    unwitnessed: Host  # its spans and checkpoints never left the process


@pytest.fixture(scope="module")
def fleet(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    tmp = tmp_path_factory.mktemp("fleet")
    project = f"e2e-fleet-{uuid.uuid4().hex[:8]}"
    hosts, procs = [], []
    for name in ("host-a", "host-b", "host-c"):
        host, key_file = _host(tmp / "chains", name)
        hosts.append(host)
        procs.append(_start_host(stack, project, host.out, host.origin, key_file))
    lone, lone_key = _host(tmp / "lone", "host-lone")
    procs.append(_start_host(stack, project, lone.out, lone.origin, lone_key, export=False))
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
    backend = PhoenixBackend(stack.endpoints.phoenix_url, project)
    for host in hosts:
        size = len(host.chain.read_bytes().splitlines())
        assert size == SPAWNS
        wait_for_checkpoint(backend, host.origin, size)
        wait_for_sampled_spans(backend, host)
    return Fleet(project, stack.endpoints.phoenix_url, stack.endpoints.otlp_http_endpoint, hosts, lone)


def _audit(fleet: Fleet, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["audit", *argv, "--backend", fleet.backend, "--project", fleet.project, "--json"])
    out, err = capsys.readouterr()
    assert err == "", err
    return code, json.loads(out)


def _victim(host: Host, tmp_path: Path, attack: Callable[[Path], None]) -> Path:
    """The host's chain and its .tlog copied, then tampered with (the original stays intact)."""
    copy = tmp_path / "victim"
    shutil.copytree(host.out, copy)
    attack(copy / "chain.jsonl")
    return copy / "chain.jsonl"


def _unsampled_seq(host: Host, fleet: Fleet) -> int:
    """A record of the chain whose span the 30% sampler dropped (the backend has no span of it)."""
    backend = PhoenixBackend(fleet.backend, fleet.project)
    payloads = chainfile.payloads(host.chain)
    starts = [int(p["start_time_unix_nano"]) for p in payloads]
    held = {s.span_id for s in backend.fetch_spans(QueryWindow(min(starts), max(starts) + 1))}
    return next(seq for seq, p in enumerate(payloads) if seq > 20 and p["span_id"] not in held)


# --------------------------------------------------------------------------------------------------


def test_each_host_of_the_fleet_agrees_three_origins_in_one_project(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    for host in fleet.hosts:
        code, report = _audit(fleet, capsys, str(host.chain), "--key", host.key)
        assert code == 0, report
        assert report["verdict"] == "agree" and report["origin"] == host.origin
        assert report["coverage"]["witnessed_size"] == SPAWNS and report["coverage"]["unwitnessed"] == 0
        # Checkpoints are made in the checkpointer's own thread: a fast host's are coalesced, so how
        # many there were depends on that thread; that the last one covers every spawn does not.
        assert 1 <= report["checkpoints"]["held"] <= SPAWNS // CHECKPOINT_EVERY + 1
        assert report["spans"]["orphan_spans"] == []  # the other hosts' spans are not this chain's
        assert 0.1 < report["coverage"]["span_coverage"] < 0.6  # the 30% sampler


def test_tampering_with_one_chain_makes_only_that_one_disagree(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "fleet"
    for host in fleet.hosts:
        shutil.copytree(host.out, directory / host.out.name)
    chainfile_path = directory / fleet.hosts[1].out.name / "chain.jsonl"
    lines = chainfile_path.read_bytes().splitlines(keepends=True)
    chainfile_path.write_bytes(b"".join(lines[:-15]))
    code = main(["audit", str(directory), "--backend", fleet.backend, "--project", fleet.project])
    out = capsys.readouterr().out.splitlines()
    assert code == 1, out
    assert ["DISAGREE" in line for line in out[:3]] == [False, True, False]
    assert out[3] == "total: 3 chains: 2 agree, 1 disagree; exit 1"


@pytest.mark.parametrize(
    ("name", "reason"),
    [("truncation", "truncated"), ("head-pruning", "record-changed"), ("forged-insert", "record-changed")],
)
def test_attacks_below_a_witnessed_checkpoint_disagree(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, reason: str
) -> None:
    host = fleet.hosts[0]
    forged = chainfile.payloads(host.chain)[30]
    attacks: dict[str, Callable[[Path], None]] = {
        "truncation": lambda p: chainfile.truncated_copy(p, p, 25),
        "head-pruning": lambda p: _relink(p, chainfile.payloads(p)[10:]),
        "forged-insert": lambda p: _relink(
            p, [*chainfile.payloads(p)[:40], forged, *chainfile.payloads(p)[40:]]
        ),
    }
    chain = _victim(host, tmp_path, attacks[name])
    assert chainfile.verify(chain), "the chain alone looks intact"
    code, report = _audit(fleet, capsys, str(chain), "--key", host.key)
    assert code == 1, report
    assert report["verdict"] == "disagree"
    failures = report["checkpoints"]["consistency"]["failures"]
    assert reason in {f["reason"] for f in failures}
    expected_first = {"truncation": None, "head-pruning": 0, "forged-insert": 40}[name]
    if expected_first is not None:
        assert report["first_bad_seq"] == expected_first


def test_an_edit_of_a_record_whose_span_was_sampled_out_disagrees(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = fleet.hosts[2]
    target = _unsampled_seq(host, fleet)

    def forge(payload: dict[str, Any]) -> None:
        payload["attributes"]["route_shadow.agreed"] = not payload["attributes"]["route_shadow.agreed"]

    copy = tmp_path / "victim"
    shutil.copytree(host.out, copy)
    chain = copy / "chain.jsonl"
    chainfile.rewritten_copy(host.chain, chain, target, forge)
    assert chainfile.verify(chain)
    code, report = _audit(fleet, capsys, str(chain), "--key", host.key)
    assert code == 1, report
    assert report["spans"]["mismatches"] == []  # the span cross-check alone sees nothing
    assert report["first_bad_seq"] == target


def test_nothing_to_hold_the_chain_against_is_insufficient_evidence(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _audit(fleet, capsys, str(fleet.unwitnessed.chain))
    assert code == 3, report
    assert report["verdict"] == "insufficient-evidence"
    assert report["shortfalls"][0].startswith("nothing to hold the chain against")


def test_a_wrong_key_is_a_bad_checkpoint_and_a_collector_port_is_not_a_witness(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    host = fleet.hosts[0]
    other = str(Signer.generate(host.origin).verifier())
    code, report = _audit(fleet, capsys, str(host.chain), "--key", other)
    assert code == 6 and report["verdict"] == "bad-checkpoint"
    code = main(["audit", str(host.chain), "--backend", fleet.rotel, "--project", fleet.project])
    out, err = capsys.readouterr()
    assert code == 5 and out == ""
    assert "not a Phoenix server" in err and "no spans" not in err and len(err.strip().splitlines()) == 1


def _relink(path: Path, payloads: list[dict[str, Any]]) -> None:
    """Write ``payloads`` as a perfectly linked chain from a new genesis (every hash recomputed)."""
    from otel_route_shadow.chain import GENESIS_HASH, sanitize_payload
    from otel_route_shadow.chain.record import encode_payload, encode_record

    out, prev = [], GENESIS_HASH
    for seq, payload in enumerate(payloads):
        clean, marks = sanitize_payload(payload)
        line, prev = encode_record(seq, prev, *encode_payload(clean, marks))
        out.append(line)
    path.write_bytes(b"".join(out))
