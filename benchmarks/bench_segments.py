"""Row 12: a segmented chain costs no more to read than one file (docs/chain-format.md section 14.4).

* 12a: ``verify --live-segment`` (``verify_pass(live_only=True)`` with the log's key: the live file
  alone, its start authenticated by its anchor) of a chain cut into 10 segments, against
  ``verify`` of a lone chain holding as many records of the same payloads: history costs nothing.
* 12b: ``report`` (``build_report``) over the same 10-segment chain against ``report`` over one file
  holding the same lines (the segments' bytes one after the other).

The segmented chain is written the way ``chainfile`` writes the large chain (the format's lines
directly), each segment's first record an anchor naming the one before it, with the SHA-256 of that
file and a checkpoint signed over the tree of every line before it. The sides of each row are
interleaved with their order rotated each run.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from benchmarks.chainfile import GENESIS_HASH, encode_line
from benchmarks.config import BenchConfig
from benchmarks.context import BenchContext
from benchmarks.harness import Row, Stats, Target, errored, interleaved, ratios, timed, unavailable
from benchmarks.payloads import demo_policies, distinct_payloads, stamp

SEGMENTS = 10
QUICK_RECORDS = 50_000
"""The quick mode's chain: big enough that the live segment (a tenth) is timed above the noise."""
ORIGIN = "bench.example/route-shadow/segments"


def _write_segmented(directory: Path, records: int, templates: list[dict[str, Any]]) -> tuple[Path, Path, Any]:
    """A chain of ``records`` records in ``SEGMENTS`` files, and one file with the same lines; the
    log's verifier."""
    from otel_route_shadow.chain import ANCHOR_KIND, SEGMENTS_SUFFIX, segment_name
    from otel_route_shadow.tlog import Checkpoint, Signer, TreeBuilder, leaf_hash, sign_note

    signer = Signer.generate(ORIGIN)
    live = directory / "segmented.jsonl"
    whole = directory / "whole.jsonl"
    folder = Path(str(live) + SEGMENTS_SUFFIX)
    folder.mkdir(parents=True, exist_ok=True)
    rng, prev, tree = random.Random(12), GENESIS_HASH, TreeBuilder()
    per = records // SEGMENTS
    lines: list[bytes] = []
    with open(whole, "wb") as out:
        for index in range(SEGMENTS):
            first = index * per
            seg: list[bytes] = []
            if index:
                data = b"".join(lines)
                tree.extend([leaf_hash(line[:-1]) for line in lines])
                note = sign_note(Checkpoint(ORIGIN, first, tree.root()).text(), [signer])
                anchor = {
                    "kind": ANCHOR_KIND,
                    "segment": segment_name(first - per),
                    "first_seq": first - per,
                    "last_seq": first - 1,
                    "last_record_hash": prev,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "bytes": len(data),
                    "checkpoint": note,
                }
                line, prev = encode_line(first, prev, anchor)
                seg.append(line)
            for seq in range(first + len(seg), first + per):
                line, prev = encode_line(seq, prev, stamp(templates[seq % len(templates)], rng, seq))
                seg.append(line)
            target = live if index == SEGMENTS - 1 else folder / segment_name(first)
            target.write_bytes(b"".join(seg))
            out.write(b"".join(seg))
            lines = seg
    return live, whole, signer.verifier()


def _lone(directory: Path, count: int, templates: list[dict[str, Any]]) -> Path:
    """A chain never cut, of ``count`` records of the same payloads."""
    rng, prev, lines = random.Random(13), GENESIS_HASH, []
    for seq in range(count):
        line, prev = encode_line(seq, prev, stamp(templates[seq % len(templates)], rng, seq))
        lines.append(line)
    path = directory / "lone.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def rows(cfg: BenchConfig, context: BenchContext) -> list[Row]:
    records = QUICK_RECORDS if cfg.quick else cfg.chain_records
    live_row = Row(
        id="12a",
        title="verify --live-segment vs a lone chain",
        measured=f"verify --live-segment, live file of a {SEGMENTS}-segment {records:,}-record chain",
        unit="s",
        baseline_label="verify, lone chain of as many records",
        ratio_label="of lone",
        target=Target("<=", 1.1),
    )
    report_row = Row(
        id="12b",
        title="report over segments vs one file",
        measured=f"report, {SEGMENTS}-segment {records:,}-record chain",
        unit="s",
        baseline_label="report, the same lines in one file",
        ratio_label="of one file",
        target=Target("<=", 1.1),
    )
    try:
        from otel_route_shadow.analysis import build_report
        from otel_route_shadow.chain import verify_chain, verify_pass
        from otel_route_shadow.core import PolicySnapshot, policy_set_hash
    except ImportError as exc:
        why = f"chain or analysis not importable: {exc}"
        return [unavailable(live_row, why), unavailable(report_row, why)]
    try:
        policies = demo_policies()
        snapshot = PolicySnapshot(policies=tuple(policies), revision=1, content_hash=policy_set_hash(policies))
        templates = distinct_payloads(snapshot, cfg.distinct_contexts)
        directory = cfg.workdir / "segments"
        directory.mkdir(parents=True, exist_ok=True)
        live, whole, verifier = _write_segmented(directory, records, templates)
        lone = _lone(directory, records // SEGMENTS, templates)

        def live_only() -> None:
            if not verify_pass(live, live_only=True, verifiers=[verifier]).result.intact:
                raise RuntimeError("verify --live-segment rejected the benchmark chain")

        def lone_verify() -> None:
            if not verify_chain(lone).intact:
                raise RuntimeError("verify rejected the lone chain")

        def report(path: Path) -> Any:
            return lambda: build_report(path)

        if not verify_chain(live).intact:
            raise RuntimeError("verify rejected the segmented benchmark chain")
        times = interleaved(
            {
                "live": lambda: timed(live_only),
                "lone": lambda: timed(lone_verify),
                "segmented": lambda: timed(report(live)),
                "whole": lambda: timed(report(whole)),
            },
            cfg.slow_runs,
        )
    except Exception as exc:
        return [errored(live_row, exc), errored(report_row, exc)]
    for row, ours, base in ((live_row, "live", "lone"), (report_row, "segmented", "whole")):
        row.ours, row.baseline, row.runs = Stats.of(times[ours]), Stats.of(times[base]), cfg.slow_runs
        row.ratio = ratios(times[ours], times[base])
    live_row.notes.append("in process; the live file's anchor checked with the log's key; no closed segment read")
    report_row.notes.append("in process: build_report, default breakdowns, verification included")
    return [live_row.judge(), report_row.judge()]
