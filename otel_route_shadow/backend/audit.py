"""One chain's audit: its checkpoints and spans fetched from the backend and held against the file.

Shell code (reads the chain, queries the backend); the judgement is :mod:`.verdict`'s. Steps:

1. the chain's origin: ``origin=`` if given, else the ``route_shadow.origin`` its records carry, else
   the origin of its own checkpoint file (``CHAIN.tlog/checkpoints``);
2. the backend's checkpoint spans of that origin (any time), read into checkpoints
   (:mod:`.checkpoints`), and the chain proven consistent with every one (``tlog``);
3. the backend's seam spans for the chain's window - only those of the origin when the records carry
   it, so two hosts or two runs sharing a backend project never raise false alarms - joined record by
   record (:mod:`.crosscheck`).
4. the ``records-dropped`` events among the records read (the chain's own account of records a writer
   had to drop), listed under coverage; they never change the verdict (:mod:`.verdict`);
5. with a tlog-policy, the cosigned notes of the chain's own ``checkpoints`` file and the backend's are
   checked against it; those whose cosignatures meet the quorum are held against the chain too, and
   only they count as witnessed (:mod:`.witnesses`).

Checkpoints are fetched before the chain is read, and spans before the second pass, so a chain still
being written never looks shorter than what the backend already holds.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from otel_route_shadow.backend.base import (
    Backend,
    BackendError,
    BackendNotFound,
    BackendNotPhoenix,
    BackendProtocolError,
    QueryWindow,
    format_unix_nano,
)
from otel_route_shadow.backend.chain_source import (
    ChainReadError,
    iter_chain_payloads,
    iter_payloads_from,
    verify,
)
from otel_route_shadow.backend.checkpoints import (
    BackendCheckpoint,
    BadCheckpointSpan,
    backend_checkpoints,
)
from otel_route_shadow.backend.crosscheck import (
    ChainSummary,
    CrossCheckReport,
    SeamRecord,
    cross_check,
    seam_record,
    summarize_chain,
)
from otel_route_shadow.backend.trust import (
    Trusted,
    TrustState,
    TrustStateError,
    trusted_after,
    verify_incremental,
)
from otel_route_shadow.backend.verdict import AuditReport, Consistency, Failure, Thresholds
from otel_route_shadow.backend.witnesses import attested_checkpoints, judge_witnesses, local_notes
from otel_route_shadow.chain import VerifyResult, left_beside
from otel_route_shadow.logstore import (
    LogStore,
    Pruned,
    StateError,
    check_kept_chain,
    signed_checkpoint_from_note,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import checkpoint_attributes as cp
from otel_route_shadow.tlog import (
    DEFAULT_SKEW_S,
    KeyWindow,
    NoteError,
    QuorumReport,
    WitnessPolicy,
    attest_notes,
)

__all__ = [
    "AuditError",
    "AuditOptions",
    "Held",
    "Problem",
    "audit_chain",
    "chain_origin_from_checkpoint_file",
    "tlog_consistency",
]

#: Records read from the chain's head to find the origin its records carry.
_HEAD_RECORDS = 64
#: Checkpoints are looked for from this time on (Phoenix wants a lower bound; 1 s after the epoch).
_EVER = 10**9


class Problem(StrEnum):
    """Why an audit could not be made (each has its own exit code in ``cli.audit``)."""

    USAGE = "unusable-input"  # the chain cannot be read, an empty window, bad arguments
    UNREACHABLE = "backend-unreachable"  # down, wrong host or port, timeout, access refused, HTTP 5xx
    NOT_A_BACKEND = "not-a-backend"  # the URL answers, but not as the backend (a collector's port)
    NO_SPANS = "no-spans"  # the backend project holds no spans at all: nothing to hold the chain against


class AuditError(Exception):
    """One line naming the problem; ``problem`` says which kind."""

    def __init__(self, message: str, problem: Problem) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Held:
    """The chain against the checkpoints held against the chain, from one read of the chain."""

    consistency: Consistency
    linkage: VerifyResult | None = None
    """The chain's own verdict from the same read (below an authenticated checkpoint that holds, its
    signer's check is relied on: docs/chain-format.md section 13.7)."""
    trusted: Trusted | None = None
    """What the auditor may remember (``audit --state``), when every checkpoint holds."""
    state_fallback: str | None = None
    """Why the auditor's memory could not be extended, so the chain was checked in full (``audit --state``)."""


