"""Offline receipts: ``prove CHAIN --seq N --receipt`` and ``verify-proof --receipt FILE --record LINE``.

A receipt is a C2SP ``tlog-proof@v1`` text (``tlog.receipt``): the record's index, its inclusion proof,
and the checkpoint note with its witnesses' cosignatures. With the record's line beside it (``prove
--record-out FILE``) and the auditor's policy, it shows one decision is in the log the witnesses saw,
with nothing else: ``verify-proof --receipt R --record L --witness-policy P`` (exit 0 included and the quorum
met, 1 not included or a signature that does not hold, 2 unusable input, 3 the quorum not met).

The checkpoint a receipt is made against: ``--checkpoint FILE`` (its newest note); else, with
``--witness-policy``, the largest checkpoint in ``CHAIN.tlog/checkpoints`` that covers the record and meets the
quorum; else the log's latest (``CHAIN.tlog/checkpoint``). The proof comes from the tiles, each
authenticated against that checkpoint's root; the record's line is read from the chain and must be the
leaf the checkpoint signed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from otel_route_shadow.chain import ChainPathError, chain_line
from otel_route_shadow.cli.checkpoints import read_log_keys
from otel_route_shadow.cli.common import CliError, check_output, read_text_file, write_output
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_INSUFFICIENT, EXIT_OK
from otel_route_shadow.cli.witnessed import attestation_problem, read_witness_policy
from otel_route_shadow.logstore import LogStore
from otel_route_shadow.tlog import (
    DEFAULT_SKEW_S,
    REBUILD_HINT,
    AttestationError,
    Checkpoint,
    KeyWindow,
    PolicyLog,
    ProofError,
    Receipt,
    ReceiptError,
    ReceiptFault,
    TileError,
    TileReader,
    WitnessPolicy,
    attest_notes,
    format_receipt,
    inclusion_proof,
    leaf_hash,
    verify_receipt,
)

__all__ = ["prove_receipt", "receipt_witness_policy", "verify_receipt_file"]


def prove_receipt(
    args: argparse.Namespace, note: str | None, checkpoint_of: Callable[[str], Checkpoint]
) -> int:
    """Print the receipt of record ``args.seq`` against ``note`` (None: chosen as the module says) and write
    its line to ``args.record_out``; ``checkpoint_of`` reads a note's checkpoint."""
    chain: str = args.chain
    seq: int = args.seq
    if args.record_out:
        check_output(args.record_out, "--record-out")  # before anything is printed
    directory = LogStore(chain)
    if note is None and args.witness_policy:
        logs = [KeyWindow.parse(key) for key in read_log_keys([], args.keys)]
        note = _attested_note(
            directory, read_witness_policy(args.witness_policy), seq, args.witness_policy, logs
        )
    if note is None:
        raise CliError("no checkpoint to prove against")
    checkpoint = checkpoint_of(note)
    if not 0 <= seq < checkpoint.size:
        raise CliError(f"seq {seq} is not in the checkpoint of size {checkpoint.size}")
    reader = TileReader(directory, checkpoint.size, checkpoint.root)
    try:
        proof = inclusion_proof(seq, checkpoint.size, reader)
        leaf = reader.node(0, seq)
    except TileError as exc:
        raise CliError(f"{directory.path}/{exc}; {REBUILD_HINT}") from None
    line = _chain_line(chain, seq)
    if leaf_hash(line) != leaf:
        raise CliError(
            f"{chain}: line {seq} is not the record the checkpoint of size {checkpoint.size} signed",
            exit_code=EXIT_FINDING,
        )
    sys.stdout.write(format_receipt(Receipt(seq, tuple(proof), note)))
    if args.record_out:
        write_output(args.record_out, line + b"\n", "--record-out")
    else:
        print(
            "otel-route-shadow: note: the record's line is not written (--record-out FILE)", file=sys.stderr
        )
    return EXIT_OK


