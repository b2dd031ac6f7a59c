"""Every pair keyword ``docs/chain-format.md`` lists is redacted in every pair form it names.

``secret_key`` (and ``SECRET_KEY``, ``secret-key``, ``aws_secret_key``) was listed but passed
unredacted: the pair branch knew ``secret`` only as a whole keyword or as the end of a longer name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_route_shadow.core import REDACTED, redact_text

DOC = Path(__file__).parent.parent / "docs" / "chain-format.md"
SECRET = "hunter2"


def _documented_keywords() -> list[str]:
    """The pair keywords the format spec lists (``api_key``/``api-key``/``apikey`` as three,
    ``credential(s)`` as two)."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"pairs whose key\s+is (.*?)\(also as the end", text, re.DOTALL)
    assert found is not None, "the pair keyword list moved in docs/chain-format.md"
    words: list[str] = []
    for token in re.findall(r"`([^`]+)`", found.group(1)):
        for word in token.split("/"):
            words.extend([word[:-3], word[:-3] + "s"] if word.endswith("(s)") else [word])
    return words


KEYWORDS = _documented_keywords()


def test_the_documented_list_is_read_whole() -> None:
    assert {"password", "secret", "secret_key", "api-key", "apikey", "credential", "credentials"} <= set(
        KEYWORDS
    )
    assert len(KEYWORDS) == 15


@pytest.mark.parametrize("keyword", KEYWORDS)
@pytest.mark.parametrize(
    "template",
    [
        "{key}={secret}",
        "{KEY}: {secret}",
        '"{key}": "{secret}"',
        "aws_{key}={secret}",  # as the end of a longer name
        "x {KEY}={secret}&next=1",
    ],
)
def test_a_secret_key_pair_is_redacted(keyword: str, template: str) -> None:
    text = template.format(key=keyword, KEY=keyword.upper(), secret=SECRET)
    out, count = redact_text(text)
    assert count == 1, out
    assert SECRET not in out
    assert REDACTED in out
    assert keyword.upper() in out.upper()  # the key itself is kept


@pytest.mark.parametrize("text", ["secret_key=hunter2", "SECRET_KEY: hunter2", "secretkey='hunter2'"])
def test_a_secret_key_pair_redaction_is_idempotent(text: str) -> None:
    once, _ = redact_text(text)
    assert SECRET not in once
    assert redact_text(once) == (once, 0)