@dataclass(frozen=True, slots=True)
class AuditOptions:
    origin: str | None = None
    verifier_keys: tuple[str, ...] = ()
    since_unix_nano: int | None = None
    until_unix_nano: int | None = None
    check_linkage: bool = True
    thresholds: Thresholds = field(default_factory=Thresholds)
    state: TrustState | None = None  # the auditor's memory of what earlier audits proved (.trust)
    full: bool = False  # check every record even when the state trusts a prefix
    policy: WitnessPolicy | None = None  # only checkpoints its quorum cosigned count as witnessed
    policy_source: str = ""  # where the policy came from (its file), for the report


def _backend_error(exc: BackendError) -> AuditError:
    if isinstance(exc, BackendNotFound):
        return AuditError(f"{exc}: nothing to hold the chain against", Problem.NO_SPANS)
    if isinstance(exc, BackendNotPhoenix | BackendProtocolError):
        return AuditError(str(exc), Problem.NOT_A_BACKEND)
    return AuditError(str(exc), Problem.UNREACHABLE)


def chain_origin_from_checkpoint_file(chain: str) -> str | None:
    """The origin of the newest note in the chain's own checkpoint file (``CHAIN.tlog/checkpoints``)."""
    try:
        notes = LogStore(chain).notes().notes
        return signed_checkpoint_from_note(notes[-1]).origin if notes else None
    except (OSError, ValueError):
        return None


def _origin(chain: str, options: AuditOptions) -> tuple[str | None, str]:
    """--origin, else the first seam record's (read from the chain's head only), else the checkpoint file's."""
    if options.origin:
        return options.origin, "--origin"
    head = summarize_chain(itertools.islice(iter_chain_payloads(chain, _first_kept(chain)), _HEAD_RECORDS))
    if head.origin:
        return head.origin, "records"
    found = chain_origin_from_checkpoint_file(chain)
    return (found, "checkpoint file") if found else (None, "none")


def read_pruned(chain: str) -> Pruned | None:
    """The chain's ``pruned`` file (None: never pruned); one that cannot be used is unusable input."""
    try:
        return LogStore(chain).read_pruned()
    except StateError as exc:
        raise AuditError(str(exc), Problem.USAGE) from None


def _first_kept(chain: str) -> int:
    """The first record the chain keeps: its minimum index (0 when never pruned)."""
    pruned = read_pruned(chain)
    return 0 if pruned is None else pruned.min_index


@dataclass(frozen=True, slots=True)
class _Tail:
    """The records the audit reads: all of them (of a pruned chain, those it keeps, from ``kept``), or
    those after the checkpoint the state trusts, from its chain-wide position ``offset``."""

    pruned: Pruned | None = None
    offset: int = 0
    first_seq: int = 0

    @property
    def kept(self) -> int:
        return 0 if self.pruned is None else self.pruned.min_index

    def payloads(self, chain: str) -> Iterator[tuple[int, object]]:
        if self.first_seq == 0:
            return iter_chain_payloads(chain, self.kept)
        return iter_payloads_from(chain, self.offset, self.first_seq, self.pruned)


