"""Credential-shaped substring redaction (ADR-0085), shared by the chain, the span layer and log scrubbing.

The chain digests a payload only after this module has scrubbed it: hashing the pre-scrub payload would
make every record on which the redactor fired fail verification. The span layer scrubs route contexts
with the same function before they are hashed into decision ids, so a decision id never depends on a
secret either.

Design constraints:

* Pure: no I/O, no caches, no global mutable state. Callers that want memoisation keep it themselves.
* One compiled alternation. Every branch starts with a literal character (or a short literal set), so the
  regex engine's first-character filter rejects most positions of an ordinary string without entering a
  branch; strings without any candidate come back as the *same object*, untouched.
* Over-redaction is preferred to a leak: the patterns are shapes, not validators.
* Linear in the length of the text, whatever it holds: it runs in the host's call path on host data.
  No branch scans again a stretch it scanned from an earlier start and failed on (a JWT header stops
  where the next "eyJ" begins, repeats are possessive where a backtrack cannot help), and a chain of
  glued keys is taken in one pass (row 2e of ``docs/benchmarks.md`` times the worst input found).
* Idempotent: a redacted string contains nothing the patterns match again, so re-scrubbing is a no-op and
  the replacement count of an already-scrubbed string is zero.
* The replacement never carries what was replaced (no length, no prefix, no hash of the secret); the
  recognisable key of a ``key=value`` pair and the ``Bearer`` scheme word are kept because they are not
  secret and they tell a reader what kind of field was scrubbed.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = [
    "REDACTED",
    "cannot_match",
    "is_secret_key",
    "json_pointer_token",
    "printable",
    "redact_text",
    "redact_value",
    "unique_key",
]

REDACTED: Final = "[REDACTED]"

# Credential keywords whose value is scrubbed in ``key=value`` / ``key: value`` / ``"key": "value"`` pairs:
# password, passwd, passphrase, pwd, private key, secret, secret key, token, api key, access key, auth key,
# credential(s).
# A keyword also matches as the suffix of a longer identifier (``access_token``, ``x-api-key``,
# ``client_secret``): the boundary check only forbids a letter or digit right before it. The branch is
# written as "first letter, then the tails that may follow it" so that it, too, starts with a plain
# character class.
_PAIR_KEYWORD: Final = (
    r"[pPsStTaAcC](?<![A-Za-z0-9].)"
    r"(?i:(?<=p)(?:ass(?:word|wd|phrase)|wd|rivate[_-]?key)|(?<=s)ecret(?:[_-]?key)?|(?<=t)oken"
    r"|(?<=a)(?:pi[_-]?key|ccess[_-]?key|uth[_-]?key)|(?<=c)redentials?)"
)

# Where another credential begins. A token run stops there even when the characters would let it go on,
# so two secrets glued together are two matches instead of one match that swallows the second one's
# prefix and leaves its secret part behind. A z.ai key is not listed: no run holds its dot, so a run
# stops there anyway, and its replacement then starts at the dot instead of its id, the text is the
# same ("[REDACTED][REDACTED]"). Listed, it cost every character of a run a look at the 32 that follow.
_BLOCK_AHEAD: Final = r"PRIVATE\+KEY\+|-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY"
"""A PEM private key block or a note key, whole: where a shape's first characters stop (a bare
"-----BEGIN" in a key is part of it)."""
_CREDENTIAL_START: Final = (
    r"sk-[A-Za-z0-9_-]{20}|eyJ[A-Za-z0-9_-]{8}|gh[pousr]_[A-Za-z0-9]{30}|github_pat_[A-Za-z0-9_]{30}"
    r"|A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|IPA|NPA|NVA|PKA)[A-Z0-9]{16}|" + _BLOCK_AHEAD
)
_NEXT_CREDENTIAL: Final = rf"(?={_CREDENTIAL_START})"


_BLOCK_START: Final = r"PRIVATE\+KEY\+|-----BEGIN"
"""Where a credential that may hold spaces or "+" begins: a run a pair, a Bearer token or a note key's
name would swallow stops there, so that the credential's own branch takes all of it."""


def _before_block(chars: str, block: str = _BLOCK_START) -> str:
    """One of ``chars`` where no ``block`` begins."""
    return rf"(?:(?!{block}){chars})"


def _run(chars: str, minimum: int) -> str:
    """At least ``minimum`` of ``chars`` where no :data:`_BLOCK_AHEAD` begins (a shape's first characters
    never take the start of a PEM block or note key glued after them, which would leave its body), then
    more up to the end of the run or the next credential."""
    return rf"{_before_block(chars, _BLOCK_AHEAD)}{{{minimum}}}{chars}*?(?:(?!{chars})|{_NEXT_CREDENTIAL})"


