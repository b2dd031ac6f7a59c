"""Records still waiting for the chain's lock when their process exits are kept in the spill file
beside the chain and written into the chain, once and in order, by the next writer.

Another process really holds the chain's lock here (``lock_held_by_another_process``); every wait is
a wait for that lock, which stays taken, so no assertion depends on how fast anything runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_chain_lock import HANG_GUARD_S, lock_held_by_another_process

from otel_route_shadow.chain import (
    DROPPED_KIND,
    DecisionChain,
    EncodedPayload,
    encode_payload,
    iter_payloads,
    sanitize_payload,
    verify_chain,
)
from otel_route_shadow.chain import log as chain_log
from otel_route_shadow.chain import spill as chain_spill
from otel_route_shadow.chain.backlog import dropped_event
from otel_route_shadow.chain.canonical import canonical_bytes

ROOT = Path(__file__).resolve().parent.parent


class Crash(Exception):
    pass


def _encoded(n: int) -> EncodedPayload:
    return encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n}))


def _kinds(path: Path) -> list[object]:
    return [p.get("n", p.get("kind")) for _, p in iter_payloads(path)]


def _spill_lines(path: Path) -> list[bytes]:
    return Path(f"{path}.spill").read_bytes().splitlines()[1:]


def _spill(path: Path, *numbers: int) -> None:
    """What a writer that exited while another process held the lock leaves: ``numbers`` spilled."""
    log = DecisionChain(path, lock_timeout=0.01)
    with lock_held_by_another_process(path):
        for n in numbers:
            assert log.submit(_encoded(n)) is None
        assert log.flush(0.01) == len(numbers)
        assert log.spill(HANG_GUARD_S) == len(numbers)
    assert log.backlog == 0
    log.close()


_EXITING_HOST = """
import sys
from otel_route_shadow.instrumentation import RouteShadowConfig, ShadowRuntime

runtime = ShadowRuntime(RouteShadowConfig.resolve(chain_path=sys.argv[1], chain_lock_timeout_ms=10))
runtime.attach()
for n in range(int(sys.argv[2])):
    runtime.exporter.append(n + 1, n + 1, n + 1, {"route_shadow.seam": f"waited-{n}"})