def _held(
    chain: str,
    checkpoints: list[BackendCheckpoint],
    origin: str | None,
    options: AuditOptions,
) -> tuple[Held | None, _Tail, Trusted | None]:
    """The chain against the checkpoints held against the chain: from the trusted point when the state has one for
    this origin (and the incremental path holds), else in full; and what to trust from now on."""
    pruned = read_pruned(chain)
    kept = _Tail(pruned)
    # Of a pruned chain, none may cover its first record kept (the backend lags): nothing to hold it against.
    uncovered = pruned is not None and all(c.size <= pruned.min_index for c in checkpoints)
    if not checkpoints or origin is None or uncovered:
        return None, kept, None
    keys, state = options.verifier_keys, options.state
    trusted = state.get(origin) if state is not None and not options.full else None
    fallback = None
    if trusted is not None:
        result = verify_incremental(chain, checkpoints, keys, trusted, pruned)
        if isinstance(result, str):
            fallback = result
        else:
            return (
                Held(result[0]),
                dataclasses.replace(kept, offset=trusted.offset, first_seq=trusted.size),
                result[1],
            )
    held = dataclasses.replace(tlog_consistency(chain, checkpoints, keys), state_fallback=fallback)
    if state is None or not held.consistency.ok:
        return held, kept, None
    return held, kept, held.trusted


def _fetch_checkpoints(
    backend: Backend, origin: str | None, now: int
) -> tuple[list[BackendCheckpoint], list[BadCheckpointSpan]]:
    if origin is None:
        return [], []
    spans = backend.fetch_spans(QueryWindow(_EVER, now + 1), {cp.ORIGIN: origin})
    return backend_checkpoints(spans, origin)


def tlog_consistency(chain: str, checkpoints: Sequence[BackendCheckpoint], keys: Sequence[str]) -> Held:
    """The chain proven consistent with every checkpoint (tlog's verifier), its own verdict and what
    to trust, from one pass over the chain. Without keys, signatures are not checked: the
    checkpoints are taken as the backend holds them. A pruned chain is checked from its minimum index m
    as ``verify`` checks it: the tree's nodes below m from the tiles the checkpoints authenticate, and
    the record at m authenticated from the signed tree, a finding when it is not the signed leaf
    (``logstore.check_kept_chain``; without keys, against the checkpoints as the backend holds them)."""
    pruned = read_pruned(chain)
    try:
        checked, problem = check_kept_chain(
            chain, pruned, [c.note for c in checkpoints], keys, check_tile_store=False
        )
    except NoteError as exc:
        raise AuditError(f"--key: {exc}", Problem.USAGE) from None
    result = checked.report
    failures = tuple(
        Failure(v.reason.value, v.size, v.first_bad_seq, v.detail) for v in result.verdicts if not v.ok
    )
    # No checkpoint authenticates with the keys given (the wrong --key, or all forged): the anchors and the
    # first record kept cannot be authenticated either, which judges the keys, not the chain.
    unkeyed = (
        bool(keys) and all(f.judges_checkpoint for f in failures) and not any(v.ok for v in result.verdicts)
    )
    if pruned is not None and problem is not None and not unkeyed:
        failures += (Failure("record-changed", None, pruned.min_index, problem),)
    consistency = Consistency(result.checkpointed_size, result.chain_size, failures)
    return Held(consistency, None if unkeyed else checked.chain, trusted_after(checked, pruned))


def _window(options: AuditOptions, summary: ChainSummary, now: int) -> QueryWindow | None:
    start = options.since_unix_nano if options.since_unix_nano is not None else summary.first_start_unix_nano
    if start is None:
        return None
    end = options.until_unix_nano if options.until_unix_nano is not None else now + 1
    if end <= start:
        raise AuditError(
            f"empty window: {format_unix_nano(end)} is not after {format_unix_nano(start)}", Problem.USAGE
        )
    return QueryWindow(start, end)


