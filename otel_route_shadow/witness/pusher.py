"""Pushing the log's checkpoints to its witnesses, off the host's path.

A :class:`WitnessPusher` owns one daemon thread (a ``Worker``, started by the first ``submit``). ``submit(note)`` only stores the note in a one-slot
queue (a newer checkpoint supersedes one not yet pushed: only the newest matters to a witness) and wakes
the thread; it never raises and never waits for a witness. The thread pushes the newest checkpoint to
each witness in turn (the ones whose last push failed go last):

* it sends ``old <size>`` with the size the witness is known to hold (0 at first, or the size the caller
  seeds), and the consistency proof from there, obtained from the caller's ``prove(old, new)``;
* a 409 gives the witness's size (reported through ``on_size(witness, size)``): it proves from there
  and retries once; a witness holding a larger tree
  than the checkpoint (``witness-ahead``: the log was cut) is not retried;
* a cosignature (verified against that witness's key before anything else sees it) is reported through
  ``on_cosigned(size, root, lines)``; every refusal through ``on_refused(witness, cause, size)`` and, once
  per witness and cause, a warning in the log;
* a timeout, an unreachable witness or a 5xx is retried with the newest checkpoint after
  ``max(cadence, RETRY_AFTER_S)``; any other refusal waits for the next checkpoint.

Each witness has one persistent connection (HTTP/1.1 keep-alive, which C2SP tlog-witness recommends),
used by the thread only, opened again when the witness closed it, closed when the thread ends.

The cadence bounds the pushes to each witness: at most ``pushes_per_day`` per day, evenly spaced (a
push is one checkpoint; its 409 retry is part of it). ``flush(timeout)`` (at shutdown) pushes the newest
checkpoint to every witness now, whatever the cadence, with every request ending by the flush's
deadline. After ``os.fork`` the child gets an empty queue and, on its first ``submit``, a thread of its
own (as the SDK's ``BatchSpanProcessor`` does). Callbacks run on the thread; their exceptions are contained.
"""

from __future__ import annotations

import dataclasses
import math
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.tlog import (
    DEFAULT_SKEW_S,
    Checkpoint,
    Malformed,
    checkpoint_of,
)
from otel_route_shadow.witness.client import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_REQUEST_TIMEOUT_S,
    MAX_PROOF_LINES,
    PushOutcome,
    WitnessAnswer,
    add_checkpoint,
    witness_connection,
)
from otel_route_shadow.witness.endpoint import WitnessEndpoint
from otel_route_shadow.witness.transport import Connection
from otel_route_shadow.worker import AFTER_FORK, Worker, WorkerName

__all__ = [
    "DEFAULT_PUSHES_PER_DAY",
    "RETRY_AFTER_S",
    "PusherStats",
    "WitnessPusher",
]


DEFAULT_PUSHES_PER_DAY = 1440.0
"""One push a minute per witness at most: what a witness operator is told to expect."""
RETRY_AFTER_S = 60.0
"""The least wait before pushing again to a witness that timed out, was unreachable or failed (5xx)."""

CANNOT_PROVE = "cannot-prove"
WITNESS_AHEAD = "witness-ahead"
BAD_NOTE = "bad-note"
CALLBACK = "callback"
_TRANSIENT = frozenset({PushOutcome.TIMEOUT, PushOutcome.UNREACHABLE, PushOutcome.SERVER_ERROR})

Prove = Callable[[int, int], Sequence[bytes]]
OnCosigned = Callable[[int, bytes, tuple[str, ...]], None]
OnRefused = Callable[[str, str, int], None]
OnSize = Callable[[str, int], None]


@dataclasses.dataclass(frozen=True, slots=True)
class PusherStats:
    """Counts since the pusher started (per witness: by policy name)."""

    submitted: int
    superseded: int
    requests: Mapping[str, int]
    cosigned: Mapping[str, int]
    refused: Mapping[str, int]


