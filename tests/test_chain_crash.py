"""Crash safety: a torn tail is reported as such, the next append quarantines it and says so in the
chain, a crash at any step of that quarantine is finished by the next appender, and a kill loop of real
SIGKILLs never leaves anything but an intact chain or one torn tail."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_chain_support import build_chain

from otel_route_shadow.chain import (
    QUARANTINE_KIND,
    DecisionChain,
    Reason,
    Verdict,
    iter_payloads,
    verify_chain,
)
from otel_route_shadow.chain import log as chain_log
from otel_route_shadow.chain import quarantine as chain_quarantine


class Crash(BaseException):
    """Stands in for the process dying at a given point (not an Exception: nothing may catch it)."""


def _payloads(path: Path) -> list[dict[str, Any]]:
    return [payload for _, payload in iter_payloads(path)]


def _events(path: Path) -> list[dict[str, Any]]:
    return [p for p in _payloads(path) if p.get("kind") == QUARANTINE_KIND]


def _marker(path: Path) -> Path:
    return Path(f"{path}.quarantine-pending")


def _check_quarantine_files(path: Path) -> None:
    """Every quarantine event names a file beside the chain holding exactly the bytes it describes,
    and every quarantine file beside the chain has its event."""
    events = _events(path)
    files = sorted(p.name for p in path.parent.glob(f"{path.name}.torn-*"))
    assert sorted(e["file"] for e in events) == files
    for event in events:
        data = (path.parent / event["file"]).read_bytes()
        assert len(data) == event["length"]
        assert hashlib.sha256(data).hexdigest() == event["sha256"]
        assert event["file"] == f"{path.name}.torn-{event['offset']}-{event['sha256'][:16]}"
        assert event["reason"] == "torn-tail"
    assert not _marker(path).exists()


def _tear(path: Path, data: bytes) -> tuple[int, bytes]:
    size = path.stat().st_size if path.exists() else 0
    with path.open("ab") as handle:
        handle.write(data)
    return size, data


@pytest.mark.parametrize(
    "torn",
    [
        b'{"payload":{"kind":"route-sha',
        b"x",
        b'{"payload":{},"prev_hash":"' + b"0" * 64 + b'","redactions":[],"seq":3,"v":1}',  # no newline
        b"\xff\xfe garbage",
    ],
    ids=["half-record", "one-byte", "complete-json-without-newline", "binary"],
)
def test_torn_tail_is_reported_then_quarantined_by_the_next_append(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 3)
    head = verify_chain(path).head_hash
    offset, _ = _tear(path, torn)

    result = verify_chain(path)
    assert (result.verdict, result.reason, result.first_bad_seq, result.line) == (
        Verdict.TORN_TAIL,
        Reason.TORN_TAIL,
        3,
        4,
    )
    assert result.torn_tail is not None and result.torn_tail.to_dict() == {
        "offset": offset,
        "length": len(torn),
    }
    assert (result.records, result.head_hash) == (3, head)  # every complete record still verifies

    log = DecisionChain(path)
    record = log.append({"kind": "route-shadow", "after": "torn"})
    payloads = _payloads(path)
    assert payloads[3] == {
        "kind": QUARANTINE_KIND,
        "reason": "torn-tail",
        "offset": offset,
        "length": len(torn),
        "sha256": hashlib.sha256(torn).hexdigest(),
        "file": f"chain.jsonl.torn-{offset}-{hashlib.sha256(torn).hexdigest()[:16]}",
    }
    assert record.seq == 4 and payloads[4] == {"kind": "route-shadow", "after": "torn"}
    assert (tmp_path / payloads[3]["file"]).read_bytes() == torn
    assert verify_chain(path).intact and log.quarantines == 1
    _check_quarantine_files(path)


def test_a_chain_that_is_only_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    path.write_bytes(b'{"payload":{"ki')
    result = verify_chain(path)
    assert (result.verdict, result.records, result.first_bad_seq, result.line) == (Verdict.TORN_TAIL, 0, 0, 1)
    record = DecisionChain(path).append({"n": 1})
    assert record.seq == 1
    assert _payloads(path)[0]["kind"] == QUARANTINE_KIND
    assert verify_chain(path).intact
    _check_quarantine_files(path)


def test_a_large_torn_tail_is_copied_in_blocks(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    torn = os.urandom(3 * 1024 * 1024).replace(b"\n", b"_")
    offset, _ = _tear(path, torn)
    DecisionChain(path).append({"n": 1})
    assert _events(path)[0]["offset"] == offset and _events(path)[0]["length"] == len(torn)
    assert verify_chain(path).intact
    _check_quarantine_files(path)


def test_head_and_readers_do_not_touch_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    _tear(path, b'{"half')
    before = path.read_bytes()
    DecisionChain(path).head()
    verify_chain(path)
    list(iter_payloads(path))
    assert path.read_bytes() == before


# -- a crash inside the quarantine procedure, at each step ----------------------------------------------


def _crash_in(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    def boom(*_: object, **__: object) -> None:
        raise Crash(where)

    if where == "copy":
        real_replace = os.replace

        def replace(src: str, dst: str) -> None:
            if ".torn-" in str(dst):
                raise Crash(where)
            real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
    elif where == "marker":
        real_write = chain_quarantine.write_atomic

        def write_atomic(path: str, data: Any, **kwargs: Any) -> None:
            if str(path).endswith(".quarantine-pending"):
                raise Crash(where)
            real_write(path, data, **kwargs)

        monkeypatch.setattr(chain_quarantine, "write_atomic", write_atomic)
    elif where == "truncate":
        monkeypatch.setattr(os, "ftruncate", boom)
    elif where == "event":
        monkeypatch.setattr(DecisionChain, "_write_event", boom)
    elif where == "unlink":
        monkeypatch.setattr(chain_quarantine, "remove_file", boom)
    else:  # pragma: no cover
        raise AssertionError(where)


@pytest.mark.parametrize("where", ["copy", "marker", "truncate", "event", "unlink"])
def test_a_crash_at_any_quarantine_step_is_finished_by_the_next_appender(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 3)
    torn = b'{"payload":{"kind":"torn'
    offset, _ = _tear(path, torn)
    with monkeypatch.context() as patch:
        _crash_in(patch, where)
        with pytest.raises(Crash):
            DecisionChain(path).append({"n": "first try"})
    # Whatever the step, the chain on disk is intact or still shows only the torn tail.
    assert verify_chain(path).verdict in (Verdict.INTACT, Verdict.TORN_TAIL)

    record = DecisionChain(path).append({"n": "second try"})
    payloads = _payloads(path)
    assert [p.get("kind") for p in payloads[3:]] == [QUARANTINE_KIND, None]
    assert payloads[3]["offset"] == offset and payloads[3]["sha256"] == hashlib.sha256(torn).hexdigest()
    assert record.seq == 4 and payloads[4] == {"n": "second try"}
    assert verify_chain(path).intact
    _check_quarantine_files(path)


def test_a_torn_quarantine_event_owes_both_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Crash after the truncation, then a second crash tears the event line itself: both quarantines
    end up in the chain, none is lost."""
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    first_torn = b'{"payload":{"first'
    _tear(path, first_torn)
    with monkeypatch.context() as patch:
        _crash_in(patch, "event")
        with pytest.raises(Crash):
            DecisionChain(path).append({"n": 0})
    second_torn = b'{"payload":{"file":"chain.jsonl.torn-'  # the start of an event line, cut short
    _tear(path, second_torn)
    DecisionChain(path).append({"n": 1})
    events = _events(path)
    assert sorted(e["sha256"] for e in events) == sorted(
        hashlib.sha256(t).hexdigest() for t in (first_torn, second_torn)
    )
    assert verify_chain(path).intact
    _check_quarantine_files(path)


