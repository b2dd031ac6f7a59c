"""Rows 10a-10e: witnessing costs the host nothing measurable, and ``verify --witness-policy`` little more than ``verify``.

10a/10b. The seam call (row 1's instrumented side: the demo factory's four seams, a precomputed context, a
       ``BatchSpanProcessor`` to an exporter that drops everything, durability ``flush``, checkpoints every
       1,000 records, signed) with two live witnesses configured (torchwood's litewitness, `make witness`,
       on loopback; the pushes' cadence raised to 100 a second so that every checkpoint of a run is
       pushed and cosigned during it) against the same without witnesses: the mean (10a) and the p99 (10b)
       of single timed calls. Rounds take turns between the sides, each on a chain of its own; the mean's
       ratio is the median of the per-round ratios, the p99 is taken over every call of a side.
10c/10d. The same with one witness that never answers (a loopback server that takes every request and
       holds it open) against none.
10e.    ``otel-route-shadow verify CHAIN --witness-policy P`` against ``verify CHAIN --key K`` with the same
       checkpoint notes (one every 1,000 records of the large chain, each cosigned by two test witnesses,
       ``--checkpoint`` of the same file), stdout discarded: the extra is the policy's attestation of each
       note (the log's signature and two cosignatures).

Without the litewitness binaries (``ROUTE_SHADOW_LITEWITNESS`` or ``.witness/bin``) rows 10a/10b say "not
available".
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import itertools
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.bench_seam import _by_seam, _DropExporter, _quantile
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import REPO_ROOT, Row, Stats, Target, errored, interleaved, ratios, timed, unavailable

ORIGIN = "bench.example/route-shadow/witness"
PUSHES_PER_DAY = 8_640_000.0
SUPPORT = REPO_ROOT / "tests" / "witness_support.py"


def _support() -> Any:
    """``tests/witness_support.py`` (litewitness pool, fake witnesses), imported by path."""
    spec = importlib.util.spec_from_file_location("_bench_witness_support", SUPPORT)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{SUPPORT}: the witness test support is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _litewitness_built() -> bool:
    for variable, name in (
        ("ROUTE_SHADOW_LITEWITNESS", "litewitness"),
        ("ROUTE_SHADOW_WITNESSCTL", "witnessctl"),
    ):
        binary = Path(os.environ.get(variable) or REPO_ROOT / ".witness" / "bin" / name)
        if not os.access(binary, os.X_OK):
            return False
    return shutil.which("ssh-agent") is not None


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    seam = [
        Row(
            id=row_id,
            title=f"seam call {stat}, {label} vs none",
            measured=f"{stat} of single seam calls, checkpoints every 1,000 records, {label}",
            unit="us",
            baseline_label=f"{stat}, no witness configured",
            ratio_label="of none",
            target=Target("<=", 1.05),
        )
        for row_id, stat, label in (
            ("10a", "mean", "two live witnesses"),
            ("10b", "p99", "two live witnesses"),
            ("10c", "mean", "a witness that never answers"),
            ("10d", "p99", "a witness that never answers"),
        )
    ]
    verify = Row(
        id="10e",
        title="verify --witness-policy vs verify, same checkpoints",
        measured=f"verify --witness-policy, {cfg.chain_records:,}-record chain, a cosigned checkpoint every 1,000",
        unit="s",
        baseline_label="verify --key, the same checkpoints",
        ratio_label="of verify",
        target=Target("<=", 1.05),
    )
    out: list[Row] = []
    if any(context.wants(r.id) for r in seam):
        out += _seam_rows(cfg, seam)
    if context.wants("10e"):
        try:
            out.append(_verify_row(cfg, context, verify))
        except Exception as exc:
            out.append(errored(verify, exc))
    return out


# --- 10a-10d ---------------------------------------------------------------------------------------------------


def _seam_rows(cfg: BenchConfig, rows_: list[Row]) -> list[Row]:
    try:
        support = _support()
    except Exception as exc:
        return [errored(r, exc) for r in rows_]
    failures: tuple[type[BaseException], ...] = (Exception, *_pytest_outcomes())
    work = cfg.workdir / "witness"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        try:
            host = _Host(cfg, work)
            stack.callback(host.close)
            mute = stack.enter_context(support.fake_witness(_never_answers))
            sides: dict[str, dict[str, Any]] = {
                "none": {},
                "mute": {
                    "witness_policy": host.policy("mute", [("mute", host.cosigner(support, 1), mute.url)])
                },
            }
            live = _litewitness_built()
            if live:
                pool = stack.enter_context(support.witness_pool(work, 2, ORIGIN, host.signer.verifier()))
                # A witness is another party's machine: the loopback ones take only CPU the host leaves
                # (each runs in a session of its own: its process group, every thread of it, at nice 19).
                for witness in pool.witnesses:
                    if witness.proc is not None:
                        os.setpriority(os.PRIO_PGRP, os.getpgid(witness.proc.pid), 19)
                witnesses = [(f"w{n}", w.verifier, w.url) for n, w in enumerate(pool.witnesses)]
                sides["live"] = {"witness_policy": host.policy("live", witnesses)}
            measured = host.measure(sides)
            _fill(rows_[2:], measured, "mute", cfg)
            if live:
                _fill(rows_[:2], measured, "live", cfg)
                rows_[0].extras["cosigned_checkpoints"] = host.cosigned["live"]
            else:
                for row in rows_[:2]:
                    unavailable(row, "no litewitness built (`make witness`, or ROUTE_SHADOW_LITEWITNESS)")
        except failures as exc:
            return [errored(r, exc) if r.ours is None and r.status != "not available" else r for r in rows_]
    return [r.judge() if r.ours is not None else r for r in rows_]


def _pytest_outcomes() -> tuple[type[BaseException], ...]:
    """What ``witness_support`` raises when a witness does not come up (pytest's fail/skip)."""
    try:
        import pytest
    except ImportError:  # pragma: no cover - pytest is a dev dependency
        return ()
    return (pytest.fail.Exception, pytest.skip.Exception)


def _never_answers(body: bytes, fake: Any) -> tuple[int, dict[str, str], bytes]:
    fake.release.wait(600)
    return 503, {}, b"released\n"


def _fill(rows_: list[Row], measured: dict[str, Any], side: str, cfg: BenchConfig) -> None:
    mean_row, p99_row = rows_
    means, base_means = measured["means"][side], measured["means"]["none"]
    mean_row.ours, mean_row.baseline = Stats.of(means), Stats.of(base_means)
    mean_row.ratio, mean_row.runs = ratios(means, base_means), len(means)
    calls, base_calls = measured["calls"][side], measured["calls"]["none"]
    on, off = _quantile(calls, 0.99), _quantile(base_calls, 0.99)
    p99_row.ours, p99_row.baseline, p99_row.ratio = Stats.of([on]), Stats.of([off]), Stats.of([on / off])
    p99_row.runs = len(means)
    for row in rows_:
        row.extras["calls_per_side"] = len(calls)
        row.extras["pushes"] = measured["pushes"].get(side, 0)
    p99_row.extras["p50_us"] = [round(_quantile(calls, 0.5), 1), round(_quantile(base_calls, 0.5), 1)]
    mean_row.notes.append(
        f"{cfg.tail_calls} timed calls per side and round; cadence {PUSHES_PER_DAY:g} pushes/day so that every "
        "checkpoint of a run is pushed during it"
    )


class _Host:
    """The demo factory instrumented on a span pipeline that drops everything (as row 1), with a signing key."""

    def __init__(self, cfg: BenchConfig, work: Path) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from otel_route_shadow.demo import factory
        from otel_route_shadow.instrumentation import (
            RouteShadowInstrumentor,
            SeamCall,
            SeamSpec,
            checkpointing,
        )
        from otel_route_shadow.logstore import generate_key_file

        self.cfg, self.work = cfg, work
        self.key = work / "log.key"
        self.signer = generate_key_file(ORIGIN, str(self.key))
        jobs = factory.plan_jobs(80, factory.FactorySettings())
        faces = {name: face for name, (_, face) in factory.SEAMS.items()}
        contexts = {job.number: factory.context_for(job, faces[job.loop.seam]) for job in jobs}

        def extract_precomputed(call: SeamCall) -> Any:
            return contexts[call.args[0].number]

        self.seams = tuple(
            SeamSpec(target=target, request_face=face, extractor=extract_precomputed, name=name)
            for name, (target, face) in factory.SEAMS.items()
        )
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(_DropExporter(), max_queue_size=65_536))  # type: ignore[arg-type]
        self.instrumentor = RouteShadowInstrumentor()
        self.calls = [_by_seam(jobs[i % len(jobs)]) for i in range(cfg.tail_calls)]
        self.factory = factory
        self.cosigned: dict[str, int] = {}
        self._pushes = 0
        self._restore = checkpointing.SHUTDOWN_PUSH_S
        checkpointing.SHUTDOWN_PUSH_S = 0.2  # a round's end waits this long for a mute witness
        self._checkpointing = checkpointing

    def cosigner(self, support: Any, n: int) -> Any:
        return support.Cosigner(f"bench-witness{n}.example/w").verifier

    def policy(self, name: str, witnesses: list[tuple[str, Any, str]]) -> Path:
        path = self.work / f"{name}.policy"
        lines = [
            f"log {self.signer.verifier()}",
            *(f"witness {w} {v} {url}" for w, v, url in witnesses),
            "quorum none",
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    def measure(self, sides: dict[str, dict[str, Any]]) -> dict[str, Any]:
        means: dict[str, list[float]] = {s: [] for s in sides}
        calls: dict[str, list[float]] = {s: [] for s in sides}
        pushes: dict[str, int] = {}
        names = list(sides)
        for round_ in range(self.cfg.tail_rounds):
            shift = round_ % len(names)
            for side in names[shift:] + names[:shift]:
                chain = self.work / f"{side}.jsonl"  # one chain per side: a witness never goes back
                timings = self._round(chain, sides[side])
                means[side].append(statistics.fmean(timings))
                calls[side].extend(timings)
                pushes[side] = pushes.get(side, 0) + self._pushes
        if "live" in sides:
            self.cosigned["live"] = _cosigned(self.work / "live.jsonl")
        return {"means": means, "calls": calls, "pushes": pushes}

    def _round(self, chain: Path, extra: dict[str, Any]) -> list[float]:
        self.instrumentor.instrument(
            tracer_provider=self.provider,
            seams=self.seams,
            chain_path=chain,
            durability="flush",
            signing_key=self.key,
            checkpoint_records=1000,
            witness_pushes_per_day=PUSHES_PER_DAY,
            **extra,
        )
        wrapped = {
            "agentic": self.factory.AgentRunner()._execute,
            "subprocess": self.factory.SubprocessRunner().run,
            "one-shot": self.factory.run_lightweight_agent,
            "streaming": self.factory.stream_claude_with_telemetry,
        }
        timings = []
        try:
            for call in self.calls:
                start = time.perf_counter()
                call(wrapped)
                timings.append((time.perf_counter() - start) * 1e6)
            runtime = self.instrumentor.runtime
            witnesses = runtime.checkpointer.witnesses if runtime is not None else None
            stats = witnesses.stats() if witnesses is not None else None
            self._pushes = sum(stats.requests.values()) if stats is not None else 0
        finally:
            self.instrumentor.uninstrument()
        return timings

    def close(self) -> None:
        if self.instrumentor.is_instrumented_by_opentelemetry:
            self.instrumentor.uninstrument()
        self.provider.shutdown()
        self._checkpointing.SHUTDOWN_PUSH_S = self._restore


def _cosigned(chain: Path) -> int:
    """Checkpoints of the chain stored with a cosignature."""
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.tlog import parse_note

    notes = LogStore(chain).notes().notes
    return len({parse_note(n).text for n in notes if len(parse_note(n).signatures) > 1})


# --- 10e --------------------------------------------------------------------------------------------------------


def _verify_row(cfg: BenchConfig, context: BenchContext, row: Row) -> Row:
    from otel_route_shadow.cli import main

    path = context.chains.large()
    notes_file, policy, key = _cosigned_notes(cfg, path)

    def run(*extra: str) -> Callable[[], float]:
        argv = ["verify", str(path), "--checkpoint", str(notes_file), "--no-progress", *extra]

        def once() -> float:
            with _quiet():
                return timed(lambda: _expect(main(argv), argv))

        return once

    times = interleaved(
        {"policy": run("--witness-policy", str(policy), "--max-unwitnessed", str(10**12)), "key": run("--key", key)},
        cfg.slow_runs,
    )
    row.ours, row.baseline = Stats.of(times["policy"]), Stats.of(times["key"])
    row.ratio, row.runs = ratios(times["policy"], times["key"]), cfg.slow_runs
    row.extras["checkpoints"] = sum(1 for _ in notes_file.open())
    row.extras["attest_notes_s"] = round(_attest_only(notes_file, policy), 4)
    row.extras["loadavg_after"] = os.getloadavg()
    row.notes.append(
        "the whole command, stdout discarded: the chain's links, the checkpoints, then the policy"
    )
    return row.judge()


def _attest_only(notes_file: Path, policy: Path) -> float:
    """The policy's own part alone (``tlog.attest_notes`` over every note), the median of 5: what the
    ratio's numerator adds, measured apart from the noise of the whole command."""
    from otel_route_shadow.logstore import read_note_file, read_witness_policy_file
    from otel_route_shadow.tlog import attest_notes

    notes, parsed = read_note_file(str(notes_file)).notes, read_witness_policy_file(policy)
    return statistics.median(
        timed(lambda: attest_notes(notes, parsed, now=int(time.time()))) for _ in range(5)
    )


def _expect(code: int, argv: list[str]) -> None:
    if code != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} ... exited {code}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def _publish_partials(reader: Any, size: int) -> None:
    """The partial tiles of a tree of ``size`` leaves whose full tile does not exist yet (a published
    checkpoint keeps them, and ``verify`` checks they are there): prefixes of the authenticated tiles."""
    from otel_route_shadow.tlog import TILE_HEIGHT, TILE_WIDTH, Tile

    level = 0
    while count := size >> (TILE_HEIGHT * level):
        index, width = divmod(count, TILE_WIDTH)
        if width and (reader.size >> (TILE_HEIGHT * level)) // TILE_WIDTH == index:
            reader.storage.save_tiles([Tile(level, index, width)], [reader.tile(level, index)[: width * 32]])
        level += 1


