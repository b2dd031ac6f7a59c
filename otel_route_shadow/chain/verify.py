"""Verifying a decision chain: a lean streaming loop, an exact diagnosis, and a parallel split.

The hot loop does what a minimal verifier must do anyway (parse, re-canonicalize, hash, compare) plus
a handful of cheap identity checks. Whenever a line does not pass *every* check, it hands the line to
:func:`_check_line`, which re-does the work slowly and precisely and either accepts the line or says
exactly what is wrong with it. The hot loop is therefore allowed to be conservative, never lenient.

Memory does not grow with the chain: lines are read in fixed-size blocks, a line longer than
:data:`MAX_LINE_BYTES` is rejected without being buffered whole, and a diagnosis that needs context
(a duplicate, a reordering) streams the file again instead of remembering it.
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import itertools
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import IO, Any, Final

import orjson

from otel_route_shadow.chain.canonical import CANONICAL_OPTIONS, canonical_bytes
from otel_route_shadow.chain.reader import open_chain
from otel_route_shadow.chain.record import (
    DROPPED_KIND,
    GENESIS_HASH,
    MAX_LINE_BYTES,
    record_shape_problem,
    version_problem,
)

__all__ = ["Reason", "TornTail", "Verdict", "VerifyResult", "verify_chain"]

_BLOCK: Final = 1 << 20
_PARALLEL_MIN_BYTES: Final = 8 << 20
_CHUNKS_PER_JOB: Final = 4
_HASH_SUFFIX: Final = len(',"record_hash":""}') + 64
_DROPPED_PREFIX: Final = b'{"payload":{"count":'
"""How every ``records-dropped`` event's line begins (its payload's first member in sorted order):
the hot loop hands such lines to the exact check, which counts the event."""


class Reason(StrEnum):
    """Why the chain does not verify at ``first_bad_seq``. Documented in ``docs/chain-format.md``."""

    HASH_MISMATCH = "hash-mismatch"
    """The record's content does not hash to its ``record_hash``: payload, seq, links or hash edited."""
    LINK_BROKEN = "link-broken"
    """The seq is the expected one but ``prev_hash`` does not name the preceding record: the preceding
    record was replaced by one with a recomputed hash, or this one was re-linked."""
    RECORD_REMOVED = "record-removed"
    """The expected seq is missing and never appears later; the next record links to a record that is
    not in the file."""
    REORDERED_OR_DUPLICATED = "reordered-or-duplicated"
    """The expected seq appears later in the file, or an earlier record appears again verbatim."""
    FORKED = "forked"
    """A different record claims a seq that an earlier record already holds: an inserted record, or two
    writers that did not share the chain lock."""
    SEQ_GAP = "seq-gap"
    """``prev_hash`` links correctly but seq jumps past the expected value."""
    TORN_TAIL = "torn-tail"
    """Bytes after the last newline: an append that did not finish (or a truncation mid-line)."""
    UNPARSEABLE = "unparseable"
    """A complete line that is not UTF-8 JSON, or is longer than the line limit."""
    MALFORMED_RECORD = "malformed-record"
    """Valid JSON, version 1, but not a well-formed record, or not in canonical form."""
    UNKNOWN_VERSION = "unknown-version"
    """The record's ``v`` is not a version this verifier knows."""


class Verdict(StrEnum):
    INTACT = "intact"
    TORN_TAIL = "torn-tail"
    BROKEN = "broken"