_B64URL: Final = "[A-Za-z0-9_-]"
_B64URL_CHARS: Final = string.ascii_letters + string.digits + "_-"
_ALNUM_CHARS: Final = frozenset(string.ascii_letters + string.digits)
_ALNUM: Final = "[A-Za-z0-9]"

# A JWT header, scanned in linear time. A header that ran to the end of its base64url run from every
# "eyJ" in it, failed on the missing dot and ran again from the next one was quadratic (row 2e of
# docs/benchmarks.md). Here a scan stops, possessively, where the next "eyJ" begins, so the scans
# from the starts of one run are disjoint; only the last 10 characters before the dot may hold another
# "eyJ" (the tail). The one start that matches is then the last "eyJ" at least 11 characters before the
# dot, and it exists exactly when the header read from the run's first "eyJ" has the 8 characters the
# shape asks for. The replacement still starts at that first "eyJ" (:func:`_header_start`), and a key
# matched inside the header before the matching start is part of the token (:func:`_enclosing_jwt`):
# the text that comes out is the one a scan from the run's first "eyJ" gave.
_JWT_HEADER: Final = rf"yJ(?={_B64URL}{{8}})(?:(?!eyJ){_B64URL})*+{_B64URL}{{0,10}}+\."

# Every alternative starts with a literal or a character class and carries no group before its first
# character, so the engine can reject most positions without entering a branch (see module docstring).
# The few boundary checks are fixed-width lookbehinds placed after that first character; most shapes are
# specific enough to need none, and a shape glued to the preceding word is still a credential. The name of the one
# group each branch ends with (``match.lastgroup``) says which branch matched.
_PATTERN: Final = re.compile(
    # PEM private key block, also when truncated (no END line): everything to the end is scrubbed.
    r"-(?P<pem>----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*))"
    # Go note signer keys (PRIVATE+KEY+<name>+<key id>+<base64 key>, the log's own signing key), also
    # cut short or malformed. A name is any run without a space or "+" (quotes, commas, colons and any
    # other credential shape in it go with it) up to another key or a PEM block; the key id any run
    # of the same; a key's 44 characters of material (base64 of 0x01 || seed: "A", then one of Q-Z,
    # a-f) whatever they hold, then any more up to another credential.
    r"|P(?P<note>RIVATE\+KEY\+"
    + _before_block(r"[^\s+]")
    + r"*+(?:\+[^\s+]*(?:\+(?:A[Q-Za-f][A-Za-z0-9+/]{42})?"
    + _run("[A-Za-z0-9+/=]", 0)
    + ")?)?)"
    # Anthropic (sk-ant-api03-...) and OpenAI (sk-proj-..., sk-svcacct-..., legacy sk-...T3BlbkFJ...) API
    # keys. Only the bare "sk-" form needs a boundary ("task-...", "desk-..." are words); the named
    # prefixes and the legacy OpenAI marker are specific enough to match anywhere.
    r"|s(?P<sk>k-(?:(?:ant|proj|svcacct|admin|None)-|(?=[A-Za-z0-9]{20}T3BlbkFJ)|(?<![A-Za-z0-9]sk-))"
    + _run(_B64URL, 20)
    + ")"
    # JSON Web Tokens: base64url header starting with {" (eyJ) and at least 8 more characters, payload,
    # optional signature. The match starts at the header's last "eyJ" before its final 10 characters
    # (_JWT_HEADER); the replacement at its first. Each scan ends at a character its class excludes
    # (the dot), so the possessive repeats give back nothing a backtrack could use.
    r"|e(?P<jwt>" + _JWT_HEADER + rf"{_B64URL}{{8,}}+\.(?:" + _run(_B64URL, 1) + ")?)"
    # GitHub tokens: classic prefixes and fine-grained personal access tokens.
    r"|g(?P<gh>h[pousr]_" + _run(_ALNUM, 30) + "|ithub_pat_" + _run("[A-Za-z0-9_]", 30) + ")"
    # AWS access key ids.
    r"|A(?P<aws>(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|IPA|NPA|NVA|PKA)" + _run("[A-Z0-9]", 16) + ")"
    # z.ai (Zhipu) API keys, <32 hex id>.<secret>. Anchored on the dot; the lookbehind checks the 32 hex
    # characters before it and the replacement covers them.
    r"|\.(?P<zai>(?<=[0-9a-f]{32}\.)" + _run(_ALNUM, 16) + ")"
    # Bearer tokens (HTTP Authorization scheme). The scheme word is kept.
    r"|[bB](?<![A-Za-z0-9][bB])[eE][aA][rR][eE][rR]\s+(?!\[REDACTED\])(?P<bearer>"
    + _before_block("[A-Za-z0-9._~+/=-]")
    + "{8,}+)"
    # key=value pairs. The key and separator are kept; a quoted value is scrubbed with its quotes. A value
    # stops where a note key or a PEM block begins, which its own branch takes whole.
    r"|"
    + _PAIR_KEYWORD
    + rf"[\"']?\s*[=:]\s*(?![\"']?(?:\[REDACTED\]|{_BLOCK_START}))"
    + r"(?P<pair>\""
    + _before_block(r"[^\"\n]")
    + rf"*+(?:\"|(?={_BLOCK_START}))|'"
    + _before_block(r"[^'\n]")
    + rf"*+(?:'|(?={_BLOCK_START}))|"
    + _before_block(r"[^\s\"'&,;<>]")
    + "++)",
    re.DOTALL,
)

