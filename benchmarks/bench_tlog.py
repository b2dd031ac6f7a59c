"""Row 6: the verifiable log (issue 12) on the large chain.

The chain's tiles and checkpoints are made once (a ``Checkpointer`` catching up over the whole chain;
reused from ``<chain>.tlog/`` while its state still matches), then:

6a. ``verify_against_checkpoints`` (one process) against plain ``hashlib.sha256`` over the same file's
    bytes (8 MiB reads). Measured: the signature check, the chain's one pass (below the checkpoint each
    line only hashed as a leaf, ``SHA-256(0x00 || line)``, no JSON), the tree, the root at the
    checkpoint's size and the tile store's health (every tile authenticated). The checkpoint covers the
    whole chain, so no line lies beyond it and no line is checked in full (below an authenticated
    checkpoint the signer checked them: docs/chain-format.md section 13.7). Figures are MB/s of chain;
    the sides are interleaved, the file page-cached. The same verify with the tile check switched off
    (``check_tile_store=False``, a benchmark-only switch) is a fourth side: its throughput and the
    ratio of the two are in the extras (target: the tile check costs at most 10%).
6b. The same with ``jobs=2`` against ``jobs=1``.
6c. An inclusion and a consistency proof for records spread over the chain, from the tiles only
    (``prove_inclusion`` / ``prove_consistency``; a fresh ``TileReader`` each time, so no tile is cached
    between proofs and every tile read is authenticated): the worst median over the sampled records, in
    milliseconds.
6d. ``Checkpointer.checkpoint()`` in a fresh process-like object after one more line (linked to the
    last): the resume (the newest own checkpoint authenticated, the state hint checked against the
    right-edge tiles authenticated against it), checking the new line's record hash and link, hashing
    it, writing the tiles durably, proving the new tree consistent from them, signing and publishing.
    Reported.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, interleaved, ratios, timed
from otel_route_shadow.logstore import LogStore

ORIGIN = "bench.example/route-shadow"


def _sha256_file(path: Path) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
    digest.digest()


def _prepared(path: Path) -> tuple[Any, list[str], str]:
    """A signer, the chain's checkpoint notes and the verifier key (tiles made on first use)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from otel_route_shadow.logstore import Checkpointer, read_note_file, tlog_dir
    from otel_route_shadow.tlog import Signer

    # A public, fixed benchmark key: the checkpoints of an earlier run stay verifiable.
    signer = Signer(
        ORIGIN, Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"route-shadow bench").digest())
    )
    checkpointer = Checkpointer(str(path), ORIGIN, signer, max_leaves=1 << 40, max_bytes=1 << 40)
    checkpointer.checkpoint()
    notes = read_note_file(os.path.join(tlog_dir(str(path)), "checkpoints")).notes
    ours = [note for note in notes if note.startswith(ORIGIN + "\n")]
    return signer, ours[-1:], str(signer.verifier())


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    n = cfg.chain_records
    speed = Row(
        id="6a",
        title="verify vs checkpoint, vs sha256 of the file",
        measured=f"verify against a checkpoint, {n:,}-record chain",
        unit="MB/s",
        baseline_label="hashlib.sha256 over the file",
        ratio_label="of sha256",
        target=Target(">=", 0.35),
    )
    jobs = Row(
        id="6b",
        title="verify vs checkpoint --jobs 2 vs 1",
        measured="verify against a checkpoint, 2 processes",
        unit="MB/s",
        baseline_label="1 process",
        ratio_label="of 1 job",
        target=Target(">", 1.7),
    )
    proof = Row(
        id="6c",
        title="inclusion/consistency proof from tiles",
        measured=f"one proof, {n:,}-record chain (worst sampled record)",
        unit="ms",
        target=Target("<=", 10, on="ours", unit="ms"),
    )
    resume = Row(id="6d", title="checkpoint after reopening", measured="resume + 1 line + sign", unit="ms")
    try:
        path = context.chains.large()
        signer, notes, verifier = _prepared(path)
        out = [*_speed_rows(cfg, path, notes, verifier, speed, jobs), _proof_row(path, n, proof)]
        out.append(_resume_row(cfg, path, signer, resume))
        return out
    except Exception as exc:
        return [errored(row, exc) for row in (speed, jobs, proof, resume)]


