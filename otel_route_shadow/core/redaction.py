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
* Idempotent: a redacted string contains nothing the patterns match again, so re-scrubbing is a no-op and
  the replacement count of an already-scrubbed string is zero.
* The replacement never carries what was replaced (no length, no prefix, no hash of the secret); the
  recognisable key of a ``key=value`` pair and the ``Bearer`` scheme word are kept because they are not
  secret and they tell a reader what kind of field was scrubbed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "REDACTED",
    "cannot_match",
    "is_secret_key",
    "json_pointer_token",
    "redact_text",
    "redact_value",
    "unique_key",
]

REDACTED: Final = "[REDACTED]"

# Credential keywords whose value is scrubbed in ``key=value`` / ``key: value`` / ``"key": "value"`` pairs:
# password, passwd, passphrase, pwd, private key, secret, token, api key, access key, auth key, credential(s).
# A keyword also matches as the suffix of a longer identifier (``access_token``, ``x-api-key``,
# ``client_secret``): the boundary check only forbids a letter or digit right before it. The branch is
# written as "first letter, then the tails that may follow it" so that it, too, starts with a plain
# character class.
_PAIR_KEYWORD: Final = (
    r"[pPsStTaAcC](?<![A-Za-z0-9].)"
    r"(?i:(?<=p)(?:ass(?:word|wd|phrase)|wd|rivate[_-]?key)|(?<=s)ecret|(?<=t)oken"
    r"|(?<=a)(?:pi[_-]?key|ccess[_-]?key|uth[_-]?key)|(?<=c)redentials?)"
)

# Where another credential begins. A token run stops there even when the characters would let it go on,
# so two secrets glued together are two matches instead of one match that swallows the second one's
# prefix and leaves its secret part behind.
_NEXT_CREDENTIAL: Final = (
    r"(?=sk-[A-Za-z0-9_-]{20}|eyJ[A-Za-z0-9_-]{8}|gh[pousr]_[A-Za-z0-9]{30}|github_pat_[A-Za-z0-9_]{30}"
    r"|A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|IPA|NPA|NVA|PKA)[A-Z0-9]{16}|[0-9a-f]{32}\.[0-9A-Za-z]{16}"
    r"|-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY|PRIVATE\+KEY\+)"
)


def _run(chars: str, minimum: int) -> str:
    """At least ``minimum`` of ``chars``, then more up to the end of the run or the next credential."""
    return rf"{chars}{{{minimum}}}{chars}*?(?:(?!{chars})|{_NEXT_CREDENTIAL})"


_BLOCK_START: Final = r"PRIVATE\+KEY\+|-----BEGIN"
"""Where a credential that may hold spaces or "+" begins: a run a pair, a Bearer token or a note key's
name would swallow stops there, so that the credential's own branch takes all of it."""


def _before_block(chars: str) -> str:
    """One of ``chars`` where no :data:`_BLOCK_START` begins."""
    return rf"(?:(?!{_BLOCK_START}){chars})"


_B64URL: Final = "[A-Za-z0-9_-]"
_ALNUM: Final = "[A-Za-z0-9]"

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
    + r"*(?:\+[^\s+]*(?:\+(?:A[Q-Za-f][A-Za-z0-9+/]{42})?"
    + _run("[A-Za-z0-9+/=]", 0)
    + ")?)?)"
    # Anthropic (sk-ant-api03-...) and OpenAI (sk-proj-..., sk-svcacct-..., legacy sk-...T3BlbkFJ...) API
    # keys. Only the bare "sk-" form needs a boundary ("task-...", "desk-..." are words); the named
    # prefixes and the legacy OpenAI marker are specific enough to match anywhere.
    r"|s(?P<sk>k-(?:(?:ant|proj|svcacct|admin|None)-|(?=[A-Za-z0-9]{20}T3BlbkFJ)|(?<![A-Za-z0-9]sk-))"
    + _run(_B64URL, 20)
    + ")"
    # JSON Web Tokens: base64url header starting with {" (eyJ), payload, optional signature.
    r"|e(?P<jwt>yJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.(?:" + _run(_B64URL, 1) + ")?)"
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
    + "{8,})"
    # key=value pairs. The key and separator are kept; a quoted value is scrubbed with its quotes. A value
    # stops where a note key or a PEM block begins, which its own branch takes whole.
    r"|"
    + _PAIR_KEYWORD
    + rf"[\"']?\s*[=:]\s*(?![\"']?(?:\[REDACTED\]|{_BLOCK_START}))"
    + r"(?P<pair>\""
    + _before_block(r"[^\"\n]")
    + rf"*(?:\"|(?={_BLOCK_START}))|'"
    + _before_block(r"[^'\n]")
    + rf"*(?:'|(?={_BLOCK_START}))|"
    + _before_block(r"[^\s\"'&,;<>]")
    + "+)",
    re.DOTALL,
)

_ZAI_ID_LEN: Final = 32

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
    # so no such neighbour survives (and redacting the output again is a no-op).
    for _ in range(16):
        text, count = _substitute(text, match)
        total += count
        match = _PATTERN.search(text)
        if match is None:
            break
    return text, total


def _substitute(text: str, match: re.Match[str] | None) -> tuple[str, int]:
    pieces: list[str] = []
    cursor = 0
    count = 0
    while match is not None:
        group = match.lastgroup
        start, end = match.span()
        keep = ""
        if group == "zai":
            start -= _ZAI_ID_LEN
        elif group in {"bearer", "pair"}:
            keep = text[start : match.start(group)]
        # A z.ai id can overlap the tail of the previous replacement only in adversarial input; clamp so
        # the output never duplicates text.
        start = max(start, cursor)
        pieces.append(text[cursor:start])
        pieces.append(keep)
        pieces.append(REDACTED)
        cursor = end
        count += 1
        match = _PATTERN.search(text, end)
    pieces.append(text[cursor:])
    return "".join(pieces), count


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
    returned as they are.
    """
    paths: list[str] = []
    return _redact(value, path, paths), paths


def _redact(value: Any, path: str, paths: list[str]) -> Any:
    if isinstance(value, str):
        new, count = redact_text(value)
        if count:
            paths.append(path)
        return new
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = key
            key_changed = False
            if isinstance(key, str):
                new_key, count = redact_text(key)
                key_changed = count > 0
                if key_changed:
                    new_key = unique_key(new_key, out)
            child = f"{path}/{json_pointer_token(str(new_key))}"
            if key_changed:
                paths.append(child)
            if isinstance(item, str) and item and item != REDACTED and is_secret_key(str(new_key)):
                if not key_changed:
                    paths.append(child)
                out[new_key] = REDACTED
                continue
            out[new_key] = _redact(item, child, paths)
        return out
    if isinstance(value, list | tuple):
        items = [_redact(item, f"{path}/{index}", paths) for index, item in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    return value


def unique_key(key: str, taken: Mapping[Any, Any]) -> str:
    """``key``, or ``key#2``, ``key#3``...: the first spelling not yet in ``taken``."""
    if key not in taken:
        return key
    suffix = 2
    while f"{key}#{suffix}" in taken:
        suffix += 1
    return f"{key}#{suffix}"