@dataclass(frozen=True, slots=True)
class TornTail:
    """The bytes after the last newline."""

    offset: int
    length: int

    def to_dict(self) -> dict[str, int]:
        return {"offset": self.offset, "length": self.length}


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """What verification found. ``records``/``head_*`` describe the verified prefix in every verdict."""

    path: str
    verdict: Verdict
    records: int
    """Records verified from seq 0 without a break (the whole chain when intact)."""
    head_seq: int | None
    head_hash: str | None
    """``record_hash`` of the last verified record; None for an empty chain."""
    first_bad_seq: int | None = None
    reason: Reason | None = None
    line: int | None = None
    """1-based line number of the first line that does not verify."""
    offset: int | None = None
    """Byte offset of that line."""
    detail: str | None = None
    torn_tail: TornTail | None = None
    bytes_verified: int = 0
    dropped_events: int = 0
    """``records-dropped`` events in the verified prefix: gaps where a writer dropped records."""
    dropped_records: int = 0
    """Records those events say were dropped (the sum of their ``count``)."""

    @property
    def intact(self) -> bool:
        return self.verdict is Verdict.INTACT

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "verdict": self.verdict.value,
            "intact": self.intact,
            "records": self.records,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "first_bad_seq": self.first_bad_seq,
            "reason": None if self.reason is None else self.reason.value,
            "line": self.line,
            "offset": self.offset,
            "detail": self.detail,
            "torn_tail": None if self.torn_tail is None else self.torn_tail.to_dict(),
            "bytes_verified": self.bytes_verified,
            "dropped_events": self.dropped_events,
            "dropped_records": self.dropped_records,
        }

    def describe(self) -> str:
        return self._summary() + self._gaps()

    def _summary(self) -> str:
        if not self.intact:
            where = f"seq {self.first_bad_seq} (line {self.line}, byte {self.offset})"
            return f"{self.path}: {self.verdict.value} at {where}: {self.reason}: {self.detail}"
        if self.records == 0:
            return f"{self.path}: intact, empty chain (0 records)"
        return f"{self.path}: intact, {self.records} records, head seq {self.head_seq} hash {self.head_hash}"

    def _gaps(self) -> str:
        if not self.dropped_events:
            return ""
        return (
            f"; the writer dropped {self.dropped_records} records in {self.dropped_events} gap(s) "
            f"({DROPPED_KIND} events: the chain was locked by another process for too long)"
        )


# ---------------------------------------------------------------------------------------------------
# Checking one line precisely.


@dataclass(frozen=True, slots=True)
class _Bad:
    reason: Reason
    detail: str


@dataclass(frozen=True, slots=True)
class _Good:
    seq: int
    prev_hash: str
    record_hash: str
    dropped: int = -1
    """The ``count`` of a ``records-dropped`` event; -1 for any other record."""


def _check_line(line: bytes, strict: bool = False) -> _Good | _Bad:
    """Everything about one line except its links to its neighbours.

    ``strict`` also walks the payload for values no conforming writer emits but that canonical
    re-encoding cannot see: floats and non-ASCII object keys (on which RFC 8785 and a sorted-keys
    encoder disagree). The record hash covers them, so they cannot be introduced into a verified chain
    without recomputing hashes; the walk costs about as much as the rest of the check, hence opt-in.
    """
    obj = _parse_record(line)
    if isinstance(obj, _Bad):
        return obj
    record_hash: str = obj.pop("record_hash")
    bad = _hash_problem(line, obj, record_hash)
    if bad is None and strict:
        problem = _value_problem(obj["payload"], "")
        bad = None if problem is None else _Bad(Reason.MALFORMED_RECORD, problem)
    if bad is not None:
        return bad
    return _Good(obj["seq"], obj["prev_hash"], record_hash, _dropped_count(obj["payload"]))


def _parse_record(line: bytes) -> dict[str, Any] | _Bad:
    """Rules 1 to 4 of the check order (``docs/chain-format.md`` section 8): the line as a record
    object of this version, or why it is not one."""
    if len(line) > MAX_LINE_BYTES:
        return _Bad(Reason.UNPARSEABLE, f"line of {len(line)} bytes exceeds the {MAX_LINE_BYTES}-byte limit")
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return _Bad(Reason.UNPARSEABLE, _decode_detail(line, exc))
    version = version_problem(obj)
    if version is not None:
        unknown, message = version
        return _Bad(Reason.UNKNOWN_VERSION if unknown else Reason.MALFORMED_RECORD, message)
    problem = record_shape_problem(obj)
    if problem is not None:
        return _Bad(Reason.MALFORMED_RECORD, problem)
    record: dict[str, Any] = obj
    return record