def _speed_rows(
    cfg: BenchConfig, path: Path, notes: list[str], verifier: str, speed: Row, jobs: Row
) -> list[Row]:
    from otel_route_shadow.logstore.consistency import verify_against_checkpoints

    def ours(j: int, tiles: bool = True) -> Any:
        def run() -> None:
            report = verify_against_checkpoints(str(path), notes, [verifier], jobs=j, check_tile_store=tiles)
            if not report.ok:
                raise RuntimeError(f"the benchmark chain does not match its checkpoint: {report.reason}")

        return run

    megabytes = path.stat().st_size / 1e6
    times = interleaved(
        {
            "sha": lambda: timed(lambda: _sha256_file(path)),
            "one": lambda: timed(ours(1)),
            "two": lambda: timed(ours(2)),
            "unchecked_tiles": lambda: timed(ours(1, tiles=False)),
        },
        cfg.slow_runs,
    )
    sha, one, two, bare = (
        [megabytes / t for t in times[k]] for k in ("sha", "one", "two", "unchecked_tiles")
    )
    speed.ours, speed.baseline, speed.ratio, speed.runs = (
        Stats.of(one),
        Stats.of(sha),
        ratios(one, sha),
        cfg.slow_runs,
    )
    jobs.ours, jobs.baseline, jobs.ratio, jobs.runs = (
        Stats.of(two),
        Stats.of(one),
        ratios(two, one),
        cfg.slow_runs,
    )
    speed.extras["without_tile_check_mbps"] = Stats.of(bare).as_dict()
    speed.extras["of_without_tile_check"] = ratios(one, bare).as_dict()
    speed.notes.append("extras: the same with check_tile_store=False; target of_without_tile_check >= 0.9")
    jobs.extras["loadavg_after"] = os.getloadavg()
    return [speed.judge(), jobs.judge()]


def _proof_row(path: Path, n: int, row: Row) -> Row:
    from otel_route_shadow.logstore import tlog_dir
    from otel_route_shadow.tlog import TileReader, parse_checkpoint, parse_note
    from otel_route_shadow.tlog.proofs import prove_consistency, prove_inclusion

    directory = tlog_dir(str(path))
    note = (Path(directory) / "checkpoint").read_text(encoding="utf-8")
    checkpoint = parse_checkpoint(parse_note(note).text)
    size = checkpoint.size
    sampled = sorted({0, 1, size // 3, size // 2, size - 2, size - 1, 12_345 % size, (7 * size) // 9})
    worst: list[float] = []
    reads: list[int] = []
    for seq in sampled:
        times = []
        for _ in range(5):
            store = TileReader(LogStore(str(path)), size, checkpoint.root)
            start = time.perf_counter()
            prove_inclusion(store, checkpoint, seq)
            prove_consistency(
                TileReader(LogStore(str(path)), size, checkpoint.root), checkpoint, seq + 1, size
            )
            times.append((time.perf_counter() - start) * 1000 / 2)
            reads.append(store.reads)
        times.sort()
        worst.append(times[len(times) // 2])
    row.ours, row.runs = Stats.of([max(worst)]), 5
    row.extras.update(
        {"records_sampled": sampled, "median_ms_per_record": worst, "tile_reads_max": max(reads)}
    )
    row.notes.append(
        "each figure: median of 5; the row shows the worst sampled record; no chain line is read"
    )
    return row.judge()


def _resume_row(cfg: BenchConfig, path: Path, signer: Any, row: Row) -> Row:
    from otel_route_shadow.logstore import Checkpointer

    size = path.stat().st_size
    directory = Path(str(path) + ".tlog")
    saved = {name: (directory / name).read_bytes() for name in ("state", "checkpoints", "checkpoint")}
    samples = []

    def put_back() -> None:
        if path.stat().st_size != size:
            os.truncate(path, size)
        for name, data in saved.items():
            (directory / name).write_bytes(data)

    try:
        for _ in range(cfg.runs):
            with open(path, "ab") as handle:
                handle.write(_next_line(path))  # linked to the last line: the signer checks it
            start = time.perf_counter()
            made = Checkpointer(str(path), ORIGIN, signer).checkpoint()
            samples.append((time.perf_counter() - start) * 1000)
            if made is None:
                raise RuntimeError("no checkpoint after one more line")
            put_back()
    finally:
        put_back()
    row.ours, row.runs = Stats.of(samples), cfg.runs
    row.notes.append("the chain, the tree state and the checkpoint files are put back after each run")
    return row.judge()


def _next_line(path: Path) -> bytes:
    """The record after the chain's last one (its payload again, the next seq, linked to it): the
    Checkpointer checks a line's record hash and link before it signs it, so a copy would be refused."""
    import orjson

    from otel_route_shadow.chain.canonical import canonical_bytes
    from otel_route_shadow.chain.record import encode_record

    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - (1 << 20)))
        last = orjson.loads(handle.read().rsplit(b"\n", 2)[-2])
    payload, marks = canonical_bytes(last["payload"]), canonical_bytes(last["redactions"])
    return encode_record(last["seq"] + 1, last["record_hash"], payload, marks)[0]