def _attested_note(
    directory: LogStore, policy: WitnessPolicy, seq: int, source: str, logs: list[KeyWindow]
) -> str:
    """The note of the largest checkpoint in ``checkpoints`` that covers ``seq`` and meets the quorum: its
    text and every distinct signature line of its notes that authenticate (the writer stores a checkpoint
    again per cosigning witness; the receipt carries them all, so it meets the quorum alone)."""
    notes = directory.notes().notes
    report = attest_notes(notes, policy, now=int(time.time()), skew=DEFAULT_SKEW_S, logs=logs)
    covering = report.attested(lambda c: c.checkpoint.size > seq)
    if covering is None:
        raise CliError(
            f"no checkpoint in {directory.path} covers seq {seq} and meets the quorum of {source}",
            exit_code=EXIT_INSUFFICIENT,
        )
    text = covering.checkpoint.text()
    lines = dict.fromkeys(
        line for i in covering.notes for line in notes[i][len(text) + 1 :].splitlines(keepends=True)
    )
    return text + "\n" + "".join(lines)


def _chain_line(chain: str, seq: int) -> bytes:
    """Line ``seq`` of the chain (without its LF), read in blocks from the segment that holds it."""
    try:
        line = chain_line(chain, seq)
    except FileNotFoundError:
        raise CliError(f"{chain}: no such file") from None
    except ChainPathError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{chain}: cannot read: {exc.strerror or exc}") from None
    if line is None:
        raise CliError(f"{chain}: has no complete line for seq {seq}", exit_code=EXIT_FINDING)
    return line


def receipt_witness_policy(args: argparse.Namespace, keys: list[str]) -> WitnessPolicy:
    """The policy a receipt is checked against: ``--witness-policy`` (with any ``--key``/``--keys`` as further log
    keys), or, with ``--key``/``--keys`` alone, the logs of those keys and no witness required."""
    if args.witness_policy:
        return read_witness_policy(args.witness_policy)
    if not keys:
        raise CliError("--receipt needs --witness-policy (or --key/--keys for the log's signature alone)")
    return WitnessPolicy(tuple(PolicyLog(KeyWindow.parse(k).verifier) for k in keys), (), (), None)


def verify_receipt_file(path: str, record: bytes, policy: WitnessPolicy, keys: list[str]) -> int:
    """Check the receipt at ``path`` for ``record``; print the verdict; the exit status."""
    text = read_text_file(path)
    logs = [KeyWindow.parse(k) for k in keys]
    try:
        verdict = verify_receipt(text, record, policy, now=int(time.time()), skew=DEFAULT_SKEW_S, logs=logs)
    except ReceiptError as exc:
        if exc.fault is ReceiptFault.MALFORMED:
            raise CliError(f"{path}: {exc}") from None
        print(f"receipt does NOT hold: {exc}")
        return EXIT_FINDING
    except AttestationError as exc:
        raise attestation_problem(exc, f"{path}: the receipt's checkpoint") from None
    except ProofError as exc:
        print(f"receipt does NOT hold: {exc}")
        return EXIT_FINDING
    attestation = verdict.attestation
    size = attestation.checkpoint.size
    cosigned = [c.name for c in attestation.cosignatures if c.counted]
    print(
        f"included: the record is seq {verdict.index} of the tree of {size} records signed by {attestation.log.name}"
    )
    if policy.quorum is None:
        print("witnessed: the policy requires no witness (quorum none)")
        return EXIT_OK
    if not attestation.quorum.met:
        print(
            f"witnessed: INSUFFICIENT EVIDENCE: the quorum {policy.quorum} is not met (cosigned by "
            f"{', '.join(cosigned) or 'no witness'}; missing: {', '.join(attestation.quorum.missing)})"
        )
        return EXIT_INSUFFICIENT
    print(f"witnessed: the quorum {policy.quorum} is met (cosigned by {', '.join(cosigned)})")
    return EXIT_OK
