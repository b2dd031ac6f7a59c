"""A log's checkpoints pushed to the witnesses of its policy, and their answers kept in its directory.

The glue between the writer (``logstore.Checkpointer``, whose listener is :meth:`CheckpointWitnessing.submit`)
and one :class:`~otel_route_shadow.witness.pusher.WitnessPusher`:

* ``submit`` (the writer's listener, after a checkpoint is durably published) hands a signed checkpoint
  to the pusher: O(1), never a wait (the pusher's one-slot queue keeps the newest). An unsigned
  checkpoint is not pushed: no witness cosigns one;
* ``prove(old, new)`` (the pusher's thread) is the consistency proof from the log's tiles, each tile
  authenticated against the root of the checkpoint being pushed (``tlog.TileReader``);
* ``on_cosigned`` merges the witness's lines into the stored checkpoint (``LogStore.cosign``: each
  line verified against the policy's witness keys, added after the note's own lines, the signed text
  never rewritten), inside the caller's ``exclusive`` guard so that a checkpoint being written is never
  skipped because of it. When the directory is busy the merge is tried again a few times, then kept
  for the next cosignature or the flush;
* ``on_refused`` records a witness's refusal in ``witness-refusals``, once per witness and cause (the
  pusher logs it once); timeouts, unreachable witnesses and 5xx answers are transient, logged only.

At start (:meth:`learn_sizes`, a thread per witness, named as the pusher's) each witness is asked the size it holds for this log
(``old 0`` with a signed checkpoint of the empty tree: the 409 answer says it); the writer signs
nothing until they answered or failed (``floor``, its ``witness_floor``) and refuses when a witness
holds more than the writer can authenticate; the pusher starts from those sizes.

The pusher is made on the first signed checkpoint; ``flush`` (at shutdown) pushes the newest one to
every witness within its timeout, once per checkpoint; ``close`` stops the pusher (a later checkpoint
makes a new one). In a forked child the lock is new (the parent's may have been copied held) and the
pusher starts a thread of its own.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Final

from otel_route_shadow.logstore import Cosigned, LogStore, SignedCheckpoint
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.tlog import DEFAULT_SKEW_S, Checkpoint, TileReader, WitnessPolicy, consistency_proof
from otel_route_shadow.witness.client import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_REQUEST_TIMEOUT_S,
    PushOutcome,
    add_checkpoint,
)
from otel_route_shadow.witness.endpoint import WitnessEndpoint, endpoints_from_policy
from otel_route_shadow.witness.pusher import DEFAULT_PUSHES_PER_DAY, PusherStats, WitnessPusher
from otel_route_shadow.worker import AFTER_FORK, WorkerName

__all__ = ["LEARN_TIMEOUT_S", "MERGE_ATTEMPTS", "TRANSIENT_CAUSES", "CheckpointWitnessing"]


MERGE_ATTEMPTS: Final = 20
"""How often a merge is tried while the directory is busy, ``_MERGE_PAUSE_S`` apart, before it is kept
for the next chance (another writer's checkpoint holds the lock for milliseconds)."""
_MERGE_PAUSE_S: Final = 0.025
_ROOTS_KEPT: Final = 16
_LEARN_GRACE_S: Final = 1.0
LEARN_TIMEOUT_S: Final = 2.0
"""Longest the question of a witness's size at start takes (connect and answer): nothing is signed
meanwhile, so a witness that holds it delays the first checkpoint by this much at most."""
TRANSIENT_CAUSES: Final = frozenset({"timeout", "unreachable", "server-error"})
"""Causes that say nothing about the log (the witness or the network failed): logged, not recorded."""

Exclusive = Callable[[float], AbstractContextManager[bool]]
"""``exclusive(timeout)``: a guard held around a merge; yields False when not had within ``timeout``."""


@contextlib.contextmanager
def _always(_timeout: float) -> Iterator[bool]:
    yield True


class CheckpointWitnessing:
    """Pushes the checkpoints of the log in ``directory`` (origin ``origin``) to the witnesses of
    ``policy`` that have a URL, and keeps their answers (see the module). Raises
    ``WitnessConfigError`` for a witness URL that cannot be pushed to."""

    def __init__(
        self,
        directory: LogStore,
        origin: str,
        policy: WitnessPolicy,
        *,
        pushes_per_day: float = DEFAULT_PUSHES_PER_DAY,
        exclusive: Exclusive = _always,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        skew: int = DEFAULT_SKEW_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.origin = origin
        self.endpoints: tuple[WitnessEndpoint, ...] = endpoints_from_policy(policy)
        self.witness_keys = tuple(e.verifier for e in self.endpoints)
        self.pushes_per_day = pushes_per_day
        self._exclusive = exclusive
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._skew = skew
        self._clock = clock
        self._lock = threading.Lock()
        self._pusher: WitnessPusher | None = None
        self._roots: dict[int, bytes] = {}
        self._last_proof: tuple[tuple[int, int, bytes], list[bytes]] | None = None
        self._pending: tuple[str, tuple[str, ...]] | None = None
        self._submitted: str | None = None
        self._flushed: str | None = None
        self._recorded: set[tuple[str, str]] = set()
        self._known: dict[str, int] = {}
        self._probe: str | None = None
        self._learned = threading.Event()
        self._learned.set()
        self._learn_until = 0.0
        self.merges: dict[str, int] = {}
        """How each merge ended, by ``logstore.Cosigned`` value (and ``kept``: left for the next chance)."""
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``AFTER_FORK``): a new lock, and the sizes asked again if the
        parent's threads had not all answered (they do not exist here)."""
        self._lock = threading.Lock()
        self._pending = None
        if not self._learned.is_set() and self._probe is not None:
            self.learn_sizes(self._probe)

    # --- what the witnesses hold ---------------------------------------------------------------------

    def learn_sizes(self, probe: str) -> None:
        """Ask every witness, each in a thread of its own, the size it holds for this log: ``old 0`` with
        ``probe`` (the log's signed checkpoint of the empty tree, which extends nothing and forks
        nothing): a 409 answer gives the size, a cosignature says 0. :meth:`floor` is None until every
        witness answered, failed or timed out (``LEARN_TIMEOUT_S`` at most).

        Threads of their own, not steps of the pusher's worker: the questions are asked at once, so a
        witness that hangs delays the answer by its timeout, not every other witness's too; each thread
        ends within ``LEARN_TIMEOUT_S`` by itself, so nothing needs to stop it."""
        self._probe = probe
        self._learned = threading.Event()
        self._learn_until = time.monotonic() + LEARN_TIMEOUT_S + _LEARN_GRACE_S
        left = [len(self.endpoints)]
        if not self.endpoints:
            self._learned.set()
        for endpoint in self.endpoints:
            thread = threading.Thread(
                target=self._learn,
                args=(endpoint, probe, self._learned, left),
                name=WorkerName.WITNESS.value,
                daemon=True,
            )
            thread.start()

    def floor(self) -> int | None:
        """The largest size a witness said it holds for this log (0: none), None while still asking."""
        if not self._learned.is_set() and time.monotonic() < self._learn_until:
            return None
        with self._lock:
            return max(self._known.values(), default=0)

    def wait_learned(self) -> bool:
        """Wait until the witnesses' sizes are known or the question's deadline passed (at most
        ``LEARN_TIMEOUT_S`` and a grace second after :meth:`learn_sizes`); whether every witness was heard."""
        return self._learned.wait(max(0.0, self._learn_until - time.monotonic()))

    def _learn(
        self, endpoint: WitnessEndpoint, probe: str, learned: threading.Event, left: list[int]
    ) -> None:
        try:
            timeout = min(self._request_timeout, LEARN_TIMEOUT_S)
            answer = add_checkpoint(
                endpoint,
                0,
                [],
                probe,
                now=int(self._clock()),
                skew=self._skew,
                connect_timeout=min(self._connect_timeout, timeout),
                timeout=timeout,
            )
            if answer.outcome is PushOutcome.CONFLICT and answer.witness_size is not None:
                with self._lock:
                    self._known[endpoint.name] = answer.witness_size
            elif answer.outcome is not PushOutcome.COSIGNED:
                _LOG.warning(
                    "route-shadow: cannot learn the size witness %s holds for %s (%s: %s); "
                    "checkpoints are signed without it",
                    endpoint.name,
                    self.origin,
                    answer.outcome.value,
                    answer.detail,
                )
        except Exception as exc:  # contained: the writer goes on without this witness's size
            _LOG.warning(
                "route-shadow: asking witness %s its size failed (%s)", endpoint.name, type(exc).__name__
            )
        finally:
            with self._lock:
                left[0] -= 1
                if left[0] == 0:
                    learned.set()

    # --- the writer's side ---------------------------------------------------------------------------

    def submit(self, made: SignedCheckpoint) -> None:
        """Queue a published checkpoint for the witnesses (a ``Checkpointer`` listener). Never waits."""
        if not made.signed or not self.endpoints:
            return
        with self._lock:
            self._roots[made.size] = made.root
            while len(self._roots) > _ROOTS_KEPT:
                del self._roots[min(self._roots)]
            pusher = self._pusher
            if pusher is None:
                pusher = self._pusher = self._new_pusher()
            self._submitted = made.note
        pusher.submit(made.note)

    def flush(self, timeout: float) -> bool:
        """Push the newest checkpoint to every witness now, within ``timeout`` seconds, unless it was
        flushed already; then merge what is still pending. True when every witness had its attempt."""
        with self._lock:
            pusher, note = self._pusher, self._submitted
            fresh = pusher is not None and note is not None and note != self._flushed
            if fresh:
                self._flushed = note
        done = pusher.flush(timeout) if fresh and pusher is not None else True
        self._merge_pending(0.0)
        return done

    def close(self) -> None:
        """Stop the pusher's thread (a later checkpoint makes a new pusher)."""
        with self._lock:
            pusher, self._pusher = self._pusher, None
        if pusher is not None:
            pusher.close(0.0)

    def stats(self) -> PusherStats | None:
        """The pusher's counts (None before the first signed checkpoint)."""
        pusher = self._pusher
        return pusher.stats() if pusher is not None else None

    def _new_pusher(self) -> WitnessPusher:
        return WitnessPusher(
            self.endpoints,
            self.prove,
            self.on_cosigned,
            on_refused=self.on_refused,
            on_size=self.on_size,
            pushes_per_day=self.pushes_per_day,
            known_sizes=dict(self._known),
            connect_timeout=self._connect_timeout,
            request_timeout=self._request_timeout,
            skew=self._skew,
            clock=self._clock,
        )

    # --- the pusher's callbacks (its thread) ---------------------------------------------------------

    def prove(self, old: int, new: int) -> Sequence[bytes]:
        """The consistency proof from ``old`` to the pushed checkpoint of size ``new``, from its tiles
        (the last proof is kept: witnesses that hold the same size get it without a second tile read)."""
        with self._lock:
            root = self._roots.get(new)
            last = self._last_proof
        if root is None:
            raise LookupError(f"no checkpoint of size {new} was submitted")
        if last is not None and last[0] == (old, new, root):
            return last[1]
        proof = consistency_proof(old, new, TileReader(self.directory, new, root))
        with self._lock:
            self._last_proof = ((old, new, root), proof)
        return proof

    def on_cosigned(self, size: int, root: bytes, lines: tuple[str, ...]) -> None:
        """Merge a witness's verified cosignature lines into the stored checkpoint."""
        text = Checkpoint(self.origin, size, root).text()
        with self._lock:
            if self._pending is not None and self._pending[0] == text:
                lines = (*self._pending[1], *lines)
            self._pending = (text, lines)
        self._merge_pending(_MERGE_PAUSE_S)

    def on_size(self, witness: str, size: int) -> None:
        """A witness said the size it holds (a 409 to a push): :meth:`floor` never goes below it, so a
        writer that could not ask at start still refuses to sign under what a witness holds."""
        with self._lock:
            self._known[witness] = max(self._known.get(witness, 0), size)

    def on_refused(self, witness: str, cause: str, size: int) -> None:
        """Record a witness's refusal once per witness and cause (transient causes are not recorded)."""
        if cause in TRANSIENT_CAUSES:
            return
        with self._lock:
            if (witness, cause) in self._recorded:
                return
            self._recorded.add((witness, cause))
        entry = {
            "witness": witness,
            "cause": cause,
            "origin": self.origin,
            "size": size,
            "time": int(self._clock()),
        }
        try:
            self.directory.append_witness_refusal(entry)
        except OSError as exc:
            _LOG.warning("route-shadow: cannot record the witness refusal (%s)", exc.strerror or exc)

    # --- merging ---------------------------------------------------------------------------------------

    def _merge_pending(self, pause: float) -> None:
        """Merge the pending lines; while the directory is busy, try again ``MERGE_ATTEMPTS`` times
        ``pause`` seconds apart (once when ``pause`` is 0), then keep them for the next chance."""
        wait = threading.Event()
        for attempt in range(MERGE_ATTEMPTS if pause > 0 else 1):
            with self._lock:
                pending = self._pending
            if pending is None:
                return
            outcome = self._merge(*pending, pause)
            if outcome is not Cosigned.BUSY:
                with self._lock:
                    if self._pending == pending:
                        self._pending = None
                self._count(outcome.value)
                return
            if attempt + 1 < MERGE_ATTEMPTS and pause > 0:
                wait.wait(pause)
        self._count("kept")

    def _merge(self, text: str, lines: tuple[str, ...], timeout: float) -> Cosigned:
        try:
            with self._exclusive(timeout) as held:
                if not held:
                    return Cosigned.BUSY
                return self.directory.cosign(
                    text, lines, self.witness_keys, now=int(self._clock()), skew=self._skew
                )
        except OSError as exc:
            _LOG.warning("route-shadow: cannot store a witness cosignature (%s)", exc.strerror or exc)
            return Cosigned.REJECTED

    def _count(self, key: str) -> None:
        with self._lock:
            self.merges[key] = self.merges.get(key, 0) + 1
