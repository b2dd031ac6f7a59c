"""The C2SP ``tlog-policy`` draft: the logs and witnesses a verifier trusts, and the quorum of witnesses.

A policy file is a sequence of lines, each ending in LF (a missing LF after the last line is
tolerated), holding one definition each::

    log <vkey> [<url>]
    witness <name> <vkey> [<url>]
    group <name> <k|any|all> <member>...
    quorum <name|none>

The rules, one function each, as the draft states them (and as Sigsum's and torchwood's parsers read
them):

* items are separated by runs of spaces and tabs; leading and trailing ones are allowed; empty lines
  and comment lines (``#`` after optional whitespace) are ignored (:func:`_fields`);
* the only control characters are tab and newline; the file is UTF-8 (:func:`_check_characters`);
* a log key is an Ed25519 note key (type 0x01); a witness key a cosignature key (type 0x04 Ed25519 or
  0x06 ML-DSA-44, see :mod:`otel_route_shadow.tlog.cosignature`);
  two logs, or two witnesses, never wrap the same public key (:func:`_check_new_key`);
* witnesses and groups share one namespace, where ``none`` is predefined: a name is defined once
  (:func:`_check_new_name`);
* a group lists at least one member, each a witness or group defined on a preceding line, each at most
  once, never ``none``; ``any`` is k = 1, ``all`` is k = n, a number k is decimal without leading zero
  and 1 <= k <= n (:func:`_members`, :func:`_threshold`);
* exactly one quorum line, naming ``none`` or a witness or group defined on a preceding line
  (:func:`_parse_quorum`).

Stricter than the draft, where torchwood's ``ParsePolicy`` reads a line differently (so that every
policy accepted here means the same there): ``#`` appears only at the start of a comment line (torchwood
cuts a line at any ``#``), names hold no Unicode whitespace (torchwood splits on it), and a line holds no
items beyond those above (torchwood ignores extra ones). Every refusal is one :class:`WitnessPolicyError`
naming the line and what was expected there, never quoting the line: a file given as a policy by
mistake may be a private key.

:meth:`WitnessPolicy.evaluate` answers the quorum question: given the names of the witnesses whose
cosignatures verified, is the quorum met, and which of its witnesses are missing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from otel_route_shadow.tlog.cosignature import CosignatureError, CosignatureVerifier
from otel_route_shadow.tlog.note import NoteError, Verifier

__all__ = [
    "MAX_POLICY_BYTES",
    "PolicyGroup",
    "PolicyLog",
    "PolicyWitness",
    "QuorumVerdict",
    "WitnessPolicy",
    "WitnessPolicyError",
    "parse_witness_policy",
]

MAX_POLICY_BYTES = 256 * 1024
"""The largest policy file read (the draft asks for at least 32 logs, 32 witnesses and 32 groups)."""
NONE = "none"

_SEPARATORS = re.compile(r"[ \t]+")
_THRESHOLD = re.compile(r"[1-9][0-9]{0,8}")
_FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class WitnessPolicyError(ValueError):
    """A policy that breaks the draft; ``line`` is the 1-based line number (``None``: the whole file)."""

    def __init__(self, line: int | None, problem: str) -> None:
        super().__init__(f"line {line}: {problem}" if line is not None else problem)
        self.line = line
        self.problem = problem


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyLog:
    """``log <vkey> [<url>]``: a log whose signature makes a checkpoint its own (key name = origin)."""

    verifier: Verifier
    url: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyWitness:
    """``witness <name> <vkey> [<url>]``: ``url`` is the witness's submission prefix, if any."""

    name: str
    verifier: CosignatureVerifier
    url: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyGroup:
    """``group <name> <k> <member>...``: witnessed when at least ``threshold`` members are."""

    name: str
    threshold: int
    members: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class QuorumVerdict:
    """Whether the quorum is met, and the quorum's witnesses that did (``cosigned``) and did not
    (``missing``) cosign, in the policy's order."""

    met: bool
    cosigned: tuple[str, ...]
    missing: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class WitnessPolicy:
    """A parsed policy; ``quorum`` is ``None`` for ``quorum none`` (no cosignature required)."""

    logs: tuple[PolicyLog, ...]
    witnesses: tuple[PolicyWitness, ...]
    groups: tuple[PolicyGroup, ...]
    quorum: str | None

    def witness_verifiers(self) -> tuple[CosignatureVerifier, ...]:
        return tuple(w.verifier for w in self.witnesses)

    def evaluate(self, cosigned: Iterable[str]) -> QuorumVerdict:
        """The quorum's verdict when the witnesses named in ``cosigned`` (policy names) cosigned."""
        signed = set(cosigned)
        holds = {w.name: w.name in signed for w in self.witnesses}
        for group in self.groups:
            holds[group.name] = sum(holds[m] for m in group.members) >= group.threshold
        if self.quorum is None:
            return QuorumVerdict(True, (), ())
        under = self._witnesses_under(self.quorum)
        return QuorumVerdict(
            holds[self.quorum],
            tuple(w for w in under if w in signed),
            tuple(w for w in under if w not in signed),
        )

    def _witnesses_under(self, name: str) -> tuple[str, ...]:
        groups = {g.name: g for g in self.groups}
        found: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if current in groups:
                pending.extend(groups[current].members)
            else:
                found.add(current)
        return tuple(w.name for w in self.witnesses if w.name in found)


@dataclasses.dataclass
class _Parsing:
    logs: list[PolicyLog] = dataclasses.field(default_factory=list)
    witnesses: list[PolicyWitness] = dataclasses.field(default_factory=list)
    groups: list[PolicyGroup] = dataclasses.field(default_factory=list)
    names: set[str] = dataclasses.field(default_factory=set)
    quorum: str | None = None
    quorum_line: int | None = None


