"""Segments sized for the retention: with ``OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS`` set and no segment
size, the writer cuts every 1/16 of the retention, so what the retention keeps stays within 1.2x of it; an
explicit segment size wins, and one that cannot hold that bound is one warning line at start."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
from tlog_support import key_file

from otel_route_shadow.chain import SEGMENTS_SUFFIX, DecisionChain, encode_payload
from otel_route_shadow.cli import main
from otel_route_shadow.instrumentation.checkpointing import (
    DEFAULT_SEGMENT_BYTES,
    DISK_FACTOR_TARGET,
    RETENTION_SEGMENTS,
    SegmentSchedule,
    scheduled_checkpointer,
)
from otel_route_shadow.instrumentation.config import RouteShadowConfig, make_checkpointer
from otel_route_shadow.tlog import Signer

ORIGIN = "example.com/route-shadow/retention-segments"
SIGNER = Signer.generate(ORIGIN)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "may keep" in r.getMessage()]


def _schedule(tmp_path: Path, env: dict[str, str], **keywords: object) -> SegmentSchedule:
    config = RouteShadowConfig.resolve(
        {"OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY": key_file(tmp_path / "log.key", SIGNER), **env},
        chain_path=str(tmp_path / "chain.jsonl"),
        **keywords,
    )
    scheduled = make_checkpointer(config)
    scheduled.close()
    assert scheduled.segments is not None
    return scheduled.segments


def test_with_a_retention_and_no_segment_size_the_writer_cuts_every_sixteenth_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    retention = {"OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS": "500000"}
    assert RouteShadowConfig.resolve({}).segment_bytes is None
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        derived = _schedule(tmp_path, retention)
        plain = _schedule(tmp_path, {})
    assert (derived.max_records, derived.max_bytes) == (500_000 // RETENTION_SEGMENTS, 0)
    assert derived.disk_factor(500_000, 1000) <= 1.13
    assert (plain.max_records, plain.max_bytes) == (0, DEFAULT_SEGMENT_BYTES)
    assert _warnings(caplog) == []


def test_an_explicit_segment_size_wins_and_one_too_large_for_the_retention_is_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {
        "OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS": "500000",
        "OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES": str(DEFAULT_SEGMENT_BYTES),
    }
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        large = _schedule(tmp_path, env)
    assert (large.max_records, large.max_bytes) == (0, DEFAULT_SEGMENT_BYTES)
    (line,) = _warnings(caplog)
    assert "1.43x" in line and f"{DEFAULT_SEGMENT_BYTES} bytes" in line and "500000 records" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        small = _schedule(tmp_path, env, segment_bytes=10 * 1024 * 1024)  # the keyword over the variable
        by_age = _schedule(tmp_path, env, segment_bytes=0)
    assert (small.max_records, small.max_bytes) == (0, 10 * 1024 * 1024)
    assert (by_age.max_records, by_age.max_bytes) == (0, 0)
    (line,) = _warnings(caplog)
    assert "an unbounded multiple" in line and "age only" in line


def test_a_retention_checkpointed_too_seldom_for_its_segments_is_one_warning_line_naming_the_factor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS": "3000"}
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        seldom = _schedule(tmp_path, env)  # a checkpoint (and so a cut) every 1000 records at most
        often = _schedule(tmp_path, env, checkpoint_records=25)
    assert seldom.max_records == often.max_records == 3000 // RETENTION_SEGMENTS
    (line,) = _warnings(caplog)
    assert "1.79x" in line and "a checkpoint every 1000 records" in line
    assert often.disk_factor(3000, 25) <= DISK_FACTOR_TARGET


def test_no_retention_applied_means_no_segment_size_derived_from_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chain = str(tmp_path / "chain.jsonl")
    with caplog.at_level(logging.WARNING, logger="otel_route_shadow"):
        unsigned = scheduled_checkpointer(chain, retention_records=2000)  # no key: retention off
    unsigned.close()
    assert unsigned.retention is None and unsigned.segments is not None
    assert (unsigned.segments.max_records, unsigned.segments.max_bytes) == (0, DEFAULT_SEGMENT_BYTES)
    assert _warnings(caplog) == []


def _lines(chain: Path) -> int:
    files = [*Path(str(chain) + SEGMENTS_SUFFIX).glob("*.jsonl"), chain]
    return sum(path.read_bytes().count(b"\n") for path in files)


def test_the_default_segment_size_keeps_disk_within_a_fifth_over_the_retention(tmp_path: Path) -> None:
    # With the 256 MiB default a retention of 500 k records kept up to 1.4x of them: the segment the
    # retention's boundary falls in and the live file were each about a fifth of the retention.
    chain = tmp_path / "chain.jsonl"
    keep, written = 2_000, 8_000
    scheduled = scheduled_checkpointer(
        str(chain),
        signing_key=key_file(tmp_path / "log.key", SIGNER),
        every_records=25,
        retention_records=keep,
        retention_delete=True,
    )
    scheduled.background = False  # the checkpoint, cut and prune run here, after each due line
    assert scheduled.retention is not None and scheduled.segments is not None
    kept_most = 0
    with DecisionChain(chain, listener=scheduled.line_written) as log:
        for n in range(written):
            log.submit(encode_payload({"kind": "route-shadow", "n": n, "pad": "x" * (n % 97)}, []))
            if n % 25 == 23:  # the next line makes a checkpoint due, and a cut and a prune after it
                kept_most = max(kept_most, _lines(chain) + 1)
    scheduled.close()
    segments = sorted(Path(str(chain) + SEGMENTS_SUFFIX).glob("*.jsonl"))
    pruned = scheduled.retention.last
    assert pruned is not None and pruned.after > written - keep * DISK_FACTOR_TARGET
    assert len(segments) <= RETENTION_SEGMENTS + 2  # the rest deleted, as configured
    assert keep <= _lines(chain) and kept_most <= keep * DISK_FACTOR_TARGET
    firsts = [int(path.stem) for path in segments]
    sizes = [b - a for a, b in itertools.pairwise(firsts)] + [chain.read_bytes().count(b"\n")]
    assert max(sizes) <= keep // RETENTION_SEGMENTS + 25  # cut at the first checkpoint once due
    assert main(["verify", str(chain), "--key", str(SIGNER.verifier())]) == 0