def _from_first_read(
    window: QueryWindow | None, tail: _Tail, summary: ChainSummary
) -> tuple[QueryWindow | None, int | None]:
    """The span window from the first record this audit reads on, and that record's seq when the
    window asked for began before it: of a pruned chain, its first record kept (the pruned records'
    spans have no record to be held against); with ``--state``, the first after the records an earlier
    audit proved (their spans were held then). Every span before it would read as an orphan. No window
    when no seam record is read; :class:`AuditError` for a window that ends before the first."""
    first_seq = tail.first_seq or tail.kept
    if window is None or not first_seq:
        return window, None
    first = summary.first_start_unix_nano
    if first is None:  # no seam record read: no span to hold against one
        return None, None
    if window.start_unix_nano >= first:
        return window, None
    if window.end_unix_nano <= first:
        what = "the first record kept" if tail.first_seq == 0 else "the records an earlier audit proved"
        raise AuditError(
            f"the window {window.describe()} holds no record this audit reads (from seq {first_seq}, after "
            f"{what}): nothing in it to hold the spans against; --full reads the whole chain",
            Problem.USAGE,
        )
    return QueryWindow(first, window.end_unix_nano), first_seq


def _since_trusted(
    summary: ChainSummary,
    checkpoints: Sequence[BackendCheckpoint],
    size: int,
    origin: str | None,
    until: int | None,
) -> ChainSummary:
    """An incremental audit's records, its window reaching back to when the trusted checkpoint (of
    ``size``) was made: every record after it was appended later, so the spans of records cut from the
    tail are held too, all of them cut included (spans of proven records there: :func:`_drop_proven`).
    ``origin``: the one the chain's head records carry; ``until``: the window asked ends there."""
    made = min((c.seen_unix_nano for c in checkpoints if c.size == size), default=None)
    first = summary.first_start_unix_nano
    if made is None or (first is not None and first <= made) or (until is not None and until <= made):
        return summary
    return dataclasses.replace(summary, first_start_unix_nano=made, origin=summary.origin or origin)


def _drop_pruned(report: CrossCheckReport, checkpoints: Sequence[BackendCheckpoint], kept: int) -> None:
    """Of the spans with no record read, drop those that started before a checkpoint of ``kept`` records or
    more was made: a record is appended when its spawn ends, so a pruned record's span may lie after the
    first record kept, but every pruned record was appended before that checkpoint."""
    made = min((c.seen_unix_nano for c in checkpoints if c.size >= kept), default=None)
    if made is not None:
        report.orphan_spans = [o for o in report.orphan_spans if o.start_time_unix_nano >= made]


def _no_window(chain: str) -> AuditError:
    return AuditError(
        f"{chain}: the chain holds no seam records, so it has no time window to audit, and the backend "
        "holds no checkpoint of its origin; pass --since to look for spans the chain lacks",
        Problem.USAGE,
    )


def _cross_check(
    chain: str,
    backend: Backend,
    window: QueryWindow | None,
    origin: str | None,
    summary: ChainSummary,
    tail: _Tail,
    now: int,
) -> CrossCheckReport:
    """The span cross-check; spans of the origin only when the records carry it (those read, or the
    chain's head: an incremental audit may read none)."""
    carried = summary.origin_records or summary.origin == origin
    by_origin = {attr.ORIGIN: origin} if origin is not None and carried else None
    spans = list(backend.fetch_spans(window, by_origin)) if window is not None else []
    report = cross_check(
        tail.payloads(chain),
        spans,
        window=window or QueryWindow(now, now + 1),
        backend=backend.describe(),
        time_tolerance_ns=backend.time_tolerance_ns,
    )
    if tail.first_seq and report.orphan_spans:
        _drop_proven(report, chain, tail)
    return report


def _drop_proven(report: CrossCheckReport, chain: str, tail: _Tail) -> None:
    """Of the spans with no record read, drop those of the records an earlier audit proved (``--state``):
    a record is appended when its spawn ends, so one below the trusted point may have started after the
    first record read, inside the window. Their keys are read only then, from the chain's head."""
    left = {(o.trace_id, o.span_id) for o in report.orphan_spans}
    proven: set[tuple[str, str]] = set()
    for seq, payload in iter_chain_payloads(chain, tail.kept):
        if seq >= tail.first_seq:
            break
        record = seam_record(seq, payload)
        if isinstance(record, SeamRecord) and record.key in left:
            proven.add(record.key)
    report.orphan_spans = [o for o in report.orphan_spans if (o.trace_id, o.span_id) not in proven]