_ZAI_ID_LEN: Final = 32

# A base64url run, and what follows a JWT header's run: for a key matched inside a header, which may
# lie in a token (see :func:`_enclosing_jwt`).
_B64URL_RUN: Final = re.compile(rf"{_B64URL}*+")
_JWT_REST: Final = re.compile(rf"\.{_B64URL}{{8,}}+\.(?:" + _run(_B64URL, 1) + ")?")
# The shapes that can begin inside a JWT header's base64url run (every other one needs a character the
# run cannot hold: a space, "+", "=", ":" or the dot).
_IN_HEADER: Final = frozenset({"sk", "gh", "aws"})
_JWT_OR_IN_HEADER: Final = _IN_HEADER | {"jwt"}

# The "sk-" branch without its boundary check, for a key glued to the end of a replacement (see
# :func:`_glued_key`); the credential starts a run stops at, as a match (how far the lookahead read).
_GLUED_SK: Final = re.compile(r"s(?P<sk>k-(?:(?:ant|proj|svcacct|admin|None)-)?" + _run(_B64URL, 20) + ")")
_CREDENTIAL_AT: Final = re.compile(_CREDENTIAL_START)

# An object key naming a credential: its string value is scrubbed whole, whatever it looks like
# ({"password": "hunter2"} is the structured form of password=hunter2).
_SECRET_KEY: Final = re.compile(
    r"(?:^|[^A-Za-z0-9])(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|auth[_-]?key|credentials?|authorization)\Z",
    re.IGNORECASE,
)


def cannot_match(text: str) -> bool:
    """True when no pattern can match ``text``, decided without running them: every shape is at
    least five characters long, and only the AWS branch can match letters and digits alone, which
    needs an "A". Hex ids, decimal timestamps and plain words take this exit."""
    return len(text) < 5 or (text.isalnum() and "A" not in text)


def redact_text(text: str) -> tuple[str, int]:
    """Scrub credential-shaped substrings; return the new string and the number of replacements.

    A string without a match is returned as the same object, so callers can test ``new is text``.
    """
    if cannot_match(text):
        return text, 0
    match = _PATTERN.search(text)
    if match is None:
        return text, 0
    total = 0
    # A secret glued to the end of another one fails its boundary check against the first secret's
    # last character; once that secret is replaced it no longer does. Repeat until nothing changes,
    # so no such neighbour survives (and redacting the output again is a no-op). Glued bare "sk-" keys,
    # the one shape that can chain, are taken in the pass that replaces their neighbour (_glued_key).
    for _ in range(16):
        text, count = _substitute(text, match)
        total += count
        match = _PATTERN.search(text)
        if match is None:
            break
    return text, total


def shown_text(raw: bytes, limit: int) -> str:
    """Bytes another party sent, as a message may show them: decoded (a bad byte replaced), credential-
    shaped strings redacted, each run of whitespace one space, cut to ``limit`` characters (a space the
    cut leaves last dropped), and every character that does not print written as its escape (``\\x1b``,
    ``\\u202e``), so that an escape sequence a hostile server sends never reaches a terminal."""
    return printable(" ".join(redact_text(raw.decode("utf-8", "replace"))[0].split())[:limit].rstrip(" "))