print(runtime.exporter._log.backlog, flush=True)
# the interpreter exits here: the runtime's exit hook (its one way out) waits for the lock, then spills
"""


def test_records_waiting_for_the_lock_at_exit_are_kept_and_written_by_the_next_appends_in_order(
    tmp_path: Path,
) -> None:
    # At exit with the chain's lock still held by another process, the waiting records were dropped
    # and the chain carried no marker (issue 25: 495 records, one log line).
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": "before"})
    with lock_held_by_another_process(path):
        done = subprocess.run(
            [sys.executable, "-c", _EXITING_HOST, str(path), "40"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=HANG_GUARD_S,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "40"  # every record waited: the lock never came
        assert "kept in" in done.stderr and "spill" in done.stderr
        assert len(_spill_lines(path)) == 40
        assert _kinds(path) == ["before"]
    log = DecisionChain(path)
    for n in range(3):  # each append takes one batch of the spill first (16 entries)
        log.append({"kind": "route-shadow", "n": f"next-{n}"})
    seams = [p.get("attributes", {}).get("route_shadow.seam", p.get("n")) for _, p in iter_payloads(path)]
    waited = [f"waited-{n}" for n in range(40)]
    assert chain_spill.SPILL_BATCH_RECORDS == 16
    assert seams == ["before", *waited[:16], "next-0", *waited[16:32], "next-1", *waited[32:], "next-2"]
    assert _spill_lines(path) == []
    assert verify_chain(path).intact


def test_a_spill_is_written_before_the_next_writers_own_records_and_only_once(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    _spill(path, 1, 2, 3)
    log = DecisionChain(path)
    log.append({"kind": "route-shadow", "n": 4})
    log.append({"kind": "route-shadow", "n": 5})
    DecisionChain(path).append({"kind": "route-shadow", "n": 6})
    assert _kinds(path) == [0, 1, 2, 3, 4, 5, 6]
    assert verify_chain(path).intact


def test_verify_says_a_spill_file_holds_records_the_chain_does_not_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # verify said "intact: 1 records" and nothing else while the spill file held two more: a host stopped
    # for good after an incident left them out of the chain, and its operator was never told.
    from otel_route_shadow.cli import main as cli_main

    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    _spill(path, 1, 2)
    assert cli_main(["verify", str(path)]) == 0
    assert f"not in the chain yet: {path}.spill" in capsys.readouterr().out
    DecisionChain(path).append({"kind": "route-shadow", "n": 3})
    assert cli_main(["verify", str(path)]) == 0
    assert "not in the chain yet" not in capsys.readouterr().out


def test_verify_names_a_waiting_file_that_holds_records_the_chain_does_not_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a writer killed while its records waited for the lock leaves them in its file under
    # <chain>.waiting/: verify said "intact" as it did for a spill file left behind.
    import json

    from otel_route_shadow.chain import encode_payload, sanitize_payload
    from otel_route_shadow.chain.waiting import WaitingFile
    from otel_route_shadow.cli import main as cli_main

    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    waiting = WaitingFile(str(path))
    waiting.keep(encode_payload(*sanitize_payload({"kind": "route-shadow", "n": 1})))
    (named,) = os.listdir(waiting.dir)
    assert cli_main(["verify", str(path)]) == 0
    assert f"not in the chain yet: {waiting.dir}/{named}" in capsys.readouterr().out
    assert cli_main(["verify", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["left_beside"] == [f"{waiting.dir}/{named}"]


def test_a_running_writer_takes_a_spill_within_its_recheck_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 3600 * 10**9)
    log = DecisionChain(path)
    log.append({"kind": "route-shadow", "n": 0})
    _spill(path, 1)
    log.append({"kind": "route-shadow", "n": 2})  # the file is as this writer left it: no look yet
    assert _kinds(path) == [0, 2]
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 0)
    log.append({"kind": "route-shadow", "n": 3})
    assert _kinds(path) == [0, 2, 1, 3]
    assert verify_chain(path).intact


def test_the_spilled_drop_count_reaches_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.01, backlog=1)
    with lock_held_by_another_process(path):
        for n in range(4):
            log.submit(_encoded(n))
        assert log.spill(HANG_GUARD_S) == 2  # the kept record and the drop event for the other three
    DecisionChain(path).append({"kind": "route-shadow", "n": 9})
    assert _kinds(path) == [0, DROPPED_KIND, 9]
    result = verify_chain(path)
    assert result.intact and result.dropped_records == 3


@pytest.mark.parametrize("written", [0, 2, 5])
def test_a_writer_that_died_while_writing_a_spill_is_finished_without_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: int
) -> None:
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    _spill(path, 1, 2, 3, 4, 5)
    real = DecisionChain._write_line
    calls = []

    def dying(self: DecisionChain, fd: int, head: Any, size: int, encoded: EncodedPayload) -> Any:
        if len(calls) == written:
            os.write(fd, b'{"payload":{"kind":"route-shadow","n":')  # killed mid-write
            raise Crash
        calls.append(1)
        return real(self, fd, head, size, encoded)

    with monkeypatch.context() as patch:
        patch.setattr(DecisionChain, "_write_line", dying)
        with pytest.raises(Crash):
            DecisionChain(path).append({"kind": "route-shadow", "n": "dies"})
    DecisionChain(path).append({"kind": "route-shadow", "n": 6})
    kinds = [k for k in _kinds(path) if k != "chain-quarantine"]
    assert kinds == [0, 1, 2, 3, 4, 5, 6]
    assert _kinds(path).count("chain-quarantine") == 1  # the line the crash tore
    assert _spill_lines(path) == []
    assert verify_chain(path).intact


def test_lines_of_a_spill_that_are_not_entries_are_counted_in_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    _spill(path, 1)
    with open(f"{path}.spill", "ab") as handle:
        handle.write(b"not an entry\n")
        handle.write(b'{"payload":{"kind":"route-shadow","n":2},"redactions":[{"rule":"x"}]}\n')
        handle.write(b'{"payload":{"kind":"route-shadow","n":3},"redactions":[]}\n')
        handle.write(b'{"payload":{"kind":"route-sh')  # torn by a crash
    DecisionChain(path).append({"kind": "route-shadow", "n": 4})
    payloads = [p for _, p in iter_payloads(path)]
    assert [p.get("n", p["kind"]) for p in payloads] == [1, 3, DROPPED_KIND, 4]
    assert payloads[2]["reason"] == "spill-unreadable" and payloads[2]["count"] == 3
    assert verify_chain(path).dropped_records == 3


def test_a_spilled_payload_goes_through_the_sanitizer_again(tmp_path: Path) -> None:
    """The spill file is on the log's own disk: what it holds is an input, never trusted as clean."""
    path = tmp_path / "chain.jsonl"
    _spill(path, 1)
    planted = {"kind": "route-shadow", "note": "ANTHROPIC_API_KEY=sk-ant-api03-" + "Zq9_x-Y8" * 11 + "AA"}
    with open(f"{path}.spill", "ab") as handle:
        handle.write(b'{"payload":' + canonical_bytes(planted) + b',"redactions":[]}\n')
    DecisionChain(path).append({"kind": "route-shadow", "n": 4})
    assert b"sk-ant-api03" not in path.read_bytes()
    records = list(DecisionChain(path).iter_records())
    assert [(m.path, m.rule) for m in records[1].redactions] == [("/note", "credential")]
    assert verify_chain(path).intact


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_spill_path_that_is_not_a_file_blocks_nothing(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "chain.jsonl"
    spill = Path(f"{path}.spill")
    if kind == "fifo":
        os.mkfifo(spill)
    else:
        spill.mkdir()
        (spill / "x").write_bytes(b"x" * 100)
    log = DecisionChain(path, lock_timeout=0.01)
    for n in range(3):
        log.append({"kind": "route-shadow", "n": n})
    assert _kinds(path) == [0, 1, 2]
    with lock_held_by_another_process(path):
        log.submit(_encoded(3))
        with pytest.raises(OSError):
            log.spill(0.01)
        assert log.backlog == 1  # kept in memory: nothing lost by trying
    assert log.flush(None) == 0
    assert _kinds(path) == [0, 1, 2, 3]


def test_entries_beyond_the_spill_bound_are_counted_as_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    monkeypatch.setattr(chain_spill, "SPILL_MAX_BYTES", 2048)
    log = DecisionChain(path, lock_timeout=0.01, backlog=40)
    big = encode_payload(*sanitize_payload({"kind": "route-shadow", "pad": "p" * 300}))
    with lock_held_by_another_process(path):
        for _ in range(40):
            log.submit(big)
        log.submit(_encoded(0))  # a 41st: the backlog is full, so this one is counted, not kept
        assert log.spill(HANG_GUARD_S) == 41
    lines = _spill_lines(path)
    assert 1 < len(lines) < 40
    event = orjson.loads(lines[-1])["payload"]
    assert event["reason"] == "spill-full"
    assert event["count"] == 40 - (len(lines) - 1) + 1  # the records left out, and the one dropped before
    DecisionChain(path).append({"kind": "route-shadow", "n": 1})
    result = verify_chain(path)
    kept = result.records - 2  # less the event and the record after it
    assert result.intact and kept + result.dropped_records == 41


def test_a_spill_file_with_a_stale_claim_is_reset_by_the_next_spiller(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    # A writer died after writing every entry, before the reset.
    stale = chain_spill._header(123, 456_000_000, chain_spill.HEADER_BYTES)
    Path(f"{path}.spill").write_bytes(stale)
    _spill(path, 1)
    assert Path(f"{path}.spill").read_bytes().startswith(chain_spill._EMPTY)
    DecisionChain(path).append({"kind": "route-shadow", "n": 2})
    assert _kinds(path) == [0, 1, 2]


def test_temporaries_a_killed_writer_left_are_removed_at_start(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    left = [
        tmp_path / f".chain.jsonl.torn-0-abc.tmp-{dead_pid}-0a1b2c3d",
        tmp_path / f".chain.jsonl.quarantine-pending.tmp-{dead_pid}-0a1b2c3d",
    ]
    live = tmp_path / f".chain.jsonl.quarantine-pending.tmp-{os.getppid()}-0a1b2c3d"
    for name in (*left, live):
        name.write_bytes(b"x")
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    assert not any(name.exists() for name in left)
    assert live.exists()  # a live writer's temporary is its own


def test_the_spill_event_counts_are_what_the_backlog_counted() -> None:
    event = dropped_event(5, 1, 2)
    encoded = EncodedPayload(canonical_bytes(event), b"[]")
    assert chain_spill._records_in([encoded, _encoded(1)]) == 6


def test_the_exit_message_names_the_spill_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from otel_route_shadow.instrumentation.exporter import RouteShadowChainExporter

    path = tmp_path / "chain.jsonl"
    exporter = RouteShadowChainExporter(path, lock_timeout_ms=10)
    exporter.append(1, 1, 1, {"route_shadow.seam": "first"})
    with lock_held_by_another_process(path):
        exporter.append(2, 2, 2, {"route_shadow.seam": "waited"})
        assert exporter.flush_backlog(0.01, spill=True) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"{path}.spill" in m and "1 chain records" in m for m in messages), messages
    exporter.append(3, 3, 3, {"route_shadow.seam": "after"})
    seams = [p["attributes"]["route_shadow.seam"] for _, p in iter_payloads(path)]
    assert seams == ["first", "waited", "after"]


def test_the_spill_file_format_is_one_entry_per_line(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    _spill(path, 7)
    header, *lines = Path(f"{path}.spill").read_bytes().splitlines(keepends=True)
    assert header == chain_spill._EMPTY and len(header) == chain_spill.HEADER_BYTES == 63
    entry = _encoded(7)
    assert lines == [b'{"payload":' + entry.payload + b',"redactions":' + entry.marks + b"}\n"]
    assert header.split() == [b"route-shadow-spill/2", b"-1", b"0", b"63"]


# -- one batch per append -----------------------------------------------------------------------------


def _lines_per_append(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the lines each append writes (``DecisionChain._write_line`` calls), one entry per append."""
    counts: list[int] = []
    real_append, real_write = DecisionChain._append, DecisionChain._write_line

    def append(self: DecisionChain, *args: Any, **kwargs: Any) -> Any:
        counts.append(0)
        return real_append(self, *args, **kwargs)

    def write_line(self: DecisionChain, *args: Any) -> Any:
        counts[-1] += 1
        return real_write(self, *args)

    monkeypatch.setattr(DecisionChain, "_append", append)
    monkeypatch.setattr(DecisionChain, "_write_line", write_line)
    return counts


def test_a_full_spill_file_is_not_written_inside_one_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The next append wrote every spilled record (up to the spill's 64 MiB) inside one seam call.
    path = tmp_path / "chain.jsonl"
    _spill(path, *range(1, 101))
    counts = _lines_per_append(monkeypatch)
    log = DecisionChain(path)
    for n in range(8):
        log.append({"kind": "route-shadow", "n": f"own-{n}"})
    batch = chain_spill.SPILL_BATCH_RECORDS
    assert counts == [batch + 1] * 6 + [100 - 6 * batch + 1, 1]  # a batch and its own record each
    kinds = _kinds(path)
    assert [k for k in kinds if isinstance(k, int)] == list(range(1, 101))  # order kept, each once
    assert kinds[batch] == "own-0" and kinds[-2:] == ["own-6", "own-7"]
    assert _spill_lines(path) == []
    assert verify_chain(path).intact


def test_a_spill_batch_is_bounded_in_bytes_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chain.jsonl"
    log = DecisionChain(path, lock_timeout=0.01)
    big = [
        encode_payload(*sanitize_payload({"kind": "route-shadow", "n": n, "pad": "p" * 20_000}))
        for n in range(9)
    ]
    with lock_held_by_another_process(path):
        for entry in big:
            log.submit(entry)
        assert log.spill(HANG_GUARD_S) == 9
    counts = _lines_per_append(monkeypatch)
    for n in range(4):
        DecisionChain(path).append({"kind": "route-shadow", "n": f"own-{n}"})
    assert counts == [4, 4, 4, 1]  # 3 entries of 20 KB per 64 KiB batch, and the own record
    assert [k for k in _kinds(path) if isinstance(k, int)] == list(range(9))


@pytest.mark.parametrize("written", [0, 1, 2])
def test_a_writer_that_died_in_a_later_batch_is_finished_without_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: int
) -> None:
    path = tmp_path / "chain.jsonl"
    monkeypatch.setattr(chain_spill, "SPILL_BATCH_RECORDS", 2)
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    _spill(path, 1, 2, 3, 4, 5)
    DecisionChain(path).append({"kind": "route-shadow", "n": "a"})  # the first batch: 1, 2
    real = DecisionChain._write_line
    calls = []

    def dying(self: DecisionChain, fd: int, head: Any, size: int, encoded: EncodedPayload) -> Any:
        if len(calls) == written:
            raise Crash
        calls.append(1)
        return real(self, fd, head, size, encoded)

    with monkeypatch.context() as patch:
        patch.setattr(DecisionChain, "_write_line", dying)
        with pytest.raises(Crash):
            DecisionChain(path).append({"kind": "route-shadow", "n": "dies"})
    log = DecisionChain(path)
    for n in ("b", "c", "d"):
        log.append({"kind": "route-shadow", "n": n})
    kinds = _kinds(path)
    assert [k for k in kinds if isinstance(k, int)] == [0, 1, 2, 3, 4, 5]
    assert kinds[:4] == [0, 1, 2, "a"] and kinds[-1] == "d"
    assert _spill_lines(path) == []
    assert verify_chain(path).intact


def _v1_spill(path: Path, numbers: list[int], claimed: int = -1) -> None:
    """A spill file as the writers before batches left it: header version 1, no next-entry offset."""
    header = f"route-shadow-spill/1 {claimed:>20} {0:>20}\n".encode("ascii")
    assert len(header) == chain_spill.HEADER_BYTES
    entries = [_encoded(n) for n in numbers]
    Path(f"{path}.spill").write_bytes(header + b"".join(chain_spill._line(entry) for entry in entries))


def test_a_version_1_spill_file_is_taken_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chain.jsonl"
    monkeypatch.setattr(chain_spill, "SPILL_BATCH_RECORDS", 2)
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    _v1_spill(path, [1, 2, 3, 4, 5])
    log = DecisionChain(path)
    for n in ("a", "b", "c", "d"):
        log.append({"kind": "route-shadow", "n": n})
    assert _kinds(path) == [0, 1, 2, "a", 3, 4, "b", 5, "c", "d"]
    assert _spill_lines(path) == []


def test_a_version_1_claim_whose_entries_were_all_written_writes_none_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer before batches died after writing every entry of its claim, before emptying the file.
    path = tmp_path / "chain.jsonl"
    monkeypatch.setattr(chain_spill, "SPILL_BATCH_RECORDS", 2)
    DecisionChain(path).append({"kind": "route-shadow", "n": 0})
    claimed = path.stat().st_size
    log = DecisionChain(path)
    monkeypatch.setattr(log, "_spill_due", False)
    for n in (1, 2, 3, 4):
        log.append({"kind": "route-shadow", "n": n})
    _v1_spill(path, [1, 2, 3, 4, 5], claimed)
    log = DecisionChain(path)
    for n in ("a", "b", "c", "d"):
        log.append({"kind": "route-shadow", "n": n})
    assert _kinds(path) == [0, 1, 2, 3, 4, "a", "b", 5, "c", "d"]
    assert _spill_lines(path) == []


def test_a_spill_line_longer_than_any_entry_is_skipped_a_window_at_a_time_and_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chain.jsonl"
    _spill(path, 1)
    with open(f"{path}.spill", "ab") as handle:
        handle.write(b"x" * (3 * chain_spill.SPILL_BATCH_BYTES + 2 * chain_spill.MAX_ENTRY_BYTES) + b"\n")
        handle.write(chain_spill._line(_encoded(2)))
    reads: list[int] = []
    real = os.pread
    monkeypatch.setattr(chain_spill.os, "pread", lambda fd, n, at: reads.append(n) or real(fd, n, at))
    log = DecisionChain(path)
    for n in range(5):
        log.append({"kind": "route-shadow", "n": f"own-{n}"})
    payloads = [p for _, p in iter_payloads(path)]
    kinds = [p.get("n", p["kind"]) for p in payloads]
    assert [k for k in kinds if k not in ("own-0", "own-1", "own-2", "own-3", "own-4")] == [
        1,
        DROPPED_KIND,
        2,
    ]
    assert [p["count"] for p in payloads if p["kind"] == DROPPED_KIND] == [1]
    assert max(reads) <= chain_spill.SPILL_BATCH_BYTES + chain_spill.MAX_ENTRY_BYTES + 1
    assert verify_chain(path).dropped_records == 1