def _hash_problem(line: bytes, body_obj: dict[str, Any], record_hash: str) -> _Bad | None:
    """Rules 5 and 6: the line is the layout of its canonical body, and the body hashes to
    ``record_hash``."""
    try:
        body = canonical_bytes(body_obj)
    except TypeError as exc:
        return _Bad(Reason.MALFORMED_RECORD, f"not encodable in canonical form: {exc}")
    if line != b"".join((body[:-1], b',"record_hash":"', record_hash.encode("ascii"), b'"}')):
        return _Bad(Reason.MALFORMED_RECORD, "line is not the canonical form of its record")
    if hashlib.sha256(body).hexdigest() != record_hash:
        return _Bad(Reason.HASH_MISMATCH, "record content does not match its record_hash")
    return None


def _dropped_count(payload: dict[str, Any]) -> int:
    """The ``count`` of a well-formed ``records-dropped`` event, else -1."""
    count = payload.get("count")
    if payload.get("kind") == DROPPED_KIND and count.__class__ is int and count >= 0:
        return int(count)
    return -1


def _value_problem(value: Any, path: str) -> str | None:
    """A payload value outside the format's value set (see ``docs/chain-format.md``), or None."""
    cls = value.__class__
    if cls is float:
        return f"payload holds a number with a fraction or exponent at {path or '/'}"
    if cls is dict:
        for key, item in value.items():
            if not key.isascii():
                return f"payload holds a non-ASCII object key at {path or '/'}"
            problem = _value_problem(item, f"{path}/{key.replace('~', '~0').replace('/', '~1')}")
            if problem is not None:
                return problem
    elif cls is list:
        for index, item in enumerate(value):
            problem = _value_problem(item, f"{path}/{index}")
            if problem is not None:
                return problem
    return None