def printable(text: str) -> str:
    """``text`` as shown to a person: every character that does not print written as its escape
    (``\\x1b``, ``\\n``, ``\\u202e``), so that a value another party wrote never drives a terminal,
    reverses the text around it or forges a line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _substitute(text: str, match: re.Match[str] | None) -> tuple[str, int]:
    pieces: list[str] = []
    cursor = 0
    count = 0
    checked = 0  # keys before this position lie in a base64url run found to hold no JWT
    following = match  # the pattern's next match (a glued key is taken before it)
    while match is not None:
        group = match.lastgroup
        start, end = match.span()
        keep = ""
        if group == "zai":
            start -= _ZAI_ID_LEN
        elif group == "jwt":
            start = _header_start(text, cursor, start)
        elif group in {"bearer", "pair"}:
            keep = text[start : match.start(group)]
        elif start >= checked and start >= cursor + 3 and group in _IN_HEADER:
            first, jwt_end, checked = _enclosing_jwt(text, cursor, start)
            if first >= 0:
                start, end = first, jwt_end
        # A z.ai id can overlap the tail of the previous replacement only in adversarial input; clamp so
        # the output never duplicates text.
        start = max(start, cursor)
        pieces += (text[cursor:start], keep, REDACTED)
        cursor = end
        count += 1
        if match is following:  # else a glued key was taken before ``following``, which still holds
            following = _PATTERN.search(text, end)
        match = following
        if text.startswith("sk-", end):
            match = _glued_key(text, end, following) or following
    pieces.append(text[cursor:])
    return "".join(pieces), count


def _glued_key(text: str, end: int, following: re.Match[str] | None) -> re.Match[str] | None:
    """The "sk-" key at ``end``, glued to the replacement that ends there, when the next pass would
    take the same span; otherwise None (and the next pass takes what it takes).

    The key's boundary check saw the replaced secret's last letter or digit, so the search passed it by;
    the next pass, seeing "]" there, took it. A chain of such keys went one key per pass: each pass read
    the whole text again, and the 17th key and those after it were left. The next pass sees the
    ``following`` match replaced, so the key is taken now only when nothing it reads lies there: its
    run, and the credential start that stopped it, end where that replacement begins or before, and no
    JWT whose header it reads into could begin inside it."""
    if text[end - 1] not in _ALNUM_CHARS:
        return None
    key = _GLUED_SK.match(text, end)
    if key is None:
        return None
    reach, limit = key.end(), len(text)
    if following is not None:
        # A z.ai key's replacement starts at its id, 32 characters before the match.
        limit = following.start() - (_ZAI_ID_LEN if following.lastgroup == "zai" else 0)
    if reach < limit and text[reach] in _B64URL_CHARS:
        credential = _CREDENTIAL_AT.match(text, reach)  # what stopped the run, read by the lookahead
        reach = limit + 1 if credential is None else credential.end()
    if reach > limit:
        return None
    if (
        following is not None
        and following.lastgroup in _JWT_OR_IN_HEADER
        and text.find("eyJ", end, reach + 2) >= 0
    ):
        return None
    return key


def _run_start(text: str, cursor: int, start: int) -> int:
    """Where the base64url run that reaches ``start`` begins, from ``cursor`` on."""
    return cursor + len(text[cursor:start].rstrip(_B64URL_CHARS))


def _header_start(text: str, cursor: int, start: int) -> int:
    """Where the JWT matched at ``start`` begins: the first "eyJ" of the base64url run that ends there,
    from ``cursor`` (the end of the previous replacement) on, where a scan from the left finds it."""
    return text.find("eyJ", _run_start(text, cursor, start), start + 3)


def _enclosing_jwt(text: str, cursor: int, start: int) -> tuple[int, int, int]:
    """The JWT whose header holds the key matched at ``start``, if any: ``(first, end, checked)``.

    The JWT branch matches at the header's last "eyJ" that leaves room for the rest, so a key matched
    in the header before it came first, and one long enough to run past it hid the token. A scan from
    the left met the header's first "eyJ" first and took the token whole, the key with it: so does
    this. ``first`` is that "eyJ" (-1 when no token holds the key), ``end`` the token's end and
    ``checked`` the end of the key's base64url run: no later key in that run needs the check again,
    so each run is read once."""
    first = text.find("eyJ", _run_start(text, cursor, start), start)
    if first < 0:
        return -1, start, start
    header = _B64URL_RUN.match(text, start)
    dot = start if header is None else header.end()
    rest = _JWT_REST.match(text, dot) if dot - first >= 11 else None
    if rest is None:
        return -1, start, dot
    return first, rest.end(), dot


def is_secret_key(key: str) -> bool:
    """Whether an object key names a credential (``password``, ``client_secret``, ``x-api-key``, ...)."""
    return _SECRET_KEY.search(key) is not None


def json_pointer_token(key: str) -> str:
    """Escape one object key as an RFC 6901 reference token (``~`` -> ``~0``, ``/`` -> ``~1``)."""
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key


def redact_value(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """Scrub every string (object keys included) in a JSON-like value.

    Returns a deep copy of mappings, lists and tuples (tuples stay tuples) with scrubbed strings, and the
    RFC 6901 JSON pointers (prefixed with ``path``) of the fields that were changed, in document order. A
    non-empty string under a key that names a credential (:func:`is_secret_key`) is replaced whole. A
    field whose *key* was scrubbed is reported under its scrubbed key. When two keys of one mapping scrub to
    the same text, later ones get a ``#2``, ``#3`` suffix so no field is lost. Other leaf values are
    returned as they are. The walk keeps its own stack, so a value nested thousands deep is scrubbed like
    any other (no ``RecursionError``).
    """
    paths: list[str] = []
    if not isinstance(value, Mapping | list | tuple):
        return _redact_leaf(value, path, paths), paths
    root = _Frame(value, path, None, None)
    stack = [root]
    while stack:
        frame = stack[-1]
        child = frame.step(paths)
        if child is not None:
            stack.append(child)
            continue
        stack.pop()
        if frame.parent is not None:
            frame.parent.put(frame.slot, frame.result())
    return root.result(), paths


def _redact_leaf(value: Any, path: str, paths: list[str]) -> Any:
    if isinstance(value, str):
        new, count = redact_text(value)
        if count:
            paths.append(path)
        return new
    return value


class _Frame:
    """One mapping, list or tuple being copied by :func:`redact_value`: the entries still to scrub, the
    copy so far, and where the finished copy goes in its parent's copy."""

    __slots__ = ("entries", "out", "parent", "path", "slot", "suffixes", "tuple")

    def __init__(self, value: Any, path: str, parent: _Frame | None, slot: Any) -> None:
        self.path, self.parent, self.slot = path, parent, slot
        self.tuple = isinstance(value, tuple)
        self.out: dict[Any, Any] | list[Any]
        self.entries: Iterator[tuple[Any, Any]]
        if isinstance(value, Mapping):
            self.out, self.entries = {}, iter(value.items())
        else:
            self.out, self.entries = [], enumerate(value)
        self.suffixes: dict[str, int] = {}

    def put(self, slot: Any, item: Any) -> None:
        if isinstance(self.out, dict):
            self.out[slot] = item
        else:
            self.out.append(item)

    def result(self) -> Any:
        return tuple(self.out) if self.tuple else self.out

    def step(self, paths: list[str]) -> _Frame | None:
        """Scrub entries up to the next one that is itself a container, and return its frame; None
        when every entry is done."""
        out = self.out
        for key, item in self.entries:
            if not isinstance(out, dict):
                child = f"{self.path}/{key}"
                slot: Any = key
            else:
                slot = key
                key_changed = False
                if isinstance(key, str):
                    slot, count = redact_text(key)
                    key_changed = count > 0
                    if slot in out:  # a scrubbed key's twin, or a key spelled as one renamed before it
                        slot, key_changed = unique_key(slot, out, self.suffixes), True
                child = f"{self.path}/{json_pointer_token(str(slot))}"
                if key_changed:
                    paths.append(child)
                if isinstance(item, str) and item and item != REDACTED and is_secret_key(str(slot)):
                    if not key_changed:
                        paths.append(child)
                    out[slot] = REDACTED
                    continue
            if isinstance(item, Mapping | list | tuple):
                return _Frame(item, child, self, slot)
            self.put(slot, _redact_leaf(item, child, paths))
        return None


def unique_key(key: str, taken: Mapping[Any, Any], suffixes: dict[str, int] | None = None) -> str:
    """``key``, or ``key#2``, ``key#3``...: the first spelling not yet in ``taken``.

    ``suffixes``, when given, is the caller's memo for one ``taken`` mapping that only grows: the next
    suffix to try for each key, updated here, so that many keys that scrub to the same text cost one try
    each instead of one per key already renamed."""
    if key not in taken:
        return key
    suffix = 2 if suffixes is None else suffixes.get(key, 2)
    while f"{key}#{suffix}" in taken:
        suffix += 1
    if suffixes is not None:
        suffixes[key] = suffix + 1
    return f"{key}#{suffix}"