def test_a_chain_that_moved_on_without_the_event_gets_it_late(tmp_path: Path) -> None:
    """A writer that ignored the marker (an old version, a hand edit) must not make the quarantine
    disappear: the next appender records it late."""
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    offset = path.stat().st_size
    marker = {"offset": offset, "length": 3, "sha256": "a" * 64, "file": "chain.jsonl.torn-x", "owed": []}
    _marker(path).write_bytes(orjson.dumps(marker))
    # Another record lands after the recorded offset without an event (the marker was ignored).
    os.rename(_marker(path), f"{_marker(path)}.hidden")
    DecisionChain(path).append({"n": "ignorer"})
    os.rename(f"{_marker(path)}.hidden", _marker(path))
    DecisionChain(path).append({"n": "next"})
    kinds = [p.get("kind", p.get("n")) for p in _payloads(path)][2:]
    assert kinds == ["ignorer", QUARANTINE_KIND, "next"]
    assert not _marker(path).exists()
    assert verify_chain(path).intact


def test_a_long_lived_writer_records_an_interrupted_quarantine_it_did_not_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that finds the file exactly as it left it skips the marker look for up to a second;
    a quarantine another process left half done (torn bytes moved out, chain truncated back to this
    writer's size, event not yet written) must still end up in the chain, after the records in
    between, with the chain intact throughout."""
    path = tmp_path / "chain.jsonl"
    build_chain(path, 2)
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 3600 * 10**9)  # "within the second", however slow
    log = DecisionChain(path)
    log.append({"n": "mine"})
    torn = b'{"payload":{"kind":"torn'
    _tear(path, torn)
    with monkeypatch.context() as patch:
        _crash_in(patch, "event")
        with pytest.raises(Crash):
            DecisionChain(path).append({"n": "other"})
    assert _marker(path).exists()
    log.append({"n": "within the second"})  # the file is as this writer left it: no look yet
    assert verify_chain(path).intact
    monkeypatch.setattr(chain_log, "MARKER_RECHECK_NS", 0)
    log.append({"n": "after the recheck"})
    kinds = [p.get("kind", p.get("n")) for p in _payloads(path)][3:]
    assert kinds == ["within the second", QUARANTINE_KIND, "after the recheck"]
    assert verify_chain(path).intact
    _check_quarantine_files(path)


def test_an_unreadable_marker_is_loud(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    build_chain(path, 1)
    _marker(path).write_bytes(b"{not json")
    with pytest.raises(Exception, match="quarantine marker"):
        DecisionChain(path).append({"n": 1})


# -- the kill loop ----------------------------------------------------------------------------------------


def _appender(path: str, ready: Any, seed: int) -> None:  # pragma: no cover - runs in a child
    rng = random.Random(seed)
    log = DecisionChain(path)
    ready.set()
    i = 0
    while True:
        # Large records make the write(2) a real share of each append, so kills land inside it.
        size = rng.choice((50, 300_000, 1_000_000))
        log.append({"kind": "route-shadow", "child": seed, "i": i, "pad": "x" * size})
        i += 1


def _kill_on_growth(path: Path, pid: int, timeout: float) -> None:
    """SIGKILL ``pid`` as soon as the file grows: some write(2) is then under way."""
    start = path.stat().st_size if path.exists() else 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if path.stat().st_size != start:
                break
        except FileNotFoundError:
            pass
    os.kill(pid, signal.SIGKILL)


def test_kill_loop(tmp_path: Path) -> None:
    """Children appending are killed with SIGKILL, dozens of times. After each kill the chain verifies
    or reports only a torn tail; the next append (ours, or the next child's first) applies the torn-tail
    policy. Half the kills land at a uniformly random moment, half as soon as the file starts growing
    (inside a write, where a torn line comes from). Exactly 40 kills: what each asserts holds wherever
    the kill lands, so the test passes or fails on correctness alone (how many kills tore a line is
    printed, not asserted: the torn-tail policy has deterministic tests above). The last kill may
    leave a torn tail; a final append repairs it before the whole chain is checked."""
    path = tmp_path / "chain.jsonl"
    context = multiprocessing.get_context("fork")
    rng = random.Random(20260511)
    torn_seen = kills = 0
    while kills < 40:
        ready = context.Event()
        child = context.Process(target=_appender, args=(str(path), ready, kills))
        child.start()
        assert ready.wait(10)
        if kills % 2:
            time.sleep(rng.uniform(0.0, 0.02))
            os.kill(child.pid or 0, signal.SIGKILL)
        else:
            time.sleep(rng.uniform(0.0, 0.005))
            _kill_on_growth(path, child.pid or 0, timeout=0.5)
        child.join()
        kills += 1
        if not path.exists():
            continue
        result = verify_chain(path)
        assert result.verdict in (Verdict.INTACT, Verdict.TORN_TAIL), result.describe()
        if kills % 3 == 0:
            continue  # leave it to the next child's first append (and its kill)
        marker_pending = _marker(path).exists()
        events_before = len(_events(path))
        record = DecisionChain(path).append({"kind": "route-shadow", "parent": kills})
        payloads = _payloads(path)
        assert payloads[-1] == {"kind": "route-shadow", "parent": kills}
        events_after = len(_events(path))
        if result.verdict is Verdict.TORN_TAIL:
            torn_seen += 1
            assert result.torn_tail is not None
            event = (
                payloads[-2]
                if not marker_pending
                else next(p for p in payloads if p.get("offset") == result.torn_tail.offset)
            )
            assert event["kind"] == QUARANTINE_KIND
            assert (event["offset"], event["length"]) == (result.torn_tail.offset, result.torn_tail.length)
            assert events_after > events_before
        elif not marker_pending:
            assert events_after == events_before
            assert record.prev_hash == result.head_hash or (result.records == 0 and record.seq == 0)
        assert verify_chain(path).intact
    print(f"kill loop: {kills} kills, {torn_seen} torn tails, {path.stat().st_size} bytes")
    DecisionChain(path).append({"kind": "route-shadow", "parent": "final"})  # repairs a last torn tail
    final = verify_chain(path)
    assert final.intact
    assert [seq for seq, _ in iter_payloads(path)] == list(range(final.records))
    _check_quarantine_files(path)