def _decode_detail(line: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"not UTF-8 (byte {err.start})"
    if not line.strip():
        return "empty line"
    return f"not JSON: {str(exc)[:120]}"


# ---------------------------------------------------------------------------------------------------
# The streaming scan.


@dataclass(slots=True)
class _State:
    """Where a scan stands: the next expected seq and prev_hash, lines consumed, bytes consumed."""

    seq: int
    prev: str
    lines: int
    offset: int
    dropped_events: int = 0
    dropped_records: int = 0


@dataclass(frozen=True, slots=True)
class _Stop:
    """The first line the scan could not accept, and the state just before it."""

    state: _State
    line: bytes | None
    """None when the line was too long to buffer."""
    bad: _Bad | None
    """Set when the line is bad on its own; None when only its links need a diagnosis."""
    good: _Good | None


_Progress = Callable[[int, int], None]
"""Internal progress hook: ``(records verified, bytes verified)``."""


def _scan(
    handle: IO[bytes],
    state: _State,
    end: int,
    progress: _Progress | None,
    strict: bool = False,
) -> _Stop | None:
    """Verify complete lines from ``state.offset`` up to ``end`` (a line boundary), updating ``state``.

    Returns None when every line verified, else where and why it stopped. Blocks are read one at a
    time; a line is at most :data:`MAX_LINE_BYTES`, checked before it is parsed wherever it falls
    against the blocks (only a block's first line can be longer than a block).
    """
    if strict:
        return _scan_strict(handle, state, end, progress)
    for lines, consumed, bad in _blocks(handle, state.offset, end):
        if bad is not None:
            return _Stop(_State(state.seq, state.prev, state.lines, state.offset), None, bad, None)
        if lines and len(lines[0]) > MAX_LINE_BYTES:
            return _Stop(_State(state.seq, state.prev, state.lines, state.offset), None, _too_long(), None)
        stop = _scan_block(lines, state)
        if stop is not None:
            return stop
        state.offset += consumed
        if progress is not None:
            progress(state.seq, state.offset)
    return None


def _too_long() -> _Bad:
    return _Bad(Reason.UNPARSEABLE, f"line exceeds the {MAX_LINE_BYTES}-byte limit")


def _blocks(handle: IO[bytes], offset: int, end: int) -> Iterator[tuple[list[bytes], int, _Bad | None]]:
    """The complete lines of each block of ``[offset, end)`` and the bytes they take (newlines
    included); a line still open at a block's end is carried into the next block's first line.

    Yields a last ``([], 0, bad)`` for a line already longer than :data:`MAX_LINE_BYTES`, or for
    bytes left over at ``end`` (which ends on a newline by construction: the file changed under us)."""
    handle.seek(offset)
    remaining = end - offset
    carry = b""
    while remaining > 0:
        block = handle.read(min(_BLOCK, remaining))
        if not block:
            break
        remaining -= len(block)
        lines = block.split(b"\n")
        consumed = len(carry) + len(block)
        if carry:
            lines[0] = carry + lines[0]
        carry = lines.pop()
        yield lines, consumed - len(carry), None
        if len(carry) > MAX_LINE_BYTES:
            yield [], 0, _too_long()
            return
    if carry or remaining > 0:
        yield [], 0, _Bad(Reason.UNPARSEABLE, "the file changed during verification")


def _scan_block(lines: list[bytes], state: _State) -> _Stop | None:
    """Verify one block's lines after ``state``: the hot loop, and the exact check where it declines."""
    start_offset = state.offset
    index = 0
    while index < len(lines):
        state.seq, state.prev, index = _fast_run(lines, index, state.seq, state.prev)
        if index == len(lines):
            break
        # The hot loop declined this line; decide precisely.
        line = lines[index]
        verdict = _check_line(line)
        if not isinstance(verdict, _Good) or verdict.seq != state.seq or verdict.prev_hash != state.prev:
            here = _State(state.seq, state.prev, state.lines + index, start_offset + _offset_of(lines, index))
            if isinstance(verdict, _Bad):
                return _Stop(here, line, verdict, None)
            return _Stop(here, line, None, verdict)
        _accept(state, verdict)
        index += 1
    state.lines += len(lines)
    return None


def _accept(state: _State, good: _Good) -> None:
    """``good`` verified after ``state``: move on (and count a ``records-dropped`` event)."""
    state.seq += 1
    state.prev = good.record_hash
    if good.dropped >= 0:
        state.dropped_events += 1
        state.dropped_records += good.dropped


def _fast_run(lines: list[bytes], start: int, seq: int, prev: str) -> tuple[int, str, int]:
    """Verify ``lines[start:]`` the quick way for as long as every check passes; return the next
    expected seq and prev_hash and the index of the first line it declined (``len(lines)`` if none).

    A conservative, never lenient, subset of :func:`_check_line` plus the links: a record with
    redaction marks, a ``records-dropped`` event, or anything unusual goes to the exact check."""
    loads, dumps, sha, opts, cut = (
        orjson.loads,
        orjson.dumps,
        hashlib.sha256,
        CANONICAL_OPTIONS,
        -_HASH_SUFFIX,
    )
    no_marks: list[Any] = []
    index = start
    for line in lines if start == 0 else lines[start:]:
        try:
            rec = loads(line)
            claimed = rec.pop("record_hash")
            body = dumps(rec, option=opts)
            got = rec["seq"]
            if (
                sha(body).hexdigest() != claimed
                or got != seq
                or rec["prev_hash"] != prev
                or got.__class__ is not int
                or line[:cut] != body[:-1]
                or not line.endswith(b'"}')
                or not body.endswith(b',"v":1}')
                or not body.startswith(b'{"payload":{')
                or len(rec) != 5
                or rec["redactions"] != no_marks
                or line.startswith(_DROPPED_PREFIX)
            ):
                break
        except Exception:
            break
        prev = claimed
        seq += 1
        index += 1
    return seq, prev, index


def _scan_strict(handle: IO[bytes], state: _State, end: int, progress: _Progress | None) -> _Stop | None:
    """The same walk with every line checked the slow, exact way (``strict=True``)."""
    for offset, line in _iter_lines_from(handle, state.offset, end):
        here = _State(state.seq, state.prev, state.lines, offset)
        if line is None:
            return _Stop(here, None, _too_long(), None)
        verdict = _check_line(line, strict=True)
        if isinstance(verdict, _Bad):
            return _Stop(here, line, verdict, None)
        if verdict.seq != state.seq or verdict.prev_hash != state.prev:
            return _Stop(here, line, None, verdict)
        _accept(state, verdict)
        state.lines += 1
        state.offset = offset + len(line) + 1
        if progress is not None and not state.seq % 8192:
            progress(state.seq, state.offset)
    return None


def _offset_of(lines: list[bytes], index: int) -> int:
    """Bytes taken by ``lines[:index]`` with their newlines (first line includes any carry)."""
    return sum(map(len, lines[:index])) + index


# ---------------------------------------------------------------------------------------------------
# Diagnosis of a line whose links do not hold.


def _iter_lines_from(handle: IO[bytes], offset: int, end: int) -> Iterator[tuple[int, bytes | None]]:
    """``(offset, line)`` for every complete line in ``[offset, end)``; over-long lines yield None."""
    handle.seek(offset)
    remaining = end - offset
    block_offset = offset
    line_start = offset
    pending: list[bytes] = []
    pending_len = 0
    too_long = False
    while remaining > 0:
        block = handle.read(min(_BLOCK, remaining))
        if not block:
            return
        remaining -= len(block)
        start = 0
        while True:
            nl = block.find(b"\n", start)
            if nl < 0:
                if not too_long:
                    pending.append(block[start:])
                    pending_len += len(block) - start
                    if pending_len > MAX_LINE_BYTES:
                        pending, too_long = [], True
                break
            piece = block[start:nl]
            if too_long or pending_len + len(piece) > MAX_LINE_BYTES:
                yield line_start, None
            else:
                yield line_start, b"".join((*pending, piece))
            pending, pending_len, too_long = [], 0, False
            start = nl + 1
            line_start = block_offset + start
        block_offset += len(block)


def _record_hash_at_line(handle: IO[bytes], line_number: int, end: int) -> str | None:
    """The record hash of the 1-based ``line_number`` (a line of the verified prefix)."""
    for number, (_, line) in enumerate(_iter_lines_from(handle, 0, end), start=1):
        if number == line_number:
            if line is None:
                return None
            verdict = _check_line(line)
            return verdict.record_hash if isinstance(verdict, _Good) else None
    return None


def _appears_later(handle: IO[bytes], offset: int, end: int, seq: int, prev: str) -> bool:
    """Does a well-formed record with ``seq`` linking to ``prev`` appear at or after ``offset``?"""
    for _, line in _iter_lines_from(handle, offset, end):
        if line is None:
            continue
        verdict = _check_line(line)
        if isinstance(verdict, _Good) and verdict.seq == seq and verdict.prev_hash == prev:
            return True
    return False


def _diagnose(handle: IO[bytes], stop: _Stop, end: int) -> tuple[Reason, str, int]:
    """Reason, detail and first bad seq for a line that is a good record but does not link."""
    state = stop.state
    good = stop.good
    if good is None:  # pragma: no cover - callers pass a _Stop with a good record
        raise AssertionError("nothing to diagnose")
    expected = state.seq
    if good.seq == expected:
        return (
            Reason.LINK_BROKEN,
            f"seq {good.seq} has prev_hash {good.prev_hash[:16]}..., but the preceding record's hash is "
            f"{state.prev[:16]}...: the preceding record was replaced, or this one re-linked",
            expected,
        )
    if good.seq < expected:
        earlier = _record_hash_at_line(handle, good.seq + 1, end)
        if earlier == good.record_hash:
            return (
                Reason.REORDERED_OR_DUPLICATED,
                f"record seq {good.seq} appears again at line {state.lines + 1}",
                good.seq,
            )
        return (
            Reason.FORKED,
            f"line {state.lines + 1} claims seq {good.seq}, already held by a different record at line "
            f"{good.seq + 1}: the chain forks at seq {good.seq}",
            good.seq,
        )
    if good.prev_hash == state.prev:
        return (
            Reason.SEQ_GAP,
            f"seq jumps from {expected - 1} to {good.seq} although prev_hash links correctly",
            expected,
        )
    after = state.offset + (len(stop.line) + 1 if stop.line is not None else 0)
    if _appears_later(handle, after, end, expected, state.prev):
        return (
            Reason.REORDERED_OR_DUPLICATED,
            f"expected seq {expected}, found seq {good.seq}; seq {expected} appears later in the file",
            expected,
        )
    return (
        Reason.RECORD_REMOVED,
        f"expected seq {expected}, found seq {good.seq}; seq {expected} is not in the file",
        expected,
    )


# ---------------------------------------------------------------------------------------------------
# Entry points.


def _snapshot_size(handle: IO[bytes]) -> int:
    """File size with no append in flight: appenders hold the exclusive lock while writing."""
    fd = handle.fileno()
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:  # pragma: no cover - a filesystem without flock; accept a possibly torn view
        return os.fstat(fd).st_size
    try:
        return os.fstat(fd).st_size
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _complete_end(handle: IO[bytes], size: int) -> int:
    """Offset just past the last newline (0 when there is none), scanning back in bounded blocks."""
    pos = size
    while pos > 0:
        start = max(0, pos - _BLOCK)
        handle.seek(start)
        block = handle.read(pos - start)
        nl = block.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        pos = start
    return 0


def verify_chain(
    path: str | os.PathLike[str],
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    strict: bool = False,
    byte_progress: Callable[[int, int], None] | None = None,
) -> VerifyResult:
    """Verify the chain file at ``path``. See :meth:`RoutingAuditLog.verify`.

    ``progress(records)`` is called now and then with the records verified so far;
    ``byte_progress(done, total)`` with bytes (for a progress bar). ``strict`` adds the payload value
    walk of :func:`_check_line`. Raises ``OSError`` (``FileNotFoundError``, ``PermissionError``,
    ``ChainPathError`` for a directory, a FIFO or a device) when the file cannot be read at all; every
    problem *inside* the file is a verdict, never an exception.
    """
    name = os.fspath(path)
    with os.fdopen(open_chain(name, os.O_RDONLY), "rb", buffering=0) as handle:
        size = _snapshot_size(handle)
        complete = _complete_end(handle, size)
        state = _State(0, GENESIS_HASH, 0, 0)
        hook = _combine(progress, byte_progress, size)
        stop: _Stop | None
        if jobs > 1 and complete >= _PARALLEL_MIN_BYTES:
            stop = _scan_parallel(name, handle, state, complete, jobs, hook, strict)
        else:
            stop = _scan(handle, state, complete, hook, strict)
        if stop is not None:
            return _broken(name, handle, stop, complete)
        return _complete(name, state, complete, size)


def _prefix(state: _State) -> dict[str, Any]:
    """The verified prefix, as every verdict reports it."""
    return {
        "records": state.seq,
        "head_seq": state.seq - 1 if state.seq else None,
        "head_hash": state.prev if state.seq else None,
        "dropped_events": state.dropped_events,
        "dropped_records": state.dropped_records,
    }


def _complete(name: str, state: _State, complete: int, size: int) -> VerifyResult:
    """Every complete line verified: intact, or a torn tail after them."""
    if complete == size:
        return VerifyResult(path=name, verdict=Verdict.INTACT, bytes_verified=complete, **_prefix(state))
    return VerifyResult(
        path=name,
        verdict=Verdict.TORN_TAIL,
        first_bad_seq=state.seq,
        reason=Reason.TORN_TAIL,
        line=state.lines + 1,
        offset=complete,
        detail=f"{size - complete} bytes after the last newline (an append that did not finish)",
        torn_tail=TornTail(complete, size - complete),
        bytes_verified=complete,
        **_prefix(state),
    )


def _combine(
    progress: Callable[[int], None] | None, byte_progress: Callable[[int, int], None] | None, total: int
) -> _Progress | None:
    if progress is None and byte_progress is None:
        return None

    def hook(records: int, done: int) -> None:
        if progress is not None:
            progress(records)
        if byte_progress is not None:
            byte_progress(done, total)

    return hook


def _broken(name: str, handle: IO[bytes], stop: _Stop, end: int) -> VerifyResult:
    state = stop.state
    if stop.bad is not None:
        reason, detail, first_bad = stop.bad.reason, stop.bad.detail, state.seq
    else:
        reason, detail, first_bad = _diagnose(handle, stop, end)
    return VerifyResult(
        path=name,
        verdict=Verdict.BROKEN,
        first_bad_seq=first_bad,
        reason=reason,
        line=state.lines + 1,
        offset=state.offset,
        detail=detail,
        bytes_verified=state.offset,
        **_prefix(state),
    )


# ---------------------------------------------------------------------------------------------------
# Parallel verification: independent chunks, stitched at their boundaries.


@dataclass(frozen=True, slots=True)
class _Chunk:
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _ChunkResult:
    """A chunk verified without knowing its predecessor: its first link is checked by the parent."""

    ok: bool
    lines: int
    first_seq: int
    first_prev: str
    last_seq: int
    last_hash: str
    dropped_events: int = 0
    dropped_records: int = 0


def _verify_chunk(path: str, chunk: _Chunk, strict: bool) -> _ChunkResult:
    failed = _ChunkResult(False, 0, -1, "", -1, "")
    with open(path, "rb", buffering=0) as handle:
        first = next(_iter_lines_from(handle, chunk.start, chunk.end), None)
        if first is None or first[1] is None:
            return failed
        line = first[1]
        verdict = _check_line(line, strict)
        if not isinstance(verdict, _Good):
            return failed
        state = _State(verdict.seq, verdict.prev_hash, 1, chunk.start + len(line) + 1)
        _accept(state, verdict)
        if _scan(handle, state, chunk.end, None, strict) is not None:
            return failed
        return _ChunkResult(
            True,
            state.lines,
            verdict.seq,
            verdict.prev_hash,
            state.seq - 1,
            state.prev,
            state.dropped_events,
            state.dropped_records,
        )


def _split(handle: IO[bytes], end: int, parts: int) -> list[_Chunk]:
    """Cut ``[0, end)`` into about ``parts`` chunks at line boundaries."""
    bounds = [0]
    step = end // parts
    for index in range(1, parts):
        target = max(index * step, bounds[-1] + 1)
        if target >= end:
            break
        handle.seek(target - 1)
        pos = target - 1
        while True:
            block = handle.read(64 * 1024)
            if not block:
                pos = end
                break
            nl = block.find(b"\n")
            if nl >= 0:
                pos += nl + 1
                break
            pos += len(block)
        if pos >= end:
            break
        bounds.append(pos)
    bounds.append(end)
    return [_Chunk(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _mp_context() -> Any:
    """``fork`` when this process has a single thread (cheap, nothing re-imported), else ``spawn``:
    forking a process with other threads running can copy a lock in a held state."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _scan_parallel(
    path: str,
    handle: IO[bytes],
    state: _State,
    end: int,
    jobs: int,
    progress: _Progress | None,
    strict: bool,
) -> _Stop | None:
    """Verify chunks in worker processes, in order, a bounded window of them in flight.

    Workers are never killed: on the first chunk whose links do not hold, the chunks not yet started
    are cancelled and the running ones finish. (``Pool.terminate`` could kill a worker while it held
    the result queue's lock, and the pool's own threads then waited for that lock forever.)
    """
    chunks = _split(handle, end, jobs * _CHUNKS_PER_JOB)
    workers = min(jobs, len(chunks))
    executor = ProcessPoolExecutor(max_workers=workers, mp_context=_mp_context(), initializer=_worker_signals)
    try:
        queued = iter(chunks)
        window: collections.deque[tuple[_Chunk, Future[_ChunkResult]]] = collections.deque()

        def submit_next() -> None:
            chunk = next(queued, None)
            if chunk is not None:
                window.append((chunk, executor.submit(_verify_chunk, path, chunk, strict)))

        for _ in range(2 * workers):
            submit_next()
        while window:
            chunk, future = window.popleft()
            result = future.result()
            if not result.ok or result.first_seq != state.seq or result.first_prev != state.prev:
                executor.shutdown(wait=True, cancel_futures=True)
                # Something in this chunk (or its first link) is wrong: find it the sequential way,
                # with the exact state the verified prefix left.
                return _scan(handle, state, end, progress, strict)
            submit_next()
            state.seq = result.last_seq + 1
            state.prev = result.last_hash
            state.lines += result.lines
            state.offset = chunk.end
            state.dropped_events += result.dropped_events
            state.dropped_records += result.dropped_records
            if progress is not None:
                progress(state.seq, state.offset)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return None


def _worker_signals() -> None:
    """Workers take the default signal dispositions: a handler inherited from the host (a test
    fixture's SIGTERM hook, say) must not keep a worker from ending with its pool."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