def _cosigned_notes(cfg: BenchConfig, path: Path) -> tuple[Path, Path, str]:
    """A checkpoint every 1,000 records of the large chain (roots from its authenticated tiles), signed by
    the benchmark's log key and cosigned by two test witnesses; the policy naming them."""
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    from benchmarks.bench_tlog import ORIGIN as LOG_ORIGIN
    from benchmarks.bench_tlog import _prepared
    from otel_route_shadow.logstore import LogStore, tlog_dir
    from otel_route_shadow.tlog import (
        Checkpoint,
        CosignatureVerifier,
        TileReader,
        parse_checkpoint,
        parse_note,
        sign_note,
        tree_hash,
    )
    from otel_route_shadow.tlog.cosignature import cosignature_message

    # The large chain's log is row 6's (its origin and key): another origin's checkpoint in the same
    # log would leave later runs of rows 6 and 9 a checkpoint they cannot authenticate.
    signer, _notes, _verifier = _prepared(path)
    latest = parse_checkpoint(parse_note((Path(tlog_dir(str(path))) / "checkpoint").read_text()).text)
    reader = TileReader(LogStore(str(path)), latest.size, latest.root)
    witnesses = []
    for n in (1, 2):
        key = Ed25519PrivateKey.from_private_bytes(
            hashlib.sha256(f"route-shadow bench witness {n}".encode()).digest()
        )
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        witnesses.append((key, CosignatureVerifier.from_public_key(f"bench-witness{n}.example/w", public)))
    stamp = int(time.time()) - 60
    notes_file = cfg.workdir / "witness-checkpoints"
    with notes_file.open("w") as out:
        for size in itertools.chain(range(1000, latest.size, 1000), [latest.size]):
            _publish_partials(reader, size)
            text = Checkpoint(LOG_ORIGIN, size, tree_hash(reader, size)).text()
            note = sign_note(text, [signer])
            for key, verifier in witnesses:
                blob = verifier.key_id.to_bytes(4, "big") + stamp.to_bytes(8, "big")
                blob += key.sign(cosignature_message(stamp, text))
                note += f"\u2014 {verifier.name} {base64.b64encode(blob).decode()}\n"
            out.write(json.dumps({"note": note}) + "\n")
    policy = cfg.workdir / "witness.policy"
    lines = [f"log {signer.verifier()}", *(f"witness w{n} {v}" for n, (_, v) in enumerate(witnesses, 1))]
    policy.write_text("\n".join([*lines, "group both all w1 w2", "quorum both"]) + "\n")
    return notes_file, policy, str(signer.verifier())
