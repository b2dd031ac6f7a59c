"""``otel-route-shadow prove`` and ``verify-proof``: inclusion and consistency proofs, and receipts.

``prove CHAIN --seq N [--checkpoint C]`` prints an inclusion proof (JSON) for record N;
``prove CHAIN --from M [--to N] [--checkpoint C]`` a consistency proof. Both read the tiles beside the
chain, never a record line. ``prove CHAIN --seq N --receipt [--witness-policy P] [--record-out LINEFILE]``
prints a C2SP tlog-proof receipt (``receipts``). ``verify-proof --proof P --checkpoint C --key VKEY
[--record LINEFILE]`` checks a proof offline, without the chain; with ``--witness-policy`` the checkpoint must
also meet the policy's quorum; ``verify-proof --receipt R --record LINEFILE --witness-policy P`` checks a receipt.
Exit codes: ``exit_codes.COMMANDS["prove"]`` and ``["verify-proof"]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from pydantic import TypeAdapter, ValidationError

from otel_route_shadow.cli.checkpoints import (
    add_key_options,
    authenticated_checkpoint,
    read_log_keys,
    read_notes,
    read_published_note,
)
from otel_route_shadow.cli.common import CliError, count_argument, read_text_file, witness_policy_arg
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_INSUFFICIENT, EXIT_OK, epilog
from otel_route_shadow.cli.receipts import prove_receipt, receipt_witness_policy, verify_receipt_file
from otel_route_shadow.cli.witnessed import attestation_problem, log_keys, read_witness_policy
from otel_route_shadow.files import FileRefused, read_regular
from otel_route_shadow.logstore import CHECKPOINT_FILE, LogStore, StateError
from otel_route_shadow.strict_json import schema_problem
from otel_route_shadow.tlog import (
    DEFAULT_SKEW_S,
    REBUILD_HINT,
    AttestationError,
    AuthenticationError,
    Checkpoint,
    ConsistencyProofDoc,
    InclusionProofDoc,
    KeyWindow,
    ProofDoc,
    ProofError,
    TileError,
    TileReader,
    WitnessPolicy,
    attest_checkpoint,
    check_consistency_doc,
    check_inclusion_doc,
    checkpoint_of,
    prove_consistency,
    prove_inclusion,
)

__all__ = ["register"]

_PROOF_ADAPTER: TypeAdapter[InclusionProofDoc | ConsistencyProofDoc] = TypeAdapter(ProofDoc)
_MAX_RECORD = 4 * 1024 * 1024 + 1


def register(sub: Any) -> None:
    prove = sub.add_parser(
        "prove",
        help="print an inclusion or consistency proof from the chain's tiles",
        description=(
            "Print a proof as JSON, built from the tiles beside CHAIN (no record line is read): "
            "--seq N proves record N is in the checkpoint's tree; --from M [--to N] proves the tree of M "
            "records is a prefix of the tree of N. Default checkpoint: CHAIN.tlog/checkpoint (the latest). "
            "--seq N --receipt prints a C2SP tlog-proof receipt instead."
        ),
        epilog=epilog("prove"),
    )
    prove.add_argument("chain", metavar="CHAIN", help="chain file (its tiles are in CHAIN.tlog/)")
    what = prove.add_mutually_exclusive_group(required=True)
    what.add_argument("--seq", type=count_argument(0), metavar="N", help="the record to prove included")
    what.add_argument("--from", dest="old", type=count_argument(0), metavar="M", help="the older tree size")
    prove.add_argument(
        "--to",
        dest="new",
        type=count_argument(0),
        metavar="N",
        help="the newer tree size (default: the checkpoint's)",
    )
    prove.add_argument("--checkpoint", metavar="FILE", help="the checkpoint note to prove against")
    prove.add_argument(
        "--receipt",
        action="store_true",
        help="with --seq: print a C2SP tlog-proof@v1 receipt (index, inclusion proof, the cosigned checkpoint) "
        "that `verify-proof --receipt` checks with nothing else",
    )
    witness_policy_arg(
        prove,
        "with --receipt: prove against the largest checkpoint that covers the record and meets this "
        "tlog-policy's quorum (exit 3 when none does)",
    )
    prove.add_argument(
        "--record-out", metavar="LINEFILE", help="with --receipt: write the record's line here"
    )
    add_key_options(prove, None)
    prove.set_defaults(handler=_prove, reads_chains=True)

    check = sub.add_parser(
        "verify-proof",
        help="check an inclusion or consistency proof offline, without the chain",
        description=(
            "Check a proof made by `prove` against a signed checkpoint and a verifier key. For an "
            "inclusion proof, --record LINEFILE (the record's line) ties the proof to that record. For a "
            "consistency proof, give the newer checkpoint and optionally the older one (--checkpoint twice). "
            "With --witness-policy, the checkpoint must also meet the tlog-policy's quorum of witnesses. "
            "--receipt FILE --record LINEFILE --witness-policy FILE checks a receipt from `prove --receipt` alone."
        ),
        epilog=epilog("verify-proof"),
    )
    what = check.add_mutually_exclusive_group(required=True)
    what.add_argument("--proof", metavar="FILE", help="proof JSON from `prove` (- for stdin)")
    what.add_argument("--receipt", metavar="FILE", help="a tlog-proof receipt from `prove --receipt`")
    check.add_argument(
        "--checkpoint", action="append", metavar="FILE", help="signed checkpoint note (--proof)"
    )
    add_key_options(check, "the log's verifier key (string or file)")
    witness_policy_arg(
        check,
        "a C2SP tlog-policy file: its log keys authenticate the checkpoint, and its witnesses' "
        "cosignatures must meet its quorum",
    )
    check.add_argument("--record", metavar="LINEFILE", help="the record's line (inclusion proof, receipt)")
    check.set_defaults(handler=_verify_proof)


def _prove(args: argparse.Namespace) -> int:
    chain: str = args.chain
    if os.path.isdir(chain):  # not a segments folder (that names its chain): not taken for a missing log
        raise CliError(f"{chain}: is a directory, not a chain file")
    directory = LogStore(chain)
    if args.seq is not None:
        _refuse_pruned(directory, args.seq)
    if (args.witness_policy or args.record_out) and not args.receipt:
        raise CliError("--witness-policy and --record-out go with --receipt")
    if args.keys and not args.witness_policy:
        raise CliError(
            "--keys goes with --receipt --witness-policy (it authenticates the checkpoints the quorum is counted on)"
        )
    if args.receipt:
        if args.seq is None:
            raise CliError("--receipt goes with --seq (a receipt proves one record)")
        # With a witness policy and no --checkpoint, the receipt finds its checkpoint in ``checkpoints``.
        found = (None, directory.path) if args.witness_policy and not args.checkpoint else None
        note, source = found or _checkpoint_note(args.checkpoint, directory)
        return prove_receipt(args, note, lambda n: _unchecked_checkpoint(n, source))
    note, source = _checkpoint_note(args.checkpoint, directory)
    checkpoint = _unchecked_checkpoint(note, source)
    reader = TileReader(directory, checkpoint.size, checkpoint.root)  # every tile authenticated
    try:
        doc: InclusionProofDoc | ConsistencyProofDoc
        if args.seq is not None:
            doc = prove_inclusion(reader, checkpoint, args.seq, note)
        else:
            new = checkpoint.size if args.new is None else args.new
            doc = prove_consistency(reader, checkpoint, args.old, new, note)
    except ProofError as exc:
        raise CliError(f"{chain}: {exc}") from None
    except TileError as exc:
        raise CliError(f"{directory.path}/{exc}; {REBUILD_HINT}") from None
    print(doc.model_dump_json(indent=2))
    return EXIT_OK


def _refuse_pruned(directory: LogStore, seq: int) -> None:
    """A record below a pruned chain's minimum index is gone: its inclusion proof still holds in the
    signed tree, but there is no record here to prove it for (its archive has its own proof)."""
    try:
        pruned = directory.read_pruned()
    except StateError as exc:
        raise CliError(str(exc)) from None
    if pruned is None or seq >= pruned.min_index or seq < 0:
        return
    held = next((s for s in pruned.segments if s.first <= seq < s.end), None)
    where = (
        f"archived in {held.archive} (`otel-route-shadow verify ARCHIVE --key VKEY` checks it against its proof)"
        if held is not None and held.archive
        else "deleted"
    )
    raise CliError(
        f"{directory.chain_path}: seq {seq} was pruned, its record is gone from the chain ({where}); its "
        f"inclusion proof still holds in the signed tree, but this chain has no record to prove it for: the "
        f"records kept begin at seq {pruned.min_index}; {pruned.describe()}"
    )


def _checkpoint_note(given: str | None, directory: LogStore) -> tuple[str, str]:
    """The newest note of ``--checkpoint``, else the log's own ``checkpoint`` (read as
    :func:`read_published_note` reads it: bounded, no link followed), and the file it came from."""
    if given:
        return _single_note(given), given
    path = directory.file(CHECKPOINT_FILE)
    note = read_published_note(directory)
    if not note:
        raise CliError(f"{path}: " + ("no such checkpoint file" if note is None else "holds no checkpoint"))
    return note, path


def _single_note(path: str) -> str:
    notes = read_notes(path)
    if not notes:
        raise CliError(f"{path}: holds no checkpoint")
    return notes[-1]


def _unchecked_checkpoint(note: str, source: str) -> Checkpoint:
    """The note's checkpoint, not authenticated: the tiles are authenticated against its root, and
    whoever checks the proof authenticates the note."""
    try:
        return checkpoint_of(note)
    except AuthenticationError as exc:
        raise CliError(f"{source}: {exc}") from None


def _verify_proof(args: argparse.Namespace) -> int:
    keys = read_log_keys(args.key, args.keys)
    if args.receipt:
        if args.checkpoint:
            raise CliError("--receipt carries its checkpoint: no --checkpoint")
        if not args.record:
            raise CliError("--receipt needs --record LINEFILE (the record's line, `prove --record-out`)")
        policy = receipt_witness_policy(args, keys)
        return verify_receipt_file(args.receipt, _read_record(args.record), policy, keys)
    if not args.checkpoint:
        raise CliError("--proof needs --checkpoint FILE (the signed checkpoint)")
    doc = _read_proof(args.proof)
    quorum_met = True
    if args.witness_policy:
        policy = read_witness_policy(args.witness_policy)
        keys = log_keys(policy, keys, args.witness_policy)
        notes = [_single_note(path) for path in args.checkpoint]
        quorum_met = _quorum(notes, args.checkpoint, policy, keys, doc)
    elif not keys:
        raise CliError(
            "give --key VKEY (the log's verifier key), --keys FILE (its key set) or --witness-policy FILE"
        )
    checkpoints = [authenticated_checkpoint(_single_note(path), keys, path) for path in args.checkpoint]
    try:
        if isinstance(doc, InclusionProofDoc):
            message = _check_inclusion(doc, checkpoints, args.record)
        else:
            tied = check_consistency_doc(doc, checkpoints)
            message = (
                f"consistent: the tree of {doc.old_size} records is a prefix of the tree of {doc.new_size}"
            )
            if doc.old_size not in tied and doc.old_size:
                message += (
                    f" (the old root is the proof's own: no checkpoint of size {doc.old_size} was given)"
                )
    except ProofError as exc:
        print(f"proof does NOT hold: {exc}")
        return EXIT_FINDING
    print(message)
    return EXIT_OK if quorum_met else EXIT_INSUFFICIENT


def _quorum(
    notes: list[str],
    paths: list[str],
    policy: WitnessPolicy,
    keys: list[str],
    doc: InclusionProofDoc | ConsistencyProofDoc,
) -> bool:
    """Whether the checkpoint the proof ends at (its tree size) meets the policy's quorum; says which
    witnesses cosigned it. A checkpoint that does not authenticate is a finding (or, malformed, exit 2)."""
    size = doc.tree_size if isinstance(doc, InclusionProofDoc) else doc.new_size
    logs = [KeyWindow.parse(k) for k in keys]
    for note, path in zip(notes, paths, strict=True):
        try:
            attestation = attest_checkpoint(
                note, policy, now=int(time.time()), skew=DEFAULT_SKEW_S, logs=logs
            )
        except AttestationError as exc:
            raise attestation_problem(exc, path) from None
        if attestation.checkpoint.size != size:
            continue
        cosigned = ", ".join(c.name for c in attestation.cosignatures if c.counted) or "no witness"
        if attestation.quorum.met:
            print(f"witnessed: the quorum {policy.quorum or 'none'} is met (cosigned by {cosigned})")
            return True
        print(
            f"witnessed: INSUFFICIENT EVIDENCE: the quorum {policy.quorum} is not met (cosigned by {cosigned}; "
            f"missing: {', '.join(attestation.quorum.missing)})"
        )
        return False
    return True  # no checkpoint of the proof's size: the proof check says so


def _check_inclusion(doc: InclusionProofDoc, checkpoints: list[Checkpoint], record: str | None) -> str:
    line = _read_record(record) if record else None
    matching = [c for c in checkpoints if c.size == doc.tree_size]
    if not matching:
        raise ProofError(f"no checkpoint of size {doc.tree_size} was given")
    check_inclusion_doc(doc, matching[0], line)
    subject = "the given record" if line is not None else f"the leaf hash {doc.leaf_hash}"
    return f"included: {subject} is seq {doc.seq} of the signed tree of {doc.tree_size} records"


def _read_proof(path: str) -> InclusionProofDoc | ConsistencyProofDoc:
    text = read_text_file(path)
    try:
        return _PROOF_ADAPTER.validate_json(text)
    except ValidationError as exc:
        raise CliError(f"{path}: not a proof: {schema_problem(exc)}") from None


def _read_record(path: str) -> bytes:
    try:
        data = sys.stdin.buffer.read(_MAX_RECORD) if path == "-" else read_regular(path, _MAX_RECORD)
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except FileRefused as exc:
        if exc.kind == "too-large":
            raise CliError(f"{path}: longer than a record line can be") from None
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) >= _MAX_RECORD:
        raise CliError(f"{path}: longer than a record line can be")
    body = data.removesuffix(b"\n")
    if b"\n" in body:
        raise CliError(f"{path}: holds more than one line; give the one record line")
    return body
