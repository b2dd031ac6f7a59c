"""A disk that fills up while the host runs, and is still full when it exits: every record the host
could not write is counted, marked in the chain by the next writer, and the exit's log line gives the
true count.

The full disk is real: a small tmpfs mounted for the test (root only; skipped elsewhere), the host a
child process using the plugin's exporter and its exit path (``flush_backlog(spill=True)``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_route_shadow.chain import DROPPED_KIND, DecisionChain, iter_payloads, verify_chain

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 120.0
SPAWNS = 450

_HOST = """
import json, logging, sys
from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter

logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
exporter = RouteShadowChainExporter(sys.argv[1], lock_timeout_ms=1000)
refused = 0
for n in range(int(sys.argv[2])):
    try:
        exporter.append(n + 1, n + 1, 1_700_000_000_000_000_000 + n, {"route_shadow.seam": "x" * 200})
    except OSError:
        refused += 1
exporter.flush_backlog(1.0, spill=True)
print(json.dumps({"refused": refused}))
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_records_lost_to_a_full_disk_at_exit_are_counted_marked_and_logged_with_the_true_count(
    small_disk: Path,
) -> None:
    chain = small_disk / "chain.jsonl"
    host = subprocess.run(
        [sys.executable, "-c", _HOST, str(chain), str(SPAWNS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD_S,
    )
    assert host.returncode == 0, host.stderr
    refused = json.loads(host.stdout.splitlines()[-1])["refused"]
    written = sum(1 for _ in iter_payloads(chain))
    assert refused > 100 and written + refused == SPAWNS
    assert f"{refused} chain records for {chain} are lost" in host.stderr, host.stderr
    assert "next writer marks them in the chain" in host.stderr
    subprocess.run(["mount", "-o", "remount,size=1m", str(small_disk)], check=True)  # room again
    DecisionChain(chain).append({"kind": "route-shadow", "n": "next process"})
    payloads = [payload for _, payload in iter_payloads(chain)]
    marks = [p for p in payloads if p["kind"] == DROPPED_KIND]
    assert sum(p["count"] for p in marks) == refused and {p["reason"] for p in marks} == {"no-space"}
    assert payloads[-1]["n"] == "next process"
    result = verify_chain(chain)
    assert result.intact and result.dropped_records == refused
    DecisionChain(chain).append({"kind": "route-shadow", "n": "and the one after"})
    assert verify_chain(chain).dropped_records == refused  # marked once


@pytest.mark.parametrize("what", ["garbage", "fifo", "directory", "huge", "symlink"])
def test_a_hostile_lost_file_counts_nothing_and_never_blocks_an_append(tmp_path: Path, what: str) -> None:
    chain = tmp_path / "chain.jsonl"
    lost = tmp_path / "chain.jsonl.lost"
    if what == "garbage":
        lost.write_bytes(b'{"no-space": [1, 2]} \xff')
    elif what == "fifo":
        os.mkfifo(lost)
    elif what == "directory":
        lost.mkdir()
    elif what == "symlink":
        target = tmp_path / "elsewhere"
        target.write_bytes(b"x" * 511 + b"\n")
        lost.symlink_to(target)
    else:
        lost.write_bytes(b'{"no-space": [3, 1, 2]}' + b" " * (1 << 20))
    with DecisionChain(chain) as log:
        log.append({"kind": "route-shadow", "n": 0})
        log.append({"kind": "route-shadow", "n": 1})
    payloads = [payload for _, payload in iter_payloads(chain)]
    assert [p.get("n") for p in payloads if p["kind"] != DROPPED_KIND] == [0, 1]
    assert sum(p["count"] for p in payloads if p["kind"] == DROPPED_KIND) == (3 if what == "huge" else 0)
    if what == "symlink":
        assert (tmp_path / "elsewhere").read_bytes() == b"x" * 511 + b"\n"  # never written through
