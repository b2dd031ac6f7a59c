"""``verify`` on hostile input (huge lines, invalid UTF-8, JSON bombs), in parallel, with bounded memory,
and in strict mode."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest
from test_chain_support import build_chain, forge, forge_chain, plugin_payload, write_lines

from otel_route_shadow import processes
from otel_route_shadow.chain import (
    MAX_LINE_BYTES,
    DecisionChain,
    Reason,
    Verdict,
    verify_chain,
)
from otel_route_shadow.chain import parallel as chain_parallel

MB = 1024 * 1024


def _chain_with(tmp_path: Path, bad: bytes, at: int = 3, count: int = 6) -> Path:
    """A valid chain of ``count`` records with the line ``bad`` inserted before record ``at``."""
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, count)
    write_lines(path, [*lines[:at], bad, *lines[at:]])
    return path


def _assert_broken(path: Path, reason: Reason, seq: int = 3, line: int = 4) -> None:
    result = verify_chain(path)
    assert (result.verdict, result.reason, result.first_bad_seq, result.line) == (
        Verdict.BROKEN,
        reason,
        seq,
        line,
    ), result.describe()


def test_empty_chain_is_intact(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    path.touch()
    result = verify_chain(path)
    assert result.intact and result.records == 0 and result.head_hash is None and result.head_seq is None
    assert result.to_dict()["verdict"] == "intact"


def test_unreadable_files_raise_os_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify_chain(tmp_path / "missing.jsonl")
    with pytest.raises(IsADirectoryError):
        verify_chain(tmp_path)


def test_a_100_mb_line_is_rejected_without_buffering_it(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    lines = build_chain(path, 5)
    with path.open("wb") as handle:
        handle.writelines(lines[:3])
        block = b"a" * MB
        for _ in range(100):
            handle.write(block)
        handle.write(b"\n")
        handle.writelines(lines[3:])
    tracemalloc.start()
    try:
        result = verify_chain(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (result.reason, result.first_bad_seq, result.line) == (Reason.UNPARSEABLE, 3, 4)
    assert "limit" in (result.detail or "")
    assert peak < 3 * MAX_LINE_BYTES, peak


def test_a_100_mb_torn_tail_is_reported_without_buffering_it(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 3)
    size = path.stat().st_size
    with path.open("ab") as handle:
        block = b"z" * MB
        for _ in range(100):
            handle.write(block)
    tracemalloc.start()
    try:
        result = verify_chain(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.verdict is Verdict.TORN_TAIL and result.records == 3
    assert result.torn_tail is not None and (result.torn_tail.offset, result.torn_tail.length) == (
        size,
        100 * MB,
    )
    assert peak < 4 * MB, peak


@pytest.mark.parametrize(
    ("bad", "reason", "detail"),
    [
        (b"\xff\xfe\xfd\n", Reason.UNPARSEABLE, "UTF-8"),
        (b'{"payload":"\xc3\x28"}\n', Reason.UNPARSEABLE, "UTF-8"),
        (b"[" * 200_000 + b"]" * 200_000 + b"\n", Reason.UNPARSEABLE, "JSON"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"\n", Reason.UNPARSEABLE, "JSON"),
        (b"NaN\n", Reason.UNPARSEABLE, "JSON"),
        (b'{"v":1,"x":Infinity}\n', Reason.UNPARSEABLE, "JSON"),
        (b'"\\ud800"\n', Reason.UNPARSEABLE, "JSON"),
        (b"\xef\xbb\xbf{}\n", Reason.UNPARSEABLE, ""),
        (b"[1,2,3]\n", Reason.MALFORMED_RECORD, "object"),
        (b'{"v":1}\n', Reason.MALFORMED_RECORD, "missing"),
        (b'{"seq":3}\n', Reason.MALFORMED_RECORD, "version"),
        (b'{"v":"1"}\n', Reason.UNKNOWN_VERSION, "version"),
        (b'{"v":true}\n', Reason.UNKNOWN_VERSION, "version"),
        (b'{"v":1.0}\n', Reason.UNKNOWN_VERSION, "version"),
    ],
    ids=[
        "invalid-utf8",
        "invalid-utf8-in-string",
        "deep-array-bomb",
        "deep-object-bomb",
        "nan",
        "infinity",
        "lone-surrogate-escape",
        "bom",
        "array",
        "missing-members",
        "no-version",
        "string-version",
        "bool-version",
        "float-version",
    ],
)
def test_hostile_lines_are_verdicts_not_crashes(
    tmp_path: Path, bad: bytes, reason: Reason, detail: str
) -> None:
    path = _chain_with(tmp_path, bad)
    _assert_broken(path, reason)
    assert detail in (verify_chain(path).detail or "")


def test_wide_json_bomb_is_a_verdict(tmp_path: Path) -> None:
    """Two million array elements in one (limit-sized) line: parsed, found wanting, no crash."""
    path = _chain_with(tmp_path, b'{"v":1,"payload":[' + b"{}," * 1_300_000 + b"{}]}\n")
    _assert_broken(path, Reason.MALFORMED_RECORD)


def test_integers_beyond_53_bits_are_malformed(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    lines = forge_chain(path, [plugin_payload(0)])
    body = orjson.dumps(
        {
            "payload": {"t": 2**60},
            "prev_hash": orjson.loads(lines[0])["record_hash"],
            "redactions": [],
            "seq": 1,
            "v": 1,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    import hashlib

    record_hash = hashlib.sha256(body).hexdigest()
    write_lines(path, [lines[0], body[:-1] + b',"record_hash":"' + record_hash.encode() + b'"}\n'])
    _assert_broken(path, Reason.MALFORMED_RECORD, seq=1, line=2)
    assert "53" in (verify_chain(path).detail or "")


@pytest.mark.parametrize(
    ("payload", "problem"),
    [({"x": 1.5}, "fraction"), ({"a": [1, {"b": 1e20}]}, "/a/1/b"), ({"caf\u00e9": 1}, "non-ASCII")],
)
def test_strict_mode_rejects_values_no_writer_emits(
    tmp_path: Path, payload: dict[str, object], problem: str
) -> None:
    """A forger who recomputes hashes can put a float in a payload; the default walk accepts it (the hash
    covers it, so it cannot be slipped into a chain without rewriting hashes), strict mode names it."""
    path = tmp_path / "chain.jsonl"
    forge_chain(path, [plugin_payload(0), payload, plugin_payload(2)])
    assert verify_chain(path).intact
    result = verify_chain(path, strict=True)
    assert (result.reason, result.first_bad_seq, result.line) == (Reason.MALFORMED_RECORD, 1, 2)
    assert problem in (result.detail or "")


def test_records_with_redactions_take_the_exact_path_and_verify(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path)
    for i in range(5):
        log.append({"i": i, "s": "password=x" if i % 2 else "clean"})
    assert verify_chain(path).intact and verify_chain(path, strict=True).intact


def test_bad_redaction_marks_are_malformed(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    line, _ = forge(0, "0" * 64, {"x": 1}, marks=b'[{"path":"/x","rule":"made-up"}]')
    write_lines(path, [line])
    _assert_broken(path, Reason.MALFORMED_RECORD, seq=0, line=1)
    line, _ = forge(
        0, "0" * 64, {"x": 1}, marks=b'[{"path":"/y","rule":"credential"},{"path":"/x","rule":"credential"}]'
    )
    write_lines(path, [line])
    assert "sorted" in (verify_chain(path).detail or "")


def test_memory_does_not_grow_with_chain_length(tmp_path: Path) -> None:
    peaks = []
    for count in (5000, 20000):
        path = tmp_path / f"chain-{count}.jsonl"
        forge_chain(path, [plugin_payload(i) for i in range(count)])
        tracemalloc.start()
        try:
            assert verify_chain(path).records == count
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    # Bounded by the read block (1 MiB) and its split lines, not by the record count.
    assert peaks[1] < 8 * MB and peaks[1] < peaks[0] * 1.5, peaks


def test_progress_reports_records_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    forge_chain(path, [plugin_payload(i) for i in range(3000)])
    records: list[int] = []
    done: list[tuple[int, int]] = []
    result = verify_chain(path, progress=records.append, byte_progress=lambda d, t: done.append((d, t)))
    assert result.records == 3000
    assert records and records == sorted(records) and records[-1] == 3000
    assert done[-1] == (path.stat().st_size, path.stat().st_size)


# -- parallel ---------------------------------------------------------------------------------------------


@pytest.fixture
def parallel_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split even small chains so that chunk boundaries fall everywhere in a test-sized file."""
    monkeypatch.setattr(chain_parallel, "PARALLEL_MIN_BYTES", 0)


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("jobs", [2, 3])
def test_parallel_verify_agrees_on_an_intact_chain(
    tmp_path: Path, jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    forge_chain(path, [plugin_payload(i) for i in range(400)])
    sequential = verify_chain(path)
    chunks: list[int] = []
    real_split = processes.line_segments

    def spy(*args: object) -> list[tuple[int, int]]:
        result = real_split(*args)  # type: ignore[arg-type]
        chunks.append(len(result))
        return result

    monkeypatch.setattr(processes, "line_segments", spy)
    progress: list[int] = []
    parallel = verify_chain(path, jobs=jobs, progress=progress.append)
    assert chunks == [jobs * processes.SEGMENTS_PER_JOB]  # really split, really parallel
    assert parallel.to_dict() == sequential.to_dict()
    assert parallel.intact and progress[-1] == 400


@pytest.mark.usefixtures("parallel_everywhere")
@pytest.mark.parametrize("where", [0, 1, 57, 199, 200, 201, 398, 399])
@pytest.mark.parametrize("damage", ["flip", "delete", "swap", "torn"])
def test_parallel_verify_finds_the_same_first_bad_seq(tmp_path: Path, where: int, damage: str) -> None:
    path = tmp_path / "chain.jsonl"
    lines = forge_chain(path, [plugin_payload(i) for i in range(400)])
    if damage == "flip":
        lines[where] = lines[where].replace(b'"selected"', b'"selectex"')
    elif damage == "delete":
        del lines[where]
    elif damage == "swap" and where < 399:
        lines[where], lines[where + 1] = lines[where + 1], lines[where]
    elif damage == "torn":
        lines = [*lines[: where + 1], lines[where][:30]] if where < 399 else [*lines[:-1], lines[-1][:-1]]
    write_lines(path, lines)
    sequential = verify_chain(path)
    # Deleting the last record leaves a shorter valid chain (only an external head anchor shows it).
    assert not sequential.intact or (damage, where) in {("swap", 399), ("delete", 399)}
    assert verify_chain(path, jobs=2).to_dict() == sequential.to_dict()


def _damaged_chain(tmp_path: Path, records: int, bad: int) -> Path:
    path = tmp_path / "chain.jsonl"
    lines = forge_chain(path, [plugin_payload(i) for i in range(records)])
    lines[bad] = lines[bad].replace(b'"selected"', b'"selectex"')
    write_lines(path, lines)
    return path


def _run_child(body: str, timeout: float, hung: str) -> list[str]:
    """Run ``body`` in a fresh interpreter with parallel verify forced on; fail if it outlives ``timeout``."""
    import subprocess
    import sys
    import textwrap

    script = "from otel_route_shadow.chain import parallel, verify_chain\nparallel.PARALLEL_MIN_BYTES = 0\n"
    script += textwrap.dedent(body)
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(hung)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_parallel_verify_is_not_hung_by_an_inherited_sigterm_handler(tmp_path: Path) -> None:
    """Regression: with the e2e fixture's SIGTERM handler installed, ``Pool.terminate`` on a damaged
    chunk left forked workers running the handler instead of dying, and the suite hung."""
    path = _damaged_chain(tmp_path, 400, 50)
    body = f"""
        import signal
        signal.signal(signal.SIGTERM, lambda signum, frame: None)  # a host handler that does not exit
        result = verify_chain({str(path)!r}, jobs=2)
        print(result.intact, result.first_bad_seq)
        """
    assert _run_child(body, 60, "parallel verify hung under an inherited SIGTERM handler") == ["False", "50"]


def test_parallel_verify_stopping_early_never_waits_on_a_killed_worker(tmp_path: Path) -> None:
    """Liveness of the early stop. It used ``Pool.terminate``, which could kill a worker while it
    held the result queue's lock; the pool's task thread then waited for that lock forever (seen
    once, in a run of the chain tests). The race is rare: this stress did not reproduce it against
    the old code in three tries, so it guards rather than proves; the fix is by construction (no
    worker is killed any more). Many early stops with workers busy, in a child with a deadline."""
    path = _damaged_chain(tmp_path, 800, 3)
    body = f"""
        for round in range(60):
            result = verify_chain({str(path)!r}, jobs=2 + round % 3)
            assert (result.intact, result.first_bad_seq) == (False, 3), result
        print("ok")
        """
    assert _run_child(body, 240, "parallel verify hung after stopping early") == ["ok"]


def _record_line(seq: int, prev: str, pad: int) -> tuple[bytes, str]:
    return forge(seq, prev, {"kind": "pad", "pad": "x" * pad})


@pytest.mark.parametrize("lead", [0, MB - 7, MB // 2, 3 * MB + 5])
@pytest.mark.parametrize("strict", [False, True])
def test_a_line_over_4_mib_is_unparseable_wherever_it_falls_against_the_read_blocks(
    tmp_path: Path, lead: int, strict: bool
) -> None:
    """Regression: a well-formed, correctly hashed record line of 4 MiB + 300 KiB passed verify when
    it completed inside a later 1 MiB read block (only the carry between blocks was measured)."""
    from otel_route_shadow.chain import GENESIS_HASH, MAX_LINE_BYTES

    lines: list[bytes] = []
    prev = GENESIS_HASH
    if lead:
        base = len(_record_line(0, prev, 0)[0])
        line, prev = _record_line(0, prev, lead - base)
        assert len(line) == lead
        lines.append(line)
    long_seq = len(lines)
    line, prev = _record_line(long_seq, prev, MAX_LINE_BYTES + 300 * 1024)
    assert MAX_LINE_BYTES < len(line) - 1 < 5 * MB
    lines.append(line)
    line, prev = _record_line(long_seq + 1, prev, 10)
    lines.append(line)
    path = tmp_path / "chain.jsonl"
    write_lines(path, lines)
    result = verify_chain(path, strict=strict)
    assert result.verdict is Verdict.BROKEN
    assert result.reason is Reason.UNPARSEABLE
    assert (result.first_bad_seq, result.line, result.offset) == (long_seq, long_seq + 1, lead)