def parse_witness_policy(data: str | bytes) -> WitnessPolicy:
    """Parse a policy file; one :class:`WitnessPolicyError` naming the first line that breaks a rule."""
    text = _decode(data)
    state = _Parsing()
    for number, line in enumerate(text.split("\n"), start=1):
        _check_characters(line, number)
        fields = _fields(line, number)
        if fields:
            _parse_line(fields, number, state)
    if state.quorum_line is None:
        raise WitnessPolicyError(
            None, "the policy has no quorum line (write `quorum none` to require no witness)"
        )
    return WitnessPolicy(tuple(state.logs), tuple(state.witnesses), tuple(state.groups), state.quorum)


def _decode(data: str | bytes) -> str:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_POLICY_BYTES:
        raise WitnessPolicyError(None, f"the policy is larger than {MAX_POLICY_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise WitnessPolicyError(line, "not UTF-8") from None


def _check_characters(line: str, number: int) -> None:
    found = _FORBIDDEN.search(line)
    if found:
        raise WitnessPolicyError(
            number, f"a control character (0x{ord(found.group()):02x}); only tab is allowed"
        )
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in line):
        raise WitnessPolicyError(number, "not UTF-8")


def _fields(line: str, number: int) -> list[str]:
    """The line's items; none for an empty or comment line."""
    stripped = line.strip(" \t")
    if not stripped or stripped.startswith("#"):
        return []
    if "#" in stripped:
        raise WitnessPolicyError(number, "'#' starts a comment line only: it cannot follow an item")
    return _SEPARATORS.split(stripped)


def _parse_line(fields: list[str], number: int, state: _Parsing) -> None:
    keyword, args = fields[0], fields[1:]
    if keyword == "log":
        _parse_log(args, number, state)
    elif keyword == "witness":
        _parse_witness(args, number, state)
    elif keyword == "group":
        _parse_group(args, number, state)
    elif keyword == "quorum":
        _parse_quorum(args, number, state)
    else:
        raise WitnessPolicyError(number, "the first item is not a keyword: log, witness, group or quorum")


def _parse_log(args: list[str], number: int, state: _Parsing) -> None:
    if not 1 <= len(args) <= 2:
        raise WitnessPolicyError(number, "a log line is `log <vkey> [<url>]`")
    try:
        verifier = Verifier.parse(args[0])
    except NoteError as exc:
        raise WitnessPolicyError(number, f"the log key: {exc}") from None
    _check_new_key(verifier.public_key, [log.verifier.public_key for log in state.logs], "log", number)
    state.logs.append(PolicyLog(verifier, args[1] if len(args) == 2 else None))


def _parse_witness(args: list[str], number: int, state: _Parsing) -> None:
    if not 2 <= len(args) <= 3:
        raise WitnessPolicyError(number, "a witness line is `witness <name> <vkey> [<url>]`")
    name = args[0]
    _check_new_name(name, number, state)
    try:
        verifier = CosignatureVerifier.parse(args[1])
    except CosignatureError as exc:
        raise WitnessPolicyError(number, f"the witness key: {exc}") from None
    _check_new_key(verifier.public_key, [w.verifier.public_key for w in state.witnesses], "witness", number)
    state.witnesses.append(PolicyWitness(name, verifier, args[2] if len(args) == 3 else None))
    state.names.add(name)


def _parse_group(args: list[str], number: int, state: _Parsing) -> None:
    if len(args) < 3:
        raise WitnessPolicyError(
            number, "a group line is `group <name> <k|any|all> <member>...` (one member at least)"
        )
    name, threshold, members = args[0], args[1], args[2:]
    _check_new_name(name, number, state)
    _members(members, number, state)
    state.groups.append(PolicyGroup(name, _threshold(threshold, len(members), number), tuple(members)))
    state.names.add(name)


def _parse_quorum(args: list[str], number: int, state: _Parsing) -> None:
    if len(args) != 1:
        raise WitnessPolicyError(number, "a quorum line is `quorum <name>` or `quorum none`")
    if state.quorum_line is not None:
        raise WitnessPolicyError(number, f"a second quorum line (the first is line {state.quorum_line})")
    name = args[0]
    if name != NONE and name not in state.names:
        raise WitnessPolicyError(number, "the quorum names neither none nor a witness or group defined above")
    state.quorum, state.quorum_line = (None if name == NONE else name), number


def _check_new_name(name: str, number: int, state: _Parsing) -> None:
    if name == NONE:
        raise WitnessPolicyError(number, "`none` is predefined (no witness required), it cannot be defined")
    if name in state.names:
        raise WitnessPolicyError(number, "the name is already defined")
    if any(ch.isspace() for ch in name):
        raise WitnessPolicyError(number, "the name holds a Unicode space")


def _check_new_key(public_key: bytes, known: list[bytes], what: str, number: int) -> None:
    if public_key in known:
        raise WitnessPolicyError(number, f"a second {what} with the same public key")


def _members(members: list[str], number: int, state: _Parsing) -> None:
    seen: set[str] = set()
    for position, member in enumerate(members, start=1):
        if member == NONE:
            raise WitnessPolicyError(number, "`none` cannot be a group member")
        if member not in state.names:
            raise WitnessPolicyError(number, f"member {position} is not a witness or group defined above")
        if member in seen:
            raise WitnessPolicyError(number, f"member {position} is listed twice")
        seen.add(member)


def _threshold(text: str, members: int, number: int) -> int:
    if text == "any":
        return 1
    if text == "all":
        return members
    if not _THRESHOLD.fullmatch(text) or not 1 <= int(text) <= members:
        raise WitnessPolicyError(
            number,
            f"the threshold is not any, all or a decimal k with 1 <= k <= {members} (the members)",
        )
    return int(text)