def audit_chain(
    chain: str,
    backend: Backend,
    options: AuditOptions = AuditOptions(),
) -> AuditReport:
    """Audit one chain. Raises :class:`AuditError` when no audit can be made."""
    now = time.time_ns()
    try:
        origin, source = _origin(chain, options)
        checkpoints, bad = _fetch_checkpoints(backend, origin, now)
        quorum, cosigned = _cosigned(chain, origin, checkpoints, options, now)
        held, tail, trust = _held(chain, [*checkpoints, *cosigned], origin, options)
        summary = summarize_chain(tail.payloads(chain))
        if tail.first_seq:
            carried = origin if source == "records" else None
            summary = _since_trusted(summary, checkpoints, tail.first_seq, carried, options.until_unix_nano)
        window, window_from_seq = _from_first_read(_window(options, summary, now), tail, summary)
        if window is None and not checkpoints and not cosigned:
            raise _no_window(chain)
        linkage = None
        if options.check_linkage and tail.first_seq == 0:
            linkage = (
                held.linkage
                if held is not None and held.linkage is not None
                else verify(chain, start=tail.kept)
            )
        spans = _cross_check(chain, backend, window, origin, summary, tail, now)
        if tail.pruned is not None:
            _drop_pruned(spans, checkpoints, tail.kept)
    except (ChainReadError, TrustStateError) as exc:
        raise AuditError(str(exc), Problem.USAGE) from None
    except BackendError as exc:
        raise _backend_error(exc) from None
    if linkage is not None:
        spans.chain_linkage = linkage.verdict.value
        spans.chain_linkage_detail = linkage.describe()
    report = AuditReport(
        chain=chain,
        origin=origin,
        origin_source=source,
        spans=spans,
        now_unix_nano=now,
        checkpoints=checkpoints,
        bad_checkpoint_spans=bad,
        consistency=held.consistency if held is not None else None,
        chain_size=(
            held.consistency.chain_size if held is not None else spans.seam_records + spans.other_records
        ),
        signatures_checked=bool(options.verifier_keys),
        thresholds=options.thresholds,
        trusted_from=tail.first_seq or None,
        state_fallback=held.state_fallback if held is not None else None,
        dropped=summary.dropped,
        left_beside=left_beside(chain),
        pruned=tail.pruned,  # as the audit read it, not read again
        window_from_seq=window_from_seq,
        witnessed=None
        if quorum is None
        else judge_witnesses(options.policy_source, quorum, held.consistency if held is not None else None),
    )
    _remember(report, options, trust)
    return report


def _cosigned(
    chain: str, origin: str | None, checkpoints: list[BackendCheckpoint], options: AuditOptions, now: int
) -> tuple[QuorumReport | None, list[BackendCheckpoint]]:
    """With a policy: its verdict on the backend's and the chain's own notes, and the chain's own notes
    whose checkpoints meet the quorum (to hold the chain against, beside the backend's)."""
    if options.policy is None:
        return None, []
    notes = [c.note for c in checkpoints]
    first = len(notes)
    notes += local_notes(chain, origin)
    try:
        logs = [KeyWindow.parse(key) for key in options.verifier_keys]
    except NoteError as exc:
        raise AuditError(f"--key: {exc}", Problem.USAGE) from None
    quorum = attest_notes(notes, options.policy, now=now // 10**9, skew=DEFAULT_SKEW_S, logs=logs)
    return quorum, attested_checkpoints(notes, first, quorum)


def _remember(report: AuditReport, options: AuditOptions, trust: Trusted | None) -> None:
    """Advance the auditor's state only when nothing contradicts the chain or a checkpoint."""
    if options.state is None or trust is None or report.origin is None:
        return
    if report.chain_disagrees or report.checkpoint_unverifiable:
        return
    try:
        options.state.put(report.origin, trust)
    except TrustStateError as exc:
        raise AuditError(str(exc), Problem.USAGE) from None
