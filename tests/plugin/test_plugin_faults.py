"""Fault injection: a host written from docs/instrumenting.md (``readme_host``) under each sink fault.

Each case runs in a process of its own (``fault_driver``): the host bare, then instrumented the
documented way (``OTEL_PYTHON_ROUTE_SHADOW_*`` and ``RouteShadowInstrumentor().instrument()``) under
the fault. Asserted for every fault: the host's results and exceptions are identical to the bare
run; the delay is bounded, by counting what could make the host wait (no sleep, at most one
blocking file lock and a few opens per seam call), never by timing; and the chain holds one record
per seam call wherever it can be written. Faults that need permissions to bind run as ``nobody``
when the suite runs as root (root ignores file modes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.plugin import readme_host

DRIVER = Path(__file__).with_name("fault_driver.py")
JOBS = 8
CALLS = JOBS * readme_host.SEAM_CALLS_PER_JOB


@dataclass
class Fault:
    """One fault: how to set it up in ``root`` (returns the settings), and what it must leave."""

    setup: Callable[[Path], dict[str, str]]
    check: Callable[[dict[str, Any], str], None]
    non_root: bool = False
    driver_fault: str = "none"
    marks: list[Any] = field(default_factory=list)


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder ``nobody`` can reach (pytest's own tmp_path is root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="route-shadow-faults-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                (Path(dirpath) / name).chmod(stat.S_IRWXU)
        shutil.rmtree(path, ignore_errors=True)


def _writable_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def _saved_store(root: Path) -> Path:
    from otel_route_shadow.store import RoutingPolicyStore
    from otel_route_shadow.store.policy_file import parse_policy_document

    store = root / "store"
    document = {"policies": [{"id": "p", "match": {"roles": ["reviewer"]}, "action": {}}]}
    RoutingPolicyStore(store).save(list(parse_policy_document(document, "t").policies))
    return store


def _chain_in(root: Path) -> str:
    return str(_writable_dir(root / "chain") / "chain.jsonl")


# -- setups --------------------------------------------------------------------------------------


def _read_only_chain_folder(root: Path) -> dict[str, str]:
    folder = root / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return {"CHAIN_PATH": str(folder / "chain.jsonl")}


def _directory_as_chain(root: Path) -> dict[str, str]:
    (root / "chain.jsonl").mkdir()
    return {"CHAIN_PATH": str(root / "chain.jsonl")}


def _fifo_as_chain(root: Path) -> dict[str, str]:
    os.mkfifo(root / "chain.jsonl")
    return {"CHAIN_PATH": str(root / "chain.jsonl")}


def _dev_full(root: Path) -> dict[str, str]:
    return {"CHAIN_PATH": "/dev/full"}


def _plain(root: Path) -> dict[str, str]:
    return {"CHAIN_PATH": _chain_in(root)}


def _corrupt_store(root: Path) -> dict[str, str]:
    store = _saved_store(root)
    for path in store.rglob("*.json"):
        path.write_text(path.read_text().replace('"reviewer"', '"planner"'))
    return {"CHAIN_PATH": _chain_in(root), "STORE": str(store)}


def _unreadable_store(root: Path) -> dict[str, str]:
    store = _saved_store(root)
    store.chmod(0)
    return {"CHAIN_PATH": _chain_in(root), "STORE": str(store)}


def _file_as_store(root: Path) -> dict[str, str]:
    (root / "store").write_text("a file where the store folder should be")
    return {"CHAIN_PATH": _chain_in(root), "STORE": str(root / "store")}


def _bad_setting(root: Path) -> dict[str, str]:
    seams = readme_host.SEAMS + f";{readme_host.MODULE}:Runner.no_such_method,agentic"
    return {"CHAIN_PATH": _chain_in(root), "SEAMS": seams}


def _strict(root: Path) -> dict[str, str]:
    return {"CHAIN_PATH": _chain_in(root), "STRICT": "true"}


def _kill_switch(root: Path) -> dict[str, str]:
    return {"CHAIN_PATH": _chain_in(root), "DISABLED": "true"}


# -- checks --------------------------------------------------------------------------------------


def _no_chain(out: dict[str, Any], log: str) -> None:
    """Nothing can be written: every seam call is still one span, marked with the sink's error."""
    assert out["records"] == 0
    assert out["spans"] == CALLS and "None" not in out["span_error_types"]
    assert sum(n for cause, n in out["errors"].items() if cause.startswith("chain:")) == CALLS
    assert log.count("route shadow chain failed") == len(out["span_error_types"])  # once per cause


def _chain_refused(out: dict[str, Any], log: str) -> None:
    """Not a regular file: refused at start with one log line, nothing recorded, every span still made."""
    assert out["records"] == 0
    assert out["spans"] == CALLS
    assert log.count("route shadow records nothing") == 1, log


def _partial_chain(out: dict[str, Any], log: str) -> None:
    """A file-size limit: what fits is written, every other record is a counted, marked error."""
    assert 1 <= out["records"] < CALLS
    assert out["records"] + out["errors"]["chain:OSError"] == CALLS


def _complete_chain(out: dict[str, Any], log: str) -> None:
    assert out["records"] == out["spans"] == CALLS


def _held(out: dict[str, Any], log: str) -> None:
    _complete_chain(out, log)
    assert out["span_reasons"] == ["snapshot-unavailable"]


def _unreadable(out: dict[str, Any], log: str) -> None:
    _held(out, log)
    assert out["span_error_types"] == out["record_error_types"] == ["StoreIOError"]
    assert out["errors"] == {"store:StoreIOError": CALLS}
    assert log.count("route shadow store failed") == 1, log