class _CannotProve(Exception):
    """The caller's ``prove`` failed or gave a proof the protocol cannot carry."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Job:
    generation: int
    note: str


@dataclasses.dataclass
class _Witness:
    endpoint: WitnessEndpoint
    index: int
    size: int = 0
    root: bytes | None = None
    done: int = 0
    picked: int = 0
    next_at: float = -math.inf
    flushed: int = 0
    failed: bool = False
    requests: int = 0
    cosigned: int = 0
    refused: int = 0
    connection: Connection | None = None


class WitnessPusher:
    """Push checkpoint notes to ``endpoints`` from one background thread (see the module)."""

    _cond: threading.Condition
    _job: _Job | None
    _submitted: int
    _superseded: int
    _flush_epoch: int
    _flushing: int
    _flush_deadline: float | None
    _closed: bool

    def __init__(
        self,
        endpoints: Sequence[WitnessEndpoint],
        prove: Prove,
        on_cosigned: OnCosigned,
        *,
        on_refused: OnRefused | None = None,
        on_size: OnSize | None = None,
        pushes_per_day: float = DEFAULT_PUSHES_PER_DAY,
        known_sizes: Mapping[str, int] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        skew: int = DEFAULT_SKEW_S,
        tls: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if pushes_per_day <= 0:
            raise ValueError("pushes_per_day must be positive")
        sizes = known_sizes or {}
        self._witnesses = [_Witness(e, i, size=max(0, sizes.get(e.name, 0))) for i, e in enumerate(endpoints)]
        self._prove = prove
        self._on_cosigned = on_cosigned
        self._on_refused = on_refused
        self._on_size = on_size
        self._interval = 86400.0 / pushes_per_day
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._skew = skew
        self._tls = tls or (ssl.create_default_context() if any(e.tls for e in endpoints) else None)
        self._clock = clock
        self._logged: set[tuple[str, str]] = set()
        self._reset()
        self._worker = Worker(WorkerName.WITNESS, self._step, last=self._disconnect)
        AFTER_FORK.add(self)

    # --- the caller's side ---------------------------------------------------------------------------

    def submit(self, note: str) -> None:
        """Queue ``note`` (a signed checkpoint) for every witness; O(1), never raises, never waits."""
        try:
            with self._cond:
                if self._closed:
                    return
                if self._job is not None and any(w.picked < self._job.generation for w in self._witnesses):
                    self._superseded += 1  # a witness never had its turn with the note this one replaces
                self._submitted += 1
                self._job = _Job(self._submitted, note)
            self._worker.wake()
        except Exception:
            self._log_once(("*", "submit"), "witness push: submit failed; checkpoints are not pushed")

    def flush(self, timeout: float) -> bool:
        """Push the newest checkpoint to every witness now; True when each had its attempt in ``timeout`` s."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            if self._job is None or self._closed:
                return self._job is None
            target = self._job.generation
            self._flush_epoch += 1
            epoch = self._flush_epoch
            self._flushing += 1
            self._flush_deadline = max(self._flush_deadline or 0.0, deadline)
            self._worker.wake()
            try:
                while not all(w.done >= target or w.flushed >= epoch for w in self._witnesses):
                    left = deadline - time.monotonic()
                    if left <= 0 or self._closed:
                        return False
                    self._cond.wait(left)
                return True
            finally:
                self._flushing -= 1
                if not self._flushing:
                    self._flush_deadline = None
                self._cond.notify_all()

    def close(self, timeout: float = 0.0) -> bool:
        """Flush within ``timeout`` seconds, then stop the thread (waiting at most what is left)."""
        deadline = time.monotonic() + max(0.0, timeout)
        flushed = self.flush(timeout) if timeout > 0 else False
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.stop(max(0.0, deadline - time.monotonic()))
        return flushed

    def stats(self) -> PusherStats:
        """The counts so far (submitted, superseded; per witness: requests, cosignatures, refusals)."""
        with self._cond:
            return PusherStats(
                self._submitted,
                self._superseded,
                {w.endpoint.name: w.requests for w in self._witnesses},
                {w.endpoint.name: w.cosigned for w in self._witnesses},
                {w.endpoint.name: w.refused for w in self._witnesses},
            )

    # --- the thread ----------------------------------------------------------------------------------

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._job = None
        self._submitted = 0
        self._superseded = 0
        self._flush_epoch = 0
        self._flushing = 0
        self._flush_deadline = None
        self._closed = False
        for w in self._witnesses:
            w.done, w.picked, w.flushed, w.next_at = 0, 0, 0, -math.inf
            w.connection = None  # after a fork: the parent's connection is never used

    def after_fork(self) -> None:
        """In a forked child (called by ``AFTER_FORK``): an empty queue, no connection of the parent's."""
        closed = self._closed
        self._reset()
        self._closed = closed

    def _disconnect(self) -> None:
        """As the thread ends: close its own connections."""
        for w in self._witnesses:
            if w.connection is not None:
                w.connection.close()
                w.connection = None

    def _step(self) -> float | None:
        """The worker's step: push the newest checkpoint to each witness that is due; how long until the
        next one is (None: nothing is due until a submit or a flush)."""
        while True:
            picked = self._next()
            if not isinstance(picked, tuple):
                return picked
            witness, job, epoch = picked
            try:
                settled = self._push(witness, job)
            except Exception:
                self._log_once(
                    (witness.endpoint.name, "internal"), "witness push to %s failed", witness.endpoint.name
                )
                settled = True
            with self._cond:
                if settled:
                    witness.done = max(witness.done, job.generation)
                witness.flushed = max(witness.flushed, epoch)
                self._cond.notify_all()

    def _next(self) -> tuple[_Witness, _Job, int] | float | None:
        """The next witness to push to, the newest checkpoint, and the flush it serves (0: none); else how
        long until one is due (None: not before a submit or a flush)."""
        with self._cond:
            if self._closed:
                return None
            now = time.monotonic()
            flushing = self._flush_deadline is not None and now < self._flush_deadline
            job = self._job
            pending = [w for w in self._witnesses if job is not None and w.done < job.generation]
            due = [w for w in pending if (w.flushed < self._flush_epoch if flushing else now >= w.next_at)]
            if job is not None and due:
                witness = min(due, key=lambda w: (w.failed, w.index))
                witness.next_at = now + self._interval
                witness.picked = job.generation
                return witness, job, (self._flush_epoch if flushing else 0)
            waits = [w.next_at - now for w in pending if not flushing]
            if flushing and self._flush_deadline is not None:
                waits.append(self._flush_deadline - now)
            return max(0.0, min(waits)) if waits else None

    def _push(self, witness: _Witness, job: _Job) -> bool:
        """One push of ``job`` to ``witness``; whether it is settled (False: retry after a while)."""
        try:
            checkpoint = checkpoint_of(job.note)
        except Malformed:
            self._refuse(witness, BAD_NOTE, 0, "the submitted note is not a signed checkpoint")
            return True
        if witness.size == checkpoint.size and witness.root == checkpoint.root:
            return True  # this witness already cosigned this very tree
        if witness.size > checkpoint.size:
            self._refuse(witness, WITNESS_AHEAD, checkpoint.size, f"it holds size {witness.size}")
            return True
        sent = witness.size
        try:
            answer = self._request(witness, sent, checkpoint, job.note)
            if answer.outcome is PushOutcome.CONFLICT and answer.witness_size not in (None, sent):
                self._holds(witness, answer.witness_size or 0)
                if witness.size > checkpoint.size:
                    self._refuse(witness, WITNESS_AHEAD, checkpoint.size, f"it holds size {witness.size}")
                    return True
                answer = self._request(witness, witness.size, checkpoint, job.note)
        except _CannotProve as exc:
            self._refuse(witness, CANNOT_PROVE, checkpoint.size, str(exc))
            return True
        return self._settle(witness, checkpoint, answer)

    def _request(self, witness: _Witness, old: int, checkpoint: Checkpoint, note: str) -> WitnessAnswer:
        proof = self._proof(old, checkpoint.size)
        with self._cond:
            witness.requests += 1
            timeout = self._request_timeout
            if self._flush_deadline is not None:
                timeout = max(0.001, min(timeout, self._flush_deadline - time.monotonic()))
        if witness.connection is None:
            witness.connection = witness_connection(
                witness.endpoint, connect_timeout=self._connect_timeout, tls=self._tls
            )
        return add_checkpoint(
            witness.endpoint,
            old,
            proof,
            note,
            now=int(self._clock()),
            skew=self._skew,
            connect_timeout=self._connect_timeout,
            timeout=timeout,
            tls=self._tls,
            connection=witness.connection,
        )

    def _proof(self, old: int, new: int) -> list[bytes]:
        if old in (0, new):
            return []
        try:
            proof = list(self._prove(old, new))
        except Exception as exc:
            raise _CannotProve(f"no proof from size {old} to {new}: {type(exc).__name__}") from None
        if len(proof) > MAX_PROOF_LINES:
            raise _CannotProve(f"the proof from size {old} to {new} has {len(proof)} lines")
        return proof

    def _settle(self, witness: _Witness, checkpoint: Checkpoint, answer: WitnessAnswer) -> bool:
        if answer.outcome is PushOutcome.CONFLICT and answer.witness_size is not None:
            self._holds(witness, answer.witness_size)
        if answer.outcome is not PushOutcome.COSIGNED:
            self._refuse(witness, answer.outcome.value, checkpoint.size, answer.detail)
            if answer.outcome in _TRANSIENT:
                with self._cond:
                    witness.next_at = time.monotonic() + max(self._interval, RETRY_AFTER_S)
                return False
            return True
        witness.size, witness.root, witness.failed = checkpoint.size, checkpoint.root, False
        with self._cond:
            witness.cosigned += 1
        try:
            self._on_cosigned(checkpoint.size, checkpoint.root, answer.cosignatures)
        except Exception:
            self._log_once(("*", CALLBACK), "witness push: the cosignature callback failed")
        return True

    def _holds(self, witness: _Witness, size: int) -> None:
        """A 409 said the size ``witness`` holds: pushes prove from it, and ``on_size`` is told."""
        witness.size, witness.root = size, None
        if self._on_size is not None:
            try:
                self._on_size(witness.endpoint.name, size)
            except Exception:
                self._log_once(("*", CALLBACK + "-size"), "witness push: the size callback failed")

    def _refuse(self, witness: _Witness, cause: str, size: int, detail: str) -> None:
        name = witness.endpoint.name
        witness.failed = True
        with self._cond:
            witness.refused += 1
        self._log_once(
            (name, cause),
            "witness %s did not cosign checkpoint %d: %s (%s); logged once per witness and cause",
            name,
            size,
            cause,
            detail,
        )
        if self._on_refused is not None:
            try:
                self._on_refused(name, cause, size)
            except Exception:
                self._log_once(("*", CALLBACK + "-refused"), "witness push: the refusal callback failed")

    def _log_once(self, key: tuple[str, str], message: str, *args: object) -> None:
        with self._cond:
            if key in self._logged:
                return
            self._logged.add(key)
        _LOG.warning(message, *args)
