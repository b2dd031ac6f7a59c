"""The chain exporter: each seam call becomes one record in the hash-linked decision chain.

The record carries the seam span's own ``route_shadow.*`` and ``gen_ai.*`` attribute values and its
trace and span ids, so the trace in the backend and the chain record are the same event. It is not an
SDK ``SpanExporter``: the SDK hands those only the spans its sampler kept, and a span the sampler
drops reaches no processor at all, while every seam call must have its record. The seam appends it
itself, just before it ends the span (``SeamObservation.export``), sampled or not.

Never disturbing the host: a chain path that is not a regular file is refused at start (one log
line; nothing is recorded); an append waits at most ``lock_timeout_ms`` for another process holding
the chain's lock, and a record that did not get it in time waits in the writer's bounded backlog
(``chain.backlog``), written before the next record and at ``close`` (the
runtime's way out: uninstrument, provider shutdown, interpreter exit), each within a bounded wait; what
is still waiting at ``close`` goes to the chain's spill file, which the next writer writes into the
chain first. A record appended after ``close`` (a seam still running when the runtime closed) is
written at once in the caller's thread, waiting for the lock as any append does; what did not get it
goes to the spill file (or is counted in ``<chain>.lost``) before the append returns, and the chain's
file descriptors are given back again. A process killed by a signal runs none of this: its waiting
records are in its file under ``<chain>.waiting/``, which the next writer writes into the chain.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from otel_route_shadow.chain import (
    BACKLOG_RECORDS,
    REASON_NOT_OBSERVED,
    ChainPathError,
    DecisionChain,
    EncodedPayload,
    LineListener,
    PayloadTemplate,
    encode_payload,
    open_chain,
    sanitize_payload,
)
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.shadow import record_payload, record_tokens
from otel_route_shadow.worker import AFTER_FORK

__all__ = ["EXIT_FLUSH_S", "RouteShadowChainExporter"]


EXIT_FLUSH_S: Final = 1.0
"""Longest wait, at shutdown and at interpreter exit, for the lock to write the backlog (and then
again for the spill file's lock, for what still waits)."""


def chain_path_refusal(path: Path) -> str | None:
    """Why ``path`` cannot be a chain (it exists and is not a regular file), or None.

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` before anything else, so a FIFO at the
    path never blocks the host."""
    try:
        os.close(open_chain(os.fspath(path), os.O_RDONLY))
    except ChainPathError as exc:
        return str(exc)
    except IsADirectoryError:
        return f"{path}: is a directory, not a chain file"
    except OSError:
        return None  # absent, or unreadable: the first append says so, contained as any disk error
    return None


class RouteShadowChainExporter:
    """Appends seam events to a decision chain."""

    def __init__(
        self,
        chain_path: str | Path,
        durability: str = "flush",
        lock_timeout_ms: int | None = None,
        backlog: int = BACKLOG_RECORDS,
        listener: LineListener | None = None,
    ) -> None:
        self._path = Path(chain_path)
        self._listener = listener
        """Told of every line written, once per line (the checkpointer's ``line_written``)."""
        self._durability = durability
        self._lock_timeout = None if lock_timeout_ms is None else lock_timeout_ms / 1000
        self._backlog = backlog
        self._log: DecisionChain | None = None
        self._lock = threading.Lock()
        self.closed = False
        """Set by ``close``, for good: every later append settles at once (see the module docstring)."""
        self.refused = chain_path_refusal(self._path)
        """Why the chain path was refused at start (then nothing is ever recorded), or None."""
        if self.refused is not None:
            _LOG.warning("route shadow records nothing: %s", self.refused)
        AFTER_FORK.add(self)

    def after_fork(self) -> None:
        """In a forked child (called by ``worker.AFTER_FORK``): the lock the chain is opened under may have
        been copied held by another thread of the parent's (the chain itself resets in ``DecisionChain``)."""
        self._lock = threading.Lock()

    @property
    def chain_path(self) -> Path:
        return self._path

    def _chain(self) -> DecisionChain | None:
        """The chain, opened on first use (None when its path was refused at start)."""
        log = self._log
        if log is None and self.refused is None:
            with self._lock:
                if self._log is None:
                    self._path.parent.mkdir(parents=True, exist_ok=True)
                    self._log = DecisionChain(
                        self._path,
                        durability=self._durability,  # type: ignore[arg-type]
                        lock_timeout=self._lock_timeout,
                        backlog=self._backlog,
                        listener=self._listener,
                    )
                log = self._log
        return log

    def append(
        self,
        trace_id: int,
        span_id: int,
        start_time_unix_nano: int,
        attributes: Mapping[str, Any],
        duration_ns: int | None = None,
    ) -> None:
        """Append one seam event (``duration_ns``: the spawn's, from the span's start to the seam's
        finish); raises what the disk raises (the caller contains it)."""
        log = self._chain()
        if log is not None:
            payload = record_payload(trace_id, span_id, start_time_unix_nano, attributes, duration_ns)
            self._submit(log, encode_payload(*sanitize_payload(payload)))

    def append_templated(
        self,
        template: PayloadTemplate,
        trace_id: int,
        span_id: int,
        start_time_unix_nano: int,
        duration_ns: int,
    ) -> None:
        """:meth:`append` for attributes whose payload shape was prepared once (``record_template``):
        the same bytes, without walking the attributes again."""
        log = self._log if self._log is not None else self._chain()
        if log is not None:
            self._submit(
                log, template.encode(record_tokens(trace_id, span_id, start_time_unix_nano, duration_ns))
            )

    def count_not_observed(self) -> None:
        """Count one seam call that has no record because observing it failed (``not-observed``): the
        chain gets a ``records-dropped`` event with its next write, at ``close`` at the latest (at once
        when closed already). Never raises: a chain that cannot be opened has nothing to count in."""
        try:
            log = self._log if self._log is not None else self._chain()
            if log is not None:
                log.count_unrecorded(REASON_NOT_OBSERVED)
                self._settle_if_closed(log)
        except Exception as exc:  # the chain's folder cannot be made: nothing to count in
            _LOG.debug("route shadow could not count a seam call it did not observe: %s", _cause(exc))

    def _submit(self, log: DecisionChain, encoded: EncodedPayload) -> None:
        """Submit one record; once closed, also settle what waits without waiting again (the append had
        the lock timeout: what missed it is spilled or counted as lost at once) and close the
        descriptors the append reopened."""
        try:
            log.submit(encoded)
        finally:
            self._settle_if_closed(log)

    def _settle_if_closed(self, log: DecisionChain) -> None:
        """Once closed: what waits is spilled or counted at once, and the reopened descriptors closed."""
        if self.closed:
            self.flush_backlog(0.0, spill=True)
            log.close()

    def flush_backlog(self, timeout: float, *, spill: bool = False) -> int:
        """Write records still waiting for the chain's lock, waiting at most ``timeout`` seconds;
        return how many records are left. With ``spill`` (at shutdown and exit) what is left goes to
        the chain's spill file, which the next writer writes first; what cannot go there either (a
        full disk) is counted in ``<chain>.lost``, which the next writer marks in the chain as
        ``records-dropped``; each outcome is logged with the number of records."""
        log = self._log
        if log is None or not log.backlog:
            return 0
        why = f"still wait for the lock on {self._path} after {timeout:g} s"
        try:
            log.flush(timeout)
        except Exception as exc:  # a disk error at exit: say so, never raise into the host
            why = f"could not be written to {self._path}: {_cause(exc)}"
            _LOG.warning("route shadow could not write its waiting chain records: %s", _cause(exc))
        kept, dropped = log.backlog_records
        left = kept + dropped
        if not log.backlog:
            return 0
        if not spill:
            _LOG.warning("route shadow: %d chain records %s", left, why)
            return left
        try:
            log.spill(timeout)
        except Exception as exc:
            return self._mark_lost(log, left, exc)
        _LOG.warning(
            "route shadow: %d chain records could not be written to %s within %g s: %d kept in %s%s; the next "
            "writer writes them into the chain first",
            left,
            self._path,
            timeout,
            kept,
            log.spill_path,
            f", {dropped} lost and counted there as records-dropped" if dropped else "",
        )
        return 0

    def _mark_lost(self, log: DecisionChain, left: int, exc: Exception) -> int:
        """Count the records neither the chain nor the spill file took in ``<chain>.lost``; logged. When that
        file cannot take them either they are dropped (``mark_lost``): logged once as lost, unmarked."""
        why = _cause(exc)
        try:
            marked = log.mark_lost(exc)
        except Exception as second:
            _LOG.warning(
                "route shadow: %d chain records for %s are lost, unmarked: neither the spill file %s (%s) "
                "nor %s.lost (%s) could take them",
                left,
                self._path,
                log.spill_path,
                why,
                self._path,
                type(second).__name__,
            )
            return left
        _LOG.warning(
            "route shadow: %d chain records for %s are lost (%s: the spill file %s could not take them); "
            "counted in %s.lost: the next writer marks them in the chain as records-dropped",
            marked,
            self._path,
            why,
            log.spill_path,
            self._path,
        )
        return 0

    def close(self) -> None:
        """Write the backlog (bounded; what is left goes to the spill file) and give the chain's file
        descriptors back; a later ``append`` reopens them for itself only (see the module docstring)."""
        self.closed = True
        self.flush_backlog(EXIT_FLUSH_S, spill=True)
        log = self._log
        if log is not None:
            log.close()


def _cause(exc: BaseException) -> str:
    """An error as a log line names it: an ``OSError``'s errno name and text (``EFBIG (File too
    large)``), else the exception's type."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{errno.errorcode.get(exc.errno, exc.errno)} ({os.strerror(exc.errno)})"
    return type(exc).__name__