def _refused(out: dict[str, Any], log: str) -> None:
    assert out["refused"] is not None and "'no_such_method' not found" in out["refused"]
    assert out["spans"] == out["records"] == 0
    assert log.count("route shadow not instrumented") == 1


def _contained_after_host(out: dict[str, Any], log: str) -> None:
    _complete_chain(out, log)
    assert out["errors"] == {"end:TypeError": CALLS}
    assert "strict mode raises only before it runs" in log and "set OTEL_PYTHON" not in log


def _raised_before_host(out: dict[str, Any], log: str) -> None:
    assert out["raised"] == ["TypeError"] and out["expected_calls"] == 0  # the host never ran
    assert "raised before the host runs" in log


def _half_recorded(out: dict[str, Any], log: str) -> None:
    assert out["records"] == out["spans"] == out["expected_calls"] == CALLS - (JOBS // 2) * 5


FAULTS: dict[str, Fault] = {
    "read-only chain folder": Fault(_read_only_chain_folder, _no_chain, non_root=True),
    "directory as chain path": Fault(_directory_as_chain, _chain_refused),
    "FIFO as chain path": Fault(_fifo_as_chain, _chain_refused),
    "/dev/full as chain path": Fault(_dev_full, _chain_refused),
    "file-size limit": Fault(_plain, _partial_chain, driver_fault="file-size-limit"),
    "corrupt store": Fault(_corrupt_store, _held),
    "unreadable store (mode 000)": Fault(_unreadable_store, _unreadable, non_root=True),
    "a file in place of the store": Fault(_file_as_store, _unreadable),
    "bad setting": Fault(_bad_setting, _refused),
    "strict, processor bug after the host": Fault(
        _strict, _contained_after_host, driver_fault="processor-bug-after-host"
    ),
    "strict, processor bug before the host": Fault(
        _strict, _raised_before_host, driver_fault="processor-bug-before-host"
    ),
    "kill switch toggled": Fault(_kill_switch, _half_recorded, driver_fault="kill-switch-toggled"),
}


def _run_driver(fault: Fault, root: Path, timeout: float = 120) -> tuple[dict[str, Any], str]:
    settings = {"SEAMS": readme_host.SEAMS, **fault.setup(root)}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_PYTHON_ROUTE_SHADOW_")}
    env.update({f"OTEL_PYTHON_ROUTE_SHADOW_{key}": value for key, value in settings.items()})
    spec = {"fault": fault.driver_fault, "jobs": JOBS, "non_root": fault.non_root}
    # The timeout only stops a hung host from hanging the suite; no assertion depends on time.
    done = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@pytest.mark.parametrize("name", list(FAULTS))
def test_the_host_is_undisturbed_under_each_fault(name: str, root: Path) -> None:
    fault = FAULTS[name]
    if fault.non_root and os.geteuid() != 0 and sys.platform != "linux":
        pytest.skip("needs POSIX file modes")
    out, log = _run_driver(fault, root)
    if name != "strict, processor bug before the host":
        assert out["same"], "the host's results or exceptions changed"
    assert out["sleeps"] == 0
    assert out["blocking_locks"] <= max(out["expected_calls"], 0)
    assert out["opens"] <= 2 * CALLS + 4
    fault.check(out, log)


def test_a_file_size_limit_is_logged_as_efbig_never_blamed_on_the_lock(root: Path) -> None:
    """Under RLIMIT_FSIZE the exit's log line said the records "still waited for the lock"; the
    lock was free, the write failed with EFBIG: the line says so."""
    _, log = _run_driver(FAULTS["file-size limit"], root)
    assert "EFBIG (File too large)" in log, log
    assert "lock" not in log, log


def test_records_the_disk_refused_are_never_said_to_be_kept_in_the_spill_file(root: Path) -> None:
    # The exit's line said "N chain records ... kept in <chain>.spill, which the next writer writes
    # into the chain": under a file-size limit the records were lost and only their count was spilled.
    _, log = _run_driver(FAULTS["file-size limit"], root)
    assert re.search(r": 0 kept in \S+/chain\.jsonl\.spill, [1-9][0-9]* lost and counted there", log), log


def test_records_a_file_size_limit_refused_are_a_gap_in_the_chain_once_writing_works_again(
    root: Path,
) -> None:
    # Under RLIMIT_FSIZE 480 of 500 records were lost and the chain carried no gap marker (issue 25):
    # the host's process counts them and keeps the count in the spill file at shutdown (it stays
    # small enough for the limit); the next writer, without the limit, writes it into the chain.
    from otel_route_shadow.chain import DROPPED_KIND, DecisionChain, iter_payloads, verify_chain

    out, log = _run_driver(FAULTS["file-size limit"], root)
    refused = out["errors"]["chain:OSError"]
    assert refused > 0 and out["records"] + refused == CALLS
    assert "kept in" in log and ".spill" in log
    chain = root / "chain" / "chain.jsonl"
    DecisionChain(chain).append({"kind": "route-shadow-test", "n": "next writer"})
    payloads = [payload for _, payload in iter_payloads(chain)]
    gaps = [p for p in payloads if p.get("kind") == DROPPED_KIND]
    assert {g["reason"] for g in gaps} == {"file-too-large"}  # a small event may fit where a record does not
    assert sum(g["count"] for g in gaps) == refused
    result = verify_chain(chain)
    assert result.intact and result.dropped_records == refused
    assert sum(p.get("kind") == "route-shadow" for p in payloads) + result.dropped_records == CALLS
