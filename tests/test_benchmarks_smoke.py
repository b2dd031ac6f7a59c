"""Smoke test of the benchmark harness (ISSUE 8): ``python -m benchmarks --quick`` runs and produces
every row with the expected keys. It asserts nothing about speed: quick sizes are too small for the
targets, and a shared CI machine is too noisy for them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROW_IDS = [
    "1",
    "1c",
    "1d",
    "1e",
    "2a",
    "2b",
    "2c",
    "2d",
    "2e",
    "3a",
    "3b",
    "3c",
    "4a",
    "4b",
    "5a",
    "5b",
    "6a",
    "6b",
    "6c",
    "6d",
    "7",
    "8a",
    "8b",
    "8c",
    "8d",
    "8e",
    "8f",
    "8g",
    "9a",
    "9b",
    "9c",
    "9d",
    "10a",
    "10b",
    "10c",
    "10d",
    "10e",
    "11a",
    "11b",
    "11c",
    "11d",
    "12a",
    "12b",
    "12d",
    "12e",
]
ROW_KEYS = {
    "id",
    "title",
    "measured",
    "unit",
    "ours",
    "baseline_label",
    "baseline",
    "ratio_label",
    "ratio",
    "target",
    "status",
    "runs",
    "notes",
    "extras",
}
STATS_KEYS = {"median", "min", "max", "quartiles", "values"}


def _run_module(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.slow
def test_quick_benchmarks_produce_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = _run_module("benchmarks", "--quick", "--workdir", str(tmp_path / "work"), "--out", str(out))
    document = json.loads(out.read_text())
    assert document["mode"] == "quick"
    assert {"started", "finished", "machine", "config", "rows", "table"} <= set(document)
    rows = document["rows"]
    assert [row["id"] for row in rows] == ROW_IDS
    for row in rows:
        assert set(row) == ROW_KEYS, row["id"]
        assert row["status"] in {"pass", "FAIL", "at the line", "reported", "not available"}, (
            row["id"],
            row["notes"],
        )
        if row["status"] == "not available":
            assert row["notes"], row["id"]
            continue
        assert set(row["ours"]) == STATS_KEYS, row["id"]
        assert row["ours"]["min"] <= row["ours"]["median"] <= row["ours"]["max"]
        for key in ("baseline", "ratio"):
            if row[key] is not None:
                assert set(row[key]) == STATS_KEYS, (row["id"], key)
    for row_id in ROW_IDS:
        assert f"\n{row_id} " in "\n" + proc.stdout, f"row {row_id} missing from the printed table"


@pytest.mark.slow
def test_seam_variants_prototypes_do_the_work_they_claim(tmp_path: Path) -> None:
    """The what-if prototypes of row 1 (``benchmarks/seam_variants.py``) feed a design decision, so
    each must do what it says: the writer thread writes every record inside the timed runs (a
    figure that left records queued would measure a queue), the minimal append writes its side file,
    and no-append writes nothing to the chain."""
    variants = "writer-thread,minimal-append,no-append"
    proc = _run_module(
        "benchmarks.seam_variants",
        "--quick",
        "--rounds",
        "1",
        "--variants",
        variants,
        "--workdir",
        str(tmp_path),
    )
    results = {r["variant"]: r for r in map(json.loads, proc.stderr.strip().splitlines())}
    writer = results["writer-thread"]
    assert writer["chain_records"] == writer["expected_records"] > 0
    assert writer["writer_errors"] == 0
    minimal = results["minimal-append"]
    assert minimal["side_file_lines"] >= minimal["expected_records"] > 0
    assert results["no-append"]["chain_records"] == 0
    assert all(r["ratio"] > 0 for r in results.values())
    assert "| writer-thread |" in proc.stdout


@pytest.mark.slow
def test_the_flag_event_variants_log_through_a_provider_or_not_at_all(tmp_path: Path) -> None:
    """``flag-event-logged`` (docs/benchmarks.md, "Where the flag event goes") must really send the
    event through an SDK logger provider: its exporter counts at least one record per chain record."""
    proc = _run_module(
        "benchmarks.seam_variants",
        "--quick",
        "--rounds",
        "1",
        "--variants",
        "flag-event-logged",
        "--workdir",
        str(tmp_path),
    )
    [logged] = [
        r for r in map(json.loads, proc.stderr.strip().splitlines()) if r["variant"] == "flag-event-logged"
    ]
    assert logged["log_records_exported"] >= logged["chain_records"] > 0


def test_checkpoint_catchup_times_a_checkpoint_that_covers_every_record() -> None:
    """``benchmarks/checkpoint_catchup.py`` (the figures of the checkpointer's hand-over and thread in
    docs/benchmarks.md) checks that each timed checkpoint covers every record, and prints both sides."""
    proc = _run_module("benchmarks.checkpoint_catchup", "--records", "20", "--runs", "1")
    assert "| handed over |" in proc.stdout
    assert "| read back from the chain |" in proc.stdout


def test_tile_sweep_times_a_sweep_over_full_tiles() -> None:
    """``benchmarks/tile_sweep.py`` (the figure of the writer's look at its full tiles in docs/benchmarks.md)."""
    proc = _run_module("benchmarks.tile_sweep", "--records", "600", "--runs", "2")
    assert proc.stdout.startswith("600 leaves: one sweep, ms: median ")


def test_prune_lock_hold_times_a_prune_and_the_chains_lock_it_holds() -> None:
    """``benchmarks/prune_lock_hold.py`` (the figure of the chain's lock held by a prune in
    docs/benchmarks.md, 12d) prunes the whole segment it wrote, and prints both times."""
    proc = _run_module("benchmarks.prune_lock_hold", "--records", "300", "--rounds", "1")
    assert proc.stdout.startswith("prune of one segment of 300 records (gzip), median of 1: ")
    assert "the chain's lock held " in proc.stdout


def test_the_chain_patches_switch_off_what_they_name_and_put_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patches behind the "Caches, windows and threads" figures (``benchmarks/chain_patches.py``)
    must each switch off what they name, and only while entered: counted, never timed."""
    import os

    sys.path.insert(0, str(ROOT))
    from benchmarks.chain_patches import PATCHES
    from otel_route_shadow.chain import DecisionChain, sanitize
    from otel_route_shadow.chain import log as chain_log
    from otel_route_shadow.core.redaction import is_secret_key
    from otel_route_shadow.instrumentation import runtime

    calls = {"pread": 0, "exists": 0}
    real_pread, real_exists = os.pread, os.path.exists

    def pread(fd: int, n: int, offset: int) -> bytes:
        calls["pread"] += 1
        return real_pread(fd, n, offset)

    def exists(path: str) -> bool:
        calls["exists"] += 1
        return real_exists(path)

    monkeypatch.setattr(os, "pread", pread)
    monkeypatch.setattr(os.path, "exists", exists)
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 3600 * 10**9)  # "within the window", however slow

    def appends(name: str, count: int = 5, **kwargs: object) -> dict[str, int]:
        log = DecisionChain(tmp_path / f"{name}.jsonl", **kwargs)  # type: ignore[arg-type]
        log.append({"kind": "route-shadow", "n": -1, "note": "a string of some length " * 3})
        before = dict(calls)
        for n in range(count):
            log.append({"kind": "route-shadow", "n": n, "note": "a string of some length " * 3})
        log.close()
        return {key: calls[key] - before[key] for key in calls}

    with PATCHES["listener"]() as probe:
        appends("listener")
        assert probe()["lines_heard"] == 6
    assert DecisionChain(tmp_path / "after.jsonl").listener is None
    assert appends("shipped")["pread"] == 0 and appends("shipped-2")["exists"] == 0
    with PATCHES["no-head-cache"]():
        assert appends("no-head-cache")["pread"] >= 5
    with PATCHES["no-recheck-window"]():
        assert appends("no-recheck-window")["exists"] >= 5
    sanitize._CLEAN.clear()
    with PATCHES["no-clean-memo"]():
        appends("no-clean-memo")
        assert not sanitize._CLEAN
    appends("clean-memo")
    assert sanitize._CLEAN
    with PATCHES["no-secret-key-memo"]():
        assert sanitize._is_secret_key is is_secret_key
    assert sanitize._is_secret_key is not is_secret_key
    with PATCHES["no-template"]():
        assert runtime.record_template({"route_shadow.seam": "s"}) is None
    assert runtime.record_template({"route_shadow.seam": "s"}) is not None
    with PATCHES["no-durable-memo"]():
        log = DecisionChain(tmp_path / "durable.jsonl", durability="fsync")
        log.append({"n": 0})
        log._commit._durable = 1 << 40  # what a sync "covered": the patch must not trust it
        syncs = log.fsyncs
        log.append({"n": 1})
        assert log.fsyncs == syncs + 1
        log.close()


# The baselines must be honest: the reference verify loop is a real verifier, and the linear-scan
# resolvers decide exactly what explain_batch decides.

VECTORS = ROOT / "tests" / "vectors" / "chain"


@pytest.mark.skipif(not (VECTORS / "valid.jsonl").exists(), reason="chain test vectors not present")
def test_reference_verify_loop_accepts_valid_and_rejects_damaged_vectors() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.chainfile import reference_verify

    assert reference_verify(VECTORS / "valid.jsonl") > 0
    cases = json.loads((VECTORS / "manifest.json").read_text("utf-8"))["cases"]
    damaged = [VECTORS / case["file"] for case in cases if case["verdict"] != "intact"]
    assert damaged
    for path in damaged:
        with pytest.raises(Exception):  # noqa: B017 - any rejection will do
            reference_verify(path)


def test_the_linear_scan_baseline_decides_like_explain_batch() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.linear_resolver import load_baseline
    from benchmarks.resolver_data import make_contexts, make_policies, make_snapshot
    from otel_route_shadow.core import explain_batch

    snapshot = make_snapshot(make_policies(60))
    contexts = make_contexts(300, 60)
    expected = explain_batch(contexts, snapshot)
    baseline, _ = load_baseline()
    assert baseline(contexts, snapshot) == expected


def test_a_row_whose_spread_holds_its_target_says_at_the_line() -> None:
    from benchmarks.harness import AT_THE_LINE, PASS, Row, Stats, Target

    def judged(values: list[float]) -> Row:
        return Row("x", "t", "m", "us", ratio=Stats.of(values), target=Target("<=", 1.25)).judge()

    at_line = judged([1.18, 1.22, 1.24, 1.27, 1.31])
    assert at_line.status == AT_THE_LINE
    assert "the median alone says pass" in at_line.notes[-1]
    assert judged([1.0, 1.05, 1.1, 1.12, 1.3]).status == PASS  # one outlier is not the spread
    assert judged([1.2, 1.3]).status == PASS  # too few runs for a spread: the median decides
