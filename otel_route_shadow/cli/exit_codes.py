"""The command line's exit codes, stated once.

:data:`EXIT_CODES` names every code the ``otel-route-shadow`` command returns; :data:`COMMANDS` says, for
each command, which of them it returns and what each means there. Every command's ``--help`` ends with
its own lines (:func:`epilog`), and ``tests/test_cli_exit_codes.py`` holds the table in docs/auditing.md to this one
and drives each command into each code listed for it. Unusable input (code 2) is always one line on
stderr naming the problem, never a traceback; argparse's own usage errors are code 2 too, and an
interrupted command (Ctrl-C) returns 130 whatever it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = [
    "COMMANDS",
    "EXIT_BAD_CHECKPOINT",
    "EXIT_BUSY",
    "EXIT_CODES",
    "EXIT_FINDING",
    "EXIT_INSUFFICIENT",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_A_BACKEND",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "ExitCode",
    "epilog",
]

EXIT_OK: Final = 0
EXIT_FINDING: Final = 1
EXIT_USAGE: Final = 2
EXIT_INSUFFICIENT: Final = 3
EXIT_UNREACHABLE: Final = 4
EXIT_NOT_A_BACKEND: Final = 5
EXIT_BAD_CHECKPOINT: Final = 6
EXIT_BUSY: Final = 7
EXIT_INTERRUPTED: Final = 130


@dataclass(frozen=True, slots=True)
class ExitCode:
    """One exit code: its number, its name (as ``audit --json`` and docs/auditing.md call it) and what it means
    for every command that returns it."""

    number: int
    name: str
    meaning: str


EXIT_CODES: Final = (
    ExitCode(EXIT_OK, "ok", "done; the answer is the one asked for"),
    ExitCode(
        EXIT_FINDING, "finding", "a finding: a problem in what was read, a broken chain, a disagreement"
    ),
    ExitCode(
        EXIT_USAGE,
        "unusable-input",
        "unusable input: bad arguments, a file that cannot be read or parsed (one line on stderr)",
    ),
    ExitCode(
        EXIT_INSUFFICIENT,
        "insufficient-evidence",
        "insufficient evidence: the witnesses' quorum or the backend vouches for too little",
    ),
    ExitCode(EXIT_UNREACHABLE, "backend-unreachable", "the backend is unreachable"),
    ExitCode(EXIT_NOT_A_BACKEND, "not-a-backend", "the URL answers, but not as the backend"),
    ExitCode(EXIT_BAD_CHECKPOINT, "bad-checkpoint", "a checkpoint the backend holds does not verify"),
    ExitCode(
        EXIT_BUSY, "busy", "another process held the chain's lock past the wait allowed; nothing changed"
    ),
    ExitCode(EXIT_INTERRUPTED, "interrupted", "interrupted (Ctrl-C), any command"),
)

_POLICY_FILE = "an unreadable or invalid policy file"
_STORE = "an unreadable store, a revision that does not exist"
_HELD = "a store without current.json whose lock another process held past the wait (a save under way)"

COMMANDS: Final[Mapping[str, Mapping[int, str]]] = MappingProxyType(
    {
        "explain": {
            EXIT_OK: "every context explained (a held or rejected decision is an answer)",
            EXIT_USAGE: (
                f"{_POLICY_FILE}, an unreadable store, a malformed context or one over 4 MiB or 1,024 "
                "accounts (JSON lines: at the end)"
            ),
        },
        "policy check": {
            EXIT_OK: "no error (warnings allowed unless --strict)",
            EXIT_FINDING: "an error in the policy file (with --strict, a warning)",
            EXIT_USAGE: "a file that cannot be read or parsed",
        },
        "policy save": {
            EXIT_OK: "saved, or the store already holds this set",
            EXIT_FINDING: "refused: a problem in the policy set, or a corrupt store",
            EXIT_USAGE: f"a file that cannot be read or parsed, {_STORE}",
        },
        "policy show": {
            EXIT_OK: "the store is ok or absent",
            EXIT_FINDING: "the current snapshot is corrupt",
            EXIT_USAGE: f"{_STORE}, {_HELD}",
        },
        "policy history": {
            EXIT_OK: "every revision verifies",
            EXIT_FINDING: "a revision, or the current snapshot, is corrupt or missing",
            EXIT_USAGE: f"{_STORE}, {_HELD}",
        },
        "policy diff": {
            EXIT_OK: "the difference printed",
            EXIT_FINDING: "a revision is corrupt",
            EXIT_USAGE: _STORE,
        },
        "policy export": {
            EXIT_OK: "the policy set printed",
            EXIT_FINDING: "the snapshot asked for is corrupt",
            EXIT_USAGE: f"{_STORE}, {_HELD}",
        },
        "policy repair": {
            EXIT_OK: "repaired, or nothing to repair",
            EXIT_USAGE: _STORE,
        },
        "verify": {
            EXIT_OK: (
                "intact, consistent with every checkpoint given; with --witness-policy, attested by the quorum up to "
                "--max-unwitnessed records from the end; an archive: its records are the range its proof names "
                "of the signed tree"
            ),
            EXIT_FINDING: (
                "broken (or a torn tail), a segment missing, misplaced or edited, an anchor that does not name "
                "the segment before it, a pruned chain whose first record kept is not the signed tree's, a "
                "checkpoint that does not hold (truncated, record-changed, fork, bad-signature, unknown-key, "
                "key-outside-window; of a pruned chain, unprovable: the tiles standing for the pruned records do "
                "not authenticate), a damaged tile store, a cosignature that does not verify; an archive: an "
                "edited or unlinked record, a proof that does not match, a wrong or unsigned note"
            ),
            EXIT_USAGE: (
                "a chain that cannot be read, a malformed witness policy, witness URL, witness or log key, key set, note or "
                "cosignature, a pruned file that cannot be read; an archive without a readable proof file, or "
                "given an option its check cannot honour (--witness-policy, --live-segment, --strict, --max-unwitnessed, "
                "--all-cosignatures)"
            ),
            EXIT_INSUFFICIENT: (
                "--witness-policy: no checkpoint the chain matches meets the quorum, or more than --max-unwitnessed "
                "records lie beyond the largest one that does"
            ),
        },
        "prove": {
            EXIT_OK: "the proof (or the receipt) printed",
            EXIT_FINDING: "--receipt: the chain's line is not the leaf the checkpoint signed",
            EXIT_USAGE: (
                "a missing or damaged tile, a checkpoint that cannot be read, a seq or size out of range, a seq "
                "a prune removed (its record is gone)"
            ),
            EXIT_INSUFFICIENT: "--receipt --witness-policy: no checkpoint covering the record meets the quorum",
        },
        "verify-proof": {
            EXIT_OK: "the proof holds (with --witness-policy, its checkpoint meets the quorum)",
            EXIT_FINDING: (
                "the proof does not hold, a checkpoint that does not authenticate, a cosignature that does "
                "not verify"
            ),
            EXIT_USAGE: "a proof, checkpoint, record, key or policy that cannot be read or parsed",
            EXIT_INSUFFICIENT: "--witness-policy: the checkpoint does not meet the quorum",
        },
        "audit": {
            EXIT_OK: "agree, consistent with every checkpoint the backend holds, no span finding, thresholds met",
            EXIT_FINDING: "disagree, a checkpoint or a span contradicts the chain (or its own hashes break)",
            EXIT_USAGE: (
                "a chain or state file that cannot be read (found before the backend is asked), an empty window, a "
                "backend URL or $PHOENIX_API_KEY that cannot be used, a --since/--until out of range"
            ),
            EXIT_INSUFFICIENT: (
                "nothing to hold the chain against (no checkpoint, no span, a project with no spans), a "
                "threshold not met, or (--witness-policy) no checkpoint the chain matches meets the quorum"
            ),
            EXIT_UNREACHABLE: "the backend is down, a wrong host or port, a timeout, access refused, HTTP 5xx",
            EXIT_NOT_A_BACKEND: (
                "the URL answers but is not Phoenix (a collector's OTLP port, for one): a redirect, endless "
                "pagination, an answer that is not HTTP, a span time out of range"
            ),
            EXIT_BAD_CHECKPOINT: (
                "a checkpoint the backend holds does not verify (bad signature, unknown key, a key outside its window, malformed, or a "
                "witness's cosignature)"
            ),
        },
        "report": {
            EXIT_OK: "the report printed",
            EXIT_FINDING: (
                "the chain does not verify (refused, or flagged with --allow-unverified); of several chains, "
                "a log that does not verify against its newest checkpoint (named, excluded from every figure)"
            ),
            EXIT_USAGE: (
                "a missing or empty chain, a bad option, an unreadable store, key or witness policy; of "
                "several chains, two logs of one origin; a --state file that cannot be written; a remote "
                "log's URL that cannot be requested (malformed, not printable ASCII, or holding user "
                "information)"
            ),
        },
        "whatif": {
            EXIT_OK: "the replay printed",
            EXIT_FINDING: (
                "the chain does not verify (of several chains: a log excluded, as for report), an integrity "
                "finding (a decision its cited snapshot does not reproduce), or with --fail-on-change a "
                "decision that would change"
            ),
            EXIT_USAGE: (
                f"a missing or empty chain, {_POLICY_FILE}, a bad option, a remote log's URL that cannot "
                "be requested (malformed, not printable ASCII, or holding user information), a remote log "
                "that answers otherwise when read again for the replay than when it was checked (nothing "
                "printed)"
            ),
        },
        "matrix": {
            EXIT_OK: "the matrix printed",
            EXIT_USAGE: f"{_POLICY_FILE}, a chain that cannot be read, a bad axis or option",
        },
        "key generate": {
            EXIT_OK: "the key file written, its verifier key printed",
            EXIT_USAGE: (
                "a name the signed-note rules refuse or that is no origin (., .., -, an empty part), a file "
                "that already exists or cannot be written"
            ),
        },
        "key verifier": {
            EXIT_OK: "the verifier key of each signing key of the file printed, one a line",
            EXIT_USAGE: (
                "a key file that cannot be read, that its group or others may read, or that holds no "
                "signing key the plugin would take"
            ),
        },
        "serve": {
            EXIT_OK: "stopped by SIGTERM or SIGINT",
            EXIT_USAGE: "a chain without a checkpoint, a checkpoint that does not authenticate, an address that "
            "cannot be listened on",
        },
        "acknowledge": {
            EXIT_OK: "the last refusal acknowledged: the writer signs on at its next start",
            EXIT_FINDING: "no refusal to acknowledge",
            EXIT_USAGE: "a refusal of the chain itself (it cannot be acknowledged), no log folder (`CHAIN.tlog/`) "
            "at all, a directory that cannot be read or written",
        },
        "rotate": {
            EXIT_OK: "the chain was cut (or its live file holds nothing after its anchor)",
            EXIT_FINDING: "not cut: the chain ends in a torn line, the log refuses to sign, or a record of the live file is not the one signed",
            EXIT_USAGE: (
                "no chain, a chain or key file that cannot be read, a file of its log folder that cannot be used "
                "(a FIFO or a folder where its lock or a tile is), a key that is not the log's, a signed log and no key"
            ),
            EXIT_BUSY: "another process held the chain's lock past --timeout; nothing changed",
        },
        "prune": {
            EXIT_OK: "pruned as the retention allows, or nothing to prune (an interrupted prune settled first)",
            EXIT_FINDING: (
                "refused, nothing changed: a segment missing, a record that does not parse or link, records "
                "that are not those the covering checkpoint signed, a damaged tile"
            ),
            EXIT_USAGE: (
                "no retention given, no --key or --witness-policy, a chain or pruned file that cannot be read, a "
                "malformed witness policy or key, an archive folder that cannot be written"
            ),
            EXIT_INSUFFICIENT: (
                "refused, nothing changed: records beyond the largest checkpoint the witness policy's quorum attests "
                "(without a witness policy: the newest signed one); --force prunes them"
            ),
            EXIT_BUSY: (
                "another process held the chain's lock, or another prune ran, past --wait; or a segment "
                "changed while prune worked: nothing changed"
            ),
        },
        "demo": {
            EXIT_OK: "the demo ran and its chain verifies",
            EXIT_FINDING: "the demo's chain does not verify",
            EXIT_USAGE: (
                f"{_POLICY_FILE}, a corrupt store, an output folder that cannot be written or that holds a "
                "chain without the demo's signing key"
            ),
        },
    }
)
"""Each command (``policy`` and ``key`` by action) and, for each code it returns, what it means there."""


_NAMES: Final = MappingProxyType({code.number: code.name.replace("-", " ") for code in EXIT_CODES})


def epilog(command: str) -> str:
    """The end of ``command``'s ``--help``: its exit codes, as :data:`COMMANDS` states them."""
    codes = "; ".join(
        f"{number} {_NAMES[number]}: {meaning}" for number, meaning in COMMANDS[command].items()
    )
    return f"Exit codes: {codes}; {EXIT_INTERRUPTED} {_NAMES[EXIT_INTERRUPTED]}."
